// The query string split and decoded as PostgREST's http-types does it ('&' and ';' separate
// items, '+' is a space), but strict where http-types is lenient: a malformed %-escape,
// invalid UTF-8 or a NUL byte is refused (PGRST100) before any grammar sees the text.
#include "internal.hpp"
#include "parsec.hpp"

namespace awp::rest {
namespace detail {
namespace {

int hex(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// urlDecode True, strict. `offset` is where `s` starts in the query (for the message).
std::string decode(std::string_view s, std::size_t offset) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '+') {
            out += ' ';
        } else if (c == '%') {
            const int h = i + 1 < s.size() ? hex(s[i + 1]) : -1;
            const int l = i + 2 < s.size() ? hex(s[i + 2]) : -1;
            if (h < 0 || l < 0) {
                throw api_error(400, "PGRST100", "Invalid percent-encoding in the query string",
                                "'%' at byte " + std::to_string(offset + i + 1) +
                                    " is not followed by two hexadecimal digits.");
            }
            out += static_cast<char>(h * 16 + l);
            i += 2;
        } else {
            out += c;
        }
    }
    if (out.find('\0') != std::string::npos) {
        throw api_error(400, "PGRST100", "NUL bytes are not accepted in the query string",
                        "A parameter starting at byte " + std::to_string(offset + 1) +
                            " decodes to a NUL byte (%00).");
    }
    std::u32string ignored;
    if (!decode_utf8(out, ignored)) {
        throw api_error(400, "PGRST100", "Invalid UTF-8 in the query string",
                        "A parameter starting at byte " + std::to_string(offset + 1) +
                            " does not decode to UTF-8 text.");
    }
    return out;
}

}  // namespace

std::vector<query_item> query_items(std::string_view q) {
    std::size_t base = 0;
    if (!q.empty() && q.front() == '?') {
        q.remove_prefix(1);
        base = 1;
    }
    std::vector<query_item> items;
    while (!q.empty()) {
        const auto sep = q.find_first_of("&;");
        const auto item = q.substr(0, sep);
        const auto eq = item.find('=');
        query_item qi;
        qi.key = decode(item.substr(0, eq), base);
        if (eq != std::string_view::npos) qi.value = decode(item.substr(eq + 1), base + eq + 1);
        items.push_back(std::move(qi));
        if (sep == std::string_view::npos) break;
        q.remove_prefix(sep + 1);
        base += sep + 1;
    }
    return items;
}

}  // namespace detail

std::vector<std::pair<std::string, std::string>> parse_query_string(std::string_view q) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& it : detail::query_items(q)) {
        if (it.value) out.emplace_back(std::move(it.key), std::move(*it.value));
    }
    return out;
}

}  // namespace awp::rest
