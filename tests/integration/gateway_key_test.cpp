// Gateway keys (sql/0026): hosts on one shared pool login, each confined to its own gateway by
// a key presented in every transaction. Without a claim the pool login reaches nothing; a claim
// cannot be forged, replayed in another transaction or on another backend, made with a wrong,
// rotated or another gateway's key, or made by a gateway's own login; with its key a host
// reaches exactly what that gateway's own login does. Only an administrator makes keys and pool
// logins.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "awp/core/crypto.hpp"
#include "gateway_world.hpp"

using namespace awp::schema_test;

namespace {

// What a connection sees of every table a gateway may read, as one line per table.
std::string visible(pg::connection& c) {
    std::string out;
    for (const auto& [table, column] : std::vector<std::pair<std::string, std::string>>{
             {"gateways", "id"},
             {"agents", "id"},
             {"agent_commands", "id"},
             {"agent_inbox_items", "id"},
             {"secrets", "id"},
             {"daemon_heartbeats", "gateway_id::text || daemon"},
             {"knowledge_items", "id"},
             {"tasks", "id"},
             {"tenants", "id"},
             {"gateway_roles", "gateway_id"}}) {
        out += table + "=" +
               one(c, "SELECT coalesce(string_agg((" + column +
                          ")::text, ',' ORDER BY 1), '') FROM " + table) +
               "\n";
    }
    return out;
}

std::string key_of(pg::connection& admin, const std::string& gateway, const std::string& secret) {
    const auto id = one(
        admin, "SELECT gateway_id::text FROM awp_gateway_key($1, sha256(convert_to($2, 'UTF8')))",
        {gateway, secret});
    std::string hex = id;
    hex.erase(std::remove(hex.begin(), hex.end(), '-'), hex.end());
    return "awpk_" + hex + "_" + secret;
}

std::string new_secret() {
    return awp::core::crypto::base64url_encode(awp::core::crypto::random_bytes(32));
}

}  // namespace

