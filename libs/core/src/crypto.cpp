// Cryptography on OpenSSL 3 (EVP) and the enc:v1 secrets format (JWTs: crypto_jwt.cpp).
#include "awp/core/crypto.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <memory>
#include <vector>

#include <rapidjson/document.h>

#include "crypto_internal.hpp"

namespace awp::core::crypto {
namespace {

constexpr std::string_view kSecretSalt = "yourhq-secrets-v1";
constexpr std::string_view kSecretInfo = "aes-256-gcm";
// EVP lengths are ints; secrets and payloads are nowhere near this.
constexpr std::size_t kMaxCipherInput = std::size_t{1} << 30;

using detail::bytes;

int int_size(std::size_t size, const char* what) {
    if (size > kMaxCipherInput) throw crypto_error(std::string(what) + " is too large");
    return static_cast<int>(size);
}

struct cipher_ctx_free {
    void operator()(EVP_CIPHER_CTX* ctx) const noexcept { EVP_CIPHER_CTX_free(ctx); }
};
using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, cipher_ctx_free>;

cipher_ctx new_cipher_ctx() {
    cipher_ctx ctx(EVP_CIPHER_CTX_new());
    if (!ctx) throw crypto_error("EVP_CIPHER_CTX_new failed");
    return ctx;
}

// ---- base64 ----

constexpr std::string_view kBase64Std =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string encode_base64(std::string_view data, std::string_view alphabet, bool pad) {
    std::string out;
    out.reserve((data.size() + 2) / 3 * 4);
    std::size_t i = 0;
    const auto at = [&data](std::size_t k) { return static_cast<unsigned char>(data[k]); };
    for (; i + 3 <= data.size(); i += 3) {
        const unsigned v = (at(i) << 16U) | (at(i + 1) << 8U) | at(i + 2);
        out += alphabet[(v >> 18U) & 63U];
        out += alphabet[(v >> 12U) & 63U];
        out += alphabet[(v >> 6U) & 63U];
        out += alphabet[v & 63U];
    }
    const std::size_t rest = data.size() - i;
    if (rest == 1) {
        const unsigned v = at(i) << 16U;
        out += alphabet[(v >> 18U) & 63U];
        out += alphabet[(v >> 12U) & 63U];
        if (pad) out += "==";
    } else if (rest == 2) {
        const unsigned v = (at(i) << 16U) | (at(i + 1) << 8U);
        out += alphabet[(v >> 18U) & 63U];
        out += alphabet[(v >> 12U) & 63U];
        out += alphabet[(v >> 6U) & 63U];
        if (pad) out += '=';
    }
    return out;
}

std::string decode_base64(std::string_view text, std::string_view alphabet, const char* name) {
    const auto fail = [name]() -> crypto_error {
        return crypto_error(std::string("invalid ") + name + " text");
    };
    std::size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    const std::size_t length = text.size() - pad;
    if (pad > 0 && text.size() % 4 != 0) throw fail();
    if (length % 4 == 1) throw fail();
    if (pad > 0 && length % 4 + pad != 4) throw fail();

    std::array<int, 256> value{};
    value.fill(-1);
    for (std::size_t k = 0; k < alphabet.size(); ++k) {
        value[static_cast<unsigned char>(alphabet[k])] = static_cast<int>(k);
    }
    std::string out;
    out.reserve(length / 4 * 3 + 2);
    unsigned acc = 0;
    int bits = 0;
    for (std::size_t k = 0; k < length; ++k) {
        const int v = value[static_cast<unsigned char>(text[k])];
        if (v < 0) throw fail();
        acc = (acc << 6U) | static_cast<unsigned>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> static_cast<unsigned>(bits)) & 0xFFU);
        }
    }
    // Left-over bits must be zero, so each byte string has exactly one accepted encoding.
    if (bits > 0 && (acc & ((1U << static_cast<unsigned>(bits)) - 1U)) != 0) throw fail();
    return out;
}

