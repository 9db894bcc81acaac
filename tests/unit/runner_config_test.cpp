// Unit tests of the runner's configuration (config.hpp): every option from its environment
// name with its default, the checks, and exit code 78 for a configuration that cannot work.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"

namespace runner_config_test {

using namespace awp::runner;

namespace {

/// Sets environment variables for one test and restores them after.
class scoped_env {
public:
    explicit scoped_env(const std::map<std::string, std::string>& vars) {
        for (const auto& [k, v] : vars) {
            const char* old = std::getenv(k.c_str());
            saved_.emplace(k, old ? std::optional<std::string>(old) : std::nullopt);
            ::setenv(k.c_str(), v.c_str(), 1);
        }
    }
    ~scoped_env() {
        for (const auto& [k, v] : saved_) {
            if (v) {
                ::setenv(k.c_str(), v->c_str(), 1);
            } else {
                ::unsetenv(k.c_str());
            }
        }
    }

private:
    std::map<std::string, std::optional<std::string>> saved_;
};

const std::string kFake = std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime";

std::optional<int> load(std::vector<std::string> args, runner_config& cfg) {
    args.insert(args.begin(), "awp-command-runner");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return load_config(static_cast<int>(argv.size()), argv.data(), cfg);
}

}  // namespace

TEST_CASE("runner config: options come from their environment names, with the defaults",
          "[runner]") {
    scoped_env env({{"HOME", "/home/runner-test"},
                    {"GATEWAY_ID", "edge-1"},
                    {"RUNTIME_MODE", "systemd"},
                    {"COMMAND_TIMEOUT", "45"},
                    {"GATEWAY_API_URL", "http://gw.example:8080/"},
                    {"OUTPUT_LIMIT", "4096"},
                    {"AGENT_RUNTIME", kFake},
                    {"AGENT_USER", ""}});
    runner_config cfg;
    REQUIRE_FALSE(load({"--instance", "runner-a", "--secrets-interval", "12.5"}, cfg));
    CHECK(cfg.gateway_slug == "edge-1");
    CHECK(cfg.mode == runtime_mode::service_manager);
    CHECK(cfg.command_timeout_s == 45);
    CHECK(cfg.lease_seconds() == 105);
    CHECK(cfg.gateway_api_url == "http://gw.example:8080");
    CHECK(cfg.output_limit == 4096);
    CHECK(cfg.secrets_interval_s == 12.5);
    CHECK(cfg.instance == "runner-a");
    CHECK(cfg.runtime_home == "/home/runner-test/.openclaw");
    CHECK(cfg.secrets_dir == "/home/runner-test/.openclaw/secrets");
    CHECK(cfg.state_dir == "/home/runner-test/.local/state/awp");
    CHECK(cfg.repo_dir == "/home/runner-test/awp");
    // Run from a build tree: the source tree's agent scripts (installed: <prefix>/share/awp).
    CHECK(cfg.scripts_dir == std::string(AWP_SOURCE_DIR) + "/deploy/runtime");
    CHECK(cfg.templates() == std::string(AWP_SOURCE_DIR) + "/deploy/runtime/../templates");
    CHECK(cfg.networking_mode == "local");
    CHECK(cfg.auth_timeout_s == 300);
    CHECK(cfg.callback_port == 1455);
    CHECK_FALSE(cfg.agent_user);
}

TEST_CASE("runner config: an unusable configuration exits 78", "[runner]") {
    scoped_env env({{"AGENT_RUNTIME", kFake}, {"AGENT_USER", ""}});
    runner_config cfg;
    CHECK(load({"--runtime-mode", "kubernetes"}, cfg) == 78);
    CHECK(load({"--command-timeout", "0"}, cfg) == 78);
    CHECK(load({"--callback-port", "70000"}, cfg) == 78);
    CHECK(load({"--gateway-api-url", "ftp://host"}, cfg) == 78);
    CHECK(load({"--hosted-secrets-key", "not-a-key"}, cfg) == 78);
    CHECK(load({"--agent-runtime", "/nonexistent/openclaw"}, cfg) == 78);
    CHECK(load({"--help"}, cfg) == 0);
}

}  // namespace runner_config_test
