// The command queue against a real database: checked transitions, fencing, lease expiry,
// concurrent leasers, bad input and the per-gateway wake-up.
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "schema_helpers.hpp"

namespace schema_commands_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

std::string enqueue(pg::connection& c, const std::string& agent_slug,
                    const std::string& action = "update", const std::string& payload = "{}") {
    return one(c,
               "INSERT INTO agent_commands (agent_slug, action, payload, status) "
               "VALUES ($1, $2::command_action, $3::jsonb, 'pending') RETURNING id",
               {agent_slug, action, payload});
}

std::vector<pg::notification> wait_notifications(pg::connection& c, std::size_t want) {
    std::vector<pg::notification> got;
    for (int i = 0; i < 100 && got.size() < want; ++i) {
        for (auto& n : c.drain_notifications()) got.push_back(std::move(n));
        if (got.size() < want) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return got;
}

}  // namespace

TEST_CASE("a command goes pending -> leased -> running -> done through the runner RPCs",
          "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    auto id = enqueue(d, "alice");

    auto leased = d.exec("SELECT * FROM lease_command(180, 'default', 'runner-1')");
    REQUIRE(leased.size() == 1);
    CHECK(leased.get<std::string>(0, "id") == id);
    CHECK(leased.get<std::string>(0, "status") == "leased");
    CHECK(leased.get<std::string>(0, "leased_by") == "runner-1");
    auto token = leased.get<std::string>(0, "lease_token");
    CHECK(count(d,
                "SELECT count(*) FROM agent_commands WHERE id = $1 AND lease_expires_at "
                "BETWEEN now() + interval '179 seconds' AND now() + interval '181 seconds'",
                {id}) == 1);
    CHECK(d.exec("SELECT * FROM lease_command(180, 'default')").empty());

    CHECK(one(d, "SELECT status FROM start_command($1, $2)", {id, token}) == "running");
    auto done =
        d.exec("SELECT * FROM complete_command($1, 0, 'out', NULL, $2, '{\"api_key\": null}')",
               {id, token});
    CHECK(done.get<std::string>(0, "status") == "done");
    CHECK(done.get<std::string>(0, "stdout") == "out");
    CHECK(done.get<int>(0, "exit_code") == 0);
    CHECK(done.is_null(0, "stderr"));
    CHECK_FALSE(done.is_null(0, "finished_at"));
}

TEST_CASE("lease_and_start_command takes the oldest pending command to running under a new lease",
          "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    auto first = enqueue(d, "alice");
    auto second = enqueue(d, "alice");

    auto r = d.exec("SELECT * FROM lease_and_start_command(180, 'default', 'runner-1')");
    REQUIRE(r.size() == 1);
    CHECK(r.get<std::string>(0, "id") == first);
    CHECK(r.get<std::string>(0, "status") == "running");
    CHECK(r.get<std::string>(0, "leased_by") == "runner-1");
    CHECK(r.get<int>(0, "attempts") == 1);
    CHECK_FALSE(r.is_null(0, "lease_token"));
    CHECK_FALSE(r.is_null(0, "leased_at"));
    CHECK_FALSE(r.is_null(0, "started_at"));
    auto token = r.get<std::string>(0, "lease_token");
    // What the table holds is what was returned: one row version, lease clock from now.
    CHECK(count(d,
                "SELECT count(*) FROM agent_commands WHERE id = $1 AND status = 'running' AND "
                "lease_token = $2 AND started_at = leased_at AND lease_expires_at "
                "BETWEEN now() + interval '179 seconds' AND now() + interval '181 seconds'",
                {first, token}) == 1);
    // Fenced like a lease: only its token completes it; start_command does not apply to it.
    CHECK(sqlstate_of([&] { d.exec("SELECT start_command($1, $2)", {first, token}); }) == "AW001");
    CHECK(sqlstate_of([&] {
              d.exec("SELECT complete_command($1, 0, 'x', NULL, $2)",
                     {first, std::string("5b0f4a1e-0000-4000-8000-00000000000f")});
          }) == "AW002");
    d.exec("SELECT complete_command($1, 0, 'out', NULL, $2)", {first, token});
    CHECK(one(d, "SELECT status || ':' || stdout FROM agent_commands WHERE id = $1", {first}) ==
          "done:out");

    // The next one, then nothing: an empty result, not an error.
    auto next = d.exec("SELECT id, status FROM lease_and_start_command(60, 'default')");
    REQUIRE(next.size() == 1);
    CHECK(next.get<std::string>(0, "id") == second);
    CHECK(d.exec("SELECT * FROM lease_and_start_command(60, 'default')").empty());

    // The same argument errors as lease_command, naming this function.
    CHECK(sqlstate_of([&] { d.exec("SELECT * FROM lease_and_start_command(60, 'nope')"); }) ==
          "AW003");
    CHECK(sqlstate_of([&] { d.exec("SELECT * FROM lease_and_start_command(0, 'default')"); }) ==
          "AW004");
    CHECK(
        message_of([&] {
            d.exec("SELECT * FROM lease_and_start_command(NULL, 'default')");
        }).find("lease_and_start_command: p_lease_seconds must be between 1 and 86400, got null") !=
        std::string::npos);

    // Its lease expires like any running command's: failed, never retried.
    admin.exec(
        "UPDATE agent_commands SET lease_expires_at = now() - interval '1 second' "
        "WHERE id = $1",
        {second});
    CHECK(d.exec("SELECT * FROM lease_and_start_command(60, 'default')").empty());
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {second}) == "failed");
}

