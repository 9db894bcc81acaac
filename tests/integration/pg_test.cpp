// The Postgres layer against a real server: typed results, errors by SQLSTATE, async queries,
// reconnect after a real restart.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>

#include "awp/core/pg.hpp"
#include "support/private_cluster.hpp"
#include "support/test_db.hpp"

namespace pg_test {

namespace net = boost::asio;
using namespace awp::core;
using awp::test::scoped_database;

namespace {
// Coroutines are free functions taking arguments by value (house rule; GCC 12 also rejects
// some coroutine lambdas inside TEST_CASE bodies).
template <class T>
T run_coro(net::io_context& ioc, net::awaitable<T> a) {
    auto f = net::co_spawn(ioc, std::move(a), net::use_future);
    ioc.restart();
    ioc.run();
    return f.get();
}

struct async_outcome {
    int count = 0;
    int big_length = 0;
    std::string error_state;
};

net::awaitable<async_outcome> async_queries(std::string dsn) {
    async_outcome out;
    auto c = co_await pg::connection::async_connect(dsn);
    auto r = co_await c.async_query("SELECT count(*)::int FROM generate_series(1, $1::int)", 1000);
    out.count = r.get<int>(0, 0);
    // A big parameter needs several writes to flush.
    std::string big(4 << 20, 'x');
    auto r2 = co_await c.async_query("SELECT length($1)", big);
    out.big_length = r2.get<int>(0, 0);
    try {
        co_await c.async_exec("SELECT 1/0");
    } catch (const pg::sql_error& e) {
        out.error_state = e.sqlstate();
    }
    co_return out;
}

// A connection with a gateway key, named statements on (a pool login reached directly): the
// key's statement and the hot statement both go out prepared, in one pipeline per transaction.
struct keyed_outcome {
    std::vector<std::string> seen;  // the gateway each statement acted as
    std::size_t prepared = 0;
    std::string error_state;
    std::string in_transaction;
};

net::awaitable<keyed_outcome> keyed_queries(std::string dsn, std::string key) {
    keyed_outcome out;
    auto c = co_await pg::connection::async_connect(dsn);
    c.set_gateway_key(key);
    for (int i = 0; i < 3; ++i) {
        auto r = co_await c.async_query_prepared(
            "SELECT coalesce(string_agg(id::text, ','), '') FROM public.gateways WHERE $1::int > 0",
            i + 1);
        out.seen.emplace_back(r.text(0, 0));
    }
    out.prepared = c.prepared_count();
    try {  // a failing statement rolls back its transaction; the next one presents the key again
        co_await c.async_query_prepared("SELECT 1 / $1::int", 0);
    } catch (const pg::sql_error& e) {
        out.error_state = e.sqlstate();
    }
    co_await pg::async_transaction(c, [&out](pg::connection& tx) -> net::awaitable<void> {
        auto r = co_await tx.async_query_prepared("SELECT public.awp_session_gateway()::text");
        out.in_transaction = std::string(r.text(0, 0));
    });
    co_return out;
}

struct prepared_outcome {
    std::vector<int> values;
    std::size_t prepared_after_three = 0;
    std::string server_side_count;
    std::string error_state;
    std::size_t prepared_after_error = 0;
    std::string after_type_change;
    std::size_t prepared_after_change = 0;
};

net::awaitable<prepared_outcome> prepared_queries(std::string dsn) {
    prepared_outcome out;
    auto c = co_await pg::connection::async_connect(dsn);
    co_await c.async_exec("CREATE TABLE pt (id int PRIMARY KEY, v int)");
    co_await c.async_exec("INSERT INTO pt VALUES (1, 10), (2, 20), (3, 30)");
    // One text, three executions: prepared once, each run with its own parameters.
    for (int id = 1; id <= 3; ++id) {
        auto r = co_await c.async_query_prepared("SELECT v FROM pt WHERE id = $1", id);
        out.values.push_back(r.get<int>(0, 0));
    }
    out.prepared_after_three = c.prepared_count();
    auto n = co_await c.async_exec(
        "SELECT count(*)::text FROM pg_prepared_statements WHERE statement LIKE '%FROM pt%'");
    out.server_side_count = std::string(n.text(0, 0));
    // An execution error is the server's typed error; a text that does not parse is not kept.
    try {
        co_await c.async_query_prepared("SELECT 1 / ($1::int - 1)", 1);
    } catch (const pg::sql_error& e) {
        out.error_state = e.sqlstate();
    }
    try {
        co_await c.async_query_prepared("SELEC nonsense");
    } catch (const pg::sql_error&) {
    }
    out.prepared_after_error = c.prepared_count();
    // A migration that changes what the statement returns: prepared afresh, not an error.
    co_await c.async_query_prepared("SELECT * FROM pt WHERE id = $1", 1);
    co_await c.async_exec("ALTER TABLE pt ADD COLUMN label text DEFAULT 'new'");
    auto r = co_await c.async_query_prepared("SELECT * FROM pt WHERE id = $1", 1);
    out.after_type_change = std::string(r.text(0, r.column("label")));
    out.prepared_after_change = c.prepared_count();
    co_return out;
}

// A connect raced against a timer that wins: the connect's coroutine is cancelled while its
// blocking connect runs on the pool.
net::awaitable<std::size_t> connect_or_timer(std::string dsn) {
    using namespace net::experimental::awaitable_operators;
    net::steady_timer t(co_await net::this_coro::executor, std::chrono::milliseconds(20));
    auto r = co_await (pg::connection::async_connect(dsn) || t.async_wait(net::use_awaitable));
    co_return r.index();
}

net::awaitable<int> session_int(pg::session& s, std::string sql, bool retry) {
    auto r = co_await s.exec(sql, {}, retry);
    co_return r.empty() ? 0 : r.get<int>(0, 0);
}
}  // namespace

TEST_CASE("results are typed, NULL reads as nullopt, parameters are never spliced", "[pg]") {
    scoped_database db;
    auto c = db.admin();
    auto r = c.exec("SELECT $1::int AS n, $2::text AS t, $3::text AS missing, $4::bool AS b",
                    {41, "it's; DROP TABLE x; --", std::nullopt, true});
    REQUIRE(r.size() == 1);
    CHECK(r.get<int>(0, "n") == 41);
    CHECK(r.get<std::string>(0, "t") == "it's; DROP TABLE x; --");
    CHECK_FALSE(r.get_optional<std::string>(0, "missing").has_value());
    CHECK(r.get<bool>(0, "b"));
    CHECK_THROWS_AS(r.get<std::string>(0, "missing"), awp::core::error);
    CHECK_THROWS_AS(r.column("nope"), awp::core::error);
    c.exec("CREATE TABLE t (id int PRIMARY KEY)");
    CHECK(c.exec("INSERT INTO t SELECT generate_series(1, 5)").affected() == 5);
}

TEST_CASE("server errors arrive typed by SQLSTATE with the server's message", "[pg]") {
    scoped_database db;
    auto c = db.admin();
    c.exec("CREATE TABLE u (id int PRIMARY KEY)");
    c.exec("INSERT INTO u VALUES (1)");
    try {
        c.exec("INSERT INTO u VALUES (1)");
        FAIL("duplicate accepted");
    } catch (const pg::unique_violation& e) {
        CHECK(e.sqlstate() == "23505");
        CHECK(std::string(e.what()).find("duplicate key") != std::string::npos);
    }
    try {
        c.exec(
            "DO $$ BEGIN RAISE EXCEPTION 'command x: cannot start' USING ERRCODE = 'AW001'; "
            "END $$");
        FAIL("no error");
    } catch (const pg::domain_error& e) {
        CHECK(e.sqlstate() == "AW001");
        CHECK(e.primary() == "command x: cannot start");
    }
    CHECK_THROWS_AS(c.exec("SELECT 'x'::int"), pg::sql_error);
    // The connection is still usable after errors.
    CHECK(c.exec("SELECT 1").get<int>(0, 0) == 1);
}

TEST_CASE("async queries run on the io thread without blocking it", "[pg]") {
    scoped_database db;
    net::io_context ioc;
    auto o = run_coro(ioc, async_queries(db.daemon_dsn()));
    CHECK(o.count == 1000);
    CHECK(o.big_length == 4 << 20);
    CHECK(o.error_state == "22012");
}

TEST_CASE("prepared statements run once-parsed, keep typed errors and survive a schema change",
          "[pg]") {
    scoped_database db;
    net::io_context ioc;
    auto o = run_coro(ioc, prepared_queries(db.admin_dsn()));
    CHECK(o.values == std::vector<int>{10, 20, 30});
    CHECK(o.prepared_after_three == 1);
    CHECK(o.server_side_count == "1");
    CHECK(o.error_state == "22012");
    CHECK(o.prepared_after_error ==
          2);  // the division is kept; the text that does not parse is not
    CHECK(o.after_type_change == "new");
    CHECK(o.prepared_after_change == 3);
}

TEST_CASE("with named statements off (DATABASE_PREPARED=off) nothing is prepared on the server",
          "[pg]") {
    scoped_database db;
    net::io_context ioc;
    awp::core::pg::set_named_statements(false);
    prepared_outcome o;
    try {
        o = run_coro(ioc, prepared_queries(db.admin_dsn()));
    } catch (...) {
        awp::core::pg::set_named_statements(true);
        throw;
    }
    awp::core::pg::set_named_statements(true);
    // The same answers and errors, from unnamed statements: what a transaction pooler carries.
    CHECK(o.values == std::vector<int>{10, 20, 30});
    CHECK(o.prepared_after_three == 0);
    CHECK(o.server_side_count == "0");
    CHECK(o.error_state == "22012");
    CHECK(o.after_type_change == "new");
    CHECK(o.prepared_after_change == 0);
}

TEST_CASE("a wrong password is a connection error that does not echo the password", "[pg]") {
    scoped_database db;
    auto dsn = db.daemon_dsn() + " password=not-the-password";
    try {
        pg::connection::connect(dsn);
        FAIL("connected with a wrong password");
    } catch (const pg::connection_error& e) {
        CHECK(std::string(e.what()).find("not-the-password") == std::string::npos);
    }
}

TEST_CASE("a session reconnects by itself after Postgres really restarts", "[pg][restart]") {
    awp::test::private_cluster pgc;
    net::io_context ioc;
    pg::session s(pgc.dsn(), "test");
    auto pid1 = run_coro(ioc, session_int(s, "SELECT pg_backend_pid()", false));
    pgc.restart();
    // The first statement after the restart finds the connection dead; an idempotent
    // statement is retried once on a new connection.
    auto pid2 = run_coro(ioc, session_int(s, "SELECT pg_backend_pid()", true));
    CHECK(pid1 != pid2);
}

TEST_CASE("a non-idempotent statement on a dead connection fails loudly", "[pg][restart]") {
    awp::test::private_cluster pgc;
    net::io_context ioc;
    pg::session s(pgc.dsn(), "test");
    run_coro(ioc, session_int(s, "CREATE TABLE x (v int)", false));
    pgc.restart();
    CHECK_THROWS_AS(run_coro(ioc, session_int(s, "INSERT INTO x VALUES (1)", false)),
                    pg::connection_error);
    // ...and the next call reconnects.
    auto n = run_coro(ioc, session_int(s, "SELECT count(*)::int FROM x", false));
    CHECK(n == 0);
}

TEST_CASE("a session waits with back-off while Postgres is down and connects when it is back",
          "[pg][restart]") {
    awp::test::private_cluster pgc;
    pgc.stop();
    net::io_context ioc;
    pg::session s(pgc.dsn(), "test");
    std::thread starter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(800));
        pgc.start();
    });
    const auto t0 = std::chrono::steady_clock::now();
    auto v = run_coro(ioc, session_int(s, "SELECT 7", false));
    starter.join();
    CHECK(v == 7);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(700));
}

