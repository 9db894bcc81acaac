// The name rules of names.hpp: UTF-8 decoded once, each code point checked against the refused
// ranges, then the segments.
#include "awp/storage/names.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "awp/core/json.hpp"
#include "awp/http/message.hpp"

namespace awp::storage {

namespace {

/// Code points refused anywhere in a name, as closed ranges, with what they are.
struct refused_range {
    std::uint32_t first;
    std::uint32_t last;
    const char* what;
};
constexpr refused_range kRefused[] = {
    {0x0000, 0x001F, "a control character"},
    {0x005C, 0x005C, "a backslash"},
    {0x007F, 0x009F, "a control character"},
    {0x00A0, 0x00A0, "a space other than U+0020"},
    {0x00AD, 0x00AD, "an invisible character (soft hyphen)"},
    {0x0337, 0x0338, "a look-alike of '/' (a combining solidus)"},
    {0x034F, 0x034F, "an invisible character"},
    {0x061C, 0x061C, "a bidirectional control"},
    {0x115F, 0x1160, "an invisible character (a Hangul filler)"},
    {0x1680, 0x1680, "a space other than U+0020"},
    {0x17B4, 0x17B5, "an invisible character"},
    {0x180B, 0x180F, "an invisible character"},
    {0x2000, 0x200A, "a space other than U+0020"},
    {0x200B, 0x200F, "an invisible or bidirectional control character"},
    {0x2024, 0x2025, "a look-alike of '.'"},
    {0x2028, 0x202E, "a line separator or bidirectional control"},
    {0x202F, 0x202F, "a space other than U+0020"},
    {0x2044, 0x2044, "a look-alike of '/' (fraction slash)"},
    {0x205F, 0x206F, "an invisible or bidirectional control character"},
    {0x20E5, 0x20E5, "a look-alike of '\\' (a combining reverse solidus)"},
    {0x2215, 0x2216, "a look-alike of '/' or '\\'"},
    {0x2571, 0x2572, "a look-alike of '/' or '\\'"},
    {0x29F5, 0x29F5, "a look-alike of '\\'"},
    {0x29F8, 0x29F9, "a look-alike of '/' or '\\'"},
    {0x3000, 0x3000, "a space other than U+0020"},
    {0x3164, 0x3164, "an invisible character (a Hangul filler)"},
    {0xD800, 0xDFFF, "a surrogate"},
    {0xE000, 0xF8FF, "a private-use character"},
    {0xFDD0, 0xFDEF, "a noncharacter"},
    {0xFE52, 0xFE52, "a look-alike of '.'"},
    {0xFE68, 0xFE68, "a look-alike of '\\'"},
    {0xFEFF, 0xFEFF, "an invisible character (byte order mark)"},
    {0xFF0E, 0xFF0F, "a look-alike of '.' or '/'"},
    {0xFF3C, 0xFF3C, "a look-alike of '\\'"},
    {0xFFA0, 0xFFA0, "an invisible character (a Hangul filler)"},
    {0xFFF0, 0xFFFB, "an invisible or special character"},
    {0x1D173, 0x1D17A, "an invisible formatting character"},
    {0xE0000, 0xE007F, "an invisible tag character"},
    {0xE0100, 0xE01EF, "an invisible variation selector"},
    {0xF0000, 0x10FFFF, "a private-use character"},
};

/// The code point at s[i] of valid UTF-8, and its length.
std::pair<std::uint32_t, std::size_t> decode_at(std::string_view s, std::size_t i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) return {b, 1};
    auto cont = [&](std::size_t k) { return static_cast<std::uint32_t>(s[i + k]) & 0x3FU; };
    if (b < 0xE0) return {((b & 0x1FU) << 6) | cont(1), 2};
    if (b < 0xF0) return {((b & 0x0FU) << 12) | (cont(1) << 6) | cont(2), 3};
    return {((b & 0x07U) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3), 4};
}

std::string hex_code_point(std::uint32_t cp) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (int shift = cp > 0xFFFF ? 16 : 12; shift >= 0; shift -= 4) {
        out.push_back(kHex[(cp >> static_cast<unsigned>(shift)) & 0xFU]);
    }
    return "U+" + out;
}

/// Why a code point is refused ("" when it is not).
std::string refused_character(std::uint32_t cp) {
    if ((cp & 0xFFFEU) == 0xFFFEU) return "a noncharacter (" + hex_code_point(cp) + ")";
    for (const auto& r : kRefused) {
        if (cp >= r.first && cp <= r.last) {
            return std::string(r.what) + " (" + hex_code_point(cp) + ")";
        }
    }
    return {};
}

/// The first refused character of valid UTF-8 `s`, described ("" when none).
std::string first_refused(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto [cp, len] = decode_at(s, i);
        if (auto why = refused_character(cp); !why.empty()) return why;
        i += len;
    }
    return {};
}

}  // namespace