TEST_CASE("finish_and_lease_command ends one command and starts the next in one transaction",
          "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    auto a = enqueue(d, "alice");
    auto b = enqueue(d, "alice");
    auto c = enqueue(d, "alice");
    auto first = d.exec("SELECT id, lease_token FROM lease_and_start_command(60, 'default', 'r')");
    auto token_a = first.get<std::string>(0, "lease_token");

    // done, with the next one leased and started.
    auto next = d.exec(
        "SELECT * FROM finish_and_lease_command($1, $2, 'done', 0, NULL, 'out-a', NULL, "
        "'{\"x\": null}', 60, 'default', 'r')",
        {a, token_a});
    REQUIRE(next.size() == 1);
    CHECK(next.get<std::string>(0, "id") == b);
    CHECK(next.get<std::string>(0, "status") == "running");
    CHECK(one(d, "SELECT status || ':' || stdout FROM agent_commands WHERE id = $1", {a}) ==
          "done:out-a");
    auto token_b = next.get<std::string>(0, "lease_token");

    // A refused transition (another lease token) writes nothing: b stays running, c pending.
    CHECK(sqlstate_of([&] {
              d.exec(
                  "SELECT * FROM finish_and_lease_command($1, $2, 'done', 0, NULL, NULL, NULL, "
                  "NULL, 60, 'default', 'r')",
                  {b, token_a});
          }) == "AW002");
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {b}) == "running");
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {c}) == "pending");
    // A refused lease (unknown gateway) writes nothing either.
    CHECK(sqlstate_of([&] {
              d.exec(
                  "SELECT * FROM finish_and_lease_command($1, $2, 'done', 0, NULL, NULL, NULL, "
                  "NULL, 60, 'nope', 'r')",
                  {b, token_b});
          }) == "AW003");
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {b}) == "running");
    // Bad arguments are named.
    CHECK(message_of([&] {
              d.exec(
                  "SELECT * FROM finish_and_lease_command($1, $2, 'ok', 0, NULL, NULL, NULL, "
                  "NULL, 60, 'default')",
                  {b, token_b});
          }).find("p_outcome must be done or failed, got ok") != std::string::npos);
    CHECK(sqlstate_of([&] {
              d.exec(
                  "SELECT * FROM finish_and_lease_command($1, NULL, 'done', 0, NULL, NULL, "
                  "NULL, NULL, 60, 'default')",
                  {b});
          }) == "AW004");

    // failed, with the last one leased; then failed with nothing left: committed, no row.
    next = d.exec(
        "SELECT * FROM finish_and_lease_command($1, $2, 'failed', 3, 'boom', NULL, 'err', NULL, "
        "60, 'default', 'r')",
        {b, token_b});
    REQUIRE(next.size() == 1);
    CHECK(next.get<std::string>(0, "id") == c);
    CHECK(one(d,
              "SELECT status || ':' || exit_code || ':' || error_message || ':' || stderr "
              "FROM agent_commands WHERE id = $1",
              {b}) == "failed:3:boom:err");
    CHECK(d.exec("SELECT * FROM finish_and_lease_command($1, $2, 'done', 0, NULL, NULL, NULL, "
                 "NULL, 60, 'default', 'r')",
                 {c, next.get<std::string>(0, "lease_token")})
              .empty());
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {c}) == "done");
}

