// core::heartbeat on a real database: the beater files the daemon's row, refreshes it with its
// details, resolves GATEWAY_ID once, beats at once when asked, rides out a database outage,
// and stops promptly even while the database is away.
#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "awp/core/heartbeat.hpp"
#include "awp/core/pg.hpp"
#include "support/private_cluster.hpp"
#include "support/run_until.hpp"
#include "support/test_db.hpp"

namespace heartbeat_test {

namespace net = boost::asio;
namespace pg = awp::core::pg;
namespace hb = awp::core::heartbeat;
using namespace std::chrono_literals;

using awp::test::run_until;

namespace {

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    REQUIRE(r.size() == 1);
    return r.is_null(0, 0) ? std::string("<null>") : std::string(r.text(0, 0));
}

hb::config test_config(const std::string& gateway, std::chrono::milliseconds interval) {
    hb::config c;
    c.gateway = gateway;
    c.daemon = "test-daemon";
    c.instance = "hb-1";
    c.version = "9.9.9";
    c.interval = interval;
    return c;
}

/// Runs b.run() on ioc; `done` turns true when it returns.
void spawn_run(net::io_context& ioc, hb::beater& b, bool& done) {
    net::co_spawn(ioc, b.run(), [&done](std::exception_ptr) { done = true; });
}

}  // namespace

TEST_CASE("the heartbeat files the daemon's row, refreshes it and writes its details",
          "[heartbeat][protocol]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto gateway_id = one(admin, "SELECT id FROM gateways WHERE slug = 'default'");
    net::io_context ioc;
    pg::session s(db.daemon_dsn(), "heartbeat");
    int counter = 0;
    hb::beater b(ioc.get_executor(), s, test_config("default", 100ms),
                 [&](hb::details& d) { d.add("counter", ++counter).add("mode", "test"); });
    std::vector<std::string> statuses;
    b.on_beat([&](const hb::outcome& o) { statuses.push_back(o.gateway_status); });
    bool done = false;
    spawn_run(ioc, b, done);

    REQUIRE(run_until(
        ioc, [&] { return b.beats() >= 1; }, 10s));
    CHECK(b.gateway_id() == gateway_id);
    CHECK(b.tenant_id() == "00000000-0000-0000-0000-000000000000");
    const std::string row =
        "SELECT daemon || ' ' || instance || ' ' || version || ' ' || (pid IS NOT NULL) "
        "FROM daemon_heartbeats WHERE gateway_id = $1 AND daemon = 'test-daemon'";
    CHECK(one(admin, row, {gateway_id}) == "test-daemon hb-1 9.9.9 true");
    const auto first_seen =
        one(admin, "SELECT last_seen_at FROM daemon_heartbeats WHERE daemon = 'test-daemon'");
    const auto started =
        one(admin, "SELECT started_at FROM daemon_heartbeats WHERE daemon = 'test-daemon'");
    CHECK(one(admin, "SELECT meta->>'mode' FROM daemon_heartbeats WHERE daemon = 'test-daemon'") ==
          "test");

    // Refreshed every interval, with fresh details; started_at stays.
    REQUIRE(run_until(
        ioc, [&] { return b.beats() >= 4; }, 10s));
    CHECK(one(admin,
              "SELECT last_seen_at > $1::timestamptz FROM daemon_heartbeats "
              "WHERE daemon = 'test-daemon'",
              {first_seen}) == "t");
    CHECK(std::stoi(one(admin,
                        "SELECT meta->>'counter' FROM daemon_heartbeats "
                        "WHERE daemon = 'test-daemon'")) >= 3);
    CHECK(one(admin, "SELECT started_at FROM daemon_heartbeats WHERE daemon = 'test-daemon'") ==
          started);
    CHECK(one(admin, "SELECT count(*) FROM daemon_heartbeats WHERE daemon = 'test-daemon'") == "1");
    CHECK(one(admin, "SELECT last_heartbeat_at IS NOT NULL FROM gateways WHERE id = $1",
              {gateway_id}) == "t");
    CHECK(!statuses.empty());
    CHECK(b.failures() == 0);

    b.stop();
    CHECK(run_until(
        ioc, [&] { return done; }, 2s));
}

