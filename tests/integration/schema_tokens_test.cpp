// Gateway registration tokens (single use, expiring, tenant-bound) and daemon heartbeats.
#include "schema_helpers.hpp"

namespace schema_tokens_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

TEST_CASE("a registration token registers one gateway, once", "[schema][tokens]") {
    scoped_database db;
    auto admin = db.admin();
    auto d = db.daemon();
    auto issued =
        d.exec("SELECT * FROM issue_gateway_token(NULL, 'Office Mac mini', 3600, 'awpctl')");
    auto token = issued.get<std::string>(0, "token");
    CHECK(token.rfind("awpgt_", 0) == 0);
    // Only the hash is stored.
    CHECK(count(admin,
                "SELECT count(*) FROM gateway_registration_tokens WHERE token_hash = "
                "encode(sha256($1::bytea), 'hex')",
                {token}) == 1);
    CHECK(count(admin, "SELECT count(*) FROM gateway_registration_tokens WHERE token_hash = $1",
                {token}) == 0);

    auto anon = db.api();
    awp::test::as_anon(anon);
    auto r =
        anon.exec("SELECT consume_gateway_token($1, NULL, NULL, $2) AS g", {token, kDefaultTenant});
    auto g = r.get<std::string>(0, "g");
    CHECK(g.find("\"gateway_slug\": \"office-mac-mini\"") != std::string::npos);
    CHECK(count(admin,
                "SELECT count(*) FROM gateways WHERE slug = 'office-mac-mini' AND status = "
                "'provisioning'") == 1);
    // Second use.
    CHECK(sqlstate_of([&] { anon.exec("SELECT consume_gateway_token($1)", {token}); }) == "AW008");
    // Anon still cannot read tokens or gateways.
    CHECK(sqlstate_of([&] { anon.exec("SELECT * FROM gateway_registration_tokens"); }) == "42501");
    CHECK(sqlstate_of([&] { anon.exec("SELECT * FROM gateways"); }) == "42501");
    // Slug collisions get a suffix; a hint wins over the label.
    auto t2 = one(d, "SELECT token FROM issue_gateway_token(NULL, 'Office Mac mini')");
    CHECK(one(anon, "SELECT consume_gateway_token($1)->>'gateway_slug'", {t2}) ==
          "office-mac-mini-2");
    auto t3 = one(d, "SELECT token FROM issue_gateway_token()");
    CHECK(one(anon, "SELECT consume_gateway_token($1, 'Lab', 'Lab Box #1')->>'gateway_slug'",
              {t3}) == "lab-box-1");
}

TEST_CASE("an expired, unknown or other tenant's token registers nothing", "[schema][tokens]") {
    scoped_database db;
    auto admin = db.admin();
    auto other = new_tenant(admin, "other");
    auto d = db.daemon();
    auto expired = one(d, "SELECT token FROM issue_gateway_token(NULL, 'old', 60)");
    admin.exec("UPDATE gateway_registration_tokens SET expires_at = now() - interval '1 second'");
    auto theirs = one(d, "SELECT token FROM issue_gateway_token($1, 'theirs')", {other});
    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(sqlstate_of([&] { anon.exec("SELECT consume_gateway_token($1)", {expired}); }) ==
          "AW007");
    CHECK(sqlstate_of([&] { anon.exec("SELECT consume_gateway_token('awpgt_nope')"); }) == "AW006");
    CHECK(
        sqlstate_of([&] {
            anon.exec("SELECT consume_gateway_token($1, NULL, NULL, $2)", {theirs, kDefaultTenant});
        }) == "AW006");
    CHECK(count(admin, "SELECT count(*) FROM gateways") == 1);
    // The other tenant's token still works for its own tenant.
    CHECK(one(anon, "SELECT consume_gateway_token($1, NULL, NULL, $2)->>'gateway_slug'",
              {theirs, other}) == "theirs");
    // Minting is for the service role only.
    CHECK(sqlstate_of([&] { anon.exec("SELECT * FROM issue_gateway_token()"); }) == "42501");
}

TEST_CASE("daemon_heartbeat upserts one row per daemon instance and wakes a provisioning gateway",
          "[schema][tokens]") {
    scoped_database db;
    auto admin = db.admin();
    auto d = db.daemon();
    auto t = one(d, "SELECT token FROM issue_gateway_token(NULL, 'edge')");
    d.exec("SELECT consume_gateway_token($1)", {t});
    auto r =
        d.exec("SELECT * FROM daemon_heartbeat('edge', 'command-runner', 'host-a', 4242, '0.1.0')");
    CHECK(r.get<std::string>(0, "gateway_status") == "ready");
    d.exec("SELECT * FROM daemon_heartbeat('edge', 'command-runner', 'host-a', 4242, '0.1.0')");
    d.exec("SELECT * FROM daemon_heartbeat('edge', 'inbox-dispatcher', 'host-a', 4243)");
    CHECK(count(d, "SELECT count(*) FROM daemon_heartbeats") == 2);
    CHECK(count(d,
                "SELECT count(*) FROM gateways WHERE slug = 'edge' AND last_seen_at IS NOT NULL") ==
          1);
    CHECK(sqlstate_of([&] {
              d.exec("SELECT * FROM daemon_heartbeat('nowhere', 'command-runner')");
          }) == "AW003");
    CHECK(sqlstate_of([&] { d.exec("SELECT * FROM daemon_heartbeat('edge', 'Bad Name')"); }) ==
          "AW004");
}

}  // namespace schema_tokens_test
