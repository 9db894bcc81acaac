// The agent inbox: attempts, exponential back-off, dead_letter at max_attempts, expired leases
// as failed attempts, fencing, and the per-gateway wake-up.
#include <chrono>
#include <thread>

#include "schema_helpers.hpp"

namespace schema_inbox_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

std::string add_item(pg::connection& admin, const std::string& agent, const std::string& key) {
    return one(admin,
               "INSERT INTO agent_inbox_items (agent_id, event_type, dedup_key, summary) "
               "VALUES ($1, 'heartbeat', $2, 'wake up') RETURNING id",
               {agent, key});
}

void make_ready(pg::connection& admin) {
    admin.exec(
        "UPDATE agent_inbox_items SET not_before = now() - interval '1 second' WHERE status = "
        "'failed'");
}

}  // namespace

TEST_CASE("an inbox item is leased, completed, and takes agent_slug and gateway from its agent",
          "[schema][inbox]") {
    scoped_database db;
    auto admin = db.admin();
    auto gw = default_gateway(admin);
    auto agent = new_agent(admin, kDefaultTenant, "alice", gw);
    auto id = add_item(admin, agent, "k1");
    CHECK(one(admin,
              "SELECT agent_slug || ' ' || gateway_id || ' ' || max_attempts FROM "
              "agent_inbox_items WHERE id = $1",
              {id}) == "alice " + gw + " 3");
    auto d = db.daemon();
    auto r = d.exec("SELECT * FROM lease_inbox_item($1, 120, 'dispatcher-1')", {agent});
    REQUIRE(r.size() == 1);
    CHECK(r.get<std::string>(0, "status") == "leased");
    CHECK(r.get<int>(0, "attempts") == 1);
    auto token = r.get<std::string>(0, "lease_token");
    CHECK(d.exec("SELECT * FROM lease_inbox_item($1, 120)", {agent}).empty());
    CHECK(one(d, "SELECT status FROM complete_inbox_item($1, $2)", {id, token}) == "done");
    // done is final.
    CHECK(sqlstate_of([&] { d.exec("SELECT complete_inbox_item($1)", {id}); }) == "AW001");
    CHECK(sqlstate_of([&] { d.exec("SELECT fail_inbox_item($1, 'x')", {id}); }) == "AW001");
    CHECK(sqlstate_of([&] {
              d.exec("UPDATE agent_inbox_items SET status = 'pending' WHERE id = $1", {id});
          }) == "AW001");
    CHECK(sqlstate_of([&] {
              d.exec("SELECT complete_inbox_item($1)", {"5b0f4a1e-0000-4000-8000-000000000001"});
          }) == "AW003");
    CHECK(sqlstate_of([&] {
              d.exec("SELECT * FROM lease_inbox_item($1, 60)",
                     {"5b0f4a1e-0000-4000-8000-000000000001"});
          }) == "AW003");
    // A pending item cannot be completed or failed without a lease.
    auto id2 = add_item(admin, agent, "k2");
    CHECK(sqlstate_of([&] { d.exec("SELECT complete_inbox_item($1)", {id2}); }) == "AW001");
    CHECK(sqlstate_of([&] { d.exec("SELECT fail_inbox_item($1, 'x')", {id2}); }) == "AW001");
}

TEST_CASE("inbox retry: failed waits out a growing back-off, then dead_letter at max_attempts",
          "[schema][inbox]") {
    scoped_database db;
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto id = add_item(admin, agent, "retry");
    auto d = db.daemon();

    std::vector<double> backoffs;
    for (int attempt = 1; attempt <= 2; ++attempt) {
        auto r = d.exec("SELECT * FROM lease_inbox_item($1, 60)", {agent});
        REQUIRE(r.size() == 1);
        CHECK(r.get<int>(0, "attempts") == attempt);
        auto f = d.exec(
            "SELECT status, last_error, extract(epoch FROM not_before - now())::float8 AS wait "
            "FROM fail_inbox_item($1, 'agent crashed')",
            {id});
        CHECK(f.get<std::string>(0, "status") == "failed");
        CHECK(f.get<std::string>(0, "last_error") == "agent crashed");
        backoffs.push_back(f.get<double>(0, "wait"));
        // Not leasable during the back-off.
        CHECK(d.exec("SELECT * FROM lease_inbox_item($1, 60)", {agent}).empty());
        make_ready(admin);
    }
    CHECK(backoffs[0] == Approx(30).margin(1));
    CHECK(backoffs[1] == Approx(60).margin(1));
    d.exec("SELECT * FROM lease_inbox_item($1, 60)", {agent});
    CHECK(one(d, "SELECT status FROM fail_inbox_item($1, 'third time')", {id}) == "dead_letter");
    make_ready(admin);
    CHECK(d.exec("SELECT * FROM lease_inbox_item($1, 60)", {agent}).empty());
    CHECK(one(d, "SELECT attempts FROM agent_inbox_items WHERE id = $1", {id}) == "3");
}

