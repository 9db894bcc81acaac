// core::secrets: the names a secret may have, the names awp gives secrets, the files they land
// in, and the one rule for the key of enc:v1 values (HOSTED_SECRETS_KEY, else HKDF of the
// service-role key) that the api-gateway and the command runner share.
#include <catch2/catch.hpp>

#include <string>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/secrets.hpp"

namespace secrets_names_test {

namespace secrets = awp::core::secrets;
namespace crypto = awp::core::crypto;

TEST_CASE("secret names are environment variable names", "[secrets][protocol]") {
    for (const std::string ok :
         {"A", "_", "a", "OPENAI_API_KEY", "_private", "x1", "TELEGRAM_BOT_TOKEN",
          "GOOGLE_DRIVE_SOURCE_1A2B3C4D__REFRESH_TOKEN"}) {
        INFO(ok);
        CHECK(secrets::is_valid_name(ok));
    }
    CHECK(secrets::is_valid_name(std::string(128, 'K')));
    CHECK_FALSE(secrets::is_valid_name(std::string(129, 'K')));
    for (const std::string bad : {"", "1ABC", "9", "A-B", "A B", " A", "A ", "A.B", "A=B", "A\nB",
                                  "ABC\n", "A'B", "A$B", "A/B",
                                  "\xc3\x84"
                                  "B",
                                  "\xc3\xa9t\xc3\xa9"}) {
        INFO(bad);
        CHECK_FALSE(secrets::is_valid_name(bad));
    }
    CHECK_FALSE(secrets::is_valid_name(std::string("A\0B", 3)));
}

TEST_CASE("the names awp gives secrets are valid secret names", "[secrets][protocol]") {
    const std::string id = "1a2b3c4d-0000-4000-8000-000000000000";
    CHECK(secrets::source_secret_name("google-drive", id) == "GOOGLE_DRIVE_SOURCE_1A2B3C4D");
    CHECK(secrets::source_secret_name("notion", id) == "NOTION_SOURCE_1A2B3C4D");
    CHECK(secrets::source_secret_name("x", "ab") == "X_SOURCE_AB");
    CHECK(secrets::source_field_name("NOTION_SOURCE_1A2B3C4D", "refresh_token") ==
          "NOTION_SOURCE_1A2B3C4D__REFRESH_TOKEN");
    CHECK(secrets::channel_token_name("telegram") == "TELEGRAM_BOT_TOKEN");
    // The longest runner provider the connector manifests allow ([a-z][a-z0-9_-]{0,63}) still
    // names a valid secret, with its longest field.
    const std::string provider = "p" + std::string(63, '-');
    const auto longest = secrets::source_secret_name(provider, id);
    CHECK(secrets::is_valid_name(longest));
    CHECK(secrets::is_valid_name(secrets::source_field_name(longest, "refresh_token")));
}

TEST_CASE("secret files: gateway.env and agents/<slug>.env, never outside agents/",
          "[secrets][protocol]") {
    CHECK(secrets::kGatewayEnvFile == "gateway.env");
    CHECK(secrets::agent_env_file("alice") == "agents/alice.env");
    CHECK(secrets::agent_env_file("Bob.v2_x-y") == "agents/Bob.v2_x-y.env");
    CHECK(secrets::agent_env_file(std::string(128, 'a')));
    for (const std::string bad :
         {"", ".", "..", "a..b", ".hidden", "-a", "_a", "a/b", "../x", "a b", "a\nb", "\xc3\xa9"}) {
        INFO(bad);
        CHECK_FALSE(secrets::agent_env_file(bad));
    }
    CHECK_FALSE(secrets::agent_env_file(std::string(129, 'a')));
}

TEST_CASE("the secrets key: HOSTED_SECRETS_KEY, else HKDF of the service-role key",
          "[secrets][protocol]") {
    const auto hosted = crypto::random_bytes(32);
    CHECK(secrets::encryption_key(crypto::base64url_encode(hosted), "service") == hosted);
    CHECK(secrets::encryption_key(crypto::hex_encode(hosted), "") == hosted);
    CHECK(secrets::encryption_key("", "service") == crypto::derive_secret_key("service"));
    CHECK(secrets::encryption_key("", "service").size() == 32);
    CHECK(secrets::encryption_key("", "").empty());
    CHECK_THROWS_AS(secrets::encryption_key("not a key", "service"), awp::core::config_error);
    // What one side encrypts under the rule, the other decrypts under it.
    const auto key = secrets::encryption_key("", "service");
    CHECK(crypto::decrypt_secret(crypto::encrypt_secret_with_key("v", key), "service") == "v");
}

}  // namespace secrets_names_test