TEST_CASE("pending goes straight to running only with a new lease taken in the same update",
          "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    auto id = enqueue(d, "alice");

    // Even the service role cannot start a command no lease fences.
    auto bare = [&](const std::string& set) {
        return message_of([&] {
            d.exec("UPDATE agent_commands SET status = 'running', " + set + " WHERE id = $1", {id});
        });
    };
    auto no_lease = bare("started_at = now()");
    CHECK(no_lease.find("command " + id +
                        ": illegal transition from pending to running without a new lease") !=
          std::string::npos);
    CHECK(sqlstate_of([&] {
              d.exec(
                  "UPDATE agent_commands SET status = 'running', started_at = now() "
                  "WHERE id = $1",
                  {id});
          }) == "AW001");
    CHECK(bare("lease_token = gen_random_uuid(), leased_at = now(), "
               "lease_expires_at = now() + interval '1 minute'")
              .find("without a new lease") != std::string::npos);  // no started_at
    CHECK(bare("lease_token = gen_random_uuid(), started_at = now(), leased_at = now()")
              .find("without a new lease") != std::string::npos);  // no expiry
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {id}) == "pending");

    // With all of it, in one update, it is a lease and a start.
    d.exec(
        "UPDATE agent_commands SET status = 'running', lease_token = gen_random_uuid(), "
        "leased_at = now(), started_at = now(), lease_expires_at = now() + interval '1 minute' "
        "WHERE id = $1",
        {id});
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {id}) == "running");
}

TEST_CASE("illegal command transitions raise AW001 and change nothing", "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    auto id = enqueue(d, "alice");

    // pending: cannot start, complete or fail.
    CHECK(sqlstate_of([&] { d.exec("SELECT start_command($1)", {id}); }) == "AW001");
    CHECK(sqlstate_of([&] { d.exec("SELECT complete_command($1, 0)", {id}); }) == "AW001");
    CHECK(sqlstate_of([&] { d.exec("SELECT fail_command($1, 1, 'x')", {id}); }) == "AW001");
    auto msg = message_of([&] { d.exec("SELECT start_command($1)", {id}); });
    CHECK(msg.find("command " + id + ": cannot start: status is pending, expected leased") !=
          std::string::npos);

    d.exec("SELECT lease_command(60, 'default')");
    // leased: cannot complete.
    CHECK(sqlstate_of([&] { d.exec("SELECT complete_command($1, 0)", {id}); }) == "AW001");
    d.exec("SELECT start_command($1)", {id});
    CHECK(sqlstate_of([&] { d.exec("SELECT start_command($1)", {id}); }) == "AW001");
    d.exec("SELECT fail_command($1, 2, 'boom')", {id});
    CHECK(one(d,
              "SELECT status || ':' || exit_code || ':' || error_message FROM agent_commands WHERE "
              "id = $1",
              {id}) == "failed:2:boom");
    // failed is final, even for a direct write by the service role.
    CHECK(sqlstate_of([&] { d.exec("SELECT complete_command($1, 0)", {id}); }) == "AW001");
    CHECK(sqlstate_of([&] {
              d.exec("UPDATE agent_commands SET status = 'pending' WHERE id = $1", {id});
          }) == "AW001");
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {id}) == "failed");

    // A leased command may fail before it starts; a cancelled one never runs.
    auto id2 = enqueue(d, "alice");
    d.exec("SELECT cancel_command($1)", {id2});
    CHECK(sqlstate_of([&] { d.exec("SELECT start_command($1)", {id2}); }) == "AW001");
    CHECK(d.exec("SELECT * FROM lease_command(60, 'default')").empty());
    CHECK(sqlstate_of([&] { d.exec("SELECT cancel_command($1)", {id2}); }) == "AW001");
}

