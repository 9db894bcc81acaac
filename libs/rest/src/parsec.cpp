// Parsec's error model and primitives (parsec.hpp): merging, labels, Haskell's `show` of
// tokens, showErrorMessages' wording, and UTF-8 in and out of the code points parsed.
#include "parsec.hpp"

#include <algorithm>
#include <array>

namespace awp::rest::detail {

int compare(source_pos a, source_pos b) noexcept {
    if (a.line != b.line) return a.line < b.line ? -1 : 1;
    if (a.col != b.col) return a.col < b.col ? -1 : 1;
    return 0;
}

parse_error merge(parse_error a, parse_error b) {
    if (b.unknown() && !a.unknown()) return a;
    if (a.unknown() && !b.unknown()) return b;
    const int c = compare(a.pos, b.pos);
    if (c == 0) {
        a.msgs.insert(a.msgs.end(), std::make_move_iterator(b.msgs.begin()),
                      std::make_move_iterator(b.msgs.end()));
        return a;
    }
    return c > 0 ? a : b;
}

void set_expect(parse_error& e, std::string label) {
    std::erase_if(e.msgs, [](const message& m) { return m.kind == msg_kind::expect; });
    e.msgs.insert(e.msgs.begin(), message{msg_kind::expect, std::move(label)});
}

namespace {

constexpr std::array<const char*, 33> kAsciiNames = {
    "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS",  "HT",  "LF",
    "VT",  "FF",  "CR",  "SO",  "SI",  "DLE", "DC1", "DC2", "DC3", "DC4", "NAK",
    "SYN", "ETB", "CAN", "EM",  "SUB", "ESC", "FS",  "GS",  "RS",  "US",  "SP"};

bool is_ascii_digit(char32_t c) noexcept { return c >= U'0' && c <= U'9'; }

/// showLitChar c, with `next` the character that follows in the output (for "\&").
void show_lit(std::string& out, char32_t c, char32_t next) {
    if (c > 0x7F) {
        out += '\\';
        out += std::to_string(static_cast<std::uint32_t>(c));
        if (is_ascii_digit(next)) out += "\\&";
        return;
    }
    switch (c) {
        case 0x7F:
            out += "\\DEL";
            return;
        case U'\\':
            out += "\\\\";
            return;
        case U'\a':
            out += "\\a";
            return;
        case U'\b':
            out += "\\b";
            return;
        case U'\f':
            out += "\\f";
            return;
        case U'\n':
            out += "\\n";
            return;
        case U'\r':
            out += "\\r";
            return;
        case U'\t':
            out += "\\t";
            return;
        case U'\v':
            out += "\\v";
            return;
        case 0x0E:
            out += "\\SO";
            if (next == U'H') out += "\\&";
            return;
        default:
            break;
    }
    if (c >= U' ') {
        out += static_cast<char>(c);
        return;
    }
    out += '\\';
    out += kAsciiNames[static_cast<std::size_t>(c)];
}

/// showMany: "pre a, b or c" over the non-empty, distinct texts.
std::string show_many(std::string_view pre, const std::vector<std::string>& texts) {
    std::vector<std::string> ms;
    for (const auto& t : texts) {
        if (!t.empty() && std::find(ms.begin(), ms.end(), t) == ms.end()) ms.push_back(t);
    }
    if (ms.empty()) return {};
    std::string list;
    if (ms.size() == 1) {
        list = ms.front();
    } else {
        for (std::size_t i = 0; i + 1 < ms.size(); ++i) {
            if (i > 0) list += ", ";
            list += ms[i];
        }
        list += " or " + ms.back();
    }
    return pre.empty() ? list : std::string(pre) + " " + list;
}

}  // namespace

std::string show_string(std::u32string_view s) {
    std::string out = "\"";
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char32_t next = i + 1 < s.size() ? s[i + 1] : U'"';
        if (s[i] == U'"') {
            out += "\\\"";
        } else {
            show_lit(out, s[i], next);
        }
    }
    out += '"';
    return out;
}

std::string show_char(char32_t c) {
    if (c == U'\'') return "'\\''";
    std::string out = "'";
    show_lit(out, c, U'\'');
    out += '\'';
    return out;
}

std::string render(const parse_error& e) {
    if (e.msgs.empty()) return "unknown parse error";
    std::vector<message> sorted = e.msgs;
    std::stable_sort(sorted.begin(), sorted.end(), [](const message& a, const message& b) {
        return static_cast<int>(a.kind) < static_cast<int>(b.kind);
    });
    std::vector<std::string> sys, unexp, exp, other;
    for (const auto& m : sorted) {
        switch (m.kind) {
            case msg_kind::sys_unexpect:
                sys.push_back(m.text);
                break;
            case msg_kind::unexpect:
                unexp.push_back(m.text);
                break;
            case msg_kind::expect:
                exp.push_back(m.text);
                break;
            case msg_kind::message:
                other.push_back(m.text);
                break;
        }
    }
    std::string show_sys;
    if (unexp.empty() && !sys.empty()) {
        show_sys = sys.front().empty() ? "unexpected end of input" : "unexpected " + sys.front();
    }
    std::vector<std::string> parts;
    for (auto p : {show_sys, show_many("unexpected", unexp), show_many("expecting", exp),
                   show_many("", other)}) {
        if (!p.empty() && std::find(parts.begin(), parts.end(), p) == parts.end()) {
            parts.push_back(std::move(p));
        }
    }
    std::string out;
    for (const auto& p : parts) {
        if (!out.empty()) out += ' ';
        out += p;
    }
    return out;
}