TEST_CASE(
    "integration: a pool login reaches nothing without a claim, and with its gateway's key "
    "exactly what that gateway's own login reaches",
    "[gateway][security][integration]") {
    gateway_world w;
    const auto host_a = w.db.pool_login(w.a);
    const auto host_c = w.db.pool_login(w.c_slug);

    // No claim: nothing, and no queue RPC on any gateway.
    auto bare = pg::connection::connect(host_a.dsn);
    CHECK(one(bare, "SELECT current_user::text") == "awp_pool_test");
    CHECK(visible(bare) ==
          "gateways=\nagents=\nagent_commands=\nagent_inbox_items=\nsecrets=\n"
          "daemon_heartbeats=\nknowledge_items=\ntasks=\ntenants=\ngateway_roles=\n");
    CHECK(one(bare, "SELECT coalesce(awp_session_gateway()::text, 'none')") == "none");
    for (const auto& gw : {w.a, w.a_slug, w.c}) {
        CHECK(sqlstate_of([&] { bare.exec("SELECT * FROM lease_command(60, $1, 'spy')", {gw}); }) ==
              "AW003");
    }
    CHECK(sqlstate_of([&] {
              bare.exec("SELECT * FROM lease_inbox_item($1::uuid)", {w.a_agent});
          }) == "AW003");

    // With A's key: what A's own login sees, table by table; with C's: C's, another tenant.
    auto own_a = pg::connection::connect(w.db.gateway_dsn(w.a));
    auto own_c = pg::connection::connect(w.db.gateway_dsn(w.c));
    auto as_a = pg::connection::connect(host_a.dsn);
    as_a.set_gateway_key(host_a.key);
    auto as_c = pg::connection::connect(host_c.dsn);
    as_c.set_gateway_key(host_c.key);
    // (gateway_roles is the one difference: a pool login has no binding of its own to read.)
    auto without_roles = [](std::string v) { return v.substr(0, v.find("gateway_roles=")); };
    CHECK(without_roles(visible(as_a)) == without_roles(visible(own_a)));
    CHECK(without_roles(visible(as_c)) == without_roles(visible(own_c)));
    CHECK(one(as_a, "SELECT string_agg(id::text, ',') FROM agent_commands") == w.a_cmd);
    CHECK(one(as_a, "SELECT current_tenant_id()::text") == w.t1);
    CHECK(one(as_c, "SELECT current_tenant_id()::text") == w.t2);

    // The claim lasts one transaction: the same connection without its key sees nothing again.
    as_a.set_gateway_key("");
    CHECK(count(as_a, "SELECT count(*) FROM agent_commands") == 0);
    as_a.set_gateway_key(host_a.key);

    // Another gateway's rows through A's claim: not found, untouched.
    for (const auto& other : {w.b_slug, w.b, w.c}) {
        CHECK(sqlstate_of([&] {
                  as_a.exec("SELECT * FROM lease_and_start_command(60, $1, 'spy')", {other});
              }) == "AW003");
    }
    CHECK(as_a.exec("UPDATE agent_commands SET meta = '{\"x\":1}' WHERE id = ANY($1::uuid[])",
                    {"{" + w.b_cmd + "," + w.c_cmd + "}"})
              .affected() == 0);
    CHECK(sqlstate_of([&] {
              as_a.exec("UPDATE agent_commands SET gateway_id = $1 WHERE id = $2", {w.b, w.a_cmd});
          }) == "42501");

    // Its own work, each statement its own transaction through the claim; and inside one
    // BEGIN ... COMMIT, where the claim made with the BEGIN holds to the end.
    auto leased =
        as_a.exec("SELECT id::text, lease_token::text FROM lease_and_start_command(60, $1, 'r1')",
                  {w.a_slug});
    REQUIRE(leased.size() == 1);
    CHECK(leased.get<std::string>(0, 0) == w.a_cmd);
    {
        pg::transaction tx(as_a);
        as_a.exec("SELECT * FROM complete_command($1::uuid, 0, 'ok', '', $2::uuid)",
                  {w.a_cmd, leased.get<std::string>(0, 1)});
        CHECK(one(as_a, "SELECT status::text FROM agent_commands WHERE id = $1", {w.a_cmd}) ==
              "done");
        tx.commit();
    }
    CHECK(one(w.admin, "SELECT status::text FROM agent_commands WHERE id = $1", {w.a_cmd}) ==
          "done");
    CHECK(one(as_a, "SELECT gateway_status::text FROM daemon_heartbeat($1, 'command-runner')",
              {w.a}) == "ready");
    CHECK(count(w.admin, "SELECT count(*) FROM daemon_heartbeats WHERE gateway_id = $1", {w.a}) ==
          1);
    // None of it reached another gateway's rows.
    CHECK(count(w.admin, "SELECT count(*) FROM agent_commands WHERE status <> 'pending'") == 1);
    CHECK(count(w.admin, "SELECT count(*) FROM agent_commands WHERE meta <> '{}'") == 0);
}