TEST_CASE("unknown command ids, gateways and bad arguments are named errors",
          "[schema][commands]") {
    scoped_database db;
    auto d = db.daemon();
    auto missing = std::string("5b0f4a1e-0000-4000-8000-000000000001");
    CHECK(sqlstate_of([&] { d.exec("SELECT start_command($1)", {missing}); }) == "AW003");
    CHECK(message_of([&] {
              d.exec("SELECT fail_command($1, 1, 'x')", {missing});
          }).find("command " + missing + ": not found") != std::string::npos);
    CHECK(sqlstate_of([&] { d.exec("SELECT * FROM lease_command(60, 'no-such-gateway')"); }) ==
          "AW003");
    CHECK(sqlstate_of([&] { d.exec("SELECT * FROM lease_command(0, 'default')"); }) == "AW004");
    CHECK(sqlstate_of([&] { d.exec("SELECT * FROM lease_command(60, NULL)"); }) == "AW004");
}

TEST_CASE("bad command rows are refused with a clear error and no partial write",
          "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    // Payload not an object, wrong enum, missing required fields, tokens in a provision payload.
    CHECK(sqlstate_of([&] { enqueue(d, "alice", "update", "[1,2]"); }) == "AW004");
    CHECK(sqlstate_of([&] { enqueue(d, "alice", "update", "\"text\""); }) == "AW004");
    CHECK(sqlstate_of([&] { enqueue(d, "alice", "fly_to_moon"); }) == "22P02");
    auto msg =
        message_of([&] { enqueue(d, "alice", "auth_set_api_key", "{\"provider\":\"openai\"}"); });
    CHECK(msg.find("needs payload field \"api_key\"") != std::string::npos);
    CHECK(sqlstate_of([&] { enqueue(d, "alice", "set_agent_model", "{}"); }) == "AW004");
    CHECK(sqlstate_of([&] {
              enqueue(d, "alice", "source_write", "{\"connection_id\":\"x\",\"action\":\"y\"}");
          }) == "AW004");
    CHECK(sqlstate_of([&] {
              enqueue(d, "alice", "provision", "{\"telegram_bot_token\":\"123:abc\"}");
          }) == "AW004");
    CHECK(sqlstate_of([&] { enqueue(d, "nobody"); }) == "AW003");
    CHECK(sqlstate_of([&] {
              d.exec(
                  "INSERT INTO agent_commands (gateway_id, action, status) VALUES ($1, "
                  "'update_all', 'done')",
                  {default_gateway(admin)});
          }) == "AW004");
    // A statement with one bad row writes none.
    CHECK(sqlstate_of([&] {
              d.exec(
                  "INSERT INTO agent_commands (agent_slug, action, payload) VALUES "
                  "('alice', 'update', '{}'), ('alice', 'approve_pairing', '{}')");
          }) == "AW004");
    CHECK(count(d, "SELECT count(*) FROM agent_commands") == 0);
    // Gateway-wide commands need no agent; provision names an agent that does not exist yet.
    CHECK(count(d,
                "WITH c AS (INSERT INTO agent_commands (gateway_id, action) VALUES ($1, "
                "'update_all') RETURNING 1) "
                "SELECT count(*) FROM c",
                {default_gateway(admin)}) == 1);
    CHECK(count(d,
                "WITH c AS (INSERT INTO agent_commands (gateway_id, agent_slug, action, payload) "
                "VALUES ($1, 'newbie', 'provision', '{\"channel\":\"telegram\"}') RETURNING 1) "
                "SELECT count(*) FROM c",
                {default_gateway(admin)}) == 1);
    CHECK(sqlstate_of([&] {
              d.exec("INSERT INTO agent_commands (action) VALUES ('update_all')");
          }) == "23502");
    // The good ones: set_agent_model gets agent_slug into its payload.
    auto id = enqueue(d, "alice", "set_agent_model", "{\"model\":\"openai/gpt-5\"}");
    CHECK(one(d, "SELECT payload->>'agent_slug' FROM agent_commands WHERE id = $1", {id}) ==
          "alice");
}

