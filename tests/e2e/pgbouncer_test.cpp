// Through PgBouncer in transaction mode (label pgbouncer: scripts/test.sh pgbouncer, one server
// connection per pool): awp keeps no session state on a pooled connection. Two clients of the
// core pg layer share the one server connection, and after the api-gateway served sessions,
// service-role routes and sign-in, that connection holds no prepared statement, no role and no
// claims. Run directly (label e2e) there is no pooler and nothing to check.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "awp/core/pg.hpp"
#include "support/api_process.hpp"
#include "support/pooler.hpp"
#include "support/test_db.hpp"

namespace pgbouncer_test {

namespace net = boost::asio;
namespace pg = awp::core::pg;
using awp::test::bearer;
using awp::test::scoped_database;

namespace {

constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";

// What the one server connection of a pool shows to whoever gets it next.
struct leftovers {
    long prepared = -1;
    std::string role, claims, user;
};

leftovers server_state(const std::string& pooled_dsn) {
    auto c = pg::connection::connect(pooled_dsn);
    auto r = c.exec(
        "SELECT (SELECT count(*) FROM pg_prepared_statements), current_setting('role'), "
        "coalesce(current_setting('request.jwt.claims', true), ''), current_user::text");
    return {r.get<long>(0, 0), r.get<std::string>(0, 1), r.get<std::string>(0, 2),
            r.get<std::string>(0, 3)};
}

// Two sessions, each with its own hot statements, taking turns on the pool's one server
// connection: named statements (awp_1 on both) would collide there, so DATABASE_PREPARED=off
// must leave none.
net::awaitable<int> two_sessions(std::string dsn) {
    pg::session a(dsn, "a");
    pg::session b(dsn, "b");
    int sum = 0;
    for (int i = 1; i <= 3; ++i) {
        auto ra = co_await a.query_prepared("SELECT $1::int + 100", i);
        auto rb = co_await b.query_prepared("SELECT $1::int * 1000", i);
        sum += ra.get<int>(0, 0) + rb.get<int>(0, 0);
    }
    co_return sum;
}

// Two hosts on the pool login, each with its own gateway's key, taking turns on the pool's one
// server connection: each statement (and each BEGIN ... COMMIT) goes out behind its host's key,
// so each host sees its own gateway's command and never the other's. Returns what they saw.
net::awaitable<std::string> two_hosts(std::string dsn_a, std::string key_a, std::string dsn_b,
                                      std::string key_b) {
    pg::session a(dsn_a, "a");
    a.set_gateway_key(key_a);
    pg::session b(dsn_b, "b");
    b.set_gateway_key(key_b);
    std::string seen;
    for (int i = 0; i < 20; ++i) {
        auto ra = co_await a.query("SELECT string_agg(gateway_id::text, ',') FROM agent_commands");
        auto rb = co_await b.query("SELECT string_agg(gateway_id::text, ',') FROM agent_commands");
        seen += std::string(ra.text(0, 0)) + "|" + std::string(rb.text(0, 0)) + "\n";
    }
    // Inside a transaction the key presented with its BEGIN holds, while the other host's
    // statements wait.
    pg::connection* ca = co_await a.get();
    co_await pg::async_transaction(*ca, [&](pg::connection& c) -> net::awaitable<void> {
        auto r = co_await c.async_query("SELECT count(*) FROM agent_commands");
        auto again = co_await c.async_query("SELECT awp_session_gateway()::text");
        seen += "tx:" + std::string(r.text(0, 0)) + ":" + std::string(again.text(0, 0)) + "\n";
    });
    co_return seen;
}

// A gateway with an agent and one pending command, for a host on the pool login.
std::string pool_gateway(pg::connection& admin, const char* slug) {
    const auto gw = std::string(
        admin
            .exec("INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, "
                  "'ready') RETURNING id::text",
                  {kTenant, awp::test::random_name(slug)})
            .text(0, 0));
    const auto agent = std::string(
        admin
            .exec("INSERT INTO agents (tenant_id, name, slug, gateway_id) VALUES ($1, 'A', $2, "
                  "$3) RETURNING id::text",
                  {kTenant, awp::test::random_name("ag"), gw})
            .text(0, 0));
    admin.exec(
        "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) VALUES ($1, $2, "
        "'update', '{}')",
        {kTenant, agent});
    return gw;
}

}  // namespace

TEST_CASE(
    "through PgBouncer: hosts of two gateways on one pool login share a server connection, and "
    "each reaches only its own gateway",
    "[pgbouncer]") {
    if (!awp::test::through_pgbouncer()) {
        SUCCEED("direct: no pooler to check (label pgbouncer runs this through one)");
        return;
    }
    scoped_database db;
    auto admin = db.admin();
    std::vector<std::string> gateways;
    for (const char* slug : {"pool-a", "pool-b"}) gateways.push_back(pool_gateway(admin, slug));
    const auto a = db.pool_login(gateways[0]), b = db.pool_login(gateways[1]);
    pg::set_named_statements(false);
    net::io_context ioc;
    auto f = net::co_spawn(
        ioc,
        two_hosts(awp::test::via_pgbouncer(a.dsn), a.key, awp::test::via_pgbouncer(b.dsn), b.key),
        net::use_future);
    ioc.run();
    std::string seen;
    try {
        seen = f.get();
    } catch (...) {
        pg::set_named_statements(true);
        throw;
    }
    pg::set_named_statements(true);
    std::string expected;
    for (int i = 0; i < 20; ++i) expected += gateways[0] + "|" + gateways[1] + "\n";
    expected += "tx:1:" + gateways[0] + "\n";
    CHECK(seen == expected);
    // One server connection served both, and it holds no key afterwards.
    const auto s = server_state(awp::test::via_pgbouncer(a.dsn));
    CHECK(s.user == "awp_pool_test");
    CHECK(s.prepared == 0);
    auto c = pg::connection::connect(awp::test::via_pgbouncer(a.dsn));
    CHECK(c.exec("SELECT coalesce(current_setting('awp.gateway_key', true), '')").text(0, 0) == "");
    CHECK(c.exec("SELECT count(*) FROM agent_commands").text(0, 0) == "0");
}

TEST_CASE(
    "through PgBouncer: what a pool host leaves on its server connection does not reach the next "
    "host",
    "[pgbouncer][security]") {
    if (!awp::test::through_pgbouncer()) {
        SUCCEED("direct: no pooler to check (label pgbouncer runs this through one)");
        return;
    }
    scoped_database db;
    auto admin = db.admin();
    const auto gw_a = pool_gateway(admin, "left-a"), gw_b = pool_gateway(admin, "left-b");
    const auto a = db.pool_login(gw_a), b = db.pool_login(gw_b);
    pg::set_named_statements(false);
    struct named_back {
        ~named_back() { pg::set_named_statements(true); }
    } restore;
    {
        // A hostile host: session settings, a role, a temporary type named like a built-in one, a
        // held advisory lock, a prepared statement, a LISTEN; each in its own transaction, as
        // every statement of a pool host goes out behind its key.
        auto c = pg::connection::connect(awp::test::via_pgbouncer(a.dsn));
        c.set_gateway_key(a.key);
        c.exec("CREATE TYPE pg_temp.uuid AS (x int)");
        c.exec("SELECT pg_advisory_lock(4242)");
        c.exec("PREPARE awp_1 AS SELECT 1");
        c.exec("LISTEN awp_wake");
        c.exec("SET ROLE awp_gateway");
        c.exec("SET default_transaction_read_only = on");
        c.exec("SET lock_timeout = 1");
    }
    // The next host on the pool's one server connection works as if none of it happened.
    auto c = pg::connection::connect(awp::test::via_pgbouncer(b.dsn));
    c.set_gateway_key(b.key);
    auto r = c.exec(
        "SELECT $1::uuid::text, current_user::text, "
        "current_setting('default_transaction_read_only'), "
        "current_setting('lock_timeout'), (SELECT count(*) FROM pg_prepared_statements), "
        "(SELECT count(*) FROM pg_listening_channels()), pg_try_advisory_lock(4242)",
        {gw_b});
    CHECK(r.text(0, 0) == gw_b);  // pg_catalog's uuid
    CHECK(r.text(0, 1) == "awp_pool_test");
    CHECK(r.text(0, 2) == "off");
    CHECK(r.text(0, 3) == "0");
    CHECK(r.text(0, 4) == "0");
    CHECK(r.text(0, 5) == "0");
    CHECK(r.text(0, 6) == "t");
    c.exec("SELECT pg_advisory_unlock_all()");
    // And it writes: its gateway's command is leased and started.
    CHECK(c.exec("SELECT id FROM public.lease_and_start_command(60, $1, 'b')", {gw_b}).size() == 1);
    CHECK(std::string(server_state(awp::test::via_pgbouncer(b.dsn)).user) == "awp_pool_test");
}

TEST_CASE("through PgBouncer: hot statements of two clients share one server connection",
          "[pgbouncer]") {
    if (!awp::test::through_pgbouncer()) {
        SUCCEED("direct: no pooler to check (label pgbouncer runs this through one)");
        return;
    }
    scoped_database db;
    const auto pooled = awp::test::via_pgbouncer(db.daemon_dsn());
    REQUIRE(pooled != db.daemon_dsn());
    pg::set_named_statements(false);  // as a daemon with DATABASE_PREPARED=off
    net::io_context ioc;
    auto f = net::co_spawn(ioc, two_sessions(pooled), net::use_future);
    ioc.run();
    int sum = 0;
    try {
        sum = f.get();
    } catch (...) {
        pg::set_named_statements(true);
        throw;
    }
    pg::set_named_statements(true);
    CHECK(sum == (101 + 102 + 103) + (1000 + 2000 + 3000));
    const auto s = server_state(pooled);
    CHECK(s.prepared == 0);
    CHECK(s.user == "awp_daemon");
}

TEST_CASE("through PgBouncer: the api-gateway leaves no role, claims or statements behind",
          "[pgbouncer]") {
    if (!awp::test::through_pgbouncer()) {
        SUCCEED("direct: no pooler to check (label pgbouncer runs this through one)");
        return;
    }
    scoped_database db;
    awp::test::api_gateway_process gw(db.api_dsn());  // AWP_API_DATABASE_URL via the pooler
    const auto token = awp::test::user_token(kTenant);
    for (int i = 0; i < 3; ++i) {
        CHECK(gw.get("/api/auth/session", bearer(token)).status == 200);
        CHECK(gw.get("/api/workspaces", bearer(token)).status == 200);
        CHECK(
            gw.get("/api/agents/no-such-agent/skills", bearer(awp::test::kApiServiceKey)).status ==
            404);
    }
    const auto s = server_state(awp::test::via_pgbouncer(db.api_dsn()));
    CHECK(s.user == "awp_api");
    CHECK(s.role == "none");
    CHECK(s.claims.empty());
    CHECK(s.prepared == 0);
}

TEST_CASE("through PgBouncer: the pooler may open as many files as its hard limit allows",
          "[pgbouncer]") {
    // scripts/pgbouncer.sh starts it through runuser, whose PAM session sets the soft limit back
    // to 1,024: a file per client, so PgBouncer refused clients beyond ~1,000 (bench/scale at
    // 1,000 hosts). The script raises the soft limit to the hard one.
    if (!awp::test::through_pgbouncer()) {
        SUCCEED("direct: no pooler to check (label pgbouncer runs this through one)");
        return;
    }
    const char* state = std::getenv("AWP_STATE_DIR");
    const std::string dir = state && *state ? state : std::string(AWP_SOURCE_DIR) + "/.awp";
    std::ifstream pid_file(dir + "/pgbouncer/pgbouncer.pid");
    long pid = 0;
    pid_file >> pid;
    REQUIRE(pid > 0);
    std::ifstream limits("/proc/" + std::to_string(pid) + "/limits");
    std::string line, soft, hard;
    while (std::getline(limits, line)) {
        if (line.rfind("Max open files", 0) != 0) continue;
        std::istringstream in(line.substr(14));
        in >> soft >> hard;
    }
    INFO("PgBouncer's open-file limit: soft " << soft << ", hard " << hard);
    REQUIRE(!soft.empty());
    CHECK(soft == hard);
}

}  // namespace pgbouncer_test
