// Plain-value HTTP helpers: headers, query and cookie parsing, escapes, error bodies.
#include "awp/http/message.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "awp/core/json.hpp"

namespace awp::http {

std::string_view trim_ows(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

void headers::set(std::string_view name, std::string value) {
    erase(name);
    fields_.emplace_back(std::string(name), std::move(value));
}

void headers::erase(std::string_view name) {
    std::erase_if(fields_, [&](const auto& f) { return iequals(f.first, name); });
}

std::optional<std::string_view> headers::get(std::string_view name) const {
    for (const auto& f : fields_) {
        if (iequals(f.first, name)) return std::string_view(f.second);
    }
    return std::nullopt;
}

std::string request::param(std::string_view name) const {
    auto it = params.find(name);
    return it == params.end() ? std::string() : it->second;
}

std::optional<std::string> request::query_param(std::string_view name) const {
    for (const auto& [k, v] : query_params) {
        if (k == name) return v;
    }
    return std::nullopt;
}

std::map<std::string, std::string, std::less<>> request::cookies() const {
    std::map<std::string, std::string, std::less<>> out;
    for (const auto& [n, v] : header.fields()) {
        if (!iequals(n, "cookie")) continue;
        std::string_view rest = v;
        while (!rest.empty()) {
            auto semi = rest.find(';');
            auto part = trim_ows(rest.substr(0, semi));
            rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
            auto eq = part.find('=');
            if (eq == std::string_view::npos || eq == 0) continue;
            auto value = trim_ows(part.substr(eq + 1));
            if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
                value = value.substr(1, value.size() - 2);
            }
            out.emplace(std::string(trim_ows(part.substr(0, eq))), std::string(value));
        }
    }
    return out;
}

std::optional<std::string> request::cookie(std::string_view name) const {
    auto all = cookies();
    auto it = all.find(name);
    if (it == all.end()) return std::nullopt;
    return it->second;
}

std::string request::media_type() const {
    auto ct = header.get("content-type");
    if (!ct) return {};
    auto v = trim_ows(ct->substr(0, ct->find(';')));
    std::string out(v);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

response response::json(unsigned status, std::string body) {
    response r;
    r.status = status;
    r.header.set("Content-Type", "application/json");
    r.body = std::move(body);
    return r;
}

response response::error(unsigned status, std::string_view code, std::string_view message) {
    return json(status, R"({"error":{"code":)" + json_quote(code) + R"(,"message":)" +
                            json_quote(message) + "}}");
}

file_body::~file_body() {
    if (fd_ >= 0) ::close(fd_);
}

response response::file(unsigned status, std::string content_type, int fd, std::uint64_t size,
                        std::uint64_t offset) {
    response r;
    r.status = status;
    r.header.set("Content-Type", std::move(content_type));
    r.body_file = std::make_shared<file_body>(fd, size, offset);
    return r;
}

response response::bytes(unsigned status, std::string content_type, std::string body) {
    response r;
    r.status = status;
    r.header.set("Content-Type", std::move(content_type));
    r.body = std::move(body);
    return r;
}

std::string_view reason(unsigned status) noexcept {
    switch (status) {
        case 100:
            return "Continue";
        case 200:
            return "OK";
        case 201:
            return "Created";
        case 204:
            return "No Content";
        case 302:
            return "Found";
        case 303:
            return "See Other";
        case 307:
            return "Temporary Redirect";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 409:
            return "Conflict";
        case 413:
            return "Content Too Large";
        case 415:
            return "Unsupported Media Type";
        case 422:
            return "Unprocessable Content";
        case 429:
            return "Too Many Requests";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        case 507:
            return "Insufficient Storage";
        default:
            return "Unknown";
    }
}

std::string json_quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out += '"';
    for (char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    static constexpr char kHex[] = "0123456789abcdef";
                    out += "\\u00";
                    out += kHex[(static_cast<unsigned char>(c) >> 4U) & 0xFU];
                    out += kHex[static_cast<unsigned char>(c) & 0xFU];
                } else {
                    out += c;
                }
        }
    }
    out += '"';
    return out;
}

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= s.size()) return std::nullopt;
            int hi = hex_value(s[i + 1]);
            int lo = hex_value(s[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

std::string percent_encode(std::string_view s) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
            out += c;
        } else {
            out += '%';
            out += kHex[u >> 4U];
            out += kHex[u & 0xFU];
        }
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> parse_query(std::string_view q) {
    std::vector<std::pair<std::string, std::string>> out;
    while (!q.empty()) {
        auto amp = q.find('&');
        auto part = q.substr(0, amp);
        q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
        if (part.empty()) continue;
        auto eq = part.find('=');
        auto k = percent_decode(part.substr(0, eq), true);
        auto v = eq == std::string_view::npos ? std::optional<std::string>("")
                                              : percent_decode(part.substr(eq + 1), true);
        if (k && v) out.emplace_back(std::move(*k), std::move(*v));
    }
    return out;
}

std::string_view text_problem(std::string_view decoded) noexcept {
    if (decoded.find('\0') != std::string_view::npos) return "holds a NUL byte";
    if (!core::json::is_utf8(decoded)) return "is not UTF-8";
    return {};
}

decoded_query decode_query(std::string_view q) {
    decoded_query out;
    std::size_t n = 0;
    while (!q.empty()) {
        auto amp = q.find('&');
        auto part = q.substr(0, amp);
        q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
        if (part.empty()) continue;
        ++n;
        auto eq = part.find('=');
        auto k = percent_decode(part.substr(0, eq), true);
        auto v = eq == std::string_view::npos ? std::optional<std::string>("")
                                              : percent_decode(part.substr(eq + 1), true);
        const auto where = "query parameter " + std::to_string(n);
        if (!k || !v) {
            out.error = where + " has a malformed %-escape";
            return out;
        }
        if (auto bad = text_problem(*k); !bad.empty()) {
            out.error = where + "'s name " + std::string(bad);
            return out;
        }
        if (auto bad = text_problem(*v); !bad.empty()) {
            // The name is said when it is short text: it helps, and it is the caller's own.
            const bool named = k->size() <= 64 && !k->empty();
            out.error = where + (named ? " (" + *k + ")" : std::string()) + " " + std::string(bad);
            return out;
        }
        out.params.emplace_back(std::move(*k), std::move(*v));
    }
    return out;
}

std::string set_cookie(std::string_view name, std::string_view value, const cookie_options& o) {
    std::string out(name);
    out += '=';
    out += value;
    out += "; Path=" + o.path;
    if (o.max_age >= 0) out += "; Max-Age=" + std::to_string(o.max_age);
    if (o.http_only) out += "; HttpOnly";
    if (o.secure) out += "; Secure";
    if (!o.same_site.empty()) out += "; SameSite=" + o.same_site;
    return out;
}

}  // namespace awp::http