std::string render_pos(std::string_view name, source_pos pos) {
    std::string out = "\"";
    out += name;
    out += "\" (line " + std::to_string(pos.line) + ", column " + std::to_string(pos.col) + ")";
    return out;
}

bool is_space(char32_t c) noexcept {
    return c == U' ' || (c >= U'\t' && c <= U'\r') || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

bool decode_utf8(std::string_view in, std::u32string& out) {
    out.clear();
    out.reserve(in.size());
    std::size_t i = 0;
    while (i < in.size()) {
        const auto b0 = static_cast<unsigned char>(in[i]);
        if (b0 < 0x80) {
            out.push_back(b0);
            ++i;
            continue;
        }
        std::size_t n = 0;
        char32_t cp = 0;
        char32_t min = 0;
        if (b0 >= 0xC2 && b0 <= 0xDF) {
            n = 1;
            cp = b0 & 0x1Fu;
            min = 0x80;
        } else if (b0 >= 0xE0 && b0 <= 0xEF) {
            n = 2;
            cp = b0 & 0x0Fu;
            min = 0x800;
        } else if (b0 >= 0xF0 && b0 <= 0xF4) {
            n = 3;
            cp = b0 & 0x07u;
            min = 0x10000;
        } else {
            return false;
        }
        if (in.size() - i <= n) return false;
        for (std::size_t k = 1; k <= n; ++k) {
            const auto b = static_cast<unsigned char>(in[i + k]);
            if ((b & 0xC0u) != 0x80u) return false;
            cp = (cp << 6) | (b & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        out.push_back(cp);
        i += n + 1;
    }
    return true;
}

std::string to_utf8(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char32_t c : s) {
        if (c < 0x80) {
            out += static_cast<char>(c);
        } else if (c < 0x800) {
            out += static_cast<char>(0xC0 | (c >> 6));
            out += static_cast<char>(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            out += static_cast<char>(0xE0 | (c >> 12));
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (c & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (c >> 18));
            out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (c & 0x3F));
        }
    }
    return out;
}

std::string lenient_utf8(std::string_view bytes) {
    std::u32string cps;
    if (decode_utf8(bytes, cps)) return std::string(bytes);
    std::string out;
    std::size_t i = 0;
    while (i < bytes.size()) {
        const auto b = static_cast<unsigned char>(bytes[i]);
        std::size_t n = 0;
        if (b < 0x80) {
            n = 1;
        } else if (b >= 0xC2 && b <= 0xDF) {
            n = 2;
        } else if (b >= 0xE0 && b <= 0xEF) {
            n = 3;
        } else if (b >= 0xF0 && b <= 0xF4) {
            n = 4;
        }
        if (n > 0 && i + n <= bytes.size() && decode_utf8(bytes.substr(i, n), cps)) {
            out += bytes.substr(i, n);
            i += n;
        } else {
            out += "\xEF\xBF\xBD";
            ++i;
        }
    }
    return out;
}

cursor scanner::step(cursor s) const noexcept {
    const char32_t c = in_[s.i];
    ++s.i;
    if (c == U'\n') {
        ++s.pos.line;
        s.pos.col = 1;
    } else if (c == U'\t') {
        s.pos.col = s.pos.col + 8 - ((s.pos.col - 1) % 8);
    } else {
        ++s.pos.col;
    }
    return s;
}

reply<char32_t> scanner::one(const cursor& s, char32_t c) const {
    reply<char32_t> r = satisfy(s, [c](char32_t x) { return x == c; });
    if (!r.ok) set_expect(r.err, show_one(c));
    return r;
}

reply<char32_t> scanner::one_of(const cursor& s, std::u32string_view set) const {
    return satisfy(s, [set](char32_t x) { return set.find(x) != std::u32string_view::npos; });
}

reply<char32_t> scanner::none_of(const cursor& s, std::u32string_view set) const {
    return satisfy(s, [set](char32_t x) { return set.find(x) == std::u32string_view::npos; });
}

reply<char32_t> scanner::any(const cursor& s) const {
    return satisfy(s, [](char32_t) { return true; });
}

reply<char32_t> scanner::letter(const cursor& s) const {
    return label(satisfy(s, is_alpha), "letter");
}

reply<char32_t> scanner::digit(const cursor& s) const {
    return label(satisfy(s, is_ascii_digit), "digit");
}

reply<unit> scanner::text(const cursor& s, std::u32string_view t) const {
    if (t.empty()) return {true, false, unit{}, s, {s.pos, {}}};
    auto failure = [&](bool consumed, std::string got) {
        return reply<unit>{
            false,
            consumed,
            unit{},
            s,
            {s.pos,
             {{msg_kind::expect, show_string(t)}, {msg_kind::sys_unexpect, std::move(got)}}}};
    };
    cursor at = s;
    for (std::size_t k = 0; k < t.size(); ++k) {
        if (at_end(at)) return failure(k > 0, "");
        if (in_[at.i] != t[k]) return failure(k > 0, show_one(in_[at.i]));
        at = step(at);
    }
    return {true, true, unit{}, at, {at.pos, {}}};
}

reply<unit> scanner::eof(const cursor& s) const {
    if (at_end(s)) {
        return {true,
                false,
                unit{},
                s,
                {s.pos, {{msg_kind::expect, "end of input"}, {msg_kind::sys_unexpect, ""}}}};
    }
    return {
        false,
        false,
        unit{},
        s,
        {s.pos, {{msg_kind::expect, "end of input"}, {msg_kind::unexpect, show_char(in_[s.i])}}}};
}

}  // namespace awp::rest::detail
