// Unit tests of awp::core::crypto: published test vectors, JWT refusals, GCM tampering, base64
// strictness, and the enc:v1 vector produced by tools/crypto-vectors (Python and Node).
#include "awp/core/crypto.hpp"

#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

namespace crypto_test {

using namespace awp::core::crypto;
using namespace std::chrono_literals;

namespace {

std::string unhex(std::string_view s) { return hex_decode(s); }

// A JWT assembled by hand (not by libjwt), so verification is checked against the standard.
std::string hand_made_token(std::string_view header, std::string_view claims,
                            std::string_view secret, const char* digest = "SHA256") {
    const auto input = base64url_encode(header) + "." + base64url_encode(claims);
    std::string mac(64, '\0');
    std::size_t length = 0;
    EVP_Q_mac(nullptr, "HMAC", nullptr, digest, nullptr, secret.data(), secret.size(),
              reinterpret_cast<const unsigned char*>(input.data()), input.size(),
              reinterpret_cast<unsigned char*>(mac.data()), mac.size(), &length);
    mac.resize(length);
    return input + "." + base64url_encode(mac);
}

token_failure refusal(std::string_view token, std::string_view secret,
                      const jwt_verify_options& options = {}) {
    try {
        (void)jwt_verify_hs256(token, secret, options);
    } catch (const token_error& e) {
        return e.reason();
    }
    FAIL("token was accepted");
    return token_failure::malformed;
}

jwt_verify_options at(std::int64_t unix_seconds, std::chrono::seconds leeway = 0s) {
    jwt_verify_options o;
    o.now = std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds));
    o.leeway = leeway;
    return o;
}

std::string flip_bit(std::string s, std::size_t index) {
    s[index] = static_cast<char>(s[index] ^ 0x01);
    return s;
}

constexpr std::string_view kHs256Header = R"({"alg":"HS256","typ":"JWT"})";
constexpr std::string_view kSecret = "super-secret-jwt-key-with-at-least-32-chars";

}  // namespace

