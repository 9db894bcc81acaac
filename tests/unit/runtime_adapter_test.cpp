// Unit tests of the agent runtime adapter (awp::runtime): versions, agent ids, thinking levels,
// terminal codes, JSON outputs kept valid, the runtime's lock discipline, per-version argv.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "awp/core/json.hpp"
#include "awp/runtime/openclaw.hpp"

namespace runtime_adapter_test {

using namespace awp::runtime;
namespace fs = std::filesystem;
using sv = std::vector<std::string>;

TEST_CASE("runtime: versions are read from the CLI's banner and mapped to a dialect", "[runtime]") {
    auto v = parse_version("OpenClaw 2026.6.1 (2e08f0f)\n");
    REQUIRE(v);
    CHECK(v->text == "2026.6.1");
    CHECK(dialect_of(*v) == dialect::v2026_6);
    CHECK(dialect_of(*parse_version("OpenClaw 2026.9.6 (eb377ac)")) == dialect::v2026_9);
    CHECK_FALSE(dialect_of(*parse_version("OpenClaw 2026.7.35 (x)")));
    CHECK_FALSE(parse_version("command not found"));
    CHECK_THROWS_AS(cli("openclaw", "2025.1.1"), unsupported_runtime);
    // A program that is not there, or prints no version: a configuration error (exit 78).
    CHECK_THROWS_AS(cli::detect("/nonexistent/openclaw"), unsupported_runtime);
    CHECK_THROWS_WITH(cli::detect("/bin/true"), Catch::Contains("printed no version"));
}

TEST_CASE("runtime: agent ids follow the runtime's normalisation and never name main",
          "[runtime]") {
    CHECK(agent_id("ana") == "ana");
    CHECK(agent_id("Ana") == "ana");
    CHECK(agent_id("sales.bot_2") == "sales-bot_2");
    CHECK(agent_id("a..b") == "a-b");
    CHECK(agent_id("-x-") == "x");
    CHECK(agent_id(std::string(100, 'a')).size() == 64);
    CHECK_THROWS_WITH(agent_id("MAIN"), Catch::Contains("reserves"));
    CHECK_THROWS(agent_id("..."));
}

TEST_CASE("runtime: the spec's thinking levels in the runtime's words", "[runtime]") {
    CHECK(thinking_level("none") == "off");
    CHECK(thinking_level("low") == "low");
    CHECK(thinking_level("high") == "high");
    CHECK(thinking_level("") == "");
    CHECK_THROWS(thinking_level("xhigh"));
    const cli rt("/rt", "2026.6.1");
    CHECK(rt.agent_turn("a", "m", std::nullopt, std::nullopt, std::string("none")).argv ==
          sv{"/rt", "agent", "--agent", "a", "--message", "m", "--thinking", "off"});
}

TEST_CASE("runtime: terminal codes are removed from what is stored", "[runtime]") {
    CHECK(strip_terminal("\x1b[1;31mError:\x1b[0m bad key\r\n") == "Error: bad key\n");
    CHECK(strip_terminal("10%\r50%\r100%\ndone") == "100%\ndone");
    CHECK(strip_terminal("\x1b]8;;https://x\x07link\x1b]8;;\x07") == "link");
    CHECK(error_line("\x1b[33m[openclaw] Reason: No pending pairing request found\x1b[0m\n"
                     "[openclaw] Debug: set OPENCLAW_DEBUG=1\n[openclaw] Try: openclaw doctor\n",
                     "") == "No pending pairing request found");
    CHECK(error_line("", "line 1\nUnknown provider x\n\n") == "Unknown provider x");
    CHECK(error_line("",
                     "fetch failed | getaddrinfo ENOTFOUND auth.openai.com\n\xe2\x94\x82\n"
                     "\x1b[90m\xe2\x94\x9c\xe2\x94\x80\xe2\x94\x80\xe2\x95\xaf\x1b[39m\n") ==
          "fetch failed | getaddrinfo ENOTFOUND auth.openai.com");
}

TEST_CASE("runtime: a gateway restart with nothing to restart is not a success", "[runtime]") {
    CHECK(restart_failure(R"({"action":"restart","ok":true,"result":"not-loaded",)"
                          R"("message":"Gateway service disabled."})")
              ->find("Gateway service disabled.") == 0);
    CHECK(restart_failure(R"({"ok":false,"message":"boom"})") ==
          std::optional<std::string>("boom"));
    CHECK_FALSE(restart_failure(R"({"action":"restart","ok":true,"result":"restarted"})"));
    CHECK_FALSE(restart_failure("not json"));
    CHECK(error_line("GatewayCredentialsRequiredError: gateway agent requires credentials\n"
                     "Fix: configure gateway.auth token/password\nConfig: /x/openclaw.json\n",
                     "") == "GatewayCredentialsRequiredError: gateway agent requires credentials");
}

TEST_CASE("runtime: JSON outputs stay valid JSON, trimmed by entries", "[runtime]") {
    std::string big = "Gateway is not running.\n{\"count\":500,\"models\":[";
    for (int i = 0; i < 500; ++i) {
        if (i) big += ",";
        big += "{\"key\":\"provider/model-" + std::to_string(i) + "\",\"name\":\"Model " +
               std::to_string(i) + "\"}";
    }
    big += "]}";
    auto small = fit_json(R"(notice {"a":[1,2]})", 1000);
    REQUIRE(small);
    CHECK(*small == R"({"a":[1,2]})");
    auto cut = fit_json(big, 4096);
    REQUIRE(cut);
    CHECK(cut->size() <= 4096);
    auto doc = awp::core::json::parse_object(*cut, awp::core::json::kDocument);
    CHECK(doc["awpTruncated"]["total"].GetUint() == 500);
    CHECK(doc["awpTruncated"]["kept"].GetUint() == doc["models"].Size());
    CHECK(doc["models"].Size() > 10);
    CHECK(std::string(doc["awpTruncated"]["path"].GetString()) == "/models");
    CHECK_FALSE(fit_json("not json at all", 100));
}

TEST_CASE("runtime: awp takes the runtime's own O_EXCL lock, never flock, and waits for it",
          "[runtime]") {
    const fs::path dir = fs::temp_directory_path() / ("awp-rtlock-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string file = (dir / "openclaw.json").string();
    bool held = false;
    with_runtime_lock(file, [&] {
        held = fs::exists(file + ".lock");
        // The runtime's own attempt (open "wx") fails while awp holds it.
        std::ifstream lock(file + ".lock");
        std::string text((std::istreambuf_iterator<char>(lock)), std::istreambuf_iterator<char>());
        CHECK(text.find("\"pid\": " + std::to_string(::getpid())) != std::string::npos);
    });
    CHECK(held);
    CHECK_FALSE(fs::exists(file + ".lock"));  // released, never left behind

    // A lock of a live holder is waited for, then reported; one of a dead process is taken over.
    {
        std::ofstream(file + ".lock") << "{\"pid\": " << ::getpid() << "}";
        CHECK_THROWS_WITH(with_runtime_lock(
                              file, [] {}, std::chrono::milliseconds(200)),
                          Catch::Contains("still after"));
        std::ofstream(file + ".lock") << "{\"pid\": 999999999}";
        bool ran = false;
        with_runtime_lock(file, [&] { ran = true; });
        CHECK(ran);
        fs::remove(file + ".lock");
    }
    // Released on an exception too.
    CHECK_THROWS(with_runtime_lock(file, [] { throw std::runtime_error("x"); }));
    CHECK_FALSE(fs::exists(file + ".lock"));
    fs::remove_all(dir);
}

TEST_CASE("runtime: auth profiles are removed from every agent's store under the lock",
          "[runtime]") {
    const fs::path dir = fs::temp_directory_path() / ("awp-rtauth-" + std::to_string(::getpid()));
    for (const char* a : {"main", "ana"}) {
        fs::create_directories(dir / "agents" / a / "agent");
        std::ofstream(dir / "agents" / a / "agent" / "auth-profiles.json")
            << R"({"version":1,"profiles":{"openai:default":{"type":"api_key","key":"k"},)"
            << R"("anthropic:default":{"type":"api_key","key":"k2"}}})";
    }
    // A symlinked store is not followed (it could point anywhere).
    fs::create_directories(dir / "agents" / "evil" / "agent");
    fs::create_symlink(dir / "agents" / "ana" / "agent" / "auth-profiles.json",
                       dir / "agents" / "evil" / "agent" / "auth-profiles.json");
    CHECK(remove_auth_profile(dir.string(), "openai:default") == 2);
    CHECK(remove_auth_profile(dir.string(), "openai:default") == 0);
    std::ifstream in(dir / "agents" / "ana" / "agent" / "auth-profiles.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("openai:default") == std::string::npos);
    CHECK(text.find("anthropic:default") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "agents" / "ana" / "agent" / "auth-profiles.json.lock"));
    fs::remove_all(dir);
}

TEST_CASE("runtime: argv differs per version where the CLIs differ", "[runtime]") {
    const cli six("/rt", "2026.6.1"), nine("/rt", "2026.9.6");
    CHECK(six.paste_api_key("openai", "openai:w", "k", std::string("ana")).argv ==
          sv{"/rt", "models", "auth", "--agent", "ana", "paste-api-key", "--provider", "openai",
             "--profile-id", "openai:w"});
    CHECK(nine.paste_api_key("openai", "openai:w", "k", std::string("ana")).argv ==
          sv{"/rt", "models", "auth", "paste-api-key", "--provider", "openai", "--profile-id",
             "openai:w", "--agent", "ana"});
    const std::string cfg6 = R"({"agents":{"list":[{"id":"main"},{"id":"ana"}]}})";
    CHECK(six.agent_index(cfg6, "ana") == std::optional<std::size_t>(1));
    CHECK_FALSE(six.agent_index(cfg6, "bob"));
    auto calls = six.set_agent_model("ana", 1, std::string("openai/gpt-5"), std::string("none"));
    REQUIRE(calls.size() == 1);
    CHECK(
        calls[0].argv ==
        sv{"/rt", "config", "set", "--batch-json",
           R"([{"path":"agents.list[1].model","value":"openai/gpt-5"},{"path":"agents.list[1].thinkingDefault","value":"off"}])"});
    auto nine_calls = nine.set_agent_model("ana", 0, std::string(""), std::nullopt);
    REQUIRE(nine_calls.size() == 1);
    CHECK(nine_calls[0].argv == sv{"/rt", "config", "unset", "agents.entries.ana.model"});
    CHECK_FALSE(six.auth_logout("openai:w", "ana"));
    CHECK(nine.auth_logout("openai:w", "ana")->argv ==
          sv{"/rt", "models", "auth", "logout", "--agent", "ana", "--yes", "openai:w"});
}

TEST_CASE(
    "runtime: the connected providers, the default model and a provider's models come from "
    "the CLI's JSON",
    "[runtime]") {
    // What 2026.6.1 prints for `models status --json` with an anthropic key (cut down).
    const std::string status =
        "notice first\n"
        R"({"defaultModel":"openai/gpt-5.5","auth":{"providers":[)"
        R"({"provider":"anthropic","effective":{"kind":"profiles"}},)"
        R"({"provider":"mistral","effective":{"kind":"env"}}],"missingProvidersInUse":["openai"]}})";
    CHECK(awp::runtime::connected_providers(status) ==
          std::vector<std::string>{"anthropic", "mistral"});
    CHECK(awp::runtime::default_model(status) == std::optional<std::string>("openai/gpt-5.5"));
    CHECK(awp::runtime::connected_providers(R"({"auth":{}})")->empty());
    CHECK_FALSE(awp::runtime::connected_providers("not json"));

    const std::string list =
        R"({"count":4,"models":[{"key":"anthropic/claude-a","available":false},)"
        R"({"key":"openai/gpt-x","available":true},{"key":"anthropic/claude-b","available":true},)"
        R"({"key":"openrouter/anthropic/claude-c"}]})";
    const auto only = awp::runtime::models_of(list, {"anthropic"});
    REQUIRE(only);
    CHECK(*only == R"({"count":2,"models":[{"key":"anthropic/claude-a","available":false},)"
                   R"({"key":"anthropic/claude-b","available":true}],"providers":["anthropic"]})");
    CHECK(*awp::runtime::models_of(list, {}) == R"({"count":0,"models":[],"providers":[]})");
    // One list per provider (`--provider P`), merged in their order; any that is not a list
    // spoils the answer, and no list at all is no model.
    const std::string mistral = R"({"count":1,"models":[{"key":"mistral/large"}]})";
    const auto both = awp::runtime::models_of(std::vector<std::string_view>{mistral, list},
                                              {"mistral", "openai"});
    REQUIRE(both);
    CHECK(*both == R"({"count":2,"models":[{"key":"mistral/large"},)"
                   R"({"key":"openai/gpt-x","available":true}],"providers":["mistral","openai"]})");
    CHECK_FALSE(awp::runtime::models_of(std::vector<std::string_view>{mistral, "Gateway down"},
                                        {"mistral"}));
    CHECK(*awp::runtime::models_of(std::vector<std::string_view>{}, {}) ==
          R"({"count":0,"models":[],"providers":[]})");
    CHECK(awp::runtime::first_model(list, "anthropic") ==
          std::optional<std::string>("anthropic/claude-b"));  // the first available one
    CHECK(awp::runtime::first_model(R"({"models":[{"key":"x/y"}]})", "x") ==
          std::optional<std::string>("x/y"));
    CHECK_FALSE(awp::runtime::first_model(list, "groq"));
}

}  // namespace runtime_adapter_test