bool valid_utf8(std::string_view s) noexcept {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t extra = 0;
        std::uint32_t cp = 0;
        if (c < 0x80U) {
            ++i;
            continue;
        }
        if ((c & 0xE0U) == 0xC0U) {
            extra = 1;
            cp = c & 0x1FU;
        } else if ((c & 0xF0U) == 0xE0U) {
            extra = 2;
            cp = c & 0x0FU;
        } else if ((c & 0xF8U) == 0xF0U) {
            extra = 3;
            cp = c & 0x07U;
        } else {
            return false;
        }
        if (i + extra >= s.size()) return false;
        for (std::size_t k = 1; k <= extra; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0U) != 0x80U) return false;
            cp = (cp << 6U) | (cc & 0x3FU);
        }
        constexpr std::array<std::uint32_t, 4> kMin{0, 0x80, 0x800, 0x10000};
        if (cp < kMin[extra] || cp > 0x10FFFFU || (cp >= 0xD800U && cp <= 0xDFFFU)) return false;
        i += extra + 1;
    }
    return true;
}

}  // namespace

std::string random_bytes(std::size_t size) {
    std::string out(size, '\0');
    if (size == 0) return out;
    if (RAND_bytes(bytes(out), int_size(size, "random request")) != 1) {
        throw crypto_error("the random number generator failed");
    }
    return out;
}

std::string sha256(std::string_view data) {
    std::string out(32, '\0');
    unsigned length = 0;
    if (EVP_Digest(data.data(), data.size(), bytes(out), &length, EVP_sha256(), nullptr) != 1 ||
        length != out.size()) {
        throw crypto_error("SHA-256 failed");
    }
    return out;
}

std::string sha256_hex(std::string_view data) { return hex_encode(sha256(data)); }

std::string hmac_sha256(std::string_view key, std::string_view data) {
    std::string out(32, '\0');
    std::size_t length = 0;
    // A zero-length key must still be a valid pointer for OpenSSL.
    static const unsigned char kEmpty = 0;
    const unsigned char* key_bytes = key.empty() ? &kEmpty : bytes(key);
    if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key_bytes, key.size(), bytes(data),
                  data.size(), bytes(out), out.size(), &length) == nullptr ||
        length != out.size()) {
        throw crypto_error("HMAC-SHA256 failed");
    }
    return out;
}

std::string hkdf_sha256(std::string_view ikm, std::string_view salt, std::string_view info,
                        std::size_t length) {
    if (length == 0 || length > 255 * 32) throw crypto_error("HKDF-SHA256 length out of range");
    std::unique_ptr<EVP_KDF, decltype(&EVP_KDF_free)> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr),
                                                          &EVP_KDF_free);
    if (!kdf) throw crypto_error("HKDF is not available");
    std::unique_ptr<EVP_KDF_CTX, decltype(&EVP_KDF_CTX_free)> ctx(EVP_KDF_CTX_new(kdf.get()),
                                                                  &EVP_KDF_CTX_free);
    if (!ctx) throw crypto_error("EVP_KDF_CTX_new failed");
    // OSSL_PARAM wants non-const pointers; OpenSSL only reads them.
    std::string ikm_copy(ikm);
    std::string salt_copy(salt);
    std::string info_copy(info);
    char digest[] = "SHA256";
    std::vector<OSSL_PARAM> params;
    params.push_back(OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0));
    params.push_back(
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, ikm_copy.data(), ikm_copy.size()));
    // An absent salt means HashLen zero bytes (RFC 5869 §2.2), which is what OpenSSL does too.
    if (!salt_copy.empty()) {
        params.push_back(OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt_copy.data(),
                                                           salt_copy.size()));
    }
    if (!info_copy.empty()) {
        params.push_back(OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info_copy.data(),
                                                           info_copy.size()));
    }
    params.push_back(OSSL_PARAM_construct_end());
    std::string out(length, '\0');
    const int rc = EVP_KDF_derive(ctx.get(), bytes(out), out.size(), params.data());
    OPENSSL_cleanse(ikm_copy.data(), ikm_copy.size());
    if (rc != 1) throw crypto_error("HKDF-SHA256 failed");
    return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    if (a.empty()) return true;
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string hex_encode(std::string_view data) {
    constexpr std::string_view kDigits = "0123456789abcdef";
    std::string out;
    out.reserve(data.size() * 2);
    for (const char c : data) {
        const auto b = static_cast<unsigned char>(c);
        out += kDigits[b >> 4U];
        out += kDigits[b & 0x0FU];
    }
    return out;
}

