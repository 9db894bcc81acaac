// The wake relay against a real server: awp-wake's relay (apps/wake) and core::listener taking
// its wake-ups from it (http::relay_opener), with gateway logins made by awp_gateway_role.
#include <catch2/catch.hpp>

#include <set>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/wake.hpp"
#include "awp/http/client.hpp"
#include "awp/http/wake.hpp"
#include "support/run_until.hpp"
#include "support/test_db.hpp"
#include "wake/relay.hpp"

namespace wake_relay_test {

namespace net = boost::asio;
namespace pg = awp::core::pg;
using namespace awp::core;
using namespace std::chrono_literals;

using awp::test::run_until;

namespace {

constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";

struct test_gateway {
    std::string id;
    std::string agent;
    std::string dsn;  // its own login, or the pool login with `key`
    std::string key;  // its gateway key (on the pool login), else empty
};

test_gateway make_gateway(awp::test::scoped_database& db) {
    auto admin = db.admin();
    test_gateway g;
    g.id = std::string(admin
                           .exec("INSERT INTO gateways (tenant_id, slug, label, status) VALUES "
                                 "($1, $2, $2, 'ready') RETURNING id::text",
                                 {kTenant, awp::test::random_name("gw")})
                           .text(0, 0));
    g.agent =
        std::string(admin
                        .exec("INSERT INTO agents (tenant_id, name, slug, gateway_id, "
                              "status) VALUES ($1, 'Ana', $2, $3, 'ready') RETURNING id::text",
                              {kTenant, awp::test::random_name("ana"), g.id})
                        .text(0, 0));
    g.dsn = db.gateway_dsn(g.id);
    return g;
}

void insert_command(awp::test::scoped_database& db, const test_gateway& g) {
    db.admin().exec(
        "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) VALUES ($1, $2, "
        "'update', '{}')",
        {kTenant, g.agent});
}

// A relay on a free port, run on `ioc`.
struct running_relay {
    running_relay(net::io_context& ioc, const awp::test::scoped_database& db,
                  unsigned short port = 0)
        : svc(ioc, [&] {
              awp::wake::config c;
              c.common.database_url = db.daemon_dsn();
              c.port = port;
              c.login_cache_s = 0;  // every stream asks Postgres: the tests change passwords
              return c;
          }()) {
        net::co_spawn(ioc, svc.run(), [this](std::exception_ptr) { done = true; });
        REQUIRE(run_until(
            ioc, [&] { return svc.listening() && svc.port() != 0; }, 10s));
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(svc.port()); }
    void stop(net::io_context& ioc) {
        svc.request_stop();
        REQUIRE(run_until(
            ioc, [&] { return done; }, 10s));
    }
    awp::wake::relay svc;
    bool done = false;
};

// A listener of one gateway's channels, through the relay.
struct relay_listener {
    relay_listener(net::io_context& ioc, const std::string& url, const test_gateway& g,
                   std::vector<std::string> channels)
        : l(
              [&] {
                  listener_options o;
                  o.channels = std::move(channels);
                  o.safety_poll = 600s;  // wake-ups, not polls, are under test
                  o.name = "test-relay";
                  daemon::wake_options w;
                  w.url = url;
                  awp::http::use_wake_source(o, w, g.dsn);
                  if (!g.key.empty()) {  // as a daemon with GATEWAY_KEY sets it up
                      o.relay = awp::http::relay_opener(url, pg::dsn_login(g.dsn), "", g.key);
                  }
                  return o;
              }(),
              [this](const pg::notification& n) { seen.push_back(n); },
              [this](rescan_reason r) {
                  if (r == rescan_reason::connected) ++rescans;
              }) {
        net::co_spawn(ioc, l.run(), [this](std::exception_ptr) { done = true; });
    }
    void stop(net::io_context& ioc) {
        l.stop();
        REQUIRE(run_until(
            ioc, [&] { return done; }, 10s));
    }
    listener l;
    std::vector<pg::notification> seen;
    int rescans = 0;
    bool done = false;
};

// One GET /v1/wake with these credentials: the status the relay answers.
unsigned status_for(net::io_context& ioc, const std::string& url, const std::string& user,
                    const std::string& password, const std::string& key = {}) {
    unsigned status = 0;
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            try {
                auto open = awp::http::relay_opener(url, {user, password}, "", key);
                auto s = co_await open();
                status = 200;
            } catch (const std::exception& e) {
                const std::string what = e.what();
                for (const unsigned code : {401u, 403u, 429u, 503u}) {
                    if (what.find("answered " + std::to_string(code)) != std::string::npos) {
                        status = code;
                    }
                }
                if (status == 0) status = 1;
            }
        },
        net::detached);
    run_until(
        ioc, [&] { return status != 0; }, 10s);
    return status;
}

}  // namespace

