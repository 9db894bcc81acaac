// Unicode helpers on ICU's C API (uchar.h, unorm2.h); UTF-8 handled here to keep ICU macros out.
#include "unicode.hpp"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace awp::embed::unicode {

namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool is_continuation(unsigned char b) { return (b & 0xC0U) == 0x80U; }

UChar32 as_uchar(char32_t c) { return static_cast<UChar32>(c); }

std::u16string to_utf16(const std::u32string& text) {
    std::u16string out;
    out.reserve(text.size());
    for (char32_t c : text) {
        if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            out.push_back(static_cast<char16_t>(0xD800 + (v >> 10)));
            out.push_back(static_cast<char16_t>(0xDC00 + (v & 0x3FF)));
        } else {
            out.push_back(static_cast<char16_t>(c));
        }
    }
    return out;
}

std::u32string from_utf16(const char16_t* s, std::size_t n) {
    std::u32string out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const char32_t c = s[i];
        if (c >= 0xD800 && c < 0xDC00 && i + 1 < n && s[i + 1] >= 0xDC00 && s[i + 1] < 0xE000) {
            out.push_back(0x10000 + ((c - 0xD800) << 10) +
                          (static_cast<char32_t>(s[i + 1]) - 0xDC00));
            ++i;
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::u32string normalize(const UNormalizer2* normalizer, const std::u32string& text) {
    const std::u16string in = to_utf16(text);
    std::vector<UChar> out(in.size() * 3 + 16);
    for (int attempt = 0; attempt < 2; ++attempt) {
        UErrorCode status = U_ZERO_ERROR;
        const int32_t n = unorm2_normalize(normalizer, reinterpret_cast<const UChar*>(in.data()),
                                           static_cast<int32_t>(in.size()), out.data(),
                                           static_cast<int32_t>(out.size()), &status);
        if (status == U_BUFFER_OVERFLOW_ERROR) {
            out.resize(static_cast<std::size_t>(n));
            continue;
        }
        if (U_FAILURE(status)) throw std::runtime_error(u_errorName(status));
        return from_utf16(reinterpret_cast<const char16_t*>(out.data()),
                          static_cast<std::size_t>(n));
    }
    throw std::runtime_error("unicode normalisation: output buffer too small");
}

const UNormalizer2* instance(const UNormalizer2* (*get)(UErrorCode*)) {
    UErrorCode status = U_ZERO_ERROR;
    const UNormalizer2* n = get(&status);
    if (U_FAILURE(status)) throw std::runtime_error(u_errorName(status));
    return n;
}

}  // namespace

std::u32string decode_utf8(std::string_view text) {
    std::u32string out;
    out.reserve(text.size());
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        const unsigned char b = s[i];
        if (b < 0x80) {
            out.push_back(b);
            ++i;
            continue;
        }
        int len = 0;
        char32_t c = 0;
        char32_t min = 0;
        if ((b & 0xE0U) == 0xC0U) {
            len = 2, c = b & 0x1FU, min = 0x80;
        } else if ((b & 0xF0U) == 0xE0U) {
            len = 3, c = b & 0x0FU, min = 0x800;
        } else if ((b & 0xF8U) == 0xF0U) {
            len = 4, c = b & 0x07U, min = 0x10000;
        }
        bool ok = len > 0 && i + static_cast<std::size_t>(len) <= n;
        for (int k = 1; ok && k < len; ++k) {
            const unsigned char cb = s[i + static_cast<std::size_t>(k)];
            ok = is_continuation(cb);
            c = (c << 6) | (cb & 0x3FU);
        }
        ok = ok && c >= min && c <= 0x10FFFF && !(c >= 0xD800 && c < 0xE000);
        if (ok) {
            out.push_back(c);
            i += static_cast<std::size_t>(len);
        } else {
            // One replacement per maximal bad prefix, like the WHATWG decoder.
            out.push_back(kReplacement);
            ++i;
            while (i < n && is_continuation(s[i])) ++i;
        }
    }
    return out;
}

void append_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (c >> 12)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (c >> 18)));
        out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
}

std::string encode_utf8(std::u32string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char32_t c : text) append_utf8(out, c);
    return out;
}

bool is_whitespace(char32_t c) {
    if (c == U' ' || c == U'\t' || c == U'\n' || c == U'\r') return true;
    if (c < 0x80) return false;
    return u_hasBinaryProperty(as_uchar(c), UCHAR_WHITE_SPACE) != 0;
}

bool is_control(char32_t c) {
    if (c == U'\t' || c == U'\n' || c == U'\r') return false;
    if (c >= 0x20 && c < 0x7F) return false;
    switch (u_charType(as_uchar(c))) {
        case U_CONTROL_CHAR:
        case U_FORMAT_CHAR:
        case U_PRIVATE_USE_CHAR:
        case U_SURROGATE:
            return true;
        default:
            return false;
    }
}

bool is_punctuation(char32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126))
        return true;
    if (c < 0x80) return false;
    switch (u_charType(as_uchar(c))) {
        case U_CONNECTOR_PUNCTUATION:
        case U_DASH_PUNCTUATION:
        case U_START_PUNCTUATION:
        case U_END_PUNCTUATION:
        case U_INITIAL_PUNCTUATION:
        case U_FINAL_PUNCTUATION:
        case U_OTHER_PUNCTUATION:
            return true;
        default:
            return false;
    }
}

bool is_chinese_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_nonspacing_mark(char32_t c) {
    return c >= 0x300 && u_charType(as_uchar(c)) == U_NON_SPACING_MARK;
}

bool is_word_char(char32_t c) {
    if (c < 0x80)
        return (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z') || (c >= U'0' && c <= U'9');
    const UChar32 u = as_uchar(c);
    if (u_isalnum(u) != 0) return true;
    const auto type = u_charType(u);
    return type == U_NON_SPACING_MARK || type == U_COMBINING_SPACING_MARK ||
           type == U_ENCLOSING_MARK;
}

void append_lowercase(std::u32string& out, char32_t c) {
    if (c < 0x80) {
        out.push_back(c >= U'A' && c <= U'Z' ? c + 32 : c);
    } else if (c == 0x130) {  // the one unconditional multi-character lowercase mapping
        out.push_back(U'i');
        out.push_back(0x307);
    } else {
        out.push_back(static_cast<char32_t>(u_tolower(as_uchar(c))));
    }
}

std::u32string nfd(const std::u32string& text) {
    static const UNormalizer2* const normalizer = instance(&unorm2_getNFDInstance);
    return normalize(normalizer, text);
}

std::u32string nfkc_casefold(const std::u32string& text) {
    static const UNormalizer2* const normalizer = instance(&unorm2_getNFKCCasefoldInstance);
    return normalize(normalizer, text);
}

}  // namespace awp::embed::unicode
