// Range header parsing (range.hpp).
#include "awp/storage/range.hpp"

#include <cctype>

namespace awp::storage {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

/// Digits only, at most 19 of them (no overflow).
std::optional<std::uint64_t> number(std::string_view s) {
    if (s.empty() || s.size() > 19) return std::nullopt;
    std::uint64_t v = 0;
    for (const char c : s) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
        v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return v;
}

}  // namespace

byte_range parse_range(std::optional<std::string_view> header, std::uint64_t size) {
    byte_range out;
    if (!header) return out;
    auto h = trim(*header);
    if (h.size() < 6 || h.substr(0, 6) != "bytes=") return out;
    h = trim(h.substr(6));
    if (h.find(',') != std::string_view::npos) return out;  // several ranges: the whole file
    const auto dash = h.find('-');
    if (dash == std::string_view::npos) return out;
    const auto a = trim(h.substr(0, dash));
    const auto b = trim(h.substr(dash + 1));
    if (a.empty()) {
        const auto n = number(b);
        if (!n) return out;
        if (*n == 0 || size == 0) {
            out.what = byte_range::kind::unsatisfiable;
            return out;
        }
        out.what = byte_range::kind::partial;
        out.first = *n >= size ? 0 : size - *n;
        out.last = size - 1;
        return out;
    }
    const auto first = number(a);
    if (!first) return out;
    std::uint64_t last = size == 0 ? 0 : size - 1;
    if (!b.empty()) {
        const auto l = number(b);
        if (!l || *l < *first) return out;
        if (*l < last) last = *l;
    }
    if (*first >= size) {
        out.what = byte_range::kind::unsatisfiable;
        return out;
    }
    out.what = byte_range::kind::partial;
    out.first = *first;
    out.last = last;
    return out;
}

std::string content_range(const byte_range& r, std::uint64_t size) {
    if (r.what == byte_range::kind::partial) {
        return "bytes " + std::to_string(r.first) + "-" + std::to_string(r.last) + "/" +
               std::to_string(size);
    }
    return "bytes */" + std::to_string(size);
}

}  // namespace awp::storage