TEST_CASE("an expired inbox lease counts as a failed attempt, the last one dead-letters",
          "[schema][inbox]") {
    scoped_database db;
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto id = add_item(admin, agent, "expiry");
    admin.exec("UPDATE agent_inbox_items SET max_attempts = 2 WHERE id = $1", {id});
    auto d = db.daemon();

    auto first = one(d, "SELECT lease_token FROM lease_inbox_item($1, 60, 'd1')", {agent});
    admin.exec("UPDATE agent_inbox_items SET lease_expires_at = now() - interval '1 second'");
    auto reaped = d.exec("SELECT * FROM reap_expired_leases()");
    CHECK(reaped.get<int>(0, "inbox_retried") == 1);
    CHECK(one(d, "SELECT status FROM agent_inbox_items WHERE id = $1", {id}) == "failed");
    CHECK(one(d, "SELECT last_error FROM agent_inbox_items WHERE id = $1", {id})
              .find("lease expired") != std::string::npos);
    // The late holder is fenced off.
    CHECK(sqlstate_of([&] {
              d.exec("SELECT complete_inbox_item($1, $2)", {id, first});
          }) == "AW002");

    make_ready(admin);
    auto second = one(d, "SELECT lease_token FROM lease_inbox_item($1, 60, 'd2')", {agent});
    CHECK(second != first);
    admin.exec("UPDATE agent_inbox_items SET lease_expires_at = now() - interval '1 second'");
    // lease_inbox_item expires the agent's own stale leases inline.
    CHECK(d.exec("SELECT * FROM lease_inbox_item($1, 60)", {agent}).empty());
    CHECK(one(d, "SELECT status FROM agent_inbox_items WHERE id = $1", {id}) == "dead_letter");
    CHECK(sqlstate_of([&] {
              d.exec("SELECT fail_inbox_item($1, 'late', $2)", {id, second});
          }) == "AW002");
}

