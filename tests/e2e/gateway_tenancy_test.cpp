// Gateways of two tenants, each with its own runner (issue 17, item 6): a second tenant cannot
// take the slug a first tenant's daemons select their gateway by, and nothing it registers
// later changes which commands the first tenant's runner serves (the runner resolves GATEWAY_ID
// once, to the gateway's id).
#include <signal.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/test_db.hpp"

namespace gateway_tenancy_test {

namespace fs = std::filesystem;
namespace pg = awp::core::pg;
using awp::test::child;
using namespace std::chrono_literals;

namespace {

const std::string kRunner = std::string(AWP_BIN_DIR) + "/awp-command-runner";

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    REQUIRE(r.size() == 1);
    return r.is_null(0, 0) ? std::string("<null>") : std::string(r.text(0, 0));
}

std::string sqlstate_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const pg::sql_error& e) {
        return e.sqlstate();
    }
    return "";
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit = 20s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (cond()) return true;
        std::this_thread::sleep_for(20ms);
    }
    return cond();
}

/// One gateway host of one tenant: its own state, fake runtime and secrets folders.
struct host {
    fs::path dir = fs::temp_directory_path() / awp::test::random_name("awp-gwt-host-");
    std::string instance = awp::test::random_name("runner-");
    host() { fs::create_directories(dir / "fake"); }
    ~host() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    std::unique_ptr<child> runner(const awp::test::scoped_database& db,
                                  const std::string& gateway) const {
        return std::make_unique<child>(
            std::vector<std::string>{kRunner},
            std::map<std::string, std::string>{
                {"DATABASE_URL", db.daemon_dsn()},
                {"GATEWAY_ID", gateway},
                {"TENANT_ID", ""},
                {"GATEWAY_TOKEN", ""},
                {"AWP_INSTANCE", instance},
                {"AWP_STATE_DIR", (dir / "state").string()},
                {"AGENT_RUNTIME", std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime"},
                {"FAKE_RUNTIME_DIR", (dir / "fake").string()},
                {"AWP_CHILD_ENV_ALLOW", "FAKE_*"},
                {"OPENCLAW_STATE_DIR", (dir / "home").string()},
                {"SECRETS_DIR", (dir / "secrets").string()},
                {"SAFETY_POLL", "0.5"},
                {"COMMAND_TIMEOUT", "60"},
                {"LOG_LEVEL", "info"}});
    }
};

struct two_tenants {
    awp::test::scoped_database db;
    pg::connection admin = db.admin();
    std::string tenant_a =
        one(admin, "INSERT INTO tenants (name, slug) VALUES ('A', $1) RETURNING id",
            {awp::test::random_name("ta")});
    std::string tenant_b =
        one(admin, "INSERT INTO tenants (name, slug) VALUES ('B', $1) RETURNING id",
            {awp::test::random_name("tb")});
    std::string slug = awp::test::random_name("edge");
    std::string gateway_a = one(admin,
                                "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, "
                                "$2, 'A edge', 'ready') RETURNING id",
                                {tenant_a, slug});

    /// A user session of `tenant` (role authenticated, as the api-gateway runs requests).
    pg::connection user(const std::string& tenant) {
        auto c = db.api();
        awp::test::as_user(c, tenant, "7d1c0a52-0000-4000-8000-00000000000b");
        return c;
    }
    std::string enqueue(const std::string& tenant, const std::string& gateway) {
        return one(admin,
                   "INSERT INTO agent_commands (tenant_id, gateway_id, action, status) VALUES "
                   "($1, $2, 'auth_list', 'pending') RETURNING id",
                   {tenant, gateway});
    }
    /// "<status> <leased_by>" of a command.
    std::string state(const std::string& id) {
        return one(admin,
                   "SELECT status::text || ' ' || coalesce(leased_by, '-') FROM agent_commands "
                   "WHERE id = $1",
                   {id});
    }
};

}  // namespace