std::string hex_decode(std::string_view text) {
    if (text.size() % 2 != 0) throw crypto_error("invalid hex text");
    const auto nibble = [](char c) -> unsigned {
        if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
        if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
        if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
        throw crypto_error("invalid hex text");
    };
    std::string out;
    out.reserve(text.size() / 2);
    for (std::size_t i = 0; i < text.size(); i += 2) {
        out += static_cast<char>((nibble(text[i]) << 4U) | nibble(text[i + 1]));
    }
    return out;
}

std::string base64_encode(std::string_view data) { return encode_base64(data, kBase64Std, true); }
std::string base64_decode(std::string_view text) {
    return decode_base64(text, kBase64Std, "base64");
}
std::string base64url_encode(std::string_view data) {
    return encode_base64(data, kBase64Url, false);
}
std::string base64url_decode(std::string_view text) {
    return decode_base64(text, kBase64Url, "base64url");
}

gcm_sealed aes256_gcm_encrypt(std::string_view key, std::string_view plaintext,
                              std::string_view aad) {
    if (key.size() != kAesKeySize) throw crypto_error("AES-256-GCM needs a 32-byte key");
    gcm_sealed sealed;
    sealed.iv = random_bytes(kGcmIvSize);
    sealed.tag.assign(kGcmTagSize, '\0');
    sealed.ciphertext.assign(plaintext.size(), '\0');
    auto ctx = new_cipher_ctx();
    int length = 0;
    bool ok = EVP_EncryptInit_ex2(ctx.get(), EVP_aes_256_gcm(), bytes(key), bytes(sealed.iv),
                                  nullptr) == 1;
    if (ok && !aad.empty()) {
        ok = EVP_EncryptUpdate(ctx.get(), nullptr, &length, bytes(aad),
                               int_size(aad.size(), "AAD")) == 1;
    }
    if (ok && !plaintext.empty()) {
        ok = EVP_EncryptUpdate(ctx.get(), bytes(sealed.ciphertext), &length, bytes(plaintext),
                               int_size(plaintext.size(), "plaintext")) == 1;
    }
    // GCM is a stream mode: Final writes nothing, but it must run before the tag exists.
    std::array<unsigned char, 16> tail{};
    ok = ok && EVP_EncryptFinal_ex(ctx.get(), tail.data(), &length) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kGcmTagSize),
                                   bytes(sealed.tag)) == 1;
    if (!ok) throw crypto_error("AES-256-GCM encryption failed");
    return sealed;
}

std::string aes256_gcm_decrypt(std::string_view key, std::string_view iv, std::string_view tag,
                               std::string_view ciphertext, std::string_view aad) {
    if (key.size() != kAesKeySize) throw crypto_error("AES-256-GCM needs a 32-byte key");
    // A short tag would be accepted by OpenSSL and weakens authentication: full tags only.
    if (iv.size() != kGcmIvSize || tag.size() != kGcmTagSize) {
        throw decrypt_error("AES-256-GCM needs a 12-byte IV and a 16-byte tag");
    }
    std::string plaintext(ciphertext.size(), '\0');
    std::string tag_copy(tag);
    auto ctx = new_cipher_ctx();
    int length = 0;
    bool ok =
        EVP_DecryptInit_ex2(ctx.get(), EVP_aes_256_gcm(), bytes(key), bytes(iv), nullptr) == 1;
    if (ok && !aad.empty()) {
        ok = EVP_DecryptUpdate(ctx.get(), nullptr, &length, bytes(aad),
                               int_size(aad.size(), "AAD")) == 1;
    }
    if (ok && !ciphertext.empty()) {
        ok = EVP_DecryptUpdate(ctx.get(), bytes(plaintext), &length, bytes(ciphertext),
                               int_size(ciphertext.size(), "ciphertext")) == 1;
    }
    ok = ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kGcmTagSize),
                                   bytes(tag_copy)) == 1;
    std::array<unsigned char, 16> tail{};
    ok = ok && EVP_DecryptFinal_ex(ctx.get(), tail.data(), &length) == 1;
    if (!ok) {
        OPENSSL_cleanse(plaintext.data(), plaintext.size());
        throw decrypt_error("AES-256-GCM authentication failed (wrong key or altered data)");
    }
    return plaintext;
}