std::string object_name_problem(std::string_view name) {
    if (name.empty()) return "the object name is empty";
    if (name.size() > kMaxNameBytes) {
        return "the object name is longer than " + std::to_string(kMaxNameBytes) + " bytes";
    }
    if (!core::json::is_utf8(name)) return "the object name is not UTF-8";
    if (auto why = first_refused(name); !why.empty()) {
        return "the object name holds " + why;
    }
    std::size_t start = 0;
    for (;;) {
        const auto slash = name.find('/', start);
        const auto seg =
            name.substr(start, slash == std::string_view::npos ? name.npos : slash - start);
        if (seg.empty()) {
            return "the object name has an empty segment (a leading, trailing or doubled '/')";
        }
        if (seg == "." || seg == "..") return "the object name has a '.' or '..' segment";
        if (seg.size() > kMaxSegmentBytes) {
            return "a segment of the object name is longer than " +
                   std::to_string(kMaxSegmentBytes) + " bytes";
        }
        if (seg.front() == ' ' || seg.back() == ' ') {
            return "a segment of the object name starts or ends with a space";
        }
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    return {};
}

std::string bucket_name_problem(std::string_view id) {
    if (id.empty()) return "the bucket name is empty";
    if (id.size() > kMaxBucketBytes) {
        return "the bucket name is longer than " + std::to_string(kMaxBucketBytes) + " characters";
    }
    static constexpr std::string_view kExtra = "_!.*'() &$=@;:+,?-";
    for (const char c : id) {
        const auto u = static_cast<unsigned char>(c);
        const bool ok = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
                        (u >= '0' && u <= '9') || kExtra.find(c) != std::string_view::npos;
        if (!ok) {
            return "the bucket name may hold only letters, digits, spaces and _ ! . * ' ( ) & $ "
                   "= @ ; : + , ? -";
        }
    }
    if (id.front() == ' ' || id.back() == ' ') {
        return "the bucket name starts or ends with a space";
    }
    if (id == "." || id == "..") return "the bucket name is '.' or '..'";
    return {};
}

std::string prefix_problem(std::string_view prefix) {
    if (prefix.size() > kMaxNameBytes) {
        return "the prefix is longer than " + std::to_string(kMaxNameBytes) + " bytes";
    }
    if (!core::json::is_utf8(prefix)) return "the prefix is not UTF-8";
    if (std::any_of(prefix.begin(), prefix.end(), [](char c) {
            const auto u = static_cast<unsigned char>(c);
            return u < 0x20 || u == 0x7F;
        })) {
        return "the prefix holds a control character";
    }
    return {};
}

object_path split_object_path(std::string_view encoded_tail) {
    object_path out;
    const auto slash = encoded_tail.find('/');
    const auto bucket_raw = encoded_tail.substr(0, slash);
    auto bucket = http::percent_decode(bucket_raw);
    if (!bucket) {
        out.problem = "the bucket name has a malformed %-escape";
        out.bad_bucket = true;
        return out;
    }
    out.bucket = std::move(*bucket);
    if (auto why = bucket_name_problem(out.bucket); !why.empty()) {
        out.problem = std::move(why);
        out.bad_bucket = true;
        return out;
    }
    if (slash == std::string_view::npos) {
        out.problem = "the object name is empty";
        return out;
    }
    std::string_view rest = encoded_tail.substr(slash + 1);
    if (rest.size() > 3 * kMaxNameBytes) {
        out.problem = "the object name is longer than " + std::to_string(kMaxNameBytes) + " bytes";
        return out;
    }
    std::size_t start = 0;
    for (;;) {
        const auto s = rest.find('/', start);
        auto seg = http::percent_decode(
            rest.substr(start, s == std::string_view::npos ? rest.npos : s - start));
        if (!seg) {
            out.problem = "the object name has a malformed %-escape";
            return out;
        }
        if (start > 0) out.name += '/';
        out.name += *seg;
        if (s == std::string_view::npos) break;
        start = s + 1;
    }
    out.problem = object_name_problem(out.name);
    return out;
}

std::string key_problem(std::string_view bucket, std::string_view name) {
    if (auto why = bucket_name_problem(bucket); !why.empty()) return why;
    return object_name_problem(name);
}

std::string like_escape(std::string_view literal) {
    std::string out;
    out.reserve(literal.size());
    for (const char c : literal) {
        if (c == '\\' || c == '%' || c == '_') out += '\\';
        out += c;
    }
    return out;
}

std::string_view base_name(std::string_view name) noexcept {
    const auto slash = name.rfind('/');
    return slash == std::string_view::npos ? name : name.substr(slash + 1);
}

}  // namespace awp::storage