TEST_CASE("a command belongs to its gateway's tenant, and goes with the tenant",
          "[schema][commands]") {
    // sql/0047 dropped agent_commands' own foreign key to tenants: the one to its gateway, of
    // (tenant_id, gateway_id), must still refuse every row whose tenant is not its gateway's, and
    // a tenant's delete must still take its commands (through its gateways).
    scoped_database db;
    auto admin = db.admin();
    const auto acme = new_tenant(admin, "acme");
    const auto other = new_tenant(admin, "other");
    const auto gw = new_gateway(admin, acme, "acme-gw");
    const auto insert = [&](const std::string& tenant) {
        admin.exec(
            "INSERT INTO agent_commands (tenant_id, gateway_id, action, status) VALUES ($1, $2, "
            "'update_all', 'pending')",
            {tenant, gw});
    };
    // Another tenant's id, and one of no tenant at all: the gateway's key refuses both.
    CHECK(sqlstate_of([&] { insert(other); }) == "23503");
    CHECK(sqlstate_of([&] { insert("11111111-2222-3333-4444-555555555555"); }) == "23503");
    CHECK(count(admin, "SELECT count(*) FROM agent_commands") == 0);
    insert(acme);
    insert(acme);
    CHECK(sqlstate_of([&] { admin.exec("UPDATE agent_commands SET tenant_id = $1", {other}); }) ==
          "23503");
    admin.exec("DELETE FROM tenants WHERE id = $1", {acme});
    CHECK(count(admin, "SELECT count(*) FROM agent_commands") == 0);
    CHECK(count(admin, "SELECT count(*) FROM gateways WHERE tenant_id = $1", {acme}) == 0);
}

TEST_CASE("a runner whose lease expired and was taken over is fenced off", "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    auto id = enqueue(d, "alice");
    auto first = one(d, "SELECT lease_token FROM lease_command(60, 'default', 'runner-a')");
    admin.exec(
        "UPDATE agent_commands SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
        {id});

    // lease_command requeues the expired lease inline and hands the command to runner-b.
    auto r = d.exec("SELECT * FROM lease_command(60, 'default', 'runner-b')");
    REQUIRE(r.size() == 1);
    CHECK(r.get<std::string>(0, "id") == id);
    CHECK(r.get<int>(0, "attempts") == 2);
    auto second = r.get<std::string>(0, "lease_token");
    CHECK(second != first);

    CHECK(sqlstate_of([&] { d.exec("SELECT start_command($1, $2)", {id, first}); }) == "AW002");
    d.exec("SELECT start_command($1, $2)", {id, second});
    CHECK(sqlstate_of([&] {
              d.exec("SELECT complete_command($1, 0, 'late', NULL, $2)", {id, first});
          }) == "AW002");
    CHECK(sqlstate_of([&] {
              d.exec("SELECT fail_command($1, 1, 'late', $2)", {id, first});
          }) == "AW002");
    d.exec("SELECT complete_command($1, 0, 'b', NULL, $2)", {id, second});
    CHECK(one(d, "SELECT stdout FROM agent_commands WHERE id = $1", {id}) == "b");
}

TEST_CASE("expired leases: leased goes back to the pool, running becomes failed, no retry",
          "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    auto a = enqueue(d, "alice");
    auto b = enqueue(d, "alice");
    d.exec("SELECT lease_command(60, 'default', 'r')");
    d.exec("SELECT lease_command(60, 'default', 'r')");
    d.exec("SELECT start_command($1)", {b});
    admin.exec("UPDATE agent_commands SET lease_expires_at = now() - interval '1 second'");

    auto reaped = d.exec("SELECT * FROM reap_expired_leases()");
    CHECK(reaped.get<int>(0, "commands_requeued") == 1);
    CHECK(reaped.get<int>(0, "commands_failed") == 1);
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {a}) == "pending");
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {b}) == "failed");
    CHECK(one(d, "SELECT error_message FROM agent_commands WHERE id = $1", {b})
              .find("lease expired") != std::string::npos);
    // The failed one is never leased again; the requeued one is.
    auto r = d.exec("SELECT id FROM lease_command(60, 'default')");
    REQUIRE(r.size() == 1);
    CHECK(r.get<std::string>(0, "id") == a);
    CHECK(d.exec("SELECT id FROM lease_command(60, 'default')").empty());
}

