// HS256 access tokens as the gateway verifies them (libjwt behind core::crypto), signed with
// the fuzzer's key half the time so the claims parser behind the signature is reached too.
#include <cstddef>
#include <cstdint>
#include <string>

#include "awp/core/crypto.hpp"
#include "awp/core/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace crypto = awp::core::crypto;
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::string key = "fuzz-secret-that-is-long-enough-0123456789";
    crypto::jwt_verify_options o;
    o.require_exp = false;
    try {
        (void)crypto::jwt_verify_hs256(text, key, o);
    } catch (const crypto::token_error&) {
    } catch (const crypto::crypto_error&) {
    }
    // The same bytes as claims: signed, then verified and parsed as the gateway does.
    try {
        const auto token = crypto::jwt_sign_hs256(text, key);
        auto claims = crypto::jwt_verify_hs256(token, key, o);
        (void)awp::core::json::parse_object(claims, awp::core::json::kSmall);
    } catch (const crypto::token_error&) {
    } catch (const crypto::crypto_error&) {
    } catch (const awp::core::json::parse_error&) {
    }
    return 0;
}
