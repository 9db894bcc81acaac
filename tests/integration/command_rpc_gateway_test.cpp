// The runner's two hot RPCs, lease_and_start_command and finish_and_lease_command, run as their
// owner (SECURITY DEFINER, issue 41): row-level security no longer confines their statements, one
// check of the caller's gateway does (awp_command_gateway). These tests attack that check the way
// the policies were attacked before: every login and key reaches, through these RPCs, exactly the
// commands its gateway's own policies let it reach, and a refusal says nothing of other gateways.
// And finish_and_lease_command, now one UPDATE of both rows, keeps the order of the calls it
// replaced: the transition first, the sweep of expired leases after.
#include <catch2/catch.hpp>

#include <string>

#include "gateway_world.hpp"

namespace command_rpc_gateway_test {

using namespace awp::schema_test;

namespace {

constexpr const char* kFinish =
    "SELECT id::text, lease_token::text FROM finish_and_lease_command($1::uuid, $2::uuid, "
    "'done', 0, NULL, 'out', NULL, NULL, 60, $3, 'spy', $4::uuid)";

std::string status_of(pg::connection& admin, const std::string& id) {
    return one(admin, "SELECT status::text FROM agent_commands WHERE id = $1", {id});
}

// Leases the gateway's oldest pending command as the service role: its lease token.
std::string lease_as_daemon(pg::connection& daemon, const std::string& gateway) {
    return one(daemon,
               "SELECT lease_token::text FROM lease_and_start_command(60, $1, 'owner-runner')",
               {gateway});
}

}  // namespace

TEST_CASE(
    "integration: the runner's RPCs run as their owner and reach only the caller's own gateway",
    "[gateway][security][integration][commands]") {
    gateway_world w;
    auto daemon = w.db.daemon();
    const auto host_a = w.db.pool_login(w.a);
    const auto host_b = w.db.pool_login(w.b);
    auto own_a = pg::connection::connect(w.db.gateway_dsn(w.a));
    auto keyed_a = pg::connection::connect(host_a.dsn);
    keyed_a.set_gateway_key(host_a.key);
    auto bare = pg::connection::connect(host_a.dsn);  // the pool login, no key
    const std::optional<std::string> no_tenant;

    // B's command is running under the service role's lease: its real token is known here.
    const auto b_token = lease_as_daemon(daemon, w.b);
    REQUIRE(status_of(w.admin, w.b_cmd) == "running");

    SECTION("a pool login without a key acts for no gateway") {
        for (const auto& gw : {w.a, w.a_slug, w.b, w.c}) {
            CHECK(sqlstate_of([&] {
                      bare.exec("SELECT * FROM lease_and_start_command(60, $1, 'spy')", {gw});
                  }) == "AW003");
            CHECK(sqlstate_of([&] {
                      bare.exec(kFinish, {w.b_cmd, b_token, gw, no_tenant});
                  }) == "AW003");
        }
        CHECK(status_of(w.admin, w.a_cmd) == "pending");
        CHECK(status_of(w.admin, w.b_cmd) == "running");
    }

    SECTION("a gateway's own login and its key name no other gateway, by id or slug") {
        for (auto* c : {&own_a, &keyed_a}) {
            for (const auto& other : {w.b, w.b_slug, w.c, w.c_slug}) {
                CHECK(sqlstate_of([&] {
                          c->exec("SELECT * FROM lease_and_start_command(60, $1, 'spy')", {other});
                      }) == "AW003");
            }
            // Its own gateway in another tenant's name is not found either.
            CHECK(sqlstate_of([&] {
                      c->exec("SELECT * FROM lease_and_start_command(60, $1, 'spy', $2::uuid)",
                              {w.a, w.t2});
                  }) == "AW003");
        }
        CHECK(status_of(w.admin, w.b_cmd) == "running");
        CHECK(status_of(w.admin, w.c_cmd) == "pending");
        CHECK(status_of(w.admin, w.a_cmd) == "pending");
    }

    SECTION("another gateway's running command is not found, with its real lease token") {
        // A has a pending command: a refused finish must roll the lease of it back too.
        for (auto* c : {&own_a, &keyed_a}) {
            for (const auto& gw : {w.a, w.a_slug}) {
                const auto refused = message_of([&] {
                    c->exec(kFinish, {w.b_cmd, b_token, gw, no_tenant});
                });
                CHECK(refused.find("command " + w.b_cmd + ": not found") != std::string::npos);
                // Not "lease lost" or a status: nothing tells that the command exists.
                CHECK(refused.find("lease") == std::string::npos);
                CHECK(refused.find("running") == std::string::npos);
            }
        }
        CHECK(status_of(w.admin, w.b_cmd) == "running");
        CHECK(status_of(w.admin, w.a_cmd) == "pending");
        CHECK(count(w.admin, "SELECT count(*) FROM agent_commands WHERE stdout IS NOT NULL") == 0);
    }

    SECTION("a key of B beside A's own login acts for A, its login's binding") {
        auto own_a_with_b_key = pg::connection::connect(w.db.gateway_dsn(w.a));
        own_a_with_b_key.set_gateway_key(host_b.key);
        CHECK(sqlstate_of([&] {
                  own_a_with_b_key.exec("SELECT * FROM lease_and_start_command(60, $1, 'spy')",
                                        {w.b});
              }) == "AW003");
        CHECK(sqlstate_of([&] {
                  own_a_with_b_key.exec(kFinish, {w.b_cmd, b_token, w.b, no_tenant});
              }) == "AW003");
        CHECK(status_of(w.admin, w.b_cmd) == "running");
    }

    SECTION("the owner's helper is nobody else's to call") {
        for (auto* c : {&own_a, &keyed_a, &bare, &daemon}) {
            CHECK(sqlstate_of([&] {
                      c->exec("SELECT * FROM awp_command_gateway($1, NULL)", {w.b});
                  }) == "42501");
        }
    }

    SECTION("each works its own gateway's queue as before: finish one, lease the next") {
        // A's own login leases A's command; each host then finishes the one in hand and gets
        // the next, the own login and the key taking turns on one queue.
        auto lease = own_a.exec(
            "SELECT id::text, lease_token::text FROM lease_and_start_command(60, $1, 'r')",
            {w.a_slug});
        REQUIRE(lease.size() == 1);
        CHECK(lease.get<std::string>(0, 0) == w.a_cmd);
        std::string in_hand = w.a_cmd;
        for (auto* c : {&keyed_a, &own_a}) {
            const auto next_cmd = w.command(w.t1, w.a_agent);
            lease = c->exec(kFinish, {in_hand, lease.get<std::string>(0, 1), w.a, w.t1});
            REQUIRE(lease.size() == 1);
            CHECK(lease.get<std::string>(0, 0) == next_cmd);
            CHECK(one(w.admin, "SELECT status || ':' || stdout FROM agent_commands WHERE id = $1",
                      {in_hand}) == "done:out");
            CHECK(status_of(w.admin, next_cmd) == "running");
            in_hand = next_cmd;
        }
        // Nothing of any other gateway moved.
        CHECK(status_of(w.admin, w.b_cmd) == "running");
        CHECK(status_of(w.admin, w.c_cmd) == "pending");
    }

    SECTION("the service role works any gateway it names") {
        const auto next = daemon.exec(kFinish, {w.b_cmd, b_token, w.b_slug, no_tenant});
        CHECK(next.empty());
        CHECK(status_of(w.admin, w.b_cmd) == "done");
        CHECK(lease_as_daemon(daemon, w.c_slug).size() == 36);
        CHECK(status_of(w.admin, w.c_cmd) == "running");
    }
}

TEST_CASE(
    "finish_and_lease_command finishes a command whose lease ran out while it ran when no sweep "
    "came first, then sweeps the gateway's other expired leases",
    "[schema][commands]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto gw = default_gateway(admin);
    const auto agent = new_agent(admin, kDefaultTenant, "alice", gw);
    auto d = db.daemon();
    auto enqueue = [&] {
        return one(admin,
                   "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) "
                   "VALUES ($1, $2, 'update', '{}') RETURNING id",
                   {kDefaultTenant, agent});
    };
    const auto mine = enqueue();
    const auto token =
        one(d, "SELECT lease_token::text FROM lease_and_start_command(60, $1, 'r')", {gw});
    // Another runner's command, running with an expired lease: the sweep fails it.
    const auto other = enqueue();
    one(d, "SELECT lease_token::text FROM lease_and_start_command(60, $1, 'r2')", {gw});
    const auto next = enqueue();
    admin.exec(
        "UPDATE agent_commands SET lease_expires_at = now() - interval '1 second' "
        "WHERE id = ANY($1::uuid[])",
        {"{" + mine + "," + other + "}"});

    const auto r = d.exec(
        "SELECT id::text FROM finish_and_lease_command($1::uuid, $2::uuid, 'done', 0, NULL, 'ok', "
        "NULL, NULL, 60, $3, 'r')",
        {mine, token, gw});
    REQUIRE(r.size() == 1);
    CHECK(r.get<std::string>(0, 0) == next);
    CHECK(one(admin, "SELECT status || ':' || stdout FROM agent_commands WHERE id = $1", {mine}) ==
          "done:ok");
    CHECK(one(admin, "SELECT status::text FROM agent_commands WHERE id = $1", {other}) == "failed");
}

}  // namespace command_rpc_gateway_test