TEST_CASE("8 concurrent leasers over 2,000 commands: none leased twice, none left behind",
          "[schema][commands][concurrency]") {
    // Both ways to take work: lease then start, and lease_and_start_command (what the runner does).
    const bool merged = GENERATE(false, true);
    INFO((merged ? "lease_and_start_command" : "lease_command + start_command"));
    scoped_database db;
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    admin.exec(
        "INSERT INTO agent_commands (agent_id, action, payload) "
        "SELECT $1, 'run_shell', jsonb_build_object('n', g) FROM generate_series(1, 2000) g",
        {agent});

    std::mutex m;
    std::vector<std::string> seen;
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            try {
                auto c = db.daemon();
                for (;;) {
                    auto r = c.exec(std::string("SELECT id, lease_token FROM ") +
                                        (merged ? "lease_and_start_command" : "lease_command") +
                                        "(300, 'default', $1)",
                                    {"runner-" + std::to_string(t)});
                    if (r.empty()) break;
                    auto id = r.get<std::string>(0, "id");
                    auto token = r.get<std::string>(0, "lease_token");
                    if (!merged) c.exec("SELECT start_command($1, $2)", {id, token});
                    c.exec("SELECT complete_command($1, 0, 'ok', NULL, $2)", {id, token});
                    std::lock_guard lock(m);
                    seen.push_back(id);
                }
            } catch (...) {
                ++errors;
            }
        });
    }
    for (auto& th : threads) th.join();
    CHECK(errors == 0);
    CHECK(seen.size() == 2000);
    CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 2000);
    CHECK(count(admin,
                "SELECT count(*) FROM agent_commands WHERE status = 'done' AND attempts = 1") ==
          2000);
}

TEST_CASE("a VACUUM clears the pending index of dead entries even under a long history",
          "[schema][commands][vacuum]") {
    // A lease walks the pending index from its oldest entry, past every entry of a command that
    // has left pending since the last index vacuum. Left to VACUUM's default, a table with a long
    // history skips that index pass (fewer than 2 % of its pages hold dead rows), so the dead
    // entries stay; sql/0014 makes VACUUM always clean the index.
    scoped_database db;
    auto admin = db.admin();
    auto gw = default_gateway(admin);
    admin.exec("ALTER TABLE agent_commands SET (autovacuum_enabled = off)");  // our VACUUM only
    admin.exec("SET session_replication_role = replica");  // history rows, past the insert rules
    // The tenant given, not the column default's per-row lookup: ten times faster for 500,000.
    admin.exec(
        "INSERT INTO agent_commands (tenant_id, gateway_id, action, status, finished_at) "
        "SELECT g.tenant_id, g.id, 'auth_list', 'done', now() FROM gateways g, "
        "generate_series(1, 500000) WHERE g.id = $1",
        {gw});
    admin.exec("RESET session_replication_role");
    admin.exec("VACUUM ANALYZE agent_commands");
    admin.exec(
        "INSERT INTO agent_commands (gateway_id, action) "
        "SELECT $1, 'auth_list' FROM generate_series(1, 5001)",
        {gw});
    admin.exec(R"(DO $$ DECLARE r record; BEGIN
                    FOR i IN 1..5000 LOOP
                      SELECT * INTO r FROM lease_and_start_command(60, 'default');
                      COMMIT;
                      PERFORM complete_command(r.id, 0, NULL, NULL, r.lease_token);
                      COMMIT;
                    END LOOP; END $$)");
    // Index pages the lease's scan reads to reach the one pending command.
    admin.exec(R"(CREATE FUNCTION pg_temp.claim_pages(p_gateway uuid) RETURNS bigint
                  LANGUAGE plpgsql AS $$ DECLARE p json; BEGIN
                    EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT q.id
                      FROM agent_commands q WHERE q.gateway_id = %L AND q.status = ''pending''
                      ORDER BY q.created_at, q.id LIMIT 1', p_gateway) INTO p;
                    RETURN (SELECT sum((n->>'Shared Hit Blocks')::bigint
                                       + (n->>'Shared Read Blocks')::bigint)
                              FROM jsonb_path_query(p::jsonb,
                                '$.** ? (@."Index Name" == "agent_commands_pending_idx")') n);
                  END $$)");
    // The second look: the first one also visits the heap behind each entry and marks it dead.
    count(admin, "SELECT pg_temp.claim_pages($1)", {gw});
    const auto before = count(admin, "SELECT pg_temp.claim_pages($1)", {gw});
    CHECK(before > 20);  // 5,000 dead entries ahead of the live one
    admin.exec("VACUUM agent_commands");
    const auto after = count(admin, "SELECT pg_temp.claim_pages($1)", {gw});
    INFO("index pages read by a lease: " << before << " before VACUUM, " << after << " after");
    CHECK(after <= 5);  // the root, a leaf page or two, the heap page
    CHECK(one(admin, "SELECT id::text FROM lease_and_start_command(60, 'default')") != "");
}