std::string derive_secret_key(std::string_view service_role_key) {
    if (service_role_key.empty()) throw crypto_error("the service-role key is empty");
    return hkdf_sha256(service_role_key, kSecretSalt, kSecretInfo, kAesKeySize);
}

std::string workspace_session_key(std::string_view jwt_secret, std::string_view workspace_id) {
    if (jwt_secret.empty()) throw crypto_error("the JWT secret is empty");
    if (workspace_id.empty()) throw crypto_error("the workspace id is empty");
    return hkdf_sha256(jwt_secret, "awp-session-v1", workspace_id, 32);
}

std::string parse_hosted_secrets_key(std::string_view text) {
    constexpr std::string_view kSpace = " \t\r\n";
    const auto first = text.find_first_not_of(kSpace);
    text = first == std::string_view::npos
               ? std::string_view{}
               : text.substr(first, text.find_last_not_of(kSpace) - first + 1);
    using decoder = std::string (*)(std::string_view);
    for (const decoder decode : {&base64url_decode, &base64_decode, &hex_decode}) {
        try {
            auto key = decode(text);
            if (key.size() == kAesKeySize) return key;
        } catch (const crypto_error&) {
            // Not this encoding; try the next.
        }
    }
    throw config_error("HOSTED_SECRETS_KEY must be 32 bytes in base64url, base64 or hex");
}

bool is_encrypted_secret(std::string_view text) noexcept { return text.starts_with(kSecretPrefix); }

std::string encrypt_secret_with_key(std::string_view plaintext, std::string_view key) {
    const auto sealed = aes256_gcm_encrypt(key, plaintext);
    return std::string(kSecretPrefix) + base64url_encode(sealed.iv) + "." +
           base64url_encode(sealed.tag) + "." + base64url_encode(sealed.ciphertext);
}

std::string decrypt_secret_with_key(std::string_view text, std::string_view key) {
    if (!is_encrypted_secret(text)) throw decrypt_error("value is not in the enc:v1 format");
    std::string_view body = text.substr(kSecretPrefix.size());
    std::vector<std::string_view> parts;
    for (;;) {
        const auto dot = body.find('.');
        parts.push_back(body.substr(0, dot));
        if (dot == std::string_view::npos) break;
        body.remove_prefix(dot + 1);
    }
    // Legacy writers produced "enc:v1:.iv.tag.ct".
    if (parts.size() == 4 && parts.front().empty()) parts.erase(parts.begin());
    if (parts.size() != 3) throw decrypt_error("malformed enc:v1 value");
    std::string iv;
    std::string tag;
    std::string ciphertext;
    try {
        iv = base64url_decode(parts[0]);
        tag = base64url_decode(parts[1]);
        ciphertext = base64url_decode(parts[2]);
    } catch (const crypto_error&) {
        throw decrypt_error("malformed enc:v1 value");
    }
    auto plaintext = aes256_gcm_decrypt(key, iv, tag, ciphertext);
    // The original readers decode UTF-8 and drop the secret when that fails.
    if (!valid_utf8(plaintext)) {
        OPENSSL_cleanse(plaintext.data(), plaintext.size());
        throw decrypt_error("decrypted secret is not UTF-8");
    }
    return plaintext;
}

std::string encrypt_secret(std::string_view plaintext, std::string_view service_role_key) {
    auto key = derive_secret_key(service_role_key);
    auto out = encrypt_secret_with_key(plaintext, key);
    OPENSSL_cleanse(key.data(), key.size());
    return out;
}

std::string decrypt_secret(std::string_view text, std::string_view service_role_key) {
    auto key = derive_secret_key(service_role_key);
    struct wipe {
        std::string& k;
        ~wipe() { OPENSSL_cleanse(k.data(), k.size()); }
    } wiper{key};
    return decrypt_secret_with_key(text, key);
}

}  // namespace awp::core::crypto