TEST_CASE("inbox wake-ups go to the agent's gateway, one per statement",
          "[schema][inbox][notify]") {
    scoped_database db;
    auto admin = db.admin();
    auto gw = default_gateway(admin);
    auto agent = new_agent(admin, kDefaultTenant, "alice", gw);
    auto listener = db.daemon();
    listener.exec("LISTEN awp_inbox_" + no_dashes(gw));
    admin.exec(
        "INSERT INTO agent_inbox_items (agent_id, event_type, dedup_key) VALUES "
        "($1, 'heartbeat', 'a'), ($1, 'heartbeat', 'b')",
        {agent});
    std::vector<pg::notification> got;
    for (int i = 0; i < 50 && got.empty(); ++i) {
        got = listener.drain_notifications();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(got.size() == 1);
    CHECK(got[0].payload.empty());
    // Dedup: the same key again creates nothing.
    auto d = db.daemon();
    CHECK(d.exec("SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'a', 't', 's') IS NULL AS dup",
                 {kDefaultTenant, agent})
              .get<bool>(0, "dup"));
}

TEST_CASE("a re-driven dead letter starts afresh with its full attempts", "[schema][inbox]") {
    scoped_database db;
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto id = add_item(admin, agent, "redrive");
    auto d = db.daemon();
    for (int attempt = 1; attempt <= 3; ++attempt) {
        REQUIRE(d.exec("SELECT * FROM lease_inbox_item($1, 60)", {agent}).size() == 1);
        d.exec("SELECT fail_inbox_item($1, 'agent crashed')", {id});
        make_ready(admin);
    }
    REQUIRE(one(admin, "SELECT status FROM agent_inbox_items WHERE id = $1", {id}) ==
            "dead_letter");
    // The operator re-drives it: pending, attempts 0, leasable at once, three more tries.
    admin.exec("UPDATE agent_inbox_items SET status = 'pending' WHERE id = $1", {id});
    CHECK(one(admin,
              "SELECT attempts || ' ' || (not_before IS NULL) FROM agent_inbox_items "
              "WHERE id = $1",
              {id}) == "0 true");
    auto r = d.exec("SELECT * FROM lease_inbox_item($1, 60)", {agent});
    REQUIRE(r.size() == 1);
    CHECK(r.get<int>(0, "attempts") == 1);
    CHECK(one(d, "SELECT status FROM fail_inbox_item($1, 'again')", {id}) == "failed");
}

TEST_CASE("an agent that becomes ready wakes its gateway when items wait for it",
          "[schema][inbox][notify]") {
    scoped_database db;
    auto admin = db.admin();
    auto gw = default_gateway(admin);
    auto agent = new_agent(admin, kDefaultTenant, "alice", gw);
    auto idle = new_agent(admin, kDefaultTenant, "bob", gw);
    admin.exec("UPDATE agents SET status = 'paused' WHERE id IN ($1, $2)", {agent, idle});
    add_item(admin, agent, "waiting");
    auto listener = db.daemon();
    listener.exec("LISTEN awp_inbox_" + no_dashes(gw));
    const auto drain = [&] {
        std::vector<pg::notification> got;
        for (int i = 0; i < 25; ++i) {
            for (auto& n : listener.drain_notifications()) got.push_back(std::move(n));
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return got;
    };
    drain();
    // An agent with nothing waiting resumes quietly; one with an item wakes the dispatcher.
    admin.exec("UPDATE agents SET status = 'ready' WHERE id = $1", {idle});
    CHECK(drain().empty());
    admin.exec("UPDATE agents SET status = 'ready' WHERE id = $1", {agent});
    auto got = drain();
    REQUIRE(got.size() == 1);
    CHECK(got[0].channel == "awp_inbox_" + no_dashes(gw));
    // Other updates of a ready agent do not.
    admin.exec("UPDATE agents SET name = 'Alice' WHERE id = $1", {agent});
    CHECK(drain().empty());
}

TEST_CASE("the dispatcher's scan counts each ready agent's leasable items, on its own gateway only",
          "[schema][inbox]") {
    scoped_database db;
    auto admin = db.admin();
    const auto gw = default_gateway(admin);
    const auto alice = new_agent(admin, kDefaultTenant, "alice", gw);
    const auto bob = new_agent(admin, kDefaultTenant, "bob", gw);
    const auto carol = new_agent(admin, kDefaultTenant, "carol", gw);
    add_item(admin, alice, "a1");
    add_item(admin, alice, "a2");
    add_item(admin, bob, "b1");
    add_item(admin, carol, "c1");
    admin.exec("UPDATE agents SET status = 'paused' WHERE id = $1", {carol});
    // bob's item fails once: it is leasable again in 90 s, not now.
    auto d = db.daemon();
    const auto token = one(d, "SELECT lease_token FROM lease_inbox_item($1, 60)", {bob});
    d.exec("SELECT fail_inbox_item(id, 'no', $2, 90) FROM agent_inbox_items WHERE agent_id = $1",
           {bob, token});

    const auto scan = [&](pg::connection& c, const std::string& gateway) {
        return c.exec(
            "SELECT coalesce(agent_id::text, '-'), waiting, due_in FROM awp_inbox_scan($1) "
            "ORDER BY agent_id NULLS LAST",
            {gateway});
    };
    auto r = scan(d, gw);
    REQUIRE(r.size() == 2);  // alice (2 items), then the row with the time to the next one
    CHECK(r.get<std::string>(0, 0) == alice);
    CHECK(r.get<long>(0, 1) == 2);
    CHECK(r.is_null(0, 2));
    CHECK(r.get<std::string>(1, 0) == "-");
    CHECK(r.get<double>(1, 2) > 80);  // bob's back-off; carol is paused
    CHECK(r.get<double>(1, 2) <= 90);

    // A gateway's own login scans its gateway; another gateway's id shows it nothing.
    const auto other = new_gateway(admin, kDefaultTenant, "other-gw");
    const auto dave = new_agent(admin, kDefaultTenant, "dave", other);
    add_item(admin, dave, "d1");
    auto mine = pg::connection::connect(db.gateway_dsn(gw));
    CHECK(scan(mine, gw).size() == 2);
    auto theirs = scan(mine, other);
    REQUIRE(theirs.size() == 1);
    CHECK(theirs.get<std::string>(0, 0) == "-");
    CHECK(theirs.is_null(0, 2));
    CHECK(scan(d, other).get<long>(0, 1) == 1);  // the service role sees dave's item
}

}  // namespace schema_inbox_test
