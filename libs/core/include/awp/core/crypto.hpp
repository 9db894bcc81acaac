// Cryptography on OpenSSL 3 and libjwt: HS256 tokens, AES-256-GCM, HKDF/HMAC/SHA-256, base64,
// and the "enc:v1:" secrets format shared with the original product's UI.
// Byte strings are std::string / std::string_view holding raw bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "awp/core/error.hpp"

namespace awp::core::crypto {

/// A cryptographic operation failed or its input is invalid (bad key size, garbage encoding,
/// authentication failure). Messages never contain key material or plaintext.
class crypto_error : public core::error {
public:
    using core::error::error;
};

/// A secret or ciphertext did not authenticate or is malformed (tampered, wrong key).
class decrypt_error : public crypto_error {
public:
    using crypto_error::crypto_error;
};

/// Why a token was refused.
enum class token_failure {
    malformed,      // not a JWT, or claims that are not a JSON object / badly typed exp, nbf
    bad_algorithm,  // alg is not HS256 (none, HS384, RS256, ...)
    bad_signature,  // wrong key or token altered
    expired,        // exp (plus leeway) has passed
    not_yet_valid,  // nbf (minus leeway) is in the future
    missing_exp,    // exp required but absent
};

/// A JWT was refused; reason() says why. The token itself is never in the message.
class token_error : public core::error {
public:
    token_error(token_failure reason, const std::string& message)
        : core::error(message), reason_(reason) {}
    [[nodiscard]] token_failure reason() const noexcept { return reason_; }

private:
    token_failure reason_;
};

// ---- primitives ----

/// `size` bytes from OpenSSL's CSPRNG. Throws crypto_error if it is unavailable.
[[nodiscard]] std::string random_bytes(std::size_t size);

/// SHA-256 digest: 32 raw bytes.
[[nodiscard]] std::string sha256(std::string_view data);
/// SHA-256 digest as 64 lowercase hex digits.
[[nodiscard]] std::string sha256_hex(std::string_view data);
/// HMAC-SHA256 of `data` under `key`: 32 raw bytes.
[[nodiscard]] std::string hmac_sha256(std::string_view key, std::string_view data);
/// HKDF-SHA256 (RFC 5869, extract then expand): `length` bytes, at most 255 * 32.
[[nodiscard]] std::string hkdf_sha256(std::string_view ikm, std::string_view salt,
                                      std::string_view info, std::size_t length);
/// Compares in time that depends only on the lengths (which it does not hide).
[[nodiscard]] bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

/// Lowercase hex.
[[nodiscard]] std::string hex_encode(std::string_view data);
/// Hex of either case; throws crypto_error on odd length or a non-hex character.
[[nodiscard]] std::string hex_decode(std::string_view text);

/// Standard base64 (RFC 4648 §4) with padding.
[[nodiscard]] std::string base64_encode(std::string_view data);
/// Standard base64; padding optional but must be right if present. Throws crypto_error on any
/// other character (whitespace included), a bad length or non-zero trailing bits.
[[nodiscard]] std::string base64_decode(std::string_view text);
/// base64url (RFC 4648 §5) without padding, as JWTs and the enc:v1 format use.
[[nodiscard]] std::string base64url_encode(std::string_view data);
/// base64url, with or without padding; as strict as base64_decode otherwise.
[[nodiscard]] std::string base64url_decode(std::string_view text);

// ---- AES-256-GCM ----

inline constexpr std::size_t kAesKeySize = 32;
inline constexpr std::size_t kGcmIvSize = 12;
inline constexpr std::size_t kGcmTagSize = 16;

struct gcm_sealed {
    std::string iv;          // 12 random bytes
    std::string tag;         // 16 bytes
    std::string ciphertext;  // as long as the plaintext
};

/// Encrypts under a 32-byte key with a fresh random 12-byte IV. Throws crypto_error on a bad key.
[[nodiscard]] gcm_sealed aes256_gcm_encrypt(std::string_view key, std::string_view plaintext,
                                            std::string_view aad = {});
/// Decrypts and authenticates (12-byte IV, full 16-byte tag only). Throws decrypt_error if
/// anything was altered or the key is wrong, crypto_error on bad sizes.
[[nodiscard]] std::string aes256_gcm_decrypt(std::string_view key, std::string_view iv,
                                             std::string_view tag, std::string_view ciphertext,
                                             std::string_view aad = {});

// ---- secrets ("enc:v1:", anchor-daemons.md §3.1) ----

inline constexpr std::string_view kSecretPrefix = "enc:v1:";

/// The AES key of the secrets format: HKDF-SHA256(ikm = service-role key, salt =
/// "yourhq-secrets-v1", info = "aes-256-gcm", 32 bytes).
[[nodiscard]] std::string derive_secret_key(std::string_view service_role_key);
/// A HOSTED_SECRETS_KEY value: base64url, then base64, then hex; the first decoding that gives
/// 32 bytes wins. Throws config_error otherwise.
[[nodiscard]] std::string parse_hosted_secrets_key(std::string_view text);

/// True if `text` carries the enc:v1 prefix. Values without it are legacy plaintext to the
/// original readers; whether to accept them is the caller's decision.
[[nodiscard]] bool is_encrypted_secret(std::string_view text) noexcept;

/// "enc:v1:" + b64url(iv) + "." + b64url(tag) + "." + b64url(ciphertext), key derived from the
/// service-role key.
[[nodiscard]] std::string encrypt_secret(std::string_view plaintext,
                                         std::string_view service_role_key);
/// Inverse of encrypt_secret; also accepts the legacy "enc:v1:.iv.tag.ct". Throws
/// decrypt_error on a missing prefix, a malformed value, tampering or the wrong key.
[[nodiscard]] std::string decrypt_secret(std::string_view text, std::string_view service_role_key);
/// Same two with the 32-byte AES key itself (a derived key, or HOSTED_SECRETS_KEY).
[[nodiscard]] std::string encrypt_secret_with_key(std::string_view plaintext, std::string_view key);
[[nodiscard]] std::string decrypt_secret_with_key(std::string_view text, std::string_view key);

// ---- JWT (HS256 only) ----

/// The HS256 key of sessions awp issues for one registered workspace: HKDF-SHA256(ikm = the
/// gateway's JWT secret, salt = "awp-session-v1", info = workspace id, 32 bytes). A session
/// signed for one workspace does not verify under another's key (docs/security.md).
[[nodiscard]] std::string workspace_session_key(std::string_view jwt_secret,
                                                std::string_view workspace_id);

/// The anon key of an instance whose JWT secret is `jwt_secret`: the HS256 token
/// {"role":"anon","iss":"awp","iat":kAnonKeyIssuedAt,"exp":kAnonKeyExpires}. Deterministic (the
/// same secret gives the same key after every restart, on every host), so a UI and scripts can
/// keep it; it changes only with the secret. It grants what the anon role may do under
/// row-level security, nothing more (docs/data-api.md, "Signing in").
[[nodiscard]] std::string anon_key(std::string_view jwt_secret);
inline constexpr long long kAnonKeyIssuedAt = 1767225600;  // 2026-01-01T00:00:00Z
inline constexpr long long kAnonKeyExpires = 4102444800;   // 2100-01-01T00:00:00Z

/// Signs a claims JSON object with HS256. Throws crypto_error if the claims are not a JSON
/// object or the secret is empty.
[[nodiscard]] std::string jwt_sign_hs256(std::string_view claims_json, std::string_view secret);

struct jwt_verify_options {
    /// Tolerated clock skew for exp and nbf.
    std::chrono::seconds leeway{0};
    /// Refuse tokens without exp.
    bool require_exp = false;
    /// Time to check against; unset = now. For tests.
    std::optional<std::chrono::system_clock::time_point> now;
};

/// Verifies an HS256 token and returns its claims as compact JSON (as libjwt re-serialises
/// them). Throws token_error: any other alg (none included), bad signature, tampering, expired,
/// not yet valid, malformed.
[[nodiscard]] std::string jwt_verify_hs256(std::string_view token, std::string_view secret,
                                           const jwt_verify_options& options = {});

}  // namespace awp::core::crypto