TEST_CASE(
    "a connect cancelled while it runs (a daemon stopped during its first heartbeat) ends "
    "the caller, not the process",
    "[pg]") {
    // A server that accepts and says nothing for 300 ms, then hangs up: the connect blocks on
    // the pool meanwhile. Before the fix the cancelled connect threw from the pool thread after
    // it returned, and std::terminate ended the test binary (the scheduler crashed that way on a
    // SIGTERM right after start).
    net::io_context server_io;
    net::ip::tcp::acceptor acceptor(server_io, {net::ip::make_address("127.0.0.1"), 0});
    const auto port = acceptor.local_endpoint().port();
    std::thread server([&] {  // one attempt: sslmode and gssencmode disabled below
        boost::system::error_code ec;
        net::ip::tcp::socket s(server_io);
        acceptor.accept(s, ec);
        if (!ec) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    });
    net::io_context ioc;
    const auto winner = run_coro(
        ioc, connect_or_timer(
                 "host=127.0.0.1 port=" + std::to_string(port) +
                 " user=nobody dbname=none connect_timeout=5 sslmode=disable gssencmode=disable"));
    CHECK(winner == 1);  // the timer; the connect failed afterwards, on its own
    server.join();
}

TEST_CASE(
    "a connection with a gateway key presents it before each transaction, prepared statements "
    "and transactions included",
    "[pg][gateway]") {
    scoped_database db;
    auto admin = db.admin();
    const auto gw = std::string(
        admin
            .exec("INSERT INTO gateways (tenant_id, slug, label, status) VALUES "
                  "('00000000-0000-0000-0000-000000000000', $1, $1, 'ready') RETURNING id::text",
                  {awp::test::random_name("keyed")})
            .text(0, 0));
    const auto host = db.pool_login(gw);
    net::io_context ioc;
    auto o = run_coro(ioc, keyed_queries(host.dsn, host.key));
    // Each statement saw the key's gateway only (the template's default gateway is not it).
    CHECK(o.seen == std::vector<std::string>{gw, gw, gw});
    CHECK(o.prepared == 2);  // the key's statement and the read, each parsed once
    CHECK(o.error_state == "22012");
    CHECK(o.in_transaction == gw);
}

}  // namespace pg_test
