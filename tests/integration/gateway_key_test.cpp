// Gateway keys (sql/0026): hosts on one shared pool login, each confined to its own gateway by
// a key presented in every transaction. Without a key the pool login reaches nothing; a wrong,
// rotated, another gateway's or a deleted gateway's key reaches nothing, nor a key set for the
// session or marked for another transaction, nor a key beside a gateway's own login; with its key
// a host reaches exactly what that gateway's own login does. Only an administrator makes keys
// and pool logins.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "awp/core/crypto.hpp"
#include "gateway_world.hpp"

namespace gateway_key_test {

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
    "integration: a pool login reaches nothing without a key, and with its gateway's key "
    "exactly what that gateway's own login reaches",
    "[gateway][security][integration]") {
    gateway_world w;
    const auto host_a = w.db.pool_login(w.a);
    const auto host_c = w.db.pool_login(w.c_slug);

    // No key: nothing, and no queue RPC on any gateway.
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

    // The key lasts one transaction: the same connection without it sees nothing again.
    as_a.set_gateway_key("");
    CHECK(count(as_a, "SELECT count(*) FROM agent_commands") == 0);
    as_a.set_gateway_key(host_a.key);

    // Another gateway's rows with A's key: not found, untouched.
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

    // Its own work, each statement its own transaction with the key; and inside one
    // BEGIN ... COMMIT, where the key presented with the BEGIN holds to the end.
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
    "integration: a presented key reaches nothing when it is wrong, rotated, another gateway's, "
    "of a deleted gateway, set for the session, marked for another transaction, or beside a "
    "gateway's own login",
    "[gateway][security][integration]") {
    gateway_world w;
    const auto host = w.db.pool_login(w.a);
    auto pool = pg::connection::connect(host.dsn);
    const auto present = [&](const std::string& value) {
        pool.exec("SELECT set_config('awp.gateway_key', $1, true)", {value});
    };
    const auto reaches = [&] {
        return count(pool, "SELECT count(*) FROM agent_commands") +
               count(pool, "SELECT count(*) FROM secrets") +
               count(pool, "SELECT count(*) FROM gateway_keys") +
               count(pool, "SELECT count(*) FROM knowledge_items");
    };
    // The key as the connection presents it: this transaction's.
    {
        pg::transaction tx(pool);
        pool.exec("SELECT awp_present_gateway_key($1)", {host.key});
        CHECK(reaches() == 1 + 1 + 1 + 1);
        CHECK(one(pool, "SELECT awp_session_gateway()::text") == w.a);
        // Marked with this transaction's start, and with nothing else.
        CHECK(one(pool,
                  "SELECT current_setting('awp.gateway_key') = $1 || ':' || "
                  "awp_transaction_mark()",
                  {host.key}) == "t");
    }
    // Set for the session in one transaction, then used in the next: not this transaction's.
    std::string marked;
    {
        pg::transaction tx(pool);
        marked = host.key + ":" + one(pool, "SELECT awp_transaction_mark()");
        pool.exec("SELECT set_config('awp.gateway_key', $1, false)", {marked});
        CHECK(count(pool, "SELECT count(*) FROM agent_commands") == 1);
        tx.commit();
    }
    CHECK(count(pool, "SELECT count(*) FROM agent_commands") == 0);
    {
        pg::transaction tx(pool);
        present(marked);  // last transaction's mark, presented in this one
        CHECK(reaches() == 0);
    }
    pool.exec("SELECT set_config('awp.gateway_key', '', false)");
    // A future mark, no mark, another backend's idea of now.
    for (const auto& value : {host.key + ":9999999999999999", host.key, host.key + ":",
                              host.key + ":" + marked.substr(82) + "0"}) {
        pg::transaction tx(pool);
        present(value);
        CHECK(reaches() == 0);
    }
    // Wrong secret; A's secret under B's id; an unknown gateway; malformed values, which must
    // name nobody and never fail the statement.
    const std::string secret = host.key.substr(38);
    std::string b_hex = w.b;
    b_hex.erase(std::remove(b_hex.begin(), b_hex.end(), '-'), b_hex.end());
    for (const auto& bad :
         {host.key.substr(0, 38) + new_secret(), "awpk_" + b_hex + "_" + secret,
          "awpk_" + std::string(32, '0') + "_" + secret, std::string("awpk_"),
          "awpk_" + std::string(32, 'x') + "_" + secret,
          "awpk_" + b_hex.substr(0, 31) + "-_" + secret, std::string("'; SELECT 1; --"),
          std::string(4096, 'a'), host.key.substr(0, 80), host.key + "x"}) {
        INFO(bad);
        pg::transaction tx(pool);
        pool.exec("SELECT awp_present_gateway_key($1)", {bad});
        CHECK(reaches() == 0);
        CHECK(one(pool, "SELECT coalesce(awp_session_gateway()::text, 'none')") == "none");
    }
    // The connection presents whatever it is given; a key the database does not know makes the
    // transaction nobody's, and the queue RPCs answer "not found".
    pool.set_gateway_key(host.key.substr(0, 38) + new_secret());
    CHECK(reaches() == 0);
    CHECK(sqlstate_of([&] {
              pool.exec("SELECT * FROM lease_and_start_command(60, $1, 'spy')", {w.a});
          }) == "AW003");
    pool.set_gateway_key("");

    // A gateway's own login stays its gateway, whatever key it presents.
    const auto host_b = w.db.pool_login(w.b);
    auto own_a = pg::connection::connect(w.db.gateway_dsn(w.a));
    own_a.set_gateway_key(host_b.key);
    CHECK(one(own_a, "SELECT string_agg(id::text, ',') FROM agent_commands") == w.a_cmd);
    CHECK(one(own_a, "SELECT awp_session_gateway()::text") == w.a);

    // Rotation: the old key reaches nothing at once, the new one works.
    auto rotating = pg::connection::connect(host.dsn);
    rotating.set_gateway_key(host.key);
    CHECK(count(rotating, "SELECT count(*) FROM agent_commands") == 1);
    const auto fresh = key_of(w.admin, w.a_slug, new_secret());
    CHECK(count(rotating, "SELECT count(*) FROM agent_commands") == 0);
    rotating.set_gateway_key(fresh);
    CHECK(count(rotating, "SELECT count(*) FROM agent_commands") == 1);

    // The gateway deleted: its key goes with it.
    w.admin.exec("DELETE FROM gateways WHERE id = $1", {w.a});
    CHECK(count(rotating, "SELECT count(*) FROM gateway_keys") == 0);
    CHECK(count(rotating, "SELECT count(*) FROM gateways") == 0);
}

TEST_CASE(
    "integration: only an administrator makes gateway keys and pool logins, and a gateway role "
    "sees no key but the one it presents",
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
                                "SELECT awp_gateway_pool_role(repeat('x', 30), 'awp_pool_spy')"}) {
            INFO(sql);
            CHECK(sqlstate_of([&] { c->exec(sql); }) == "42501");
        }
    }
    // The keys: the pool login sees the one it presents, a gateway's own login none; the API
    // login nothing at all.
    CHECK(one(pool, "SELECT string_agg(gateway_id::text, ',') FROM gateway_keys") == w.a);
    CHECK(count(own, "SELECT count(*) FROM gateway_keys") == 0);
    CHECK(sqlstate_of([&] { api.exec("SELECT 1 FROM gateway_keys"); }) == "42501");
    // Not through an API role either: a user presents no key.
    awp::test::as_user(api, w.t1, "00000000-0000-0000-0000-00000000000a");
    CHECK(sqlstate_of([&] { api.exec("SELECT 1 FROM gateway_keys"); }) == "42501");
    CHECK(sqlstate_of([&] { api.exec("SELECT awp_present_gateway_key($1)", {host.key}); }) ==
          "42501");

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

}  // namespace gateway_key_test
