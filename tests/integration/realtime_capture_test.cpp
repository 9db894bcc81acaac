// Realtime's replication reader against a real server: a live stream decoded into transactions,
// Postgres restarted and crashed under it, its own process restarted (the slot's confirmed LSN),
// a second reader waiting for the slot, a sink that blocks (back-pressure), wal_level=replica.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include "awp/core/pg.hpp"
#include "awp/realtime/capture.hpp"
#include "support/private_cluster.hpp"
#include "support/run_until.hpp"
#include "support/test_db.hpp"

namespace realtime_capture_test {

namespace net = boost::asio;
namespace pg = awp::core::pg;
namespace rt = awp::realtime;
using namespace std::chrono_literals;
using awp::test::run_until;
using awp::test::scoped_database;

namespace {

// One statement on a connection of its own: the reader's type lookups and its figures may run
// at the same time, as they do on the gateway's pool.
net::awaitable<pg::result> run_query(std::string dsn, std::string sql, pg::params p) {
    auto c = co_await pg::connection::async_connect(dsn);
    co_return co_await c.async_exec(std::move(sql), std::move(p));
}

rt::query_fn query_on(std::string dsn) {
    return [dsn](std::string sql, pg::params p) {
        return run_query(dsn, std::move(sql), std::move(p));
    };
}

// What a test sink saw, and a gate that holds it (back-pressure).
struct recorder {
    std::vector<rt::transaction> seen;
    bool gate_open = true;
    bool held = false;  // the sink is waiting at the gate
};

net::awaitable<void> record(std::shared_ptr<recorder> r, rt::transaction t) {
    if (!r->gate_open) {
        r->held = true;
        net::steady_timer wait(co_await net::this_coro::executor);
        while (!r->gate_open) {
            wait.expires_after(10ms);
            boost::system::error_code ec;
            co_await wait.async_wait(net::redirect_error(net::use_awaitable, ec));
        }
        r->held = false;
    }
    r->seen.push_back(std::move(t));
}

// A capture on its own io_context, as one gateway process runs it.
struct reader {
    reader(rt::capture_options opts, const std::string& query_dsn)
        : rec(std::make_shared<recorder>()),
          ioc(std::make_unique<net::io_context>()),
          cap(std::make_unique<rt::capture>(
              std::move(opts), [r = rec](rt::transaction t) { return record(r, std::move(t)); },
              query_on(query_dsn))) {
        net::co_spawn(*ioc, cap->run(), [done = done](std::exception_ptr e) {
            *done = true;
            if (e) std::rethrow_exception(e);  // run() must never throw: the test fails loudly
        });
    }
    ~reader() {
        if (cap && ioc && !*done) {  // a test that ended early: let run() end before the object
            cap->stop();
            run_until(
                *ioc, [d = done] { return *d; }, 10s);
        }
    }
    bool run(std::function<bool()> pred, std::chrono::milliseconds timeout = 15s) {
        return run_until(*ioc, std::move(pred), timeout);
    }
    void pump(std::chrono::milliseconds d) {
        run([] { return false; }, d);
    }
    rt::capture_status status() const { return cap->status(); }
    bool streaming() const { return status().state == "streaming"; }
    /// A clean stop: run() ends, what was decided is confirmed.
    void stop() {
        cap->stop();
        run([d = done] { return *d; }, 10s);
        REQUIRE(*done);
    }
    /// A crash at the slot's level: the io_context and its coroutines go without a word to the
    /// server (no final confirmation), the connection is closed as a dying process's is.
    void crash() {
        ioc.reset();
        cap.reset();
    }
    /// The `id` column of every change to `table`, in order.
    std::vector<int> ids(const std::string& table = "items") const {
        std::vector<int> out;
        for (const auto& t : rec->seen) {
            for (const auto& c : t.changes) {
                if (c.table != table) continue;
                const auto& cols = c.kind == rt::change_kind::remove ? c.old_keys : c.new_row;
                for (const auto& v : cols) {
                    if (v.name == "id" && v.text) out.push_back(std::stoi(*v.text));
                }
            }
        }
        return out;
    }
    std::uint64_t last_commit() const {
        return rec->seen.empty() ? 0 : rec->seen.back().commit_lsn;
    }

