// Unit tests of the command runner's payload validation, argv mapping, mode table, scrubbing,
// redaction, output tails and secret env files.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "actions.hpp"
#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "config.hpp"
#include "scrub.hpp"
#include "secrets.hpp"
#include "sources.hpp"

namespace runner_actions_test {

using namespace awp::runner;

namespace {

runner_config config() {
    runner_config c;
    c.agent_runtime = "/opt/rt";
    c.runtime = awp::runtime::cli("/opt/rt", "2026.6.1");
    c.scripts_dir = "/scripts";
    c.runtime_home = "/home/x/.openclaw";
    c.compose_project = "proj";
    c.repo_dir = "/srv/awp";
    return c;
}

command_row cmd(std::string action, std::string payload = "{}",
                std::optional<std::string> slug = std::nullopt) {
    command_row c;
    c.id = "11111111-1111-1111-1111-111111111111";
    c.action = std::move(action);
    c.payload = std::move(payload);
    c.agent_slug = std::move(slug);
    return c;
}

std::string refusal(const command_row& c, const runner_config& cfg = config()) {
    try {
        plan_command(c, cfg);
    } catch (const invalid_command& e) {
        return e.what();
    }
    return "";
}

std::vector<std::string> argv_of(const command_row& c, const runner_config& cfg = config()) {
    auto p = plan_command(c, cfg);
    REQUIRE(p.kind == plan_kind::spawn);
    REQUIRE(p.steps.size() == 1);
    return p.steps[0].argv;
}

using sv = std::vector<std::string>;

}  // namespace

TEST_CASE("provision validates every payload field and keeps it for the runtime steps",
          "[runner]") {
    auto c = cmd("provision",
                 R"({"channel":"discord","discord_server_id":"123","discord_user_id":"456",
                     "source_template":"template/sales","name":"Ana; rm -rf /","description":"d",
                     "emoji":"🙂","model":"anthropic/claude-x","owner_name":"O N",
                     "owner_preferred_name":"O","owner_timezone":"Europe/Berlin"})",
                 "Ana");
    auto p = plan_command(c, config());
    CHECK(p.kind == plan_kind::provision);
    CHECK(p.sync_secrets_first);
    CHECK(p.steps.empty());  // built once the agent's secrets are synced (the token file)
    CHECK(p.fields.at("agent_slug") == "Ana");
    CHECK(p.fields.at("agent_id") == "ana");  // the runtime's id
    CHECK(p.fields.at("channel") == "discord");
    CHECK(p.fields.at("name") == "Ana; rm -rf /");
    CHECK(p.fields.at("model") == "anthropic/claude-x");
    CHECK(p.fields.at("owner_timezone") == "Europe/Berlin");
    // The templates endpoint's "branch" (template/<name>) and its "id" (<name>) name one template.
    CHECK(p.fields.at("source_template") == "sales");
    CHECK(plan_command(cmd("provision", R"({"source_template":"sales"})", "bob"), config())
              .fields.at("source_template") == "sales");
    for (const char* bad : {"template/../x", "template/a/b", "other/sales", "template/", "../x"}) {
        INFO(bad);
        CHECK_THAT(
            refusal(cmd("provision", std::string(R"({"source_template":")") + bad + "\"}", "bob")),
            Catch::Contains("GET /api/agents/templates"));
    }
    // Defaults: channel telegram.
    CHECK(plan_command(cmd("provision", "{}", "bob"), config()).fields.at("channel") == "telegram");
    // The runtime keeps "main" for its default agent: never provisioned by awp.
    CHECK_THAT(refusal(cmd("provision", "{}", "Main")), Catch::Contains("reserves"));
}

