// The wake relay's line protocol: parsing and formatting (wake.hpp).
#include "awp/core/wake.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"

namespace awp::core::wake {

namespace {

constexpr std::array<std::string_view, 3> kPrefixes = {"awp_commands_", "awp_inbox_",
                                                       "awp_secrets_"};

bool is_lower_hex(std::string_view s) {
    for (const char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

// A canonical lowercase uuid (8-4-4-4-12), or empty.
bool uuid_or_empty(std::string_view s) {
    if (s.empty()) return true;
    return gateway_hex(s).has_value();
}

}  // namespace

std::optional<gateway_channel> parse_channel(std::string_view channel) {
    for (const auto prefix : kPrefixes) {
        if (channel.size() == prefix.size() + 32 && channel.substr(0, prefix.size()) == prefix) {
            const auto hex = channel.substr(prefix.size());
            if (is_lower_hex(hex)) return gateway_channel{channel, hex};
        }
    }
    return std::nullopt;
}

std::optional<std::string> gateway_hex(std::string_view uuid) {
    if (uuid.size() != 36) return std::nullopt;
    std::string out;
    out.reserve(32);
    for (std::size_t i = 0; i < uuid.size(); ++i) {
        const char c = uuid[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') return std::nullopt;
            continue;
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
        out += c;
    }
    return out;
}

std::optional<line> parse_notify_payload(std::string_view payload) {
    if (payload.size() > kMaxLine) return std::nullopt;
    const auto space = payload.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const auto channel = payload.substr(0, space);
    const auto rest = payload.substr(space + 1);
    if (!parse_channel(channel) || !uuid_or_empty(rest)) return std::nullopt;
    line l;
    l.what = line::kind::wake;
    l.channel = std::string(channel);
    l.payload = std::string(rest);
    return l;
}

std::optional<line> parse_line(std::string_view text) {
    if (text.size() > kMaxLine) return std::nullopt;
    line l;
    if (text == "ping") {
        l.what = line::kind::ping;
        return l;
    }
    if (text == "rescan") {
        l.what = line::kind::rescan;
        return l;
    }
    if (text.substr(0, 6) == "ready ") {
        const auto id = text.substr(6);
        if (!gateway_hex(id)) return std::nullopt;
        l.what = line::kind::ready;
        l.channel = std::string(id);
        return l;
    }
    return parse_notify_payload(text);
}

std::string format_wake(const line& l) {
    std::string out;
    out.reserve(l.channel.size() + l.payload.size() + 2);
    out += l.channel;
    out += ' ';
    out += l.payload;
    out += '\n';
    return out;
}

std::optional<credentials> parse_basic_credentials(std::string_view header) {
    constexpr std::string_view kBasic = "Basic ";
    if (header.size() <= kBasic.size() || header.size() > 1024) return std::nullopt;
    if (!std::equal(kBasic.begin(), kBasic.end(), header.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
        })) {
        return std::nullopt;
    }
    std::string decoded;
    try {
        decoded = crypto::base64_decode(header.substr(kBasic.size()));
    } catch (const error&) {
        return std::nullopt;
    }
    const auto colon = decoded.find(':');
    if (colon == std::string::npos || colon == 0) return std::nullopt;
    if (decoded.find('\0') != std::string::npos) return std::nullopt;
    return credentials{decoded.substr(0, colon), decoded.substr(colon + 1)};
}

}  // namespace awp::core::wake