TEST_CASE("hashes, HMAC and HKDF match published vectors", "[crypto]") {
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256("abc").size() == 32);
    // RFC 4231 test case 2.
    CHECK(hex_encode(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    // RFC 5869 test case 1.
    CHECK(hex_encode(hkdf_sha256(std::string(22, '\x0b'), unhex("000102030405060708090a0b0c"),
                                 unhex("f0f1f2f3f4f5f6f7f8f9"), 42)) ==
          "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
    // RFC 5869 test case 3: no salt, no info.
    CHECK(hex_encode(hkdf_sha256(std::string(22, '\x0b'), "", "", 42)) ==
          "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8");
    CHECK_THROWS_AS(hkdf_sha256("ikm", "", "", 255 * 32 + 1), crypto_error);
}

TEST_CASE("random bytes and constant-time compare", "[crypto]") {
    const auto a = random_bytes(32);
    const auto b = random_bytes(32);
    CHECK(a.size() == 32);
    CHECK(a != b);
    CHECK(random_bytes(0).empty());
    CHECK(constant_time_equal("same", "same"));
    CHECK(constant_time_equal("", ""));
    CHECK_FALSE(constant_time_equal("same", "samf"));
    CHECK_FALSE(constant_time_equal("same", "same "));
}

TEST_CASE("base64 and base64url follow RFC 4648 and round-trip any bytes", "[crypto]") {
    CHECK(base64_encode("") == "");
    CHECK(base64_encode("f") == "Zg==");
    CHECK(base64_encode("fo") == "Zm8=");
    CHECK(base64_encode("foo") == "Zm9v");
    CHECK(base64_encode("foobar") == "Zm9vYmFy");
    CHECK(base64_decode("Zm9vYg==") == "foob");
    CHECK(base64_decode("Zm9vYg") == "foob");  // padding optional
    CHECK(base64url_encode("\xfb\xff\xbf") == "-_-_");
    CHECK(base64_encode("\xfb\xff\xbf") == "+/+/");
    CHECK(base64url_encode("fo") == "Zm8");  // no padding
    CHECK(base64url_decode("Zm8=") == "fo");
    for (std::size_t n = 0; n <= 70; ++n) {
        const auto data = random_bytes(n);
        CHECK(base64url_decode(base64url_encode(data)) == data);
        CHECK(base64_decode(base64_encode(data)) == data);
    }
    CHECK(hex_decode("00ffAb") == std::string("\x00\xff\xab", 3));
    CHECK_THROWS_AS(hex_decode("0g"), crypto_error);
    CHECK_THROWS_AS(hex_decode("abc"), crypto_error);
}

TEST_CASE("base64 decoding rejects garbage", "[crypto]") {
    for (const std::string_view bad : std::initializer_list<std::string_view>{
             "Zm9v!", "Z", "Zm9vY", "Zg=", "Zg===", "=Zg=", "Zg==Zg==", "Zm 9v", "Zm9v\n",
             "Zh==", "Zm9=", std::string_view("Zm9v\0", 5)}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(base64_decode(bad), crypto_error);
        CHECK_THROWS_AS(base64url_decode(bad), crypto_error);
    }
    CHECK_THROWS_AS(base64url_decode("+/+/"), crypto_error);  // standard alphabet in url text
    CHECK_THROWS_AS(base64_decode("-_-_"), crypto_error);     // url alphabet in standard text
}

TEST_CASE("AES-256-GCM round-trips and refuses any alteration", "[crypto]") {
    const auto key = random_bytes(32);
    const std::string plaintext = "provider key: sk-test-123";
    const auto sealed = aes256_gcm_encrypt(key, plaintext, "aad");
    CHECK(sealed.iv.size() == 12);
    CHECK(sealed.tag.size() == 16);
    CHECK(sealed.ciphertext.size() == plaintext.size());
    CHECK(aes256_gcm_decrypt(key, sealed.iv, sealed.tag, sealed.ciphertext, "aad") == plaintext);
    CHECK(aes256_gcm_encrypt(key, plaintext).iv != aes256_gcm_encrypt(key, plaintext).iv);

    SECTION("bit flipped in the ciphertext") {
        CHECK_THROWS_AS(
            aes256_gcm_decrypt(key, sealed.iv, sealed.tag, flip_bit(sealed.ciphertext, 3), "aad"),
            decrypt_error);
    }
    SECTION("bit flipped in the tag") {
        CHECK_THROWS_AS(
            aes256_gcm_decrypt(key, sealed.iv, flip_bit(sealed.tag, 15), sealed.ciphertext, "aad"),
            decrypt_error);
    }
    SECTION("bit flipped in the IV") {
        CHECK_THROWS_AS(
            aes256_gcm_decrypt(key, flip_bit(sealed.iv, 0), sealed.tag, sealed.ciphertext, "aad"),
            decrypt_error);
    }
    SECTION("other AAD, other key, truncated tag") {
        CHECK_THROWS_AS(aes256_gcm_decrypt(key, sealed.iv, sealed.tag, sealed.ciphertext, "aaD"),
                        decrypt_error);
        CHECK_THROWS_AS(
            aes256_gcm_decrypt(random_bytes(32), sealed.iv, sealed.tag, sealed.ciphertext, "aad"),
            decrypt_error);
        CHECK_THROWS_AS(
            aes256_gcm_decrypt(key, sealed.iv, sealed.tag.substr(0, 12), sealed.ciphertext, "aad"),
            decrypt_error);
    }
    SECTION("wrong key size") {
        CHECK_THROWS_AS(aes256_gcm_encrypt(random_bytes(16), plaintext), crypto_error);
    }
}

TEST_CASE("AES-256-GCM decrypts the NIST/McGrew-Viega test case 14", "[crypto]") {
    const std::string zero_key(32, '\0');
    CHECK(aes256_gcm_decrypt(zero_key, std::string(12, '\0'),
                             unhex("d0d1c8a799996bf0265b98b5d48ab919"),
                             unhex("cea7403d4d606b6e074ec5d3baf39d18")) == std::string(16, '\0'));
}

// Vector from tools/crypto-vectors/gen_enc_v1.py (Python `cryptography`, HKDF checked against a
// hand-written RFC 5869) and gen_enc_v1.mjs (Node crypto, as the original UI): both print these.
TEST_CASE("enc:v1 secrets decrypt the independently generated vector", "[crypto]") {
    const std::string service_role_key = "test-service-role-key/2026+\xc3\xa9";
    const std::string plaintext =
        "sk-ant-api03-\xc3\x9cn\xc3\xaf"
        "c\xc3\xb8"
        "d\xc3\xa9 \xe2\x82\xacuro \xe2\x9c\x93 'quoted' $HOME";
    const std::string value =
        "enc:v1:AAECAwQFBgcICQoL.4SMmnZCp0WcvYQ1r4amwiA."
        "RLNFjJoEc_4tKXUCvcsfdul-0C-88sPtb7MBqkbukZDz8zCIdDSoxBQdS9akT1rFCpQ";

    CHECK(hex_encode(derive_secret_key(service_role_key)) ==
          "3f458bf4cb29f14f008807645d83c5a9b231531392d9479c1ed3aa285341f04d");
    CHECK(decrypt_secret(value, service_role_key) == plaintext);
    SECTION("legacy form with an empty first part") {
        CHECK(decrypt_secret("enc:v1:." + value.substr(7), service_role_key) == plaintext);
    }
    SECTION("empty plaintext") {
        CHECK(decrypt_secret("enc:v1:AAAAAAAAAAAAAAAA.1swlGmyP5BvySVIUOz1QKg.", service_role_key) ==
              "");
    }
    SECTION("wrong service-role key") {
        CHECK_THROWS_AS(decrypt_secret(value, service_role_key + "x"), decrypt_error);
    }
    SECTION("tampered iv, tag or ciphertext") {
        // Position 10 is inside the iv, 30 inside the tag, 60 inside the ciphertext.
        for (const std::size_t pos : {std::size_t{10}, std::size_t{30}, std::size_t{60}}) {
            std::string bad = value;
            bad[pos] = bad[pos] == 'A' ? 'B' : 'A';
            CAPTURE(pos);
            CHECK_THROWS_AS(decrypt_secret(bad, service_role_key), decrypt_error);
        }
    }
    SECTION("malformed values") {
        for (const std::string& bad :
             {std::string("plain-value"), std::string("enc:v1:"), std::string("enc:v1:a.b"),
              std::string("enc:v1:a.b.c.d"), std::string("enc:v2:") + value.substr(7),
              value + ".extra", std::string("enc:v1:!!!.4SMmnZCp0WcvYQ1r4amwiA.RLNF")}) {
            CAPTURE(bad);
            CHECK_THROWS_AS(decrypt_secret(bad, service_role_key), decrypt_error);
        }
    }
}

TEST_CASE("enc:v1 secrets round-trip with fresh IVs", "[crypto]") {
    const std::string key = "service-role-key";
    const auto a = encrypt_secret("value 1 \xe2\x9c\x93", key);
    const auto b = encrypt_secret("value 1 \xe2\x9c\x93", key);
    CHECK(a.rfind("enc:v1:", 0) == 0);
    CHECK(a != b);
    CHECK(is_encrypted_secret(a));
    CHECK_FALSE(is_encrypted_secret("plain"));
    CHECK(decrypt_secret(a, key) == "value 1 \xe2\x9c\x93");
    CHECK(decrypt_secret(encrypt_secret("", key), key) == "");
    const auto raw_key = random_bytes(32);
    CHECK(decrypt_secret_with_key(encrypt_secret_with_key("x", raw_key), raw_key) == "x");
    CHECK_THROWS_AS(encrypt_secret("x", ""), crypto_error);
}

TEST_CASE("HOSTED_SECRETS_KEY is read as base64url, base64 or hex of 32 bytes", "[crypto]") {
    const auto key = random_bytes(32);
    CHECK(parse_hosted_secrets_key(base64url_encode(key)) == key);
    CHECK(parse_hosted_secrets_key(base64_encode(key) + "\n") == key);
    CHECK(parse_hosted_secrets_key(hex_encode(key)) == key);
    CHECK_THROWS_AS(parse_hosted_secrets_key(base64_encode(random_bytes(16))),
                    awp::core::config_error);
    CHECK_THROWS_AS(parse_hosted_secrets_key("not a key"), awp::core::config_error);
}

TEST_CASE("JWT HS256 signs and verifies, claims come back", "[crypto]") {
    const auto token = jwt_sign_hs256(R"({"sub":"user-1","role":"authenticated"})", kSecret);
    const auto claims = jwt_verify_hs256(token, kSecret);
    CHECK(claims.find(R"("sub":"user-1")") != std::string::npos);
    CHECK(claims.find(R"("role":"authenticated")") != std::string::npos);
    // A token made without libjwt verifies too.
    CHECK(jwt_verify_hs256(hand_made_token(kHs256Header, R"({"a":1})", kSecret), kSecret) ==
          R"({"a":1})");
    // The jwt.io example.
    CHECK(jwt_verify_hs256(
              "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
              "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
              "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
              "your-256-bit-secret")
              .find("John Doe") != std::string::npos);
    CHECK_THROWS_AS(jwt_sign_hs256("[1,2]", kSecret), crypto_error);
    CHECK_THROWS_AS(jwt_sign_hs256("{}", ""), crypto_error);
}

TEST_CASE("JWT verification refuses other algorithms, alg none included", "[crypto]") {
    const std::string claims = R"({"sub":"admin"})";
    CHECK(refusal(base64url_encode(R"({"alg":"none","typ":"JWT"})") + "." +
                      base64url_encode(claims) + ".",
                  kSecret) == token_failure::bad_algorithm);
    CHECK(refusal(base64url_encode(R"({"alg":"None"})") + "." + base64url_encode(claims) + ".",
                  kSecret) == token_failure::bad_algorithm);
    // Correctly signed with the right secret, but HS384: libjwt alone would accept it.
    CHECK(refusal(hand_made_token(R"({"alg":"HS384","typ":"JWT"})", claims, kSecret, "SHA384"),
                  kSecret) == token_failure::bad_algorithm);
    CHECK(refusal(hand_made_token(R"({"alg":"RS256","typ":"JWT"})", claims, kSecret), kSecret) ==
          token_failure::bad_algorithm);
}

TEST_CASE("JWT verification refuses a wrong key and tampered tokens", "[crypto]") {
    const auto token = jwt_sign_hs256(R"({"sub":"user-1"})", kSecret);
    const auto first_dot = token.find('.');
    const auto second_dot = token.find('.', first_dot + 1);
    SECTION("wrong key") {
        CHECK(refusal(token, "another-secret") == token_failure::bad_signature);
    }
    SECTION("payload swapped") {
        const auto forged = token.substr(0, first_dot + 1) +
                            base64url_encode(R"({"sub":"admin"})") + token.substr(second_dot);
        CHECK(refusal(forged, kSecret) == token_failure::bad_signature);
    }
    SECTION("signature changed") {
        std::string forged = token;
        auto& c = forged[second_dot + 5];
        c = c == 'A' ? 'B' : 'A';
        CHECK(refusal(forged, kSecret) == token_failure::bad_signature);
        CHECK(refusal(token.substr(0, second_dot + 1), kSecret) == token_failure::bad_signature);
    }
    SECTION("not a token") {
        CHECK(refusal("", kSecret) == token_failure::malformed);
        CHECK(refusal("abc", kSecret) == token_failure::malformed);
        CHECK(refusal("a.b.c", kSecret) == token_failure::malformed);
        const auto extra = refusal(token + ".x", kSecret);
        CHECK((extra == token_failure::malformed || extra == token_failure::bad_signature));
    }
}

TEST_CASE("JWT verification enforces exp and nbf with a leeway", "[crypto]") {
    const auto with = [](std::string_view claims) {
        return hand_made_token(kHs256Header, claims, kSecret);
    };
    const auto expiring = with(R"({"sub":"u","exp":1000})");
    CHECK(refusal(expiring, kSecret, at(1000)) == token_failure::expired);
    CHECK(refusal(expiring, kSecret, at(5000)) == token_failure::expired);
    CHECK_NOTHROW(jwt_verify_hs256(expiring, kSecret, at(999)));
    CHECK_NOTHROW(jwt_verify_hs256(expiring, kSecret, at(1004, 5s)));
    CHECK(refusal(expiring, kSecret, at(1005, 5s)) == token_failure::expired);
    // Against the real clock as well.
    CHECK(refusal(with(R"({"exp":1})"), kSecret) == token_failure::expired);

    const auto early = with(R"({"sub":"u","nbf":2000})");
    CHECK(refusal(early, kSecret, at(1999)) == token_failure::not_yet_valid);
    CHECK_NOTHROW(jwt_verify_hs256(early, kSecret, at(2000)));
    CHECK_NOTHROW(jwt_verify_hs256(early, kSecret, at(1995, 5s)));

    CHECK(refusal(with(R"({"exp":"tomorrow"})"), kSecret) == token_failure::malformed);
    CHECK(refusal(with("[1]"), kSecret) == token_failure::malformed);
    jwt_verify_options need_exp;
    need_exp.require_exp = true;
    CHECK(refusal(with(R"({"sub":"u"})"), kSecret, need_exp) == token_failure::missing_exp);
    CHECK_NOTHROW(jwt_verify_hs256(with(R"({"sub":"u","exp":9999999999})"), kSecret, need_exp));
}

}  // namespace crypto_test
