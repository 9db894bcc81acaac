// core::secrets against the SQL: the names C++ accepts for a secret are exactly those the
// secrets.key CHECK accepts, and the agent slugs that name an env file are exactly those the
// agents.slug CHECK accepts, over a table of valid, invalid and edge-case names.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "awp/core/pg.hpp"
#include "awp/core/secrets.hpp"
#include "support/test_db.hpp"

namespace secrets_names_test {

namespace pg = awp::core::pg;
namespace secrets = awp::core::secrets;

namespace {

constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";

/// Whether the INSERT passes the CHECK named `constraint` (any other error fails the test).
bool sql_accepts(pg::connection& c, const std::string& sql, const pg::params& p,
                 const std::string& constraint) {
    c.exec("SAVEPOINT probe");
    try {
        c.exec(sql, p);
        c.exec("RELEASE SAVEPOINT probe");
        return true;
    } catch (const pg::check_violation& e) {
        c.exec("ROLLBACK TO SAVEPOINT probe");
        INFO(e.what());
        CHECK(std::string(e.what()).find(constraint) != std::string::npos);
        return false;
    }
}

std::vector<std::string> names() {
    std::vector<std::string> out = {"A",
                                    "_",
                                    "a",
                                    "z9",
                                    "_9",
                                    "OPENAI_API_KEY",
                                    "lower_case",
                                    "MiXeD_1",
                                    "TELEGRAM_BOT_TOKEN",
                                    "NOTION_SOURCE_1A2B3C4D__REFRESH_TOKEN",
                                    "",
                                    "1",
                                    "1ABC",
                                    "A-B",
                                    "A B",
                                    " A",
                                    "A ",
                                    "A.B",
                                    "A=B",
                                    "A\nB",
                                    "ABC\n",
                                    "\nABC",
                                    "A\tB",
                                    "A'B",
                                    "A\"B",
                                    "A$B",
                                    "A/B",
                                    "A\\B",
                                    "A;B",
                                    "..",
                                    ".env",
                                    "a..b",
                                    "-a",
                                    ".a",
                                    "a.",
                                    "a-",
                                    "A\xc3\x84",
                                    "\xc3\xa9t\xc3\xa9",
                                    "\xe2\x80\x8b"
                                    "A",
                                    "Alice.v2",
                                    "bob_x-y",
                                    "9lives",
                                    std::string(127, 'K'),
                                    std::string(128, 'K'),
                                    std::string(129, 'K'),
                                    "_" + std::string(127, '9'),
                                    "a" + std::string(127, '.'),
                                    "a" + std::string(127, '-'),
                                    "a" + std::string(128, '-')};
    return out;
}

}  // namespace

TEST_CASE("secret names: C++ and the secrets.key CHECK accept the same names",
          "[secrets][protocol]") {
    awp::test::scoped_database db;
    auto c = db.admin();
    const auto gateway =
        c.exec("SELECT id::text FROM gateways WHERE slug = 'default'").get<std::string>(0, 0);
    c.exec("BEGIN");
    int accepted = 0;
    for (const auto& name : names()) {
        INFO("name: \"" << name << "\" (" << name.size() << " bytes)");
        const bool sql = sql_accepts(c,
                                     "INSERT INTO secrets (tenant_id, gateway_id, key, "
                                     "encrypted_value) VALUES ($1, $2, $3, 'enc:v1:aa.bb.cc')",
                                     {kTenant, gateway, name}, "secrets_key_check");
        CHECK(secrets::is_valid_name(name) == sql);
        accepted += sql;
    }
    CHECK(accepted >= 10);
    // The names awp makes itself pass the SQL too.
    for (const auto& name :
         {secrets::source_secret_name("google-drive", "1a2b3c4d-0000"),
          secrets::source_field_name(
              secrets::source_secret_name("p" + std::string(63, '_'), "ffffffff-ffff"),
              "refresh_token"),
          secrets::channel_token_name("discord")}) {
        INFO(name);
        CHECK(sql_accepts(c,
                          "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) "
                          "VALUES ($1, $2, $3, 'enc:v1:aa.bb.cc')",
                          {kTenant, gateway, name}, "secrets_key_check"));
    }
    c.exec("ROLLBACK");
}

TEST_CASE("agent env files: C++ names a file for exactly the slugs the agents.slug CHECK accepts",
          "[secrets][protocol]") {
    awp::test::scoped_database db;
    auto c = db.admin();
    c.exec("BEGIN");
    int accepted = 0;
    for (const auto& slug : names()) {
        INFO("slug: \"" << slug << "\" (" << slug.size() << " bytes)");
        const bool sql =
            sql_accepts(c, "INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'agent', $2)",
                        {kTenant, slug}, "agents_slug_check");
        CHECK(secrets::agent_env_file(slug).has_value() == sql);
        accepted += sql;
    }
    CHECK(accepted >= 10);
    c.exec("ROLLBACK");
}

}  // namespace secrets_names_test