TEST_CASE("the relay hands each gateway its own wake-ups and no other's", "[wake][relay]") {
    awp::test::scoped_database db;
    const test_gateway a = make_gateway(db), b = make_gateway(db);
    net::io_context ioc;
    running_relay relay(ioc, db);
    relay_listener la(ioc, relay.url(), a, {channels::commands(a.id), channels::inbox(a.id)});
    relay_listener lb(ioc, relay.url(), b, {channels::commands(b.id), channels::inbox(b.id)});
    REQUIRE(run_until(
        ioc, [&] { return la.l.connected() && lb.l.connected(); }, 10s));
    CHECK(la.rescans == 1);  // a new stream looks once
    CHECK(relay.svc.streams() == 2);

    insert_command(db, a);
    REQUIRE(run_until(
        ioc, [&] { return !la.seen.empty(); }, 5s));
    CHECK(la.seen.front().channel == channels::commands(a.id));
    CHECK(wake::gateway_hex(la.seen.front().payload).has_value());  // the command id

    db.admin().exec("SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'k1', 't', 's', '{}')",
                    {kTenant, b.agent});
    REQUIRE(run_until(
        ioc, [&] { return !lb.seen.empty(); }, 5s));
    CHECK(lb.seen.front().channel == channels::inbox(b.id));
    ioc.restart();
    ioc.run_for(300ms);
    // Neither saw the other's.
    for (const auto& n : la.seen)
        CHECK(n.channel.find(wake::gateway_hex(a.id).value()) != std::string::npos);
    for (const auto& n : lb.seen)
        CHECK(n.channel.find(wake::gateway_hex(b.id).value()) != std::string::npos);
    CHECK(la.seen.size() == 1);
    CHECK(lb.seen.size() == 1);

    la.stop(ioc);
    lb.stop(ioc);
    relay.stop(ioc);
}

TEST_CASE(
    "the relay refuses a wrong password, a login that is no gateway's and "
    "anything but GET /v1/wake",
    "[wake][relay][security]") {
    awp::test::scoped_database db;
    const test_gateway a = make_gateway(db);
    net::io_context ioc;
    running_relay relay(ioc, db);
    const auto login = pg::dsn_login(a.dsn);
    CHECK(status_for(ioc, relay.url(), login.user, login.password) == 200);
    CHECK(status_for(ioc, relay.url(), login.user, login.password + "x") == 401);
    CHECK(status_for(ioc, relay.url(), "no_such_role", "x") == 401);
    CHECK(status_for(ioc, relay.url(), login.user, "") == 401);
    // awp_daemon logs in fine but is no gateway: it gets no gateway's wake-ups.
    const auto daemon_login = pg::dsn_login(db.daemon_dsn());
    CHECK(status_for(ioc, relay.url(), daemon_login.user, daemon_login.password) == 403);

    // Headers that are not Basic credentials, other paths and methods.
    auto fetch = [&](std::string method, std::string path, std::string authorization) {
        awp::http::response res;
        bool got = false;
        net::co_spawn(
            ioc,
            [&]() -> net::awaitable<void> {
                awp::http::client_request r;
                r.method = method;
                r.url = relay.url() + path;
                if (!authorization.empty()) r.header.add("Authorization", authorization);
                try {
                    res = co_await awp::http::fetch(r);
                } catch (const std::exception& e) {
                    res.status = 0;
                    res.body = e.what();
                }
                got = true;
            },
            net::detached);
        REQUIRE(run_until(
            ioc, [&] { return got; }, 10s));
        return res;
    };
    CHECK(fetch("GET", "/v1/wake", "").status == 401);
    CHECK(fetch("GET", "/v1/wake", "Basic !!!notbase64").status == 401);
    CHECK(fetch("GET", "/v1/wake", "Bearer abc").status == 401);
    const auto long_header = fetch("GET", "/v1/wake", "Basic " + std::string(2000, 'A'));
    INFO(long_header.body);
    CHECK(long_header.status == 401);
    CHECK(fetch("POST", "/v1/wake", "").status == 405);
    CHECK(fetch("GET", "/v1/wake/../healthz", "").status == 404);
    const auto health = fetch("GET", "/healthz", "");
    CHECK(health.status == 200);
    CHECK(health.body.find("\"listening\":true") != std::string::npos);
    CHECK(relay.svc.streams() == 0);
    relay.stop(ioc);
}

