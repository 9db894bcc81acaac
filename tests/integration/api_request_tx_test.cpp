// The api-gateway's request transaction against a real server (apps/api-gateway/src/db.cpp):
// one round trip for a one-statement request (a libpq pipeline of set_config + the statement,
// one implicit transaction), BEGIN and the settings sent with the first statement otherwise.
// What a user relies on: a request's role and claims never reach the next request on the same
// pooled connection, a failing request leaves that connection clean, and a pooled connection
// whose backend died is replaced without the request failing.
// GCC 12 reports Asio's awaitable frame allocator as a mismatched new/delete once these
// coroutines are inlined here (a false positive; the daemons' libraries turn it off too).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "gateway.hpp"
#include "support/test_db.hpp"

namespace api_request_tx_test {

namespace net = boost::asio;
using namespace awp::core;
using awp::api::db_pool;
using awp::api::principal;
using awp::test::scoped_database;

namespace {

template <class T>
T run_coro(net::io_context& ioc, net::awaitable<T> a) {
    auto f = net::co_spawn(ioc, std::move(a), net::use_future);
    ioc.restart();
    ioc.run();
    return f.get();
}

principal user(const std::string& tenant) {
    principal p;
    p.sub = uuid::generate_v4().to_string();
    p.tenant_id = tenant;
    p.claims_json = R"({"sub":")" + p.sub +
                    R"(","role":"authenticated","app_metadata":{"tenant_id":")" + tenant + R"("}})";
    return p;
}

principal service() {
    principal p;
    p.who = principal::kind::service;
    return p;
}

// What a request sees of its connection's state.
const char* const kState =
    "SELECT pg_backend_pid() AS pid, current_user::text AS who, "
    "coalesce(current_setting('request.jwt.claims', true), '') AS claims, "
    "public.current_tenant_id()::text AS tenant, "
    "coalesce(current_setting('awp.test_leak', true), '') AS leak";

struct state {
    int pid = 0;
    std::string who, claims, tenant, leak;
};

state read_state(const pg::result& r) {
    return {r.get<int>(0, "pid"), r.get<std::string>(0, "who"), r.get<std::string>(0, "claims"),
            r.get<std::string>(0, "tenant"), r.get<std::string>(0, "leak")};
}

net::awaitable<state> one_statement(db_pool& pool, principal p) {
    auto t = co_await pool.begin(std::move(p));
    auto r = co_await t.query_and_commit(kState);
    co_return read_state(r);
}

// A user's request that fails after changing session state (a session-level set_config, a
// SQL error): returns the SQLSTATE.
net::awaitable<std::string> failing_statement(db_pool& pool, principal p) {
    std::string sqlstate;
    try {
        auto t = co_await pool.begin(std::move(p));
        co_await t.query_and_commit("SELECT set_config('awp.test_leak', 'leaked', false), 1/0");
    } catch (const pg::sql_error& e) {
        sqlstate = e.sqlstate();
    }
    co_return sqlstate;
}

struct users_outcome {
    state a, b, after_a_service, after_b_service;
};

net::awaitable<users_outcome> alternate_users(db_pool& pool, std::string ta, std::string tb) {
    users_outcome out;
    out.a = co_await one_statement(pool, user(ta));
    out.after_a_service = co_await one_statement(pool, service());
    out.b = co_await one_statement(pool, user(tb));
    out.after_b_service = co_await one_statement(pool, service());
    co_return out;
}

struct failure_outcome {
    state before;
    std::string sqlstate;
    state after;
};

net::awaitable<failure_outcome> failure_then_next(db_pool& pool, std::string tenant) {
    failure_outcome out;
    out.before = co_await one_statement(pool, user(tenant));
    out.sqlstate = co_await failing_statement(pool, user(tenant));
    out.after = co_await one_statement(pool, service());
    co_return out;
}

struct multi_outcome {
    state first;
    bool same_transaction = false;
    state after_commit;
    state after_empty;
    std::string failed_sqlstate;
    state after_failure;
};

net::awaitable<multi_outcome> multi_statement(db_pool& pool, std::string tenant) {
    multi_outcome out;
    {
        // BEGIN and the settings go with the first statement; the second runs in the same
        // transaction (same now()), then COMMIT.
        auto t = co_await pool.begin(user(tenant));
        auto r1 = co_await t.query(std::string(kState) + ", now()::text AS at");
        auto r2 = co_await t.query("SELECT now()::text AS at, current_user::text AS who");
        co_await t.commit();
        out.first = read_state(r1);
        out.same_transaction = r1.get<std::string>(0, "at") == r2.get<std::string>(0, "at") &&
                               r2.get<std::string>(0, "who") == "authenticated";
    }
    out.after_commit = co_await one_statement(pool, service());
    {
        auto t = co_await pool.begin(user(tenant));  // nothing sent, nothing to undo
        co_await t.commit();
    }
    out.after_empty = co_await one_statement(pool, service());
    try {
        auto t = co_await pool.begin(user(tenant));
        co_await t.query("SELECT set_config('awp.test_leak', 'leaked', false)");
        co_await t.query("SELECT 1/0");
    } catch (const pg::sql_error& e) {
        out.failed_sqlstate = e.sqlstate();
    }
    out.after_failure = co_await one_statement(pool, service());
    co_return out;
}

