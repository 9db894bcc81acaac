// enc:v1 secret envelopes (what the runner and the gateway decrypt from rows a tenant wrote)
// and HOSTED_SECRETS_KEY values.
#include <cstddef>
#include <cstdint>
#include <string>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace crypto = awp::core::crypto;
    const std::string text(reinterpret_cast<const char*>(data), size);
    static const std::string key(32, 'k');
    try {
        (void)crypto::decrypt_secret_with_key(text, key);
    } catch (const crypto::decrypt_error&) {
    } catch (const crypto::crypto_error&) {
    }
    try {
        (void)crypto::decrypt_secret(text, "fuzz-service-role-key-0123456789");
    } catch (const crypto::decrypt_error&) {
    } catch (const crypto::crypto_error&) {
    }
    try {
        (void)crypto::parse_hosted_secrets_key(text);
    } catch (const awp::core::config_error&) {
    }
    return 0;
}
