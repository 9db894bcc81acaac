// UUID generation (RFC 4122 version 4) and canonical-form parsing.
#include "awp/core/uuid.hpp"

#include <algorithm>

#include "awp/core/crypto.hpp"

namespace awp::core {
namespace {

constexpr std::string_view kHex = "0123456789abcdef";

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool is_dash_position(std::size_t i) noexcept { return i == 8 || i == 13 || i == 18 || i == 23; }

std::string format(const std::array<std::uint8_t, 16>& bytes, bool dashes) {
    std::string out;
    out.reserve(36);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (dashes && (i == 4 || i == 6 || i == 8 || i == 10)) out += '-';
        out += kHex[bytes[i] >> 4U];
        out += kHex[bytes[i] & 0x0FU];
    }
    return out;
}

}  // namespace

uuid uuid::generate_v4() {
    const auto random = crypto::random_bytes(16);
    std::array<std::uint8_t, 16> bytes{};
    std::transform(random.begin(), random.end(), bytes.begin(),
                   [](char c) { return static_cast<std::uint8_t>(c); });
    bytes[6] = static_cast<std::uint8_t>((bytes[6] & 0x0FU) | 0x40U);  // version 4
    bytes[8] = static_cast<std::uint8_t>((bytes[8] & 0x3FU) | 0x80U);  // RFC 4122 variant
    return uuid(bytes);
}

std::optional<uuid> uuid::parse(std::string_view text) noexcept {
    if (text.size() != 36) return std::nullopt;
    std::array<std::uint8_t, 16> bytes{};
    std::size_t out = 0;
    int high = -1;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (is_dash_position(i)) {
            if (text[i] != '-') return std::nullopt;
            continue;
        }
        const int v = hex_value(text[i]);
        if (v < 0) return std::nullopt;
        if (high < 0) {
            high = v;
        } else {
            bytes[out++] = static_cast<std::uint8_t>((high << 4) | v);
            high = -1;
        }
    }
    return uuid(bytes);
}

std::string uuid::to_string() const { return format(bytes_, true); }

std::string uuid::without_dashes() const { return format(bytes_, false); }

bool is_valid_uuid(std::string_view text) noexcept { return uuid::parse(text).has_value(); }

}  // namespace awp::core
