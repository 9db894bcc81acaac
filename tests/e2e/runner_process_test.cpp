// End-to-end tests of awp-command-runner as a real process: kill -9 mid-command then restart
// (the command ends failed, never runs twice), SIGTERM exits cleanly, bad config exits 78.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/net.hpp"
#include "support/pooler.hpp"
#include "support/secret_scan.hpp"
#include "support/test_db.hpp"

namespace runner_process_test {

namespace {

namespace pg = awp::core::pg;
using namespace std::chrono_literals;
constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    REQUIRE(r.size() == 1);
    return r.is_null(0, 0) ? std::string("<null>") : std::string(r.text(0, 0));
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit = 15s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (cond()) return true;
        std::this_thread::sleep_for(20ms);
    }
    return cond();
}

/// The runner binary with extra environment; killed (SIGKILL) on destruction if still running.
class runner_process {
public:
    explicit runner_process(const std::map<std::string, std::string>& env) {
        std::vector<std::string> vars = awp::test::child_environment(env);  // support/pooler.hpp
        std::vector<char*> envp;
        for (auto& v : vars) envp.push_back(v.data());
        envp.push_back(nullptr);
        std::string bin = std::string(AWP_BIN_DIR) + "/awp-command-runner";
        char* argv[] = {bin.data(), nullptr};
        REQUIRE(::posix_spawn(&pid_, bin.c_str(), nullptr, nullptr, argv, envp.data()) == 0);
    }
    ~runner_process() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            wait();
        }
    }
    pid_t pid() const { return pid_; }
    void signal(int sig) { ::kill(pid_, sig); }
    /// Exit status (or 128 + signal), -1 if it did not end within the limit.
    int wait(std::chrono::milliseconds limit = 20s) {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            int st = 0;
            const pid_t r = ::waitpid(pid_, &st, WNOHANG);
            if (r == pid_) {
                pid_ = -1;
                return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
            std::this_thread::sleep_for(20ms);
        }
        return -1;
    }

private:
    pid_t pid_ = -1;
};

struct setup {
    awp::test::scoped_database db;
    pg::connection admin = db.admin();
    std::filesystem::path root =
        std::filesystem::temp_directory_path() / awp::test::random_name("awp-runner-e2e-");
    std::string slug = awp::test::random_name("gw");
    std::string gateway_id;
    setup() {
        std::filesystem::create_directories(root / "fake");
        gateway_id = one(
            admin,
            "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, 'ready') "
            "RETURNING id",
            {kTenant, slug});
    }
    ~setup() {
        std::error_code ec;
        std::filesystem::remove_all(root, ec);
    }
    std::map<std::string, std::string> env(const std::string& instance) const {
        return {{"DATABASE_URL", db.gateway_dsn(slug)},
                {"GATEWAY_ID", slug},
                {"AWP_INSTANCE", instance},
                {"AGENT_RUNTIME", std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime"},
                {"FAKE_RUNTIME_DIR", (root / "fake").string()},
                {"AWP_CHILD_ENV_ALLOW", "FAKE_*"},
                {"OPENCLAW_STATE_DIR", (root / "home").string()},
                {"SECRETS_DIR", (root / "secrets").string()},
                {"AWP_STATE_DIR", (root / "state").string()},
                {"COMMAND_TIMEOUT", "60"},
                {"LOG_LEVEL", "warn"}};
    }
    std::string enqueue(const std::string& action) {
        return one(
            admin,
            "INSERT INTO agent_commands (tenant_id, gateway_id, action, status) VALUES ($1, $2, "
            "$3::command_action, 'pending') RETURNING id",
            {kTenant, gateway_id, action});
    }
    std::string status(const std::string& id) {
        return one(admin, "SELECT status::text FROM agent_commands WHERE id = $1", {id});
    }
    std::size_t calls() const {
        std::ifstream in(root / "fake" / "calls");
        std::size_t n = 0;
        std::string line;
        while (std::getline(in, line)) ++n;
        return n;
    }
};

}  // namespace

TEST_CASE(
    "runner e2e: kill -9 mid-command, then restart: the command ends failed and never runs twice",
    "[runner][e2e]") {
    setup s;
    std::ofstream(s.root / "fake" / "hang");
    const std::string instance = awp::test::random_name("runner-e2e-");
    std::string id;
    {
        runner_process r(s.env(instance));
        id = s.enqueue("auth_list");
        REQUIRE(eventually([&] { return s.status(id) == "running" && s.calls() == 1; }));
        r.signal(SIGKILL);
        CHECK(r.wait() == 128 + SIGKILL);
    }
    // The runtime the dead runner started is still around: stop it as an operator would.
    {
        std::ifstream in(s.root / "fake" / "child.pid");
        pid_t child = 0;
        in >> child;
        if (child > 0) ::kill(-child, SIGKILL);
    }
    std::filesystem::remove(s.root / "fake" / "hang");
    CHECK(s.status(id) == "running");

    runner_process again(s.env(instance));
    REQUIRE(eventually([&] { return s.status(id) == "failed"; }));
    CHECK_THAT(
        one(s.admin, "SELECT error_message FROM agent_commands WHERE id = $1", {id}),
        Catch::Contains("stopped while the command was running") && Catch::Contains("not retried"));
    const auto next = s.enqueue("auth_list");
    REQUIRE(eventually([&] { return s.status(next) == "done"; }));
    CHECK(s.calls() == 2);  // the killed command ran once, the new one once

    again.signal(SIGTERM);
    CHECK(again.wait() == 0);
}