TEST_CASE("invalid payloads are refused with a message naming the field", "[runner]") {
    CHECK_THAT(refusal(cmd("provision", R"({"channel":"fax"})", "a")),
               Catch::Contains("\"channel\"") && Catch::Contains("telegram"));
    CHECK_THAT(refusal(cmd("provision", R"({"model":"no-slash"})", "a")),
               Catch::Contains("\"model\""));
    CHECK_THAT(refusal(cmd("provision", R"({"name":5})", "a")),
               Catch::Contains("\"name\" must be a string"));
    CHECK_THAT(refusal(cmd("provision", R"({"owner_timezone":"../etc"})", "a")),
               Catch::Contains("owner_timezone"));
    CHECK_THAT(refusal(cmd("provision", "{}", "../etc")), Catch::Contains("not a safe slug"));
    CHECK_THAT(refusal(cmd("provision", "{}")), Catch::Contains("needs an agent"));
    CHECK_THAT(refusal(cmd("update", "{}", "a/../../b")), Catch::Contains("not a safe slug"));
    CHECK_THAT(refusal(cmd("remove", "{}", "..")), Catch::Contains("not a safe slug"));
    CHECK_THAT(refusal(cmd("approve_pairing", R"x({"pairing_code":"AB$(id)"})x")),
               Catch::Contains("pairing_code"));
    CHECK_THAT(refusal(cmd("approve_pairing", R"({"pairing_code":"ABC","channel":"none"})")),
               Catch::Contains("channel"));
    CHECK_THAT(refusal(cmd("approve_pairing", "{}")),
               Catch::Contains("\"pairing_code\" is required"));
    CHECK_THAT(refusal(cmd("set_agent_model", R"({"agent_slug":"a"})")),
               Catch::Contains("\"model\" or \"thinking\""));
    CHECK_THAT(refusal(cmd("set_agent_model", R"({"agent_slug":"a","thinking":"max"})")),
               Catch::Contains("none, low, medium or high"));
    CHECK_THAT(refusal(cmd("auth_set_api_key", R"({"provider":"openai"})")),
               Catch::Contains("\"api_key\""));
    CHECK_THAT(refusal(cmd("auth_set_api_key", R"({"provider":"Open AI","api_key":"k"})")),
               Catch::Contains("\"provider\""));
    CHECK_THAT(refusal(cmd("auth_set_api_key",
                           R"({"provider":"x","api_key":"k","base_url":"file:///etc"})")),
               Catch::Contains("base_url"));
    CHECK_THAT(refusal(cmd("auth_start", R"({"provider":"x","mode":"magic"})")),
               Catch::Contains("oauth_paste"));
    CHECK_THAT(refusal(cmd("auth_start", R"({"provider":"x","profile_name":"a b"})")),
               Catch::Contains("profile_name"));
    CHECK_THAT(refusal(cmd("auth_paste", R"({"parent_command_id":"nope","value":"v"})")),
               Catch::Contains("parent_command_id"));
    CHECK_THAT(refusal(cmd("auth_remove", R"({"profile_id":"noColon"})")),
               Catch::Contains("provider:profile_name"));
    CHECK_THAT(refusal(cmd("auth_refresh", R"({"profile_id":"a:b:c"})")),
               Catch::Contains("profile_id"));
    CHECK_THAT(
        refusal(cmd("source_write",
                    R"({"connection_id":"11111111-1111-1111-1111-111111111111","action":"x"})")),
        Catch::Contains("\"params\""));
    CHECK_THAT(refusal(cmd("execute_prompt", R"({"prompt":""})", "a")),
               Catch::Contains("\"prompt\""));
    CHECK_THAT(refusal(cmd("execute_prompt", R"({"prompt":"hi","timeout_seconds":100000})", "a")),
               Catch::Contains("timeout_seconds"));
    CHECK_THAT(refusal(cmd("run_shell", R"({"argv":"ls -la"})")), Catch::Contains("\"argv\""));
    CHECK_THAT(refusal(cmd("run_shell", R"({"argv":["ls",1]})")), Catch::Contains("strings only"));
    CHECK_THAT(refusal(cmd("upload_file", R"({"path":"../x","content":"a"})", "a")),
               Catch::Contains("\"..\""));
    CHECK_THAT(refusal(cmd("upload_file", R"({"path":"/etc/x","content":"a"})", "a")),
               Catch::Contains("relative"));
    CHECK_THAT(
        refusal(cmd("upload_file", R"({"path":"x","content":"@@","encoding":"base64"})", "a")),
        Catch::Contains("base64"));
    CHECK_THAT(refusal(cmd("send_message", R"({"target":"1"})")), Catch::Contains("\"message\""));
    CHECK_THAT(refusal(cmd("list_models", "[1,2]")), Catch::Contains("JSON object"));
    CHECK_THAT(refusal(cmd("backup_gateway")),
               Catch::Contains("unknown action \"backup_gateway\""));
}

TEST_CASE("the RUNTIME_MODE table maps gateway actions to compose, systemctl and the runtime",
          "[runner]") {
    auto c = config();
    c.mode = runtime_mode::container;
    CHECK(argv_of(cmd("restart_gateway"), c) ==
          sv{"docker", "compose", "-p", "proj", "restart", "agent-runtime"});
    CHECK(argv_of(cmd("restart_dispatcher"), c) ==
          sv{"docker", "compose", "-p", "proj", "restart", "awp-inbox-dispatcher"});
    auto up = plan_command(cmd("update_gateway"), c);
    REQUIRE(up.steps.size() == 2);
    CHECK(up.steps[0].argv == sv{"docker", "compose", "-p", "proj", "pull"});
    CHECK(up.steps[1].argv == sv{"docker", "compose", "-p", "proj", "up", "-d"});

    c.mode = runtime_mode::service_manager;
    // With the host's awp-host-ops helper (the systemd units set AWP_HOST_OPS_DIR): asked of it.
    c.host_ops_dir = "/var/lib/awp-host-ops";
    for (const auto& [action, op] : std::vector<std::pair<std::string, std::string>>{
             {"restart_dispatcher", "restart-dispatcher"},
             {"restart_gateway", "restart-runtime"},
             {"update_gateway", "update"}}) {
        auto hp = plan_command(cmd(action), c);
        REQUIRE(hp.steps.size() == 1);
        CHECK(hp.steps[0].argv == sv{"/scripts/host-op.sh", op});
        CHECK(hp.steps[0].host_operation);
    }
    c.host_ops_dir.clear();
    CHECK(argv_of(cmd("restart_gateway"), c) == sv{"/opt/rt", "gateway", "restart", "--json"});
    CHECK(argv_of(cmd("restart_dispatcher"), c) ==
          sv{"systemctl", "--user", "restart", "awp-inbox-dispatcher"});
    up = plan_command(cmd("update_gateway"), c);
    REQUIRE(up.steps.size() == 2);
    CHECK(up.steps[0].argv == sv{"git", "-C", "/srv/awp", "pull", "--ff-only"});
    CHECK(up.steps[1].argv == sv{"/srv/awp/deploy/install-systemd.sh", "--update"});

    CHECK(parse_runtime_mode("docker") == runtime_mode::container);
    CHECK(parse_runtime_mode("systemd") == runtime_mode::service_manager);
    CHECK_THROWS(parse_runtime_mode("e2b"));
}

TEST_CASE("runtime CLI actions have the documented argv", "[runner]") {
    CHECK(argv_of(cmd("approve_pairing", R"({"pairing_code":" AB-12 "})")) ==
          sv{"/opt/rt", "pairing", "approve", "telegram", "AB-12"});
    CHECK(argv_of(cmd("update", "{}", "ana")) == sv{"/scripts/update-agent.sh", "ana"});
    auto rm = plan_command(cmd("remove", "{}", "Ana"), config());
    REQUIRE(rm.steps.size() == 2);
    CHECK(rm.steps[0].argv == sv{"/opt/rt", "agents", "delete", "ana", "--force", "--json"});
    CHECK(rm.steps[1].argv[0] == "rm");
    CHECK(argv_of(cmd("update_all")) == sv{"/scripts/update-all-agents.sh"});
    // Without a provider: the connected providers' models (runtime_ops.cpp), never --all as is.
    CHECK(plan_command(cmd("list_models"), config()).kind == plan_kind::list_models);
    CHECK(plan_command(cmd("list_models"), config()).json_output);
    CHECK(argv_of(cmd("list_models", R"({"provider":"openai"})")) ==
          sv{"/opt/rt", "models", "list", "--json", "--provider", "openai"});
    CHECK(argv_of(cmd("auth_list")) == sv{"/opt/rt", "models", "status", "--json", "--probe"});
    CHECK(argv_of(cmd("auth_refresh", R"({"profile_id":"openai:work"})")) ==
          sv{"/opt/rt", "models", "status", "--json", "--probe", "--probe-profile", "openai:work"});
    // The profile first in its provider's order, then the default model (runtime_ops.cpp).
    auto def = plan_command(cmd("auth_set_default", R"({"provider":"anthropic"})"), config());
    CHECK(def.kind == plan_kind::auth_set_default);
    CHECK(def.fields.at("profile_name") == "default");
    CHECK(def.fields.count("agent_id") == 0);
    CHECK(def.fields.count("model") == 0);
    auto def_agent = plan_command(
        cmd("auth_set_default",
            R"({"provider":"anthropic","profile_name":"w","model":"anthropic/claude-x"})", "Ana"),
        config());
    CHECK(def_agent.fields.at("agent_id") == "ana");
    CHECK(def_agent.fields.at("model") == "anthropic/claude-x");
    CHECK_THAT(refusal(cmd("auth_set_default", R"({"provider":"anthropic","model":"openai/x"})")),
               Catch::Contains("a model of provider \"anthropic\""));
    auto key = plan_command(
        cmd("auth_set_api_key", R"({"provider":"openai","api_key":"sk-secret-1"})"), config());
    CHECK(key.steps[0].argv == sv{"/opt/rt", "models", "auth", "paste-api-key", "--provider",
                                  "openai", "--profile-id", "openai:default"});
    CHECK(key.steps[0].stdin_data == std::optional<std::string>("sk-secret-1\n"));
    auto url =
        plan_command(cmd("auth_set_api_key",
                         R"({"provider":"ollama","api_key":"k-123","base_url":"http://h:1"})"),
                     config());
    REQUIRE(url.steps.size() == 2);
    CHECK(url.steps[1].argv ==
          sv{"/opt/rt", "config", "set", "models.providers.ollama.baseUrl", "http://h:1"});
    // Sessions live in the runtime's gateway.
    CHECK(argv_of(cmd("start_session", R"({"session_id":"s1"})", "ana")) ==
          sv{"/opt/rt", "gateway", "call", "sessions.create", "--json", "--params",
             R"({"agentId":"ana","key":"agent:ana:s1"})"});
    CHECK(argv_of(cmd("end_session", "{}", "ana")) ==
          sv{"/opt/rt", "gateway", "call", "sessions.delete", "--json", "--params",
             R"({"key":"agent:ana:main","agentId":"ana"})"});
    CHECK(argv_of(cmd("restart_session", "{}", "ana")) ==
          sv{"/opt/rt", "gateway", "call", "sessions.reset", "--json", "--params",
             R"({"key":"agent:ana:main","agentId":"ana","reason":"new"})"});
    CHECK(argv_of(cmd("execute_prompt", R"({"prompt":"$(id)\nline 2","thinking":"none"})",
                      "ana")) == sv{"/opt/rt", "agent", "--agent", "ana", "--message",
                                    "$(id)\nline 2", "--thinking", "off"});
    CHECK(argv_of(cmd("send_message", R"({"channel":"slack","target":"C1","message":"hi"})",
                      "Ana")) == sv{"/opt/rt", "message", "send", "--channel", "slack", "--target",
                                    "C1", "--message", "hi", "--account", "ana"});
    CHECK(argv_of(cmd("run_shell", R"({"argv":["/bin/echo","a b","$HOME"]})")) ==
          sv{"/bin/echo", "a b", "$HOME"});
    auto login =
        plan_command(cmd("auth_start", R"({"provider":"openai","mode":"device_code"})"), config());
    CHECK(login.kind == plan_kind::auth_start);
    CHECK(login.steps[0].argv == sv{"/opt/rt", "models", "auth", "login", "--provider", "openai",
                                    "--profile-id", "openai:default", "--device-code"});
    CHECK(plan_command(cmd("auth_start", R"({"provider":"openai"})"), config()).fields.at("mode") ==
          "oauth_paste");
    auto model =
        plan_command(cmd("set_agent_model", R"({"agent_slug":"Ana","thinking":"none"})"), config());
    CHECK(model.kind == plan_kind::set_agent_model);
    CHECK(model.fields.at("agent_id") == "ana");
    CHECK(model.fields.at("thinking") == "none");  // mapped by the adapter when run
}

TEST_CASE("scrub patches remove the secrets on success and on failure", "[runner]") {
    // Both flags on every auth_set_api_key, base_url_applied false when none was given.
    CHECK(scrub_patch(cmd("auth_set_api_key", R"({"provider":"p","api_key":"k"})"), true) ==
          R"({"api_key":null,"api_key_scrubbed":true,"base_url_applied":false})");
    CHECK(scrub_patch(
              cmd("auth_set_api_key", R"({"provider":"p","api_key":"k","base_url":"http://h"})"),
              true) ==
          R"({"api_key":null,"base_url":null,"api_key_scrubbed":true,"base_url_applied":true})");
    CHECK(scrub_patch(
              cmd("auth_set_api_key", R"({"provider":"p","api_key":"k","base_url":"http://h"})"),
              false) ==
          R"({"api_key":null,"base_url":null,"api_key_scrubbed":true,"base_url_applied":false})");
    CHECK(scrub_patch(cmd("auth_paste", R"({"parent_command_id":"x","value":"v"})"), false) ==
          R"({"value":null,"value_scrubbed":true})");
    CHECK(scrub_patch(cmd("provision", R"({"telegram_token":"t","x_token":"u","name":"n"})"),
                      true) == R"({"telegram_token":null,"x_token":null})");
    CHECK(scrub_patch(cmd("list_models"), true).empty());
    const auto s =
        payload_secrets(cmd("auth_paste", R"({"parent_command_id":"x","value":" code=abc "})"));
    CHECK(std::find(s.begin(), s.end(), "code=abc") != s.end());
}

TEST_CASE("outputs are redacted, cut to a tail with a marker and made valid text", "[runner]") {
    CHECK(redact("key sk-123456 and sk-123456", {"sk-123456"}) == "key [redacted] and [redacted]");
    CHECK(redact("short abc", {"abc"}) == "short abc");
    const std::string big(5000, 'x');
    const auto t = tail(big + "END", 100);
    CHECK(t.size() < 140);
    CHECK_THAT(t, Catch::StartsWith("[... ") && Catch::EndsWith("END"));
    CHECK(clean_text(std::string("a\0b\xff", 4)) ==
          "a\xEF\xBF\xBD"
          "b\xEF\xBF\xBD");
    CHECK(clean_text("é✓") == "é✓");
}

TEST_CASE("secret files: 0600, atomic, sorted, quoted, and a deleted secret disappears",
          "[runner]") {
    const std::string key = awp::core::crypto::derive_secret_key("service-role-key");
    const auto dir = std::filesystem::temp_directory_path() /
                     ("awp-runner-secrets-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::vector<secret_row> rows = {
        {"1", std::nullopt, "OPENAI_API_KEY",
         awp::core::crypto::encrypt_secret_with_key("sk-a'b", key)},
        {"2", std::string("ana"), "TELEGRAM_BOT_TOKEN",
         awp::core::crypto::encrypt_secret_with_key("tg-1", key)},
        {"3", std::nullopt, "BROKEN", "enc:v1:AAAA.BBBB.CCCC"},
    };
    auto r = write_secret_files(dir.string(), key, rows);
    CHECK(r.synced_ids == std::vector<std::string>{"1", "2"});
    CHECK(r.failed_ids == std::vector<std::string>{"3"});
    auto read = [](const std::filesystem::path& p) {
        std::ifstream in(p);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    CHECK_THAT(read(dir / "gateway.env"), Catch::Contains("OPENAI_API_KEY='sk-a'\\''b'\n"));
    CHECK_THAT(read(dir / "agents/ana.env"),
               Catch::Contains("TELEGRAM_BOT_TOKEN='tg-1'") && Catch::Contains("OPENAI_API_KEY="));
    struct stat st {};
    REQUIRE(::stat((dir / "gateway.env").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(read_env_file((dir / "gateway.env").string()).at("OPENAI_API_KEY") == "sk-a'b");

    rows.erase(rows.begin(), rows.begin() + 2);
    write_secret_files(dir.string(), key, rows);
    CHECK_THAT(read(dir / "gateway.env"), !Catch::Contains("OPENAI_API_KEY"));
    CHECK_FALSE(std::filesystem::exists(dir / "agents/ana.env"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("source credentials come from <PROVIDER>_SOURCE_<id8> keys", "[runner]") {
    std::map<std::string, std::string> env = {{"HTTP_JSON_SOURCE_ABCDEF12", "k1"},
                                              {"HTTP_JSON_SOURCE_ABCDEF12__USER", "u"},
                                              {"HTTP_JSON_SOURCE_99999999", "other"}};
    auto c = source_credentials(env, "http_json", "abcdef12-0000-0000-0000-000000000000");
    CHECK(c.size() == 2);
    CHECK(c.at("api_key") == "k1");
    CHECK(c.at("user") == "u");
}

TEST_CASE("GATEWAY_API_URL is a base http(s) address, kept without a trailing slash", "[runner]") {
    using awp::runner::normalize_api_url;
    CHECK(normalize_api_url("") == "");
    CHECK(normalize_api_url("http://10.0.0.5:3000/") == "http://10.0.0.5:3000");
    CHECK(normalize_api_url("https://gw.example.org") == "https://gw.example.org");
    CHECK(normalize_api_url("http://[::1]:3000") == "http://[::1]:3000");
    for (const char* bad :
         {"ftp://h", "gw.example.org:3000", "http://", "http://:3000", "http://u:p@h:3000",
          "http://h:3000/?x=1", "http://h:3000/#f", "http://h:30 00", "http://h:port"}) {
        INFO(bad);
        CHECK_THROWS_AS(normalize_api_url(bad), awp::core::config_error);
    }
}

}  // namespace runner_actions_test