TEST_CASE("one NOTIFY per statement per gateway when commands become pending",
          "[schema][commands][notify]") {
    scoped_database db;
    auto admin = db.admin();
    auto gw1 = default_gateway(admin);
    auto gw2 = new_gateway(admin, kDefaultTenant, "second");
    auto a1 = new_agent(admin, kDefaultTenant, "alice", gw1);
    auto a2 = new_agent(admin, kDefaultTenant, "bob", gw2);
    auto listener = db.daemon();
    listener.exec("LISTEN awp_commands_" + no_dashes(gw1));
    listener.exec("LISTEN awp_commands_" + no_dashes(gw2));
    auto d = db.daemon();

    auto id = enqueue(d, "alice");
    auto n = wait_notifications(listener, 1);
    REQUIRE(n.size() == 1);
    CHECK(n[0].channel == "awp_commands_" + no_dashes(gw1));
    CHECK(n[0].payload == id);

    // Three rows over two gateways in one statement: one notification per gateway.
    d.exec(
        "INSERT INTO agent_commands (agent_id, action) VALUES ($1, 'update'), ($1, 'update'), ($2, "
        "'update')",
        {a1, a2});
    n = wait_notifications(listener, 2);
    REQUIRE(n.size() == 2);
    std::set<std::string> channels{n[0].channel, n[1].channel};
    CHECK(channels.count("awp_commands_" + no_dashes(gw1)) == 1);
    for (auto& x : n) {
        if (x.channel == "awp_commands_" + no_dashes(gw1))
            CHECK(x.payload.empty());
        else
            CHECK(x.payload.size() == 36);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(listener.drain_notifications().empty());

    // A requeue after an expired lease wakes the gateway again.
    d.exec("SELECT lease_command(60, 'second')");
    admin.exec(
        "UPDATE agent_commands SET lease_expires_at = now() - interval '1 second' WHERE status = "
        "'leased'");
    d.exec("SELECT reap_expired_leases()");
    n = wait_notifications(listener, 1);
    REQUIRE(n.size() == 1);
    CHECK(n[0].channel == "awp_commands_" + no_dashes(gw2));
}

TEST_CASE("a user enqueues and cancels commands of its tenant only, never leases",
          "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto api = db.api();
    awp::test::as_user(api, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");
    auto id = enqueue(api, "alice");
    CHECK(sqlstate_of([&] { api.exec("SELECT * FROM lease_command(60, 'default')"); }) == "42501");
    // pending -> done is refused (by the state machine, before the policy would refuse it too).
    CHECK_FALSE(sqlstate_of([&] {
                    api.exec("UPDATE agent_commands SET status = 'done' WHERE id = $1", {id});
                }).empty());
    CHECK(sqlstate_of([&] {
              api.exec("UPDATE agent_commands SET status = 'leased' WHERE id = $1", {id});
          }) == "42501");
    CHECK(one(api, "SELECT status FROM agent_commands WHERE id = $1", {id}) == "pending");
    CHECK(sqlstate_of([&] {
              api.exec("UPDATE agent_commands SET stdout = 'x' WHERE id = $1", {id});
          }) == "42501");
    CHECK(one(api, "SELECT status FROM cancel_command($1)", {id}) == "cancelled");
}

TEST_CASE(
    "command_action lists the spec's actions first, in the spec's order, and still checks "
    "payloads",
    "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    CHECK(one(admin, "SELECT enum_range(NULL::command_action)::text") ==
          "{provision,update,remove,start_session,end_session,restart_session,execute_prompt,"
          "send_message,run_shell,upload_file,auth_set_api_key,auth_start,auth_paste,"
          "set_agent_model,source_write,approve_pairing,update_all,restart_gateway,"
          "restart_dispatcher,update_gateway,list_models,auth_list,auth_refresh,auth_remove,"
          "auth_set_default}");
    // The payload check moved with the type: a secret-bearing provision payload is refused.
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    CHECK_THROWS(enqueue(admin, "alice", "provision", R"({"telegram_token":"x"})"));
    CHECK_FALSE(enqueue(admin, "alice", "provision", "{}").empty());
    // Only the new type is left.
    CHECK(one(admin, "SELECT count(*) FROM pg_type WHERE typname LIKE 'command_action%'") == "1");
}

TEST_CASE("run_shell: only operators by default, members when an operator opens the gateway",
          "[schema][commands]") {
    scoped_database db;
    auto admin = db.admin();
    const std::string gw = default_gateway(admin);
    new_agent(admin, kDefaultTenant, "alice", gw);
    auto c = db.api();
    const std::string tenant = kDefaultTenant;
    auto as_member = [&] { awp::test::as_user(c, tenant, "7d1c0a52-0000-4000-8000-00000000000b"); };
    auto as_operator = [&] {
        c.exec("SELECT set_config('request.jwt.claims', $1, false)",
               {R"({"role":"authenticated","sub":"7d1c0a52-0000-4000-8000-00000000000c",)"
                R"("app_metadata":{"tenant_id":")" +
                tenant + R"(","awp_role":"operator"}})"});
    };
    const std::string shell = R"({"argv":["/usr/bin/id"]})";
    CHECK(one(admin, "SELECT run_shell_policy FROM gateways WHERE id = $1", {gw}) == "operators");

    // A member: refused with AW010, and no row is written.
    as_member();
    CHECK(sqlstate_of([&] { enqueue(c, "alice", "run_shell", shell); }) == "AW010");
    CHECK(message_of([&] { enqueue(c, "alice", "run_shell", shell); }).find("needs an operator") !=
          std::string::npos);
    CHECK(count(admin, "SELECT count(*) FROM agent_commands WHERE action = 'run_shell'") == 0);
    // Other actions are a member's as before, marked as not written by an operator; the
    // inserter cannot claim otherwise (the column is not in the insert grants).
    CHECK_FALSE(enqueue(c, "alice", "update").empty());
    CHECK(one(admin, "SELECT bool_or(requested_by_operator)::text FROM agent_commands") == "false");
    CHECK(sqlstate_of([&] {
              c.exec(
                  "INSERT INTO agent_commands (agent_slug, action, requested_by_operator) "
                  "VALUES ('alice', 'run_shell', true)");
          }) == "42501");
    // A member cannot open the gateway to members.
    CHECK(sqlstate_of([&] {
              c.exec("UPDATE gateways SET run_shell_policy = 'members' WHERE id = $1", {gw});
          }) == "AW010");

    // An operator writes run_shell, and may open the gateway; then a member may too.
    as_operator();
    const auto op_cmd = enqueue(c, "alice", "run_shell", shell);
    CHECK(one(admin, "SELECT requested_by_operator::text FROM agent_commands WHERE id = $1",
              {op_cmd}) == "true");
    c.exec("UPDATE gateways SET run_shell_policy = 'members' WHERE id = $1", {gw});
    as_member();
    CHECK_FALSE(enqueue(c, "alice", "run_shell", shell).empty());
    // Closing it again is anyone's right (it only takes a power away).
    c.exec("UPDATE gateways SET run_shell_policy = 'operators' WHERE id = $1", {gw});
    CHECK(sqlstate_of([&] { enqueue(c, "alice", "run_shell", shell); }) == "AW010");
}

}  // namespace schema_commands_test
