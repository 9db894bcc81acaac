// The LISTEN loop against a real server: bursts drained, re-scan after reconnect, survival of
// a Postgres restart.
#include <catch2/catch.hpp>

#include <set>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/wake.hpp"
#include "support/private_cluster.hpp"
#include "support/run_until.hpp"
#include "support/test_db.hpp"

namespace notify_test {

namespace net = boost::asio;
using namespace awp::core;
using namespace std::chrono_literals;

using awp::test::run_until;

TEST_CASE("a burst of 1,000 notifications is drained, none lost", "[notify]") {
    awp::test::scoped_database db;
    net::io_context ioc;
    const auto channel = awp::test::random_name("ch_");
    std::set<std::string> seen;
    int rescans = 0;
    listener l(
        {db.daemon_dsn(), {channel}, 30s, "test", {}},
        [&](const pg::notification& n) { seen.insert(n.payload); },
        [&](rescan_reason) { ++rescans; });
    net::co_spawn(ioc, l.run(), net::detached);
    REQUIRE(run_until(
        ioc, [&] { return l.connected(); }, 5s));

    std::thread sender([&] {
        auto c = db.admin();
        // In one transaction: all 1,000 arrive together when it commits.
        c.exec("SELECT pg_notify($1, g::text) FROM generate_series(1, 1000) g", {channel});
    });
    sender.join();
    CHECK(run_until(
        ioc, [&] { return seen.size() == 1000; }, 10s));
    CHECK(seen.count("1") == 1);
    CHECK(seen.count("1000") == 1);
    CHECK(rescans == 1);  // the one after connecting
    l.stop();
    ioc.restart();
    ioc.run_for(100ms);
}

TEST_CASE("the listener survives a Postgres restart and re-scans for work missed meanwhile",
          "[notify][restart]") {
    awp::test::private_cluster pgc;
    {
        auto c = pg::connection::connect(pgc.dsn());
        c.exec("CREATE TABLE work (id int PRIMARY KEY, done bool NOT NULL DEFAULT false)");
    }
    net::io_context ioc;
    int notified = 0;
    std::vector<rescan_reason> rescans;
    listener l(
        {pgc.dsn(), {"work"}, 30s, "test", {}}, [&](const pg::notification&) { ++notified; },
        [&](rescan_reason r) { rescans.push_back(r); });
    net::co_spawn(ioc, l.run(), net::detached);
    REQUIRE(run_until(
        ioc, [&] { return l.connected(); }, 5s));
    REQUIRE(rescans.size() == 1);

    pgc.stop();
    CHECK(run_until(
        ioc, [&] { return !l.connected(); }, 5s));
    pgc.start();
    // Work inserted while the listener was away: its NOTIFY went to nobody.
    {
        auto c = pg::connection::connect(pgc.dsn());
        c.exec_script("INSERT INTO work VALUES (1); NOTIFY work");
    }
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(run_until(
        ioc, [&] { return l.connected() && rescans.size() == 2; }, 15s));
    CHECK(std::chrono::steady_clock::now() - t0 < 6s);
    CHECK(rescans.back() == rescan_reason::connected);
    CHECK(l.connects() == 2);

    // After the reconnect, notifications flow again.
    {
        auto c = pg::connection::connect(pgc.dsn());
        c.exec("NOTIFY work, 'x'");
    }
    CHECK(run_until(
        ioc, [&] { return notified >= 1; }, 5s));
    l.stop();
    ioc.restart();
    ioc.run_for(100ms);
}

TEST_CASE("the safety poll re-scans even when no notification arrives", "[notify]") {
    awp::test::scoped_database db;
    net::io_context ioc;
    int polls = 0;
    listener l(
        {db.daemon_dsn(), {"quiet"}, 150ms, "test", {}}, [](const pg::notification&) {},
        [&](rescan_reason r) {
            if (r == rescan_reason::safety_poll) ++polls;
        });
    net::co_spawn(ioc, l.run(), net::detached);
    CHECK(run_until(
        ioc, [&] { return polls >= 3; }, 3s));
    l.stop();
    ioc.restart();
    ioc.run_for(100ms);
}

TEST_CASE("stop() ends a connected listener cleanly: run() returns without an exception",
          "[notify]") {
    // stop() cancels the socket wait and the poll timer together; both branches of the wait
    // fail at once, which must not escape as an error (it logged one at every clean shutdown).
    awp::test::scoped_database db;
    for (int i = 0; i < 5; ++i) {
        net::io_context ioc;
        listener l(
            {db.daemon_dsn(), {"quiet"}, 30s, "test", {}}, [](const pg::notification&) {},
            [](rescan_reason) {});
        bool done = false;
        std::exception_ptr escaped;
        net::co_spawn(ioc, l.run(), [&](std::exception_ptr e) {
            escaped = e;
            done = true;
        });
        REQUIRE(run_until(
            ioc, [&] { return l.connected(); }, 5s));
        l.stop();
        REQUIRE(run_until(
            ioc, [&] { return done; }, 5s));
        std::string what;
        if (escaped) {
            try {
                std::rethrow_exception(escaped);
            } catch (const std::exception& e) {
                what = e.what();
            }
        }
        INFO(what);
        CHECK_FALSE(escaped);
    }
}

TEST_CASE("integration: the channel names of core::channels are the ones the SQL notifies",
          "[notify][protocol]") {
    // The daemons LISTEN on core::channels; the triggers pg_notify names spelled in SQL. Each
    // queue write must reach the channel the daemon listens on, and only that one.
    awp::test::scoped_database db;
    auto admin = db.admin();
    const std::string tenant = "00000000-0000-0000-0000-000000000000";
    const auto gw = std::string(
        admin
            .exec("INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, "
                  "'ready') RETURNING id::text",
                  {tenant, awp::test::random_name("gw")})
            .text(0, 0));
    const auto agent = std::string(
        admin
            .exec("INSERT INTO agents (tenant_id, name, slug, gateway_id, status) VALUES ($1, "
                  "'Ana', $2, $3, 'ready') RETURNING id::text",
                  {tenant, awp::test::random_name("ana"), gw})
            .text(0, 0));
    auto listener = db.daemon();
    const std::set<std::string> expected = {channels::commands(gw), channels::inbox(gw),
                                            channels::secrets(gw), std::string(channels::kEmbed)};
    for (const auto& ch : expected) listener.exec("LISTEN " + listener.quote_identifier(ch));

    admin.exec(
        "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) VALUES ($1, $2, "
        "'update', '{}')",
        {tenant, agent});
    admin.exec("SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'k1', 't', 's', '{}')",
               {tenant, agent});
    admin.exec(
        "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) VALUES ($1, $2, 'K', "
        "'enc:v1:aaaa.bbbb.cccc')",
        {tenant, gw});
    admin.exec(
        "INSERT INTO knowledge_items (tenant_id, kind, title, plain_text) VALUES ($1, "
        "'page', 'T', 'x')",
        {tenant});

    std::set<std::string> seen;
    for (int i = 0; i < 100 && seen.size() < expected.size(); ++i) {
        for (const auto& n : listener.drain_notifications()) seen.insert(n.channel);
        if (seen.size() < expected.size()) std::this_thread::sleep_for(20ms);
    }
    CHECK(seen == expected);
    CHECK(channels::commands(gw).size() <= 63);  // Postgres's identifier limit
}

TEST_CASE("integration: every per-gateway NOTIFY is also raised on awp_wake, as the relay reads it",
          "[notify][protocol][wake]") {
    // sql/functions/wake.sql: one relay per database LISTENs on awp_wake; each per-gateway
    // wake-up must reach it as "<channel> <payload>", in the same transaction.
    awp::test::scoped_database db;
    auto admin = db.admin();
    const std::string tenant = "00000000-0000-0000-0000-000000000000";
    const auto gw = std::string(
        admin
            .exec("INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, "
                  "'ready') RETURNING id::text",
                  {tenant, awp::test::random_name("gw")})
            .text(0, 0));
    const auto agent = std::string(
        admin
            .exec("INSERT INTO agents (tenant_id, name, slug, gateway_id, status) VALUES ($1, "
                  "'Ana', $2, $3, 'ready') RETURNING id::text",
                  {tenant, awp::test::random_name("ana"), gw})
            .text(0, 0));
    auto listener = db.daemon();
    listener.exec("LISTEN " + listener.quote_identifier(std::string(wake::kChannel)));
    // A user's write through the API fires the triggers, which run as their owner (sql/0034):
    // the wake-up is raised though the user may not call awp_notify_gateway itself.
    auto user = db.api();
    awp::test::as_user(user, tenant, "00000000-0000-0000-0000-0000000000aa");
    user.exec(
        "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) VALUES ($1, $2, "
        "'update', '{}')",
        {tenant, agent});
    admin.exec("SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'k1', 't', 's', '{}')",
               {tenant, agent});
    admin.exec(
        "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) VALUES ($1, $2, 'K', "
        "'enc:v1:aaaa.bbbb.cccc')",
        {tenant, gw});
    const std::set<std::string> expected = {channels::commands(gw), channels::inbox(gw),
                                            channels::secrets(gw)};
    std::set<std::string> seen;
    for (int i = 0; i < 100 && seen.size() < expected.size(); ++i) {
        for (const auto& n : listener.drain_notifications()) {
            const auto l = wake::parse_notify_payload(n.payload);
            INFO(n.payload);
            REQUIRE(l);
            seen.insert(l->channel);
        }
        if (seen.size() < expected.size()) std::this_thread::sleep_for(20ms);
    }
    CHECK(seen == expected);
}

}  // namespace notify_test