TEST_CASE("runner e2e: the runtime it starts holds none of the runner's secrets",
          "[runner][e2e][security]") {
    setup s;
    auto env = s.env(awp::test::random_name("runner-e2e-"));
    const auto secrets = awp::test::daemon_secrets();
    for (const auto& [k, v] : secrets) env[k] = v;
    runner_process r(env);
    const auto id = s.enqueue("auth_list");
    REQUIRE(eventually([&] { return s.status(id) == "done"; }));
    int scanned = 0;
    const auto leaks = awp::test::leaked_secrets(s.root / "fake", {"environ", "status"}, secrets,
                                                 s.db.gateway_dsn(s.slug), &scanned);
    CHECK(scanned >= 2);  // the environment and /proc/self/status of the call
    INFO((leaks.empty() ? std::string() : leaks.front()));
    CHECK(leaks.empty());
    // What the runtime needs still arrives.
    std::ifstream in(s.root / "fake" / "environ.1", std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    CHECK(all.str().find(std::string("PATH=")) != std::string::npos);
    CHECK(all.str().find("AWP_GATEWAY=" + s.slug) != std::string::npos);
    CHECK(all.str().find("FAKE_RUNTIME_DIR=") != std::string::npos);  // AWP_CHILD_ENV_ALLOW
    r.signal(SIGTERM);
    CHECK(r.wait() == 0);
}

TEST_CASE("runner e2e: a heartbeat marks the gateway seen, SIGTERM exits 0", "[runner][e2e]") {
    setup s;
    s.admin.exec("UPDATE gateways SET last_seen_at = NULL WHERE id = $1", {s.gateway_id});
    runner_process r(s.env(awp::test::random_name("runner-e2e-")));
    CHECK(eventually([&] {
        return one(s.admin,
                   "SELECT count(*) FROM daemon_heartbeats WHERE gateway_id = $1 AND daemon = "
                   "'command-runner'",
                   {s.gateway_id}) == "1";
    }));
    CHECK(one(s.admin, "SELECT last_seen_at IS NOT NULL FROM gateways WHERE id = $1",
              {s.gateway_id}) == "t");
    r.signal(SIGTERM);
    CHECK(r.wait() == 0);
}

TEST_CASE("runner e2e: bad configuration exits 78 with a message", "[runner][e2e]") {
    setup s;
    {
        auto env = s.env("x");
        env["RUNTIME_MODE"] = "e2b";
        runner_process r(env);
        CHECK(r.wait() == 78);
    }
    {
        auto env = s.env("x");
        env["GATEWAY_ID"] = "";
        runner_process r(env);  // no slug, no registration stored, no token
        CHECK(r.wait() == 78);
    }
    {
        auto env = s.env("x");
        env["GATEWAY_ID"] = "no-such-gateway";
        runner_process r(env);
        CHECK(r.wait() == 78);
    }
    // Gateway keys (docs/security.md, "Gateway keys"): not one, a file that is not there, both
    // ways at once, and a well-formed key the database refuses on the pool login.
    const auto host = s.db.pool_login(s.slug);
    for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
             {"GATEWAY_KEY", "awpk_not-a-key"},
             {"GATEWAY_KEY", host.key + "x"},
             {"GATEWAY_KEY_FILE", (s.root / "no-such-key").string()}}) {
        INFO(name << "=" << value);
        auto env = s.env("x");
        env["DATABASE_URL"] = host.dsn;
        env[name] = value;
        runner_process r(env);
        CHECK(r.wait() == 78);
    }
    {
        auto env = s.env("x");
        env["DATABASE_URL"] = host.dsn;
        env["GATEWAY_KEY"] = host.key;
        std::ofstream(s.root / "key") << host.key << "\n";
        env["GATEWAY_KEY_FILE"] = (s.root / "key").string();
        runner_process r(env);
        CHECK(r.wait() == 78);
    }
    {
        auto env = s.env("x");
        env["DATABASE_URL"] = host.dsn;
        env["GATEWAY_KEY"] = host.key.substr(0, 38) + std::string(43, 'A');
        runner_process r(env);
        CHECK(r.wait() == 78);
    }
}

