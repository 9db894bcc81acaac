// Integration tests of the runner's start-up and housekeeping parts on their own, against a real
// database: registration (GATEWAY_ID, the stored file, a token), the commands a dead runner
// left, the heartbeat row and the secrets sync.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "../unit/runner_test_util.hpp"
#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "housekeeping.hpp"
#include "registration.hpp"
#include "runner_harness.hpp"

namespace runner_startup_test {

using namespace awp::runner_test;
namespace runner = awp::runner;

namespace {

std::string host_name() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

/// The pid of a process that has ended (forked, exited, reaped).
pid_t dead_pid() {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return pid;
}

std::string held_command(pg::connection& admin, const std::string& gateway_id,
                         const std::string& action, const std::string& status,
                         const std::string& holder, const std::string& payload = "{}") {
    // Made pending (the only status a new command may have), then held as a runner holds it.
    const auto id = enqueue(admin, gateway_id, action, payload);
    admin.exec(
        "UPDATE agent_commands SET status = $2::command_status, leased_by = $3, lease_token = "
        "gen_random_uuid(), leased_at = now(), lease_expires_at = now() + interval '5 minutes', "
        "started_at = CASE WHEN $2 = 'running' THEN now() END WHERE id = $1",
        {id, status, holder});
    return id;
}

}  // namespace

TEST_CASE("runner start-up: the gateway comes from GATEWAY_ID, the stored file or a token",
          "[runner]") {
    awp::test::scoped_database db;
    auto d = db.daemon();
    fake_runtime_box box;
    auto cfg = box.config();
    cfg.database_url = db.daemon_dsn();
    net::io_context ioc;
    pg::session s(cfg.database_url, "test");
    const bool stopping = false;

    cfg.gateway_slug = "edge-7";
    CHECK(run_to_end(ioc, runner::register_gateway(s, cfg, stopping)) == "edge-7");

    cfg.gateway_slug.clear();
    CHECK_THROWS_WITH(run_to_end(ioc, runner::register_gateway(s, cfg, stopping)),
                      Catch::Contains("GATEWAY_ID is not set and no registration is stored in"));

    cfg.gateway_token = one(d, "SELECT token FROM issue_gateway_token(NULL, 'Lab Box', 3600)");
    const std::string id = run_to_end(ioc, runner::register_gateway(s, cfg, stopping));
    CHECK(awp::core::is_valid_uuid(id));
    // Stored: the next start needs no token (a used one would be refused).
    CHECK(run_to_end(ioc, runner::register_gateway(s, cfg, stopping)) == id);
    const auto gw = run_to_end(ioc, runner::resolve_gateway(s, cfg, id, stopping));
    REQUIRE(gw);
    CHECK(gw->id == id);
    CHECK(gw->slug == "lab-box");

    std::filesystem::remove(box.root / "state" / "registration.json");
    CHECK_THROWS_WITH(run_to_end(ioc, runner::register_gateway(s, cfg, stopping)),
                      Catch::Contains("gateway registration failed"));
}

TEST_CASE("runner start-up: a dead runner's leased command is requeued, its running one failed",
          "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    const std::string dead = host_name() + ":awp-command-runner:" + std::to_string(dead_pid());
    const std::string me = "runner-restarted";
    const auto leased = held_command(admin, gw.id, "list_models", "leased", dead);
    const auto running = held_command(admin, gw.id, "auth_list", "running", dead);
    const auto login = held_command(admin, gw.id, "auth_start", "running", me,
                                    R"({"provider":"openai","profile_name":"work"})");
    const auto alive =
        held_command(admin, gw.id, "auth_list", "running", "other-host:awp-command-runner:1");
    net::io_context ioc;
    pg::session s(db.daemon_dsn(), "test");
    const auto runs = run_to_end(ioc, runner::recover_dead_runs(s, gw.id, me));

    CHECK(one(admin,
              "SELECT status::text || coalesce(leased_by, '-') FROM agent_commands "
              "WHERE id = $1",
              {leased}) == "pending-");
    REQUIRE(runs.size() == 2);
    for (const auto& r : runs) {
        CHECK((r.cmd.id == running || r.cmd.id == login));
        CHECK(r.outcome.k == runner::command_outcome::kind::failed);
        CHECK_THAT(r.outcome.error, Catch::Contains("stopped while the command was running") &&
                                        Catch::Contains("not retried"));
        CHECK_FALSE(r.cmd.lease_token.empty());
        if (r.cmd.id == login) {
            CHECK(r.holder == me);
            CHECK_THAT(r.outcome.patch, Catch::Contains("\"stage\":\"failed\""));
        } else {
            CHECK(r.holder == dead);
            CHECK(r.outcome.patch.empty());
        }
    }
    // Nothing is written by recovery itself but the requeue; another host's runner is left be.
    CHECK(read_command(admin, running).status == "running");
    CHECK(read_command(admin, alive).status == "running");
}

TEST_CASE("runner housekeeping: the heartbeat row carries the sync state, the sync the values",
          "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    fake_runtime_box box;
    auto cfg = box.config();
    cfg.database_url = db.daemon_dsn();
    cfg.service_role_key = "runner-test-service-role-key";
    cfg.gateway_api_url = "http://10.0.0.5:8081";
    admin.exec(
        "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) VALUES ($1, $2, "
        "'OPENAI_API_KEY', $3)",
        {kDefaultTenant, gw.id,
         awp::core::crypto::encrypt_secret("sk-synced-123456", cfg.service_role_key)});
    net::io_context ioc;
    runner::housekeeping hk(ioc.get_executor(), cfg, [] { return std::size_t{2}; });
    hk.set_gateway(gw.id, gw.slug, kDefaultTenant);
    pg::session s(cfg.database_url, "test");

    CHECK(hk.sync_enabled());
    CHECK(run_to_end(ioc, hk.sync(s)).empty());
    std::ifstream env(box.root / "secrets" / "gateway.env");
    const std::string text((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    CHECK_THAT(text, Catch::Contains("\nOPENAI_API_KEY='sk-synced-123456'\n"));
    const auto secrets = hk.secrets().for_command(command("list_models"));
    CHECK(std::find(secrets.begin(), secrets.end(), "sk-synced-123456") != secrets.end());

    // The loop: a heartbeat when one is due, then stop.
    bool ended = false;
    net::co_spawn(ioc, hk.run(), [&](std::exception_ptr) { ended = true; });
    hk.heartbeat_soon();
    const std::string row =
        "SELECT meta->>'secrets_sync' || ' ' || (meta->>'auth_flows') || ' ' || "
        "(meta->>'api_url') || ' ' || (meta->>'runtime_mode') FROM daemon_heartbeats WHERE "
        "gateway_id = $1 AND daemon = 'command-runner' AND instance = $2";
    auto heartbeat = [&] {
        auto r = admin.exec(row, {gw.id, cfg.instance});
        return r.size() == 1 ? std::string(r.text(0, 0)) : std::string();
    };
    REQUIRE(run_until(ioc, [&] { return !heartbeat().empty(); }));
    CHECK(heartbeat() == "ok 2 http://10.0.0.5:8081 container");
    hk.stop();
    REQUIRE(run_until(ioc, [&] { return ended; }));
    CHECK(hk.done());

    // Without a key the sync is off, and the heartbeat says so.
    cfg.service_role_key.clear();
    runner::housekeeping off(ioc.get_executor(), cfg, [] { return std::size_t{0}; });
    off.set_gateway(gw.id, gw.slug, kDefaultTenant);
    CHECK_FALSE(off.sync_enabled());
    CHECK(run_to_end(ioc, off.sync(s)).empty());
    run_to_end(ioc, [&]() -> net::awaitable<bool> {
        co_await off.heartbeat(s);
        co_return true;
    }());
    CHECK_THAT(heartbeat(), Catch::StartsWith("off 0 "));
}

TEST_CASE(
    "runner start-up: a dead run's end goes through the one exit: its payload's secrets are "
    "scrubbed and its agent row says error",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    const std::string dead = host_name() + ":awp-command-runner:" + std::to_string(dead_pid());
    const std::string key = "sk-left-behind-4242";
    const auto keyed = held_command(admin, gw.id, "auth_set_api_key", "running", dead,
                                    R"({"provider":"openai","api_key":")" + key + R"("})");
    // A provision the dead runner had started: its agent was left "provisioning".
    const auto prov = enqueue(admin, gw.id, "provision", R"({"channel":"none"})", gw.agent);
    admin.exec(
        "UPDATE agent_commands SET status = 'running', leased_by = $2, lease_token = "
        "gen_random_uuid(), leased_at = now(), lease_expires_at = now() + interval '5 minutes', "
        "started_at = now() WHERE id = $1",
        {prov, dead});
    admin.exec("UPDATE agents SET status = 'provisioning' WHERE id = $1", {gw.agent_id});
    running_runner r(base_config(db.gateway_dsn(gw.slug), box, gw.slug));
    auto s = wait_finished(admin, keyed);
    CHECK(s.status == "failed");
    CHECK_THAT(s.error, Catch::Contains("stopped while the command was running"));
    CHECK_THAT(s.payload, !Catch::Contains(key) && Catch::Contains("\"api_key_scrubbed\": true"));
    CHECK(wait_finished(admin, prov).status == "failed");
    CHECK_THAT(
        one(admin, "SELECT status::text || '|' || coalesce(error, '-') FROM agents WHERE id = $1",
            {gw.agent_id}),
        Catch::StartsWith("error|runner " + dead + " stopped while the command was running"));
}

}  // namespace runner_startup_test