TEST_CASE(
    "gateways: a second tenant cannot take a first tenant's slug, and its registrations never "
    "change which commands the first tenant's runner serves",
    "[gateways][tenancy][e2e]") {
    two_tenants w;
    host ha, hb;

    // Tenant A's runner selects its gateway by slug, without TENANT_ID: the usual configuration.
    auto ra = ha.runner(w.db, w.slug);
    INFO(ra->log());
    REQUIRE(ra->wait_for_log("\"msg\":\"ready\"", 20s));
    const auto a1 = w.enqueue(w.tenant_a, w.gateway_a);
    REQUIRE(eventually([&] { return w.state(a1) == "done " + ha.instance; }));

    // Tenant B squats the slug: directly under RLS, and through a registration token.
    auto ub = w.user(w.tenant_b);
    CHECK(sqlstate_of([&] {
              ub.exec("INSERT INTO gateways (slug, label) VALUES ($1, 'squat')", {w.slug});
          }) == "23505");
    const auto token =
        one(w.admin, "SELECT token FROM issue_gateway_token($1, 'squat')", {w.tenant_b});
    auto anon = w.db.api();
    awp::test::as_anon(anon);
    const auto reg = one(anon, "SELECT consume_gateway_token($1, $2, $2)::text", {token, w.slug});
    const auto gateway_b = one(w.admin, "SELECT ($1::jsonb ->> 'gateway_id')", {reg});
    const auto slug_b = one(w.admin, "SELECT ($1::jsonb ->> 'gateway_slug')", {reg});
    CHECK(slug_b != w.slug);
    CHECK(one(w.admin, "SELECT count(*) FROM gateways WHERE slug = $1", {w.slug}) == "1");
    CHECK(one(w.admin, "SELECT tenant_id::text FROM gateways WHERE id = $1", {gateway_b}) ==
          w.tenant_b);

    // B's runner selects its gateway by id (a uuid is a GATEWAY_ID like a slug).
    auto rb = hb.runner(w.db, gateway_b);
    INFO(rb->log());
    REQUIRE(rb->wait_for_log("\"msg\":\"ready\"", 20s));
    const auto b1 = w.enqueue(w.tenant_b, gateway_b);
    const auto a2 = w.enqueue(w.tenant_a, w.gateway_a);
    REQUIRE(eventually([&] { return w.state(b1) == "done " + hb.instance; }));
    REQUIRE(eventually([&] { return w.state(a2) == "done " + ha.instance; }));

    // A renames its gateway; B takes the freed slug and queues a command there (no runner of B
    // serves that gateway). A's runner, started with that slug, keeps serving A's gateway and
    // never leases B's command, although B's is older.
    auto ua = w.user(w.tenant_a);
    ua.exec("UPDATE gateways SET slug = $1 WHERE id = $2", {w.slug + "-moved", w.gateway_a});
    const auto squat =
        one(ub, "INSERT INTO gateways (slug, label) VALUES ($1, 'squat') RETURNING id", {w.slug});
    const auto b2 = w.enqueue(w.tenant_b, squat);
    const auto a3 = w.enqueue(w.tenant_a, w.gateway_a);
    REQUIRE(eventually([&] { return w.state(a3) == "done " + ha.instance; }));
    CHECK(w.state(b2) == "pending -");
    CHECK(ra->running());
    CHECK(rb->running());

    // Both runners only ever ran their own tenant's commands.
    CHECK(one(w.admin,
              "SELECT count(*) FROM agent_commands WHERE leased_by = $1 AND tenant_id <> $2",
              {ha.instance, w.tenant_a}) == "0");
    CHECK(one(w.admin,
              "SELECT count(*) FROM agent_commands WHERE leased_by = $1 AND tenant_id <> $2",
              {hb.instance, w.tenant_b}) == "0");

    ra->signal(SIGTERM);
    rb->signal(SIGTERM);
    CHECK(ra->wait(20s) == 0);
    CHECK(rb->wait(20s) == 0);
}

}  // namespace gateway_tenancy_test
