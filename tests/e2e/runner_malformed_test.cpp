// Hostile payloads for every action of the runner (a real awp-command-runner process with the
// stand-in runtime): every payload field of every action set to every wrong kind of value. Each
// command ends (never stuck, never a crash): refused with a message naming what is wrong, or
// done when the value is acceptable after all; the runner stays up, keeps its heartbeat, and a
// valid command still runs afterwards.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "integration/runner_harness.hpp"
#include "support/child.hpp"

namespace runner_malformed_test {

namespace {

using namespace awp::runner_test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The payload fields each action reads (interface-spec and docs/command-runner.md); actions
// without fields get a stray one.
const std::map<std::string, std::vector<std::string>> kFields = {
    {"provision",
     {"channel", "discord_server_id", "discord_user_id", "model", "source_template", "name",
      "description", "emoji", "owner_name", "owner_preferred_name", "owner_timezone"}},
    {"approve_pairing", {"pairing_code", "channel"}},
    {"set_agent_model", {"agent_slug", "model", "thinking"}},
    {"list_models", {"provider"}},
    {"auth_set_api_key", {"provider", "api_key", "profile_name", "base_url"}},
    {"auth_paste", {"parent_command_id", "value"}},
    {"auth_refresh", {"profile_id"}},
    {"auth_remove", {"profile_id"}},
    {"auth_set_default", {"provider", "profile_name"}},
    {"source_write", {"connection_id", "action", "params"}},
    {"start_session", {"session_id"}},
    {"end_session", {"session_id"}},
    {"restart_session", {"session_id"}},
    {"execute_prompt", {"prompt", "session_id", "model", "thinking", "timeout_seconds"}},
    {"send_message", {"channel", "target", "message"}},
    {"run_shell", {"argv", "timeout_seconds"}},
    {"upload_file", {"path", "content", "encoding", "mode"}},
};

std::vector<std::string> bad_values() {
    std::string deep;
    for (int i = 0; i < 60; ++i) deep += "[";
    for (int i = 0; i < 60; ++i) deep += "]";
    return {
        "123",
        "-1e308",
        "true",
        "null",
        "[]",
        "{}",
        deep,
        R"("")",
        R"("   ")",
        R"("a\u0000b")",
        R"("\u001b[31mred")",
        R"("../../etc/passwd")",
        R"("$(id); rm -rf /")",
        R"("\ud800")",
        "\"" + std::string(70000, 'x') + "\"",
        R"(["a", 1, null])",
    };
}

}  // namespace

TEST_CASE(
    "runner e2e: every field of every action, set to every wrong kind of value, is refused "
    "clearly and the runner stays up",
    "[runner][e2e]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    const fs::path root = fs::temp_directory_path() / awp::test::random_name("awp-malformed-");
    fs::create_directories(root / "fake");
    fs::create_directories(root / "home" / ("workspace-" + gw.agent));
    awp::test::child runner(
        {std::string(AWP_BIN_DIR) + "/awp-command-runner"},
        {{"DATABASE_URL", db.gateway_dsn(gw.slug)},
         {"GATEWAY_ID", gw.slug},
         {"AGENT_RUNTIME", std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime"},
         {"FAKE_RUNTIME_DIR", (root / "fake").string()},
         {"AWP_CHILD_ENV_ALLOW", "FAKE_*"},
         {"OPENCLAW_STATE_DIR", (root / "home").string()},
         {"SECRETS_DIR", (root / "secrets").string()},
         {"AWP_STATE_DIR", (root / "state").string()},
         {"SERVICE_ROLE_KEY", "malformed-test-service-role-key"},
         {"COMMAND_TIMEOUT", "20"},
         {"RUNTIME_MODE", "service_manager"},
         {"AWP_REPO_DIR", (root / "no-repo").string()},
         {"AUTH_FLOW_TIMEOUT", "5"},
         {"AUTH_CALLBACK_PORT", std::to_string(22000 + ::getpid() % 20000)},
         {"LOG_LEVEL", "error"}});

    const auto actions_row = one(
        admin, "SELECT string_agg(a::text, ',') FROM unnest(enum_range(NULL::command_action)) a");
    std::vector<std::string> actions;
    for (std::size_t b = 0; b <= actions_row.size();) {
        const auto e = std::min(actions_row.find(',', b), actions_row.size());
        actions.push_back(actions_row.substr(b, e - b));
        b = e + 1;
    }
    REQUIRE(actions.size() >= 25);

    std::vector<std::pair<std::string, std::string>> sent;  // command id, what it was
    int refused_at_insert = 0;
    const auto values = bad_values();
    for (const auto& action : actions) {
        // auth_start runs in the background and waits for a login: not part of this flood.
        if (action == "auth_start") continue;
        const auto f = kFields.find(action);
        const std::vector<std::string> fields =
            f == kFields.end() ? std::vector<std::string>{"unexpected"} : f->second;
        for (const auto& field : fields) {
            for (const auto& v : values) {
                const std::string payload = "{\"" + field + "\":" + v + "}";
                try {
                    sent.emplace_back(enqueue(admin, gw.id, action, payload, gw.agent),
                                      action + " " + field + "=" + v.substr(0, 40));
                } catch (const std::exception&) {
                    ++refused_at_insert;  // the database's own payload check: also clear
                }
            }
        }
    }
    INFO(sent.size() << " commands, " << refused_at_insert << " refused by the database");
    int failed = 0, done = 0;
    for (const auto& [id, what] : sent) {
        auto s = wait_finished(admin, id, 60s);
        INFO(what << ": " << s.status << " / " << s.error.substr(0, 200));
        REQUIRE((s.status == "failed" || s.status == "done"));
        if (s.status == "failed") {
            ++failed;
            CHECK_FALSE(s.error.empty());
        } else {
            ++done;
        }
        CHECK(s.error.find('\x1b') == std::string::npos);
    }
    WARN(sent.size() << " hostile commands: " << failed << " refused with a message, " << done
                     << " acceptable and done; " << refused_at_insert
                     << " refused at insert by the database");
    CHECK(runner.running());
    // Still serving: its heartbeat is fresh and a valid command runs.
    CHECK(one(admin,
              "SELECT count(*) FROM daemon_heartbeats WHERE gateway_id = $1 AND daemon = "
              "'command-runner' AND last_seen_at > now() - interval '60 seconds'",
              {gw.id}) == "1");
    auto ok =
        wait_finished(admin, enqueue(admin, gw.id, "list_models", R"({"provider":"openai"})"), 30s);
    CHECK(ok.status == "done");
    runner.signal(SIGTERM);
    CHECK(runner.wait(30s) == std::optional<int>(0));
    std::error_code ec;
    fs::remove_all(root, ec);
}

}  // namespace runner_malformed_test