TEST_CASE(
    "integration: a gateway claim cannot be forged, replayed, made with a wrong, rotated or "
    "another gateway's key, or made by a gateway's own login",
    "[gateway][security][integration]") {
    gateway_world w;
    const auto host = w.db.pool_login(w.a);
    auto pool = pg::connection::connect(host.dsn);

    // A valid claim of A, as the claim function wrote it in one transaction.
    std::string claim;
    {
        pool.set_gateway_key(host.key);
        pg::transaction tx(pool);
        claim = one(pool, "SELECT current_setting('awp.gateway_claim')");
        CHECK(count(pool, "SELECT count(*) FROM agent_commands") == 1);
        tx.commit();
        pool.set_gateway_key("");
    }
    REQUIRE(claim.size() == 36 + 1 + 36 + 1 + 64);

    // Replayed in a later transaction of the same backend, set for the session or locally.
    pool.exec("SELECT set_config('awp.gateway_claim', $1, false)", {claim});
    CHECK(count(pool, "SELECT count(*) FROM agent_commands") == 0);
    {
        pg::transaction tx(pool);
        pool.exec("SELECT set_config('awp.gateway_claim', $1, true)", {claim});
        CHECK(count(pool, "SELECT count(*) FROM agent_commands") == 0);
        CHECK(one(pool, "SELECT coalesce(awp_session_gateway()::text, 'none')") == "none");
    }
    // On another backend.
    {
        auto other = pg::connection::connect(host.dsn);
        pg::transaction tx(other);
        other.exec("SELECT set_config('awp.gateway_claim', $1, true)", {claim});
        CHECK(count(other, "SELECT count(*) FROM agent_commands") == 0);
    }
    // Rewritten to name B (same mac), or with a made-up mac, or malformed.
    std::string to_b = claim;
    to_b.replace(0, 36, w.b);
    for (const auto& forged :
         {to_b, claim.substr(0, 74) + std::string(64, '0'), w.a + ":" + w.t1 + ":x",
          std::string("'; SELECT 1; --"), std::string(4096, 'a')}) {
        pg::transaction tx(pool);
        pool.exec("SELECT set_config('awp.gateway_claim', $1, true)", {forged});
        CHECK(count(pool, "SELECT count(*) FROM agent_commands") == 0);
        CHECK(count(pool, "SELECT count(*) FROM secrets") == 0);
    }

    // Keys: a wrong secret, A's secret under B's id, an unknown gateway: one refusal, 42501.
    const std::string secret = host.key.substr(38);
    std::string b_hex = w.b;
    b_hex.erase(std::remove(b_hex.begin(), b_hex.end(), '-'), b_hex.end());
    for (const auto& bad : {host.key.substr(0, 38) + new_secret(), "awpk_" + b_hex + "_" + secret,
                            "awpk_" + std::string(32, '0') + "_" + secret}) {
        INFO(bad);
        CHECK(sqlstate_of([&] { pool.exec("SELECT awp_claim_gateway($1)", {bad}); }) == "42501");
        CHECK(message_of([&] { pool.exec("SELECT awp_claim_gateway($1)", {bad}); }) ==
              "awp_claim_gateway: gateway key refused");
    }
    // Malformed: refused for what it is, and never half-read.
    for (const auto& bad : {std::string(""), std::string("awpk_"), host.key + "x",
                            host.key.substr(0, 80), std::string("awpk_") + std::string(200, 'f')}) {
        CHECK(sqlstate_of([&] { pool.exec("SELECT awp_claim_gateway($1)", {bad}); }) == "AW004");
    }
    CHECK(message_of([&] {
              pool.exec("SELECT awp_claim_gateway(NULL)");
          }).find("not a gateway key") != std::string::npos);
    // The connection refuses nothing itself: the database does, and the statement fails.
    pool.set_gateway_key(host.key.substr(0, 38) + new_secret());
    CHECK(sqlstate_of([&] { pool.exec("SELECT count(*) FROM agent_commands"); }) == "42501");
    pool.set_gateway_key("");

    // A gateway's own login claims nothing, even with a valid key of another gateway.
    const auto host_b = w.db.pool_login(w.b);
    auto own_a = pg::connection::connect(w.db.gateway_dsn(w.a));
    CHECK(message_of([&] {
              own_a.exec("SELECT awp_claim_gateway($1)", {host_b.key});
          }).find("is bound to its own gateway") != std::string::npos);
    own_a.set_gateway_key(host_b.key);
    CHECK(sqlstate_of([&] { own_a.exec("SELECT 1"); }) == "42501");

    // Rotation: the old key stops working at once, the new one works.
    auto rotating = pg::connection::connect(host.dsn);
    rotating.set_gateway_key(host.key);
    CHECK(count(rotating, "SELECT count(*) FROM agent_commands") == 1);
    const auto fresh = key_of(w.admin, w.a_slug, new_secret());
    CHECK(sqlstate_of([&] { rotating.exec("SELECT count(*) FROM agent_commands"); }) == "42501");
    rotating.set_gateway_key(fresh);
    CHECK(count(rotating, "SELECT count(*) FROM agent_commands") == 1);

    // The gateway deleted: its key goes with it.
    w.admin.exec("DELETE FROM gateways WHERE id = $1", {w.a});
    CHECK(sqlstate_of([&] { rotating.exec("SELECT 1"); }) == "42501");
}