    std::shared_ptr<recorder> rec;
    std::shared_ptr<bool> done = std::make_shared<bool>(false);
    std::unique_ptr<net::io_context> ioc;
    std::unique_ptr<rt::capture> cap;
};

std::string realtime_dsn(const scoped_database& db) {
    return "host=127.0.0.1 port=" + awp::test::require_env("AWP_PG_PORT") +
           " user=awp_realtime password=" + awp::test::require_env("AWP_PG_REALTIME_PASSWORD") +
           " dbname=" + db.name();
}

// Drops the test's slot before its database goes (a database with a logical slot cannot be
// dropped), once the slot's last reader has let go of it.
struct slot_guard {
    std::string admin_dsn, slot;
    ~slot_guard() {
        try {
            auto c = pg::connection::connect(admin_dsn);
            for (int i = 0; i < 100; ++i) {
                const auto r =
                    c.exec("SELECT active FROM pg_replication_slots WHERE slot_name = $1", {slot});
                if (r.empty()) return;
                if (!r.get<bool>(0, 0)) {
                    c.exec("SELECT pg_drop_replication_slot($1)", {slot});
                    return;
                }
                std::this_thread::sleep_for(50ms);
            }
        } catch (...) {
        }
    }
};

rt::capture_options options(std::string dsn, std::string slot) {
    rt::capture_options o;
    o.dsn = std::move(dsn);
    o.slot = std::move(slot);
    o.confirm_delay = 50ms;
    o.standby_poll = 200ms;
    o.retry_cap = 500ms;
    o.stats_interval = 1h;  // the tests read the figures themselves (read_slot_figures)
    return o;
}

std::map<int, int> counts(const std::vector<int>& ids) {
    std::map<int, int> m;
    for (int id : ids) ++m[id];
    return m;
}

std::map<int, int> once_each(int from, int to) {
    std::map<int, int> m;
    for (int i = from; i <= to; ++i) m[i] = 1;
    return m;
}

void insert_ids(pg::connection& c, int from, int to) {
    for (int i = from; i <= to; ++i) {
        c.exec("INSERT INTO items (id) VALUES ($1)", {i});  // one transaction each
    }
}

std::uint64_t confirmed_flush(pg::connection& admin, const std::string& slot) {
    const auto r = admin.exec(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", {slot});
    REQUIRE(r.size() == 1);
    return rt::parse_lsn(r.get<std::string>(0, 0)).value_or(0);
}

long rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return 0;
}

const rt::column_value* column(const rt::change& c, const std::string& name, bool old = false) {
    for (const auto& v : old ? c.old_keys : c.new_row) {
        if (v.name == name) return &v;
    }
    return nullptr;
}

}  // namespace

TEST_CASE("a live stream arrives as the transactions committed, in order, typed and keyed",
          "[realtime][capture]") {
    scoped_database db;
    const auto slot = awp::test::random_name("awp_rt_");
    slot_guard guard{db.admin_dsn(), slot};
    auto admin = db.admin();
    admin.exec_script(R"SQL(
        CREATE TYPE rt_mood AS ENUM ('calm', 'busy');
        CREATE TABLE items (id int PRIMARY KEY, name text, tags text[], meta jsonb,
                            at timestamptz, mood rt_mood, uid uuid, note text);
    )SQL");
    reader r(options(realtime_dsn(db), slot), db.admin_dsn());
    REQUIRE(r.run([&] { return r.streaming(); }));

    admin.exec(
        "INSERT INTO items VALUES (1, 'one', '{a,b}', '{\"k\": 1}', now(), 'calm', "
        "'6f1c1a6e-8a59-4bd1-9a43-36a3d1f3c0de', NULL)");
    admin.exec("UPDATE items SET name = 'uno' WHERE id = 1");
    admin.exec("UPDATE items SET id = 2 WHERE id = 1");
    admin.exec_script(
        "BEGIN; INSERT INTO items (id) VALUES (3); INSERT INTO items (id) VALUES (4);"
        " DELETE FROM items WHERE id = 2; COMMIT;");
    admin.exec("TRUNCATE items");
    admin.exec("INSERT INTO items (id, name) VALUES (5, 'after the truncate')");
    REQUIRE(r.run([&] { return r.rec->seen.size() >= 5; }));
    r.pump(300ms);  // nothing more comes: the truncate is not a transaction of changes
    const auto& seen = r.rec->seen;
    REQUIRE(seen.size() == 5);

    const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
    std::uint64_t previous = 0;
    for (const auto& t : seen) {
        CHECK(t.commit_lsn > previous);
        previous = t.commit_lsn;
        CHECK(std::regex_match(t.commit_timestamp, iso));
        for (const auto& c : t.changes) {
            CHECK(c.schema == "public");
            CHECK(c.table == "items");
            CHECK(c.lsn == t.commit_lsn);
            CHECK(c.commit_timestamp == t.commit_timestamp);
        }
    }

    // The insert: every column, its type's name (an enum's too), NULL as nullopt, the key.
    REQUIRE(seen[0].changes.size() == 1);
    const auto& ins = seen[0].changes[0];
    CHECK(ins.kind == rt::change_kind::insert);
    CHECK(ins.old_keys.empty());
    REQUIRE(ins.new_row.size() == 8);
    const std::map<std::string, std::string> types{
        {"id", "int4"},        {"name", "text"},    {"tags", "_text"}, {"meta", "jsonb"},
        {"at", "timestamptz"}, {"mood", "rt_mood"}, {"uid", "uuid"},   {"note", "text"}};
    for (const auto& v : ins.new_row) {
        INFO(v.name);
        CHECK(v.type == types.at(v.name));
        CHECK(v.type_oid != 0);
        CHECK(v.key == (v.name == "id"));
    }
    CHECK(column(ins, "id")->text == "1");
    CHECK(column(ins, "tags")->text == "{a,b}");
    CHECK(column(ins, "meta")->text == "{\"k\": 1}");
    CHECK(column(ins, "mood")->text == "calm");
    CHECK(column(ins, "uid")->text == "6f1c1a6e-8a59-4bd1-9a43-36a3d1f3c0de");
    CHECK_FALSE(column(ins, "note")->text.has_value());

    // An update of the key carries the old key; one that keeps the key carries none.
    REQUIRE(seen[1].changes.size() == 1);
    CHECK(seen[1].changes[0].kind == rt::change_kind::update);
    CHECK(column(seen[1].changes[0], "name")->text == "uno");
    CHECK(seen[1].changes[0].old_keys.empty());
    REQUIRE(seen[2].changes.size() == 1);
    REQUIRE(seen[2].changes[0].old_keys.size() == 1);
    CHECK(column(seen[2].changes[0], "id", true)->text == "1");
    CHECK(column(seen[2].changes[0], "id")->text == "2");

    // One transaction's changes together and in order; a delete carries the key only.
    REQUIRE(seen[3].changes.size() == 3);
    CHECK(seen[3].changes[0].kind == rt::change_kind::insert);
    CHECK(seen[3].changes[1].kind == rt::change_kind::insert);
    const auto& del = seen[3].changes[2];
    CHECK(del.kind == rt::change_kind::remove);
    CHECK(del.new_row.empty());
    REQUIRE(del.old_keys.size() == 1);
    CHECK(column(del, "id", true)->text == "2");
    CHECK(r.ids() == std::vector<int>{1, 1, 2, 3, 4, 2, 5});

    const auto st = r.status();
    CHECK(st.state == "streaming");
    CHECK(st.reason.empty());
    CHECK(st.transactions == 5);
    CHECK(st.changes == 7);
    CHECK(st.truncates == 1);
    CHECK(st.connects == 1);
    CHECK(st.sink_failures == 0);

    // Decided is confirmed to the slot (within confirm_delay), and the slot is the reader's.
    REQUIRE(r.run([&] { return r.status().confirmed_lsn >= r.last_commit(); }, 5s));
    // Sent is not yet received: the server's walsender reads the status update when it gets to it.
    CHECK(r.run([&] { return confirmed_flush(admin, slot) >= r.last_commit(); }, 5s));
    const auto slots = admin.exec(
        "SELECT plugin, slot_type, active, temporary FROM pg_replication_slots "
        "WHERE slot_name = $1",
        {slot});
    REQUIRE(slots.size() == 1);
    CHECK(slots.get<std::string>(0, 0) == "pgoutput");
    CHECK(slots.get<std::string>(0, 1) == "logical");
    CHECK(slots.get<bool>(0, 2));
    CHECK_FALSE(slots.get<bool>(0, 3));  // persistent: it outlives the connection
    r.stop();
    CHECK(r.status().state == "off");
}

TEST_CASE(
    "a reader restarted on the slot resumes from the confirmed LSN: nothing lost, nothing "
    "confirmed twice, in-flight transactions again",
    "[realtime][capture][restart]") {
    scoped_database db;
    const auto slot = awp::test::random_name("awp_rt_");
    slot_guard guard{db.admin_dsn(), slot};
    auto admin = db.admin();
    admin.exec("CREATE TABLE items (id int PRIMARY KEY)");
    {
        reader a(options(realtime_dsn(db), slot), db.admin_dsn());
        REQUIRE(a.run([&] { return a.streaming(); }));
        insert_ids(admin, 1, 5);
        REQUIRE(a.run([&] { return a.ids().size() == 5; }));
        REQUIRE(a.run([&] { return a.status().confirmed_lsn >= a.last_commit(); }, 5s));
        REQUIRE(a.run([&] { return confirmed_flush(admin, slot) >= a.last_commit(); }, 5s));
        a.crash();  // a kill -9 of the gateway, as the slot sees it
    }
    insert_ids(admin, 6, 10);  // committed while no reader runs
    std::uint64_t in_flight_commit = 0;
    {
        reader b(options(realtime_dsn(db), slot), db.admin_dsn());
        REQUIRE(b.run([&] { return b.ids().size() >= 5; }));
        b.pump(300ms);
        CHECK(counts(b.ids()) == once_each(6, 10));  // 1-5 were confirmed: never again
        REQUIRE(b.run([&] { return b.status().confirmed_lsn >= b.last_commit(); }, 5s));
        b.crash();
    }
    {
        // A reader that dies after its sink decided a transaction but before it confirmed it:
        // that one comes again (at least once, never lost).
        auto slow = options(realtime_dsn(db), slot);
        slow.confirm_delay = 1h;
        slow.status_interval = 1h;
        reader c(slow, db.admin_dsn());
        REQUIRE(c.run([&] { return c.streaming(); }));
        insert_ids(admin, 11, 11);
        REQUIRE(c.run([&] { return c.ids().size() == 1; }));
        in_flight_commit = c.last_commit();
        CHECK(confirmed_flush(admin, slot) < in_flight_commit);
        c.crash();
    }
    reader d(options(realtime_dsn(db), slot), db.admin_dsn());
    REQUIRE(d.run([&] { return d.ids().size() >= 1; }));
    insert_ids(admin, 12, 12);
    REQUIRE(d.run([&] { return d.ids().size() >= 2; }));
    d.pump(300ms);
    CHECK(d.ids() == std::vector<int>{11, 12});
    CHECK(d.rec->seen.front().commit_lsn == in_flight_commit);
    d.stop();
    // A clean stop confirms what was decided: the next reader starts after 12.
    CHECK(confirmed_flush(admin, slot) >= d.last_commit());
}

TEST_CASE("a second reader on the same slot waits and takes over when the first goes",
          "[realtime][capture]") {
    scoped_database db;
    const auto slot = awp::test::random_name("awp_rt_");
    slot_guard guard{db.admin_dsn(), slot};
    auto admin = db.admin();
    admin.exec("CREATE TABLE items (id int PRIMARY KEY)");
    reader a(options(realtime_dsn(db), slot), db.admin_dsn());
    REQUIRE(a.run([&] { return a.streaming(); }));
    reader b(options(realtime_dsn(db), slot), db.admin_dsn());
    REQUIRE(b.run([&] { return b.status().state == "standby"; }));
    CHECK_THAT(b.status().reason, Catch::Contains("in use"));
    CHECK(a.streaming());

    insert_ids(admin, 1, 3);
    REQUIRE(a.run([&] { return a.ids().size() == 3; }));
    b.pump(500ms);  // the waiting reader reads nothing
    CHECK(b.ids().empty());
    CHECK(b.status().state == "standby");

    a.stop();
    insert_ids(admin, 4, 6);  // committed between the two
    REQUIRE(b.run([&] { return b.streaming(); }, 10s));
    insert_ids(admin, 7, 8);
    REQUIRE(b.run([&] { return b.ids().size() >= 5; }));
    b.pump(300ms);
    CHECK(counts(b.ids()) == once_each(4, 8));
    b.stop();
}

TEST_CASE(
    "a sink that blocks stops the reading: the slot holds the rest, memory stays bounded, "
    "the connection stays up, and reading resumes",
    "[realtime][capture][backpressure]") {
    scoped_database db;
    const auto slot = awp::test::random_name("awp_rt_");
    slot_guard guard{db.admin_dsn(), slot};
    auto admin = db.admin();
    admin.exec("CREATE TABLE items (id int PRIMARY KEY, body text)");
    // The server drops a reader silent for 2 s: the reader must keep reporting while it waits.
    auto opts = options(realtime_dsn(db) + " options='-c wal_sender_timeout=2000'", slot);
    opts.status_interval = 500ms;
    reader r(opts, db.admin_dsn());
    REQUIRE(r.run([&] { return r.streaming(); }));
    r.rec->gate_open = false;
    insert_ids(admin, 0, 0);
    REQUIRE(r.run([&] { return r.rec->held; }));
    CHECK(r.status().in_sink);

    // About 40 MB of changes behind the one the sink holds.
    const long rss_before = rss_kib();
    constexpr int kRows = 600;
    // From another thread: the reader's io thread (this one) keeps running meanwhile.
    std::atomic<bool> written{false};
    std::string write_error;
    std::thread writer([&] {
        try {
            auto w = db.admin();
            for (int i = 1; i <= kRows; ++i) {
                w.exec(
                    "INSERT INTO items SELECT $1, string_agg(md5(random()::text), '') "
                    "FROM generate_series(1, 2000)",
                    {i});
            }
        } catch (const std::exception& e) {
            write_error = e.what();
        }
        written = true;
    });
    const bool all_written = r.run([&] { return written.load(); }, 120s);
    writer.join();
    REQUIRE(all_written);
    REQUIRE(write_error.empty());
    r.pump(4s);  // twice the server's timeout
    const long rss_held = rss_kib();
    CHECK(r.rec->held);
    CHECK(r.rec->seen.empty());
    const auto held = r.status();
    CHECK(held.in_sink);
    CHECK(held.sink_wait_s > 3.0);
    CHECK(held.connects == 1);  // the connection stayed up while the sink held it
    CHECK(held.state == "streaming");
    // The gateway did not take the backlog in: the slot holds it.
    CHECK(rss_held - rss_before < 16 * 1024);
    net::io_context side;
    auto figures =
        net::co_spawn(side, rt::read_slot_figures(query_on(db.admin_dsn()), slot), net::use_future);
    side.run();
    const auto f = figures.get();
    CHECK(f.exists);
    CHECK(f.active);
    CHECK(f.wal_status == "reserved");
    CHECK(f.lag_bytes > 20 * 1024 * 1024);
    CHECK(f.max_slot_wal_keep_size == "1GB");
    CHECK(f.wal_level == "logical");

    r.rec->gate_open = true;
    REQUIRE(r.run([&] { return r.rec->seen.size() == kRows + 1; }, 60s));
    CHECK(counts(r.ids()) == once_each(0, kRows));
    CHECK_FALSE(r.status().in_sink);
    REQUIRE(r.run([&] { return r.status().confirmed_lsn >= r.last_commit(); }, 5s));
    // The slot let the backlog go: its confirmed position is past the last row. (Not its lag:
    // that counts the WAL of the whole cluster, which other databases' writers grow meanwhile.)
    REQUIRE(r.run([&] { return confirmed_flush(admin, slot) >= r.last_commit(); }, 5s));
    r.stop();
}

TEST_CASE("a login without REPLICATION: realtime says why it is off, nothing breaks",
          "[realtime][capture]") {
    scoped_database db;
    reader r(options(db.api_dsn(), awp::test::random_name("awp_rt_")), db.admin_dsn());
    REQUIRE(r.run([&] { return r.status().state == "unavailable"; }));
    CHECK_THAT(r.status().reason, Catch::Contains("REPLICATION"));
    CHECK(r.status().connects == 0);
    r.stop();
}

TEST_CASE("a connection string that does not parse: realtime is off, the string is not repeated",
          "[realtime][capture]") {
    reader r(options("host=127.0.0.1 password=s3cret-p4ss 'broken", "awp_rt_x"), "dbname=none");
    REQUIRE(r.run([&] { return r.status().state == "unavailable"; }));
    CHECK_THAT(r.status().reason, Catch::Contains("does not parse"));
    CHECK_THAT(rt::status_json(r.status()), !Catch::Contains("s3cret"));
    r.stop();
}

TEST_CASE(
    "Postgres restarted and crashed under the reader: it resumes, loses nothing committed "
    "after, repeats nothing confirmed",
    "[realtime][capture][restart]") {
    awp::test::private_cluster pgc;
    {
        auto c = pg::connection::connect(pgc.dsn());
        c.exec("ALTER SYSTEM SET wal_level = logical");
    }
    pgc.restart();
    auto admin = pg::connection::connect(pgc.dsn());
    admin.exec_script(
        "CREATE PUBLICATION awp_realtime FOR ALL TABLES;"
        "CREATE TABLE items (id int PRIMARY KEY);");
    reader r(options(pgc.dsn(), "awp_realtime"), pgc.dsn());
    REQUIRE(r.run([&] { return r.streaming(); }));
    insert_ids(admin, 1, 10);
    REQUIRE(r.run([&] { return r.ids().size() == 10; }));
    REQUIRE(r.run([&] { return r.status().confirmed_lsn >= r.last_commit(); }, 5s));

    SECTION("a restart (fast shutdown)") { pgc.restart(); }
    SECTION("a crash (the postmaster killed -9)") {
        pgc.kill9();
        pgc.start();
    }
    // Committed after Postgres is back, before the reader is.
    admin = pg::connection::connect(pgc.dsn());
    insert_ids(admin, 11, 15);
    REQUIRE(r.run([&] { return r.streaming() && r.status().connects == 2; }, 20s));
    insert_ids(admin, 16, 20);
    REQUIRE(r.run([&] { return r.ids().size() >= 20; }, 20s));
    r.pump(300ms);
    CHECK(counts(r.ids()) == once_each(1, 20));
    CHECK(r.status().state == "streaming");
    r.stop();
}

TEST_CASE(
    "wal_level=replica: realtime is off with the reason, the slot's figures say so, "
    "nothing crashes",
    "[realtime][capture]") {
    awp::test::private_cluster pgc;  // initdb's default: replica
    auto admin = pg::connection::connect(pgc.dsn());
    admin.exec("CREATE PUBLICATION awp_realtime FOR ALL TABLES");
    reader r(options(pgc.dsn(), "awp_realtime"), pgc.dsn());
    REQUIRE(r.run([&] { return r.status().state == "unavailable"; }));
    const auto st = r.status();
    CHECK_THAT(st.reason, Catch::Contains("wal_level is replica"));
    CHECK(st.connects == 0);
    const auto json = rt::status_json(st);
    CHECK_THAT(json, Catch::Contains("\"state\":\"unavailable\""));
    CHECK_THAT(json, Catch::Contains("wal_level"));
    net::io_context side;
    auto figures = net::co_spawn(side, rt::read_slot_figures(query_on(pgc.dsn()), "awp_realtime"),
                                 net::use_future);
    side.run();
    const auto f = figures.get();
    CHECK(f.wal_level == "replica");
    CHECK_FALSE(f.exists);
    CHECK(f.lag_bytes == 0);
    r.stop();
    CHECK(r.status().state == "off");
}

}  // namespace realtime_capture_test