TEST_CASE(
    "the relay gives a host on the pool login its key's gateway's wake-ups, and refuses a wrong, "
    "rotated or malformed key and a key on a gateway's own login",
    "[wake][relay][security]") {
    awp::test::scoped_database db;
    test_gateway a = make_gateway(db), b = make_gateway(db);
    const auto pool_a = db.pool_login(a.id), pool_b = db.pool_login(b.id);
    test_gateway a_pooled = a, b_pooled = b;
    a_pooled.dsn = pool_a.dsn;
    a_pooled.key = pool_a.key;
    b_pooled.dsn = pool_b.dsn;
    b_pooled.key = pool_b.key;
    net::io_context ioc;
    running_relay relay(ioc, db);
    const auto pool = pg::dsn_login(pool_a.dsn);
    const auto own = pg::dsn_login(a.dsn);
    CHECK(status_for(ioc, relay.url(), pool.user, pool.password, pool_a.key) == 200);
    // The pool login alone is no gateway's.
    CHECK(status_for(ioc, relay.url(), pool.user, pool.password) == 403);
    // A's id with another secret; a malformed key; the pool password wrong.
    CHECK(status_for(ioc, relay.url(), pool.user, pool.password,
                     pool_a.key.substr(0, 38) + std::string(43, 'A')) == 401);
    CHECK(status_for(ioc, relay.url(), pool.user, pool.password, "awpk_nope") == 401);
    CHECK(status_for(ioc, relay.url(), pool.user, pool.password + "x", pool_a.key) == 401);
    // A gateway's own login claims nothing, not even with a valid key of another gateway.
    CHECK(status_for(ioc, relay.url(), own.user, own.password, pool_b.key) == 401);

    // Each pooled host gets its own gateway's wake-ups only.
    relay_listener la(ioc, relay.url(), a_pooled, {channels::commands(a.id)});
    relay_listener lb(ioc, relay.url(), b_pooled, {channels::commands(b.id)});
    REQUIRE(run_until(
        ioc, [&] { return la.l.connected() && lb.l.connected(); }, 10s));
    insert_command(db, a);
    REQUIRE(run_until(
        ioc, [&] { return !la.seen.empty(); }, 5s));
    CHECK(la.seen.front().channel == channels::commands(a.id));
    ioc.restart();
    ioc.run_for(300ms);
    CHECK(lb.seen.empty());
    la.stop(ioc);
    lb.stop(ioc);

    // A rotated key stops opening streams (the relay's cache is off in these tests).
    db.admin().exec("SELECT * FROM awp_gateway_key($1, sha256('rotated'::bytea))", {a.id});
    CHECK(status_for(ioc, relay.url(), pool.user, pool.password, pool_a.key) == 401);
    relay.stop(ioc);
}

TEST_CASE("a relay that lost its LISTEN, or restarted, makes every host look again",
          "[wake][relay]") {
    awp::test::scoped_database db;
    const test_gateway a = make_gateway(db);
    net::io_context ioc;
    auto relay = std::make_unique<running_relay>(ioc, db);
    const unsigned short port = relay->svc.port();
    relay_listener la(ioc, relay->url(), a, {channels::commands(a.id)});
    REQUIRE(run_until(
        ioc, [&] { return la.l.connected() && la.rescans == 1; }, 10s));

    // The relay's own LISTEN session dies: what was notified meanwhile is lost, so the stream
    // says rescan (the host's stream itself stays up).
    db.admin().exec(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
        "AND query LIKE 'LISTEN%awp_wake%'");
    REQUIRE(run_until(
        ioc, [&] { return la.rescans >= 2; }, 15s));
    CHECK(la.l.connects() == 1);
    insert_command(db, a);
    REQUIRE(run_until(
        ioc, [&] { return la.seen.size() == 1; }, 5s));

    // The relay restarts on the same port: the host reconnects and looks.
    relay->stop(ioc);
    relay.reset();
    relay = std::make_unique<running_relay>(ioc, db, port);
    REQUIRE(run_until(
        ioc, [&] { return la.l.connects() == 2 && la.rescans >= 3; }, 15s));
    insert_command(db, a);
    REQUIRE(run_until(
        ioc, [&] { return la.seen.size() == 2; }, 5s));
    la.stop(ioc);
    relay->stop(ioc);
}

TEST_CASE("what is NOTIFYed on awp_wake is checked like outside bytes", "[wake][relay][security]") {
    // Anyone who may log in may NOTIFY any channel: the relay forwards only well-formed
    // wake-ups of per-gateway channels, never a second line or another word.
    awp::test::scoped_database db;
    const test_gateway a = make_gateway(db);
    net::io_context ioc;
    running_relay relay(ioc, db);
    relay_listener la(ioc, relay.url(), a, {channels::commands(a.id), channels::secrets(a.id)});
    REQUIRE(run_until(
        ioc, [&] { return la.l.connected(); }, 10s));
    const std::string ch = channels::commands(a.id);
    auto gw = pg::connection::connect(a.dsn);  // a hostile gateway host's own login
    for (const std::string& bad : std::vector<std::string>{
             ch + " x", ch + " 00000000-0000-0000-0000-000000000000\nrescan", ch, "awp_embed ",
             ch + "  ", "awp_commands_" + std::string(32, 'G') + " ",
             ch + " 00000000-0000-0000-0000-00000000000A", "ready " + a.id, "rescan", "ping",
             std::string(300, 'a')}) {
        gw.exec("SELECT pg_notify('awp_wake', $1)", {bad});
    }
    gw.exec("SELECT pg_notify('awp_wake', $1)", {channels::secrets(a.id) + " "});
    REQUIRE(run_until(
        ioc, [&] { return !la.seen.empty(); }, 5s));
    ioc.restart();
    ioc.run_for(200ms);
    REQUIRE(la.seen.size() == 1);
    CHECK(la.seen.front().channel == channels::secrets(a.id));
    CHECK(la.seen.front().payload.empty());
    CHECK(la.rescans == 1);
    la.stop(ioc);
    relay.stop(ioc);
}

}  // namespace wake_relay_test