TEST_CASE(
    "integration: only an administrator makes gateway keys and pool logins; nobody else reads "
    "a key's hash, the claim secret or the mac",
    "[gateway][security][integration]") {
    gateway_world w;
    const auto host = w.db.pool_login(w.a);
    auto pool = pg::connection::connect(host.dsn);
    pool.set_gateway_key(host.key);
    auto own = pg::connection::connect(w.db.gateway_dsn(w.b));
    auto daemon = w.db.daemon();
    auto api = w.db.api();
    std::vector<pg::connection*> others{&pool, &own, &daemon, &api};
    for (auto* c : others) {
        for (const char* sql : {"SELECT * FROM awp_gateway_key('default', sha256('x'::bytea))",
                                "SELECT awp_gateway_pool_role(repeat('x', 30), 'awp_pool_spy')",
                                "SELECT * FROM gateway_keys", "SELECT * FROM gateway_claim_secret",
                                "SELECT awp_claim_mac(gen_random_uuid(), gen_random_uuid())"}) {
            INFO(sql);
            CHECK(sqlstate_of([&] { c->exec(sql); }) == "42501");
        }
    }
    // Not through an API role either.
    awp::test::as_service(api);
    CHECK(sqlstate_of([&] { api.exec("SELECT * FROM gateway_keys"); }) == "42501");
    CHECK(sqlstate_of([&] { api.exec("SELECT awp_claim_gateway($1)", {host.key}); }) == "42501");
    awp::test::as_user(api, w.t1, "00000000-0000-0000-0000-00000000000a");
    CHECK(sqlstate_of([&] { api.exec("SELECT awp_claim_gateway($1)", {host.key}); }) == "42501");

    // Arguments an administrator gets wrong are named.
    CHECK(sqlstate_of([&] {
              w.admin.exec("SELECT * FROM awp_gateway_key($1, '\\x00'::bytea)", {w.a});
          }) == "AW004");
    CHECK(sqlstate_of([&] {
              w.admin.exec("SELECT * FROM awp_gateway_key('no-such-gateway', sha256('x'::bytea))");
          }) == "AW003");
    for (const char* role : {"postgres", "awp_gw_x", "awp_pool-x", "awp_daemon"}) {
        INFO(role);
        CHECK(sqlstate_of([&] {
                  w.admin.exec("SELECT awp_gateway_pool_role(repeat('x', 30), $1)", {role});
              }) == "AW004");
    }
    CHECK(sqlstate_of([&] {
              w.admin.exec("SELECT awp_gateway_pool_role('short', 'awp_pool_x')");
          }) == "AW004");
    // A pool login holds nothing but its membership of awp_gateway.
    CHECK(one(w.admin,
              "SELECT string_agg(b.rolname, ',') FROM pg_auth_members m JOIN pg_roles b ON b.oid "
              "= m.roleid JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = 'awp_pool_test'") ==
          "awp_gateway");
    CHECK(one(w.admin,
              "SELECT (rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls OR "
              "rolreplication)::text FROM pg_roles WHERE rolname = 'awp_pool_test'") == "false");
    // The database holds a hash of the secret, never the key.
    CHECK(count(w.admin,
                "SELECT count(*) FROM gateway_keys WHERE position($1 IN encode(secret_sha256, "
                "'escape')) > 0",
                {host.key.substr(38)}) == 0);
}