TEST_CASE("runner e2e: GATEWAY_TOKEN registers once, the restart reuses the stored registration",
          "[runner][e2e]") {
    setup s;
    const std::string token = one(
        s.admin,
        "SELECT token FROM public.issue_gateway_token(p_tenant_id => $1::uuid, p_label => 'e2e')",
        {kTenant});
    const auto before = one(s.admin, "SELECT count(*) FROM gateways");
    auto env = s.env(awp::test::random_name("runner-e2e-"));
    // Registration by token is the shared daemon role's path (docs/security.md, "Gateway
    // credentials"): the gateway does not exist yet, so it has no login of its own.
    env["DATABASE_URL"] = s.db.daemon_dsn();
    env["GATEWAY_ID"] = "";
    env["GATEWAY_TOKEN"] = token;
    env["GATEWAY_LABEL"] = "e2e-box";
    {
        runner_process r(env);
        REQUIRE(eventually(
            [&] { return std::filesystem::exists(s.root / "state" / "registration.json"); }));
        r.signal(SIGTERM);
        CHECK(r.wait() == 0);
    }
    CHECK(std::stol(one(s.admin, "SELECT count(*) FROM gateways")) == std::stol(before) + 1);
    runner_process again(env);  // the token is used up: only the stored registration lets it start
    std::this_thread::sleep_for(1500ms);
    CHECK(::kill(again.pid(), 0) == 0);
    CHECK(std::stol(one(s.admin, "SELECT count(*) FROM gateways")) == std::stol(before) + 1);
    again.signal(SIGTERM);
    CHECK(again.wait() == 0);
}

// The runner taking its wake-ups from a real awp-wake process (WAKE_URL,
// docs/protocols/wake-relay.md).
TEST_CASE(
    "wake e2e: the runner takes its wake-ups from awp-wake, and a relay killed -9 and "
    "restarted loses nothing",
    "[wake][relay][e2e]") {
    setup s;
    const unsigned short port = awp::test::free_port();
    const std::map<std::string, std::string> relay_env = {{"DATABASE_URL", s.db.daemon_dsn()},
                                                          {"WAKE_PORT", std::to_string(port)},
                                                          {"LOG_LEVEL", "info"}};
    const std::string relay_bin = std::string(AWP_BIN_DIR) + "/awp-wake";
    auto relay = std::make_unique<awp::test::child>(std::vector<std::string>{relay_bin}, relay_env);
    REQUIRE(relay->wait_for_log("\"listening\"", 10s));

    auto env = s.env(awp::test::random_name("runner-wake-"));
    env["WAKE_URL"] = "http://127.0.0.1:" + std::to_string(port);
    env["SAFETY_POLL"] = "600";  // a command picked up in seconds came by a wake-up
    env["LOG_LEVEL"] = "info";
    runner_process r(env);
    // The first command may be found by the start-up look; the next ones only by a wake-up.
    const auto first = s.enqueue("auth_list");
    REQUIRE(eventually([&] { return s.status(first) == "done"; }));
    for (int i = 0; i < 3; ++i) {
        const auto id = s.enqueue("auth_list");
        REQUIRE(eventually([&] { return s.status(id) == "done"; }, 5s));
    }
    // The gateway host holds no LISTEN session of its own: the relay's is the database's only.
    CHECK(one(s.admin,
              "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
              "query ILIKE 'LISTEN%'") == "1");

    // The relay dies; a command is written meanwhile; a new relay starts on the same port. The
    // runner reconnects and looks: the command is done without waiting for the safety poll.
    relay->signal(SIGKILL);
    CHECK(relay->wait(5s) == 128 + SIGKILL);
    const auto during = s.enqueue("auth_list");
    std::this_thread::sleep_for(300ms);
    CHECK(s.status(during) == "pending");
    relay = std::make_unique<awp::test::child>(std::vector<std::string>{relay_bin}, relay_env);
    REQUIRE(eventually([&] { return s.status(during) == "done"; }, 15s));
    const auto after = s.enqueue("auth_list");
    REQUIRE(eventually([&] { return s.status(after) == "done"; }, 5s));
    CHECK(s.calls() == 6);

    r.signal(SIGTERM);
    CHECK(r.wait() == 0);
    relay->signal(SIGTERM);
    CHECK(relay->wait(10s) == 0);
}

TEST_CASE(
    "wake e2e: a runner whose login the relay refuses keeps retrying and is still woken by "
    "its safety poll",
    "[wake][relay][e2e][security]") {
    setup s;
    const unsigned short port = awp::test::free_port();
    awp::test::child relay(
        {std::string(AWP_BIN_DIR) + "/awp-wake"},
        {{"DATABASE_URL", s.db.daemon_dsn()}, {"WAKE_PORT", std::to_string(port)}});
    REQUIRE(relay.wait_for_log("\"listening\"", 10s));
    auto env = s.env(awp::test::random_name("runner-wake-"));
    env["WAKE_URL"] = "http://127.0.0.1:" + std::to_string(port);
    env["SAFETY_POLL"] = "1";
    env["LOG_LEVEL"] = "info";
    // awp_daemon's login is no gateway's: the relay answers 403 and hands it nothing.
    env["DATABASE_URL"] = s.db.daemon_dsn();
    runner_process r(env);
    const auto id = s.enqueue("auth_list");
    REQUIRE(eventually([&] { return s.status(id) == "done"; }, 15s));  // by the poll
    r.signal(SIGTERM);
    CHECK(r.wait() == 0);
}

}  // namespace runner_process_test