struct pipeline_outcome {
    std::vector<std::string> values;
    std::string sqlstate;
    std::size_t completed = 9;
    std::string after;
};
net::awaitable<pipeline_outcome> pipeline_run(std::string dsn) {
    pipeline_outcome out;
    auto conn = co_await pg::connection::async_connect(dsn);
    std::vector<pg::connection::pipelined> ok;
    ok.push_back({"SELECT set_config('awp.x', $1, true)", {pg::param("one")}});
    ok.push_back({"SELECT current_setting('awp.x') || $1::text", {pg::param("+two")}});
    auto r = co_await conn.async_pipeline(std::move(ok));
    for (const auto& x : r) out.values.emplace_back(x.text(0, 0));
    std::vector<pg::connection::pipelined> bad;
    bad.push_back({"INSERT INTO pipe_t VALUES (1)", {}});
    bad.push_back({"INSERT INTO pipe_t VALUES (1)", {}});  // unique violation
    bad.push_back({"INSERT INTO pipe_t VALUES (2)", {}});  // skipped
    try {
        co_await conn.async_pipeline(std::move(bad), &out.completed);
    } catch (const pg::sql_error& e) {
        out.sqlstate = e.sqlstate();
    }
    auto n = co_await conn.async_exec(
        "SELECT count(*)::text || coalesce(current_setting('awp.x', true), '') FROM pipe_t");
    out.after = std::string(n.text(0, 0));
    co_return out;
}

}  // namespace

TEST_CASE("a request's role and claims never reach the next request on the same pooled connection",
          "[api][pool]") {
    scoped_database db;
    net::io_context ioc;
    db_pool pool(ioc, db.api_dsn(), 1);  // one connection: every request shares it
    const auto ta = uuid::generate_v4().to_string(), tb = uuid::generate_v4().to_string();
    auto out = run_coro(ioc, alternate_users(pool, ta, tb));
    CHECK(out.a.who == "authenticated");
    CHECK(out.a.tenant == ta);
    CHECK(out.a.claims.find(ta) != std::string::npos);
    CHECK(out.b.who == "authenticated");
    CHECK(out.b.tenant == tb);
    CHECK(out.b.claims.find(ta) == std::string::npos);
    for (const auto* s : {&out.after_a_service, &out.after_b_service}) {
        CHECK(s->pid == out.a.pid);  // the same backend each time
        CHECK(s->who == "service_role");
        CHECK(s->claims.empty());
        CHECK(s->tenant == "00000000-0000-0000-0000-000000000000");
    }
    CHECK(out.b.pid == out.a.pid);
}

TEST_CASE("a failing one-round-trip request is rolled back whole and leaves its connection clean",
          "[api][pool]") {
    scoped_database db;
    net::io_context ioc;
    db_pool pool(ioc, db.api_dsn(), 1);
    auto out = run_coro(ioc, failure_then_next(pool, uuid::generate_v4().to_string()));
    CHECK(out.sqlstate == "22012");          // division by zero, as the server said it
    CHECK(out.after.pid == out.before.pid);  // the connection went back to the pool, usable
    CHECK(out.after.who == "service_role");
    CHECK(out.after.claims.empty());
    CHECK(out.after.leak.empty());  // even the session-level set_config was rolled back
}

TEST_CASE(
    "a multi-statement request is one transaction with its settings, and only a failed one "
    "costs its connection",
    "[api][pool]") {
    scoped_database db;
    net::io_context ioc;
    db_pool pool(ioc, db.api_dsn(), 1);
    const auto tenant = uuid::generate_v4().to_string();
    auto out = run_coro(ioc, multi_statement(pool, tenant));
    CHECK(out.first.who == "authenticated");
    CHECK(out.first.tenant == tenant);
    CHECK(out.same_transaction);
    CHECK(out.after_commit.pid == out.first.pid);
    CHECK(out.after_commit.who == "service_role");
    CHECK(out.after_commit.claims.empty());
    CHECK(out.after_empty.pid == out.first.pid);  // a request that sent nothing keeps it
    CHECK(out.failed_sqlstate == "22012");
    // A transaction left open by a failure is not rolled back in a destructor: the connection
    // is dropped and the next request gets a fresh one, with nothing of the failed request.
    CHECK(out.after_failure.pid != out.first.pid);
    CHECK(out.after_failure.who == "service_role");
    CHECK(out.after_failure.claims.empty());
    CHECK(out.after_failure.leak.empty());
}

TEST_CASE("a pooled connection whose backend was terminated is replaced and the request succeeds",
          "[api][pool]") {
    scoped_database db;
    net::io_context ioc;
    db_pool pool(ioc, db.api_dsn(), 1);
    const auto tenant = uuid::generate_v4().to_string();
    auto before = run_coro(ioc, one_statement(pool, user(tenant)));
    auto admin = db.admin();
    admin.exec("SELECT pg_terminate_backend($1::int)", {before.pid});
    // Idle in the pool meanwhile; the next request finds it dead before anything ran.
    auto after = run_coro(ioc, one_statement(pool, user(tenant)));
    CHECK(after.pid != before.pid);
    CHECK(after.who == "authenticated");
    CHECK(after.tenant == tenant);
    auto multi = run_coro(ioc, multi_statement(pool, tenant));
    CHECK(multi.first.tenant == tenant);
}

TEST_CASE("a libpq pipeline runs its statements in one implicit transaction", "[pg][pipeline]") {
    scoped_database db;
    auto c = pg::connection::connect(db.admin_dsn());
    c.exec("CREATE TABLE pipe_t (id int PRIMARY KEY)");
    net::io_context ioc;
    auto out = run_coro(ioc, pipeline_run(db.admin_dsn()));
    CHECK(out.values == std::vector<std::string>{"one", "one+two"});
    CHECK(out.sqlstate == "23505");
    CHECK(out.completed == 1);
    CHECK(out.after == "0");  // the first insert rolled back with the rest; the setting ended
}

}  // namespace api_request_tx_test
