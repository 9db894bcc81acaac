// UUIDs: random (v4) generation and strict parsing of the canonical 8-4-4-4-12 form.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace awp::core {

class uuid {
public:
    /// The nil UUID (all zero).
    uuid() = default;
    explicit uuid(const std::array<std::uint8_t, 16>& bytes) noexcept : bytes_(bytes) {}

    /// A random version-4 UUID from OpenSSL's CSPRNG. Throws crypto::crypto_error if it fails.
    [[nodiscard]] static uuid generate_v4();
    /// Canonical 36-character form, hex digits of either case; nullopt for anything else
    /// (braces, "urn:uuid:", missing dashes, whitespace).
    [[nodiscard]] static std::optional<uuid> parse(std::string_view text) noexcept;

    /// Lowercase canonical form.
    [[nodiscard]] std::string to_string() const;
    /// Lowercase, 32 hex digits, no dashes.
    [[nodiscard]] std::string without_dashes() const;

    [[nodiscard]] const std::array<std::uint8_t, 16>& bytes() const noexcept { return bytes_; }
    /// The version nibble (4 for generate_v4()).
    [[nodiscard]] int version() const noexcept { return bytes_[6] >> 4U; }
    [[nodiscard]] bool is_nil() const noexcept { return *this == uuid{}; }

    friend auto operator<=>(const uuid&, const uuid&) = default;

private:
    std::array<std::uint8_t, 16> bytes_{};
};

/// True if `text` is a canonical UUID (see uuid::parse).
[[nodiscard]] bool is_valid_uuid(std::string_view text) noexcept;

}  // namespace awp::core