TEST_CASE("beat_now beats before the interval, and stop ends the loop at once",
          "[heartbeat][protocol]") {
    awp::test::scoped_database db;
    net::io_context ioc;
    pg::session s(db.daemon_dsn(), "heartbeat");
    hb::beater b(ioc.get_executor(), s, test_config("default", 1h));
    bool done = false;
    spawn_run(ioc, b, done);
    REQUIRE(run_until(
        ioc, [&] { return b.beats() == 1; }, 10s));
    CHECK_FALSE(run_until(
        ioc, [&] { return b.beats() > 1; }, 300ms));  // the hour is long
    b.beat_now();
    CHECK(run_until(
        ioc, [&] { return b.beats() == 2; }, 5s));
    const auto t0 = std::chrono::steady_clock::now();
    b.stop();
    CHECK(run_until(
        ioc, [&] { return done; }, 2s));
    CHECK(std::chrono::steady_clock::now() - t0 < 1s);
}

TEST_CASE("an unknown gateway is a failed beat, retried until the gateway exists",
          "[heartbeat][protocol]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    net::io_context ioc;
    pg::session s(db.daemon_dsn(), "heartbeat");
    hb::beater b(ioc.get_executor(), s, test_config("later-gw", 100ms));

    // One beat on its own throws the domain error's type.
    std::optional<bool> not_found;
    net::co_spawn(ioc, b.beat(), [&](std::exception_ptr e, hb::outcome) {
        try {
            if (e) std::rethrow_exception(e);
            not_found = false;
        } catch (const pg::not_found&) {
            not_found = true;
        } catch (...) {
            not_found = false;
        }
    });
    REQUIRE(run_until(
        ioc, [&] { return not_found.has_value(); }, 10s));
    CHECK(*not_found);

    bool done = false;
    spawn_run(ioc, b, done);
    REQUIRE(run_until(
        ioc, [&] { return b.failures() >= 2; }, 10s));
    CHECK(b.beats() == 0);
    CHECK(b.gateway_id().empty());
    CHECK_FALSE(b.last_error().empty());
    const auto id =
        one(admin,
            "INSERT INTO gateways (tenant_id, slug, label) VALUES "
            "('00000000-0000-0000-0000-000000000000', 'later-gw', 'Later') RETURNING id");
    REQUIRE(run_until(
        ioc, [&] { return b.beats() >= 1; }, 10s));
    CHECK(b.gateway_id() == id);
    CHECK(b.last_error().empty());
    // Filed under the id from then on: a rename changes nothing.
    admin.exec("UPDATE gateways SET slug = 'renamed-gw' WHERE id = $1", {id});
    const auto beats = b.beats();
    CHECK(run_until(
        ioc, [&] { return b.beats() >= beats + 2; }, 10s));
    CHECK(b.last_error().empty());
    CHECK(one(admin, "SELECT count(*) FROM daemon_heartbeats WHERE gateway_id = $1", {id}) == "1");
    b.stop();
    CHECK(run_until(
        ioc, [&] { return done; }, 2s));
}

TEST_CASE("the heartbeat survives a database outage and stops promptly during one",
          "[heartbeat][protocol]") {
    awp::test::private_cluster pgc(true);
    auto query = [&](const std::string& sql, const pg::params& p = {}) {
        auto c = pg::connection::connect(pgc.dsn());
        return one(c, sql, p);
    };
    const std::string seen =
        "SELECT last_seen_at FROM daemon_heartbeats WHERE daemon = 'test-daemon'";
    net::io_context ioc;
    pg::session s(pgc.dsn(), "heartbeat");
    hb::beater b(ioc.get_executor(), s, test_config("default", 100ms));
    bool done = false;
    spawn_run(ioc, b, done);
    REQUIRE(run_until(
        ioc, [&] { return b.beats() >= 1; }, 10s));

    // While the server is down the beat waits for it (the session reconnects with back-off).
    pgc.stop();
    ioc.restart();
    ioc.run_for(1s);
    const auto beats = b.beats();
    ioc.restart();
    ioc.run_for(500ms);
    CHECK(b.beats() == beats);
    CHECK_FALSE(done);
    pgc.start();
    const auto before = query(seen);
    REQUIRE(run_until(
        ioc, [&] { return b.beats() >= beats + 2; }, 15s));
    CHECK(b.last_error().empty());
    CHECK(query("SELECT (" + seen + ") > $1::timestamptz", {before}) == "t");

    // Down again, the beat stuck reconnecting: stop() does not wait for the database.
    pgc.stop();
    ioc.restart();
    ioc.run_for(1s);
    const auto t0 = std::chrono::steady_clock::now();
    b.stop();
    CHECK(run_until(
        ioc, [&] { return done; }, 3s));
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

}  // namespace heartbeat_test
