// The real agent runtime: awp-command-runner and awp-inbox-dispatcher (real processes) against
// the real openclaw CLI from npm (AWP_OPENCLAW, installed by scripts/install-runtime.sh; CI sets
// it). Every runtime action runs in a throwaway OPENCLAW_STATE_DIR and the runtime's own state is
// checked after it; an action that needs the network (a model turn, a token exchange, a chat
// message, the runtime's gateway) must fail with the runtime's own message, never with an argv
// error. docs/runtime.md.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "awp/core/crypto.hpp"
#include "awp/core/identity.hpp"
#include "awp/core/json.hpp"
#include "awp/core/process.hpp"
#include "awp/runtime/openclaw.hpp"
#include "integration/runner_harness.hpp"
#include "support/child.hpp"

namespace runtime_real_test {

namespace {

namespace fs = std::filesystem;
namespace rj = rapidjson;
using namespace awp::runner_test;
using namespace std::chrono_literals;

const char* real_runtime() {
    const char* p = std::getenv("AWP_OPENCLAW");
    return p && *p ? p : nullptr;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// What an argv mistake looks like in the CLI's own words (commander.js and openclaw's checks).
bool argv_error(const std::string& text) {
    for (const char* s : {"unknown option", "too many arguments", "missing required argument",
                          "does not recognize option", "unknown command", "Usage: openclaw",
                          "Invalid option", "expected one of"}) {
        if (text.find(s) != std::string::npos) return true;
    }
    return false;
}

rj::Document config_of(const fs::path& state) {
    return awp::core::json::parse_object(slurp(state / "openclaw.json"),
                                         awp::core::json::kDocument);
}

const rj::Value* agent_entry(const rj::Document& cfg, const std::string& id) {
    if (!cfg.HasMember("agents")) return nullptr;
    // 2026.9: agents.entries.<id>; 2026.6: agents.list[] with an id.
    if (cfg["agents"].HasMember("entries")) {
        const auto& e = cfg["agents"]["entries"];
        return e.HasMember(id.c_str()) ? &e[id.c_str()] : nullptr;
    }
    if (!cfg["agents"].HasMember("list")) return nullptr;
    for (const auto& e : cfg["agents"]["list"].GetArray())
        if (e.HasMember("id") && e["id"].GetString() == id) return &e;
    return nullptr;
}

struct real_stack {
    awp::test::scoped_database db;
    pg::connection admin = db.admin();
    gateway_fixture gw{admin, "Ada"};
    fs::path root = fs::temp_directory_path() / awp::test::random_name("awp-real-rt-");
    fs::path state = root / "openclaw";
    std::string key = "real-runtime-test-service-role-key";

    std::map<std::string, std::string> env() const {
        return {{"DATABASE_URL", db.gateway_dsn(gw.slug)},
                {"GATEWAY_ID", gw.slug},
                {"AGENT_RUNTIME", real_runtime()},
                {"OPENCLAW_STATE_DIR", state.string()},
                {"HOME", (root / "home").string()},
                {"SECRETS_DIR", (root / "secrets").string()},
                {"AWP_STATE_DIR", (root / "runner").string()},
                {"AWP_RUNTIME_SCRIPTS", std::string(AWP_SOURCE_DIR) + "/deploy/runtime"},
                {"RUNTIME_MODE", "service_manager"},
                {"SERVICE_ROLE_KEY", key},
                {"COMMAND_TIMEOUT", "120"},
                {"NETWORKING_MODE", "remote"},
                {"AUTH_FLOW_TIMEOUT", "20"},
                {"AUTH_CALLBACK_PORT", std::to_string(21000 + ::getpid() % 20000)},
                {"LOG_LEVEL", "warn"}};
    }
    real_stack() { fs::create_directories(root / "home"); }
    ~real_stack() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    command_state run(const std::string& action, const std::string& payload,
                      const std::optional<std::string>& agent = std::nullopt) {
        return wait_finished(admin, enqueue(admin, gw.id, action, payload, agent), 200s);
    }
};

}  // namespace

TEST_CASE("real runtime: every runner action leaves openclaw in the state it promises",
          "[runtime][e2e][slow]") {
    if (!real_runtime()) {
        WARN(
            "AWP_OPENCLAW is not set (scripts/install-runtime.sh): the real-runtime test is "
            "skipped");
        return;
    }
    real_stack s;
    const std::string id = awp::runtime::agent_id(s.gw.agent);
    const std::string token = "123456789:AAreal-runtime-test-token";
    s.admin.exec(
        "INSERT INTO secrets (tenant_id, gateway_id, agent_id, key, encrypted_value) VALUES ($1, "
        "$2, $3, 'TELEGRAM_BOT_TOKEN', $4)",
        {kDefaultTenant, s.gw.id, s.gw.agent_id, awp::core::crypto::encrypt_secret(token, s.key)});
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"}, s.env());
    const auto t0 = std::chrono::steady_clock::now();
    int passed = 0;

    // provision: the agent, its identity, its telegram account (token from a file) and binding.
    auto p = s.run("provision",
                   R"({"name":"Ada Lovelace","emoji":"🧮","model":"anthropic/claude-sonnet-4-5",)"
                   R"("owner_timezone":"Europe/London"})",
                   s.gw.agent);
    INFO(p.error << p.stderr_);
    REQUIRE(p.status == "done");
    {
        auto cfg = config_of(s.state);
        const auto* a = agent_entry(cfg, id);
        REQUIRE(a);
        CHECK(std::string((*a)["workspace"].GetString()) ==
              (s.state / ("workspace-" + s.gw.agent)).string());
        CHECK(std::string((*a)["model"].GetString()) == "anthropic/claude-sonnet-4-5");
        CHECK(fs::exists(s.state / ("workspace-" + s.gw.agent) / "AGENTS.md"));  // seeded
        const std::string text = slurp(s.state / "openclaw.json");
        CHECK_THAT(text, Catch::Contains("Ada Lovelace"));   // identity
        CHECK_THAT(text, Catch::Contains("\"tokenFile\""));  // channel
        CHECK_THAT(text, !Catch::Contains(token));           // not in config
        CHECK(cfg.HasMember("bindings"));                    // routing
        CHECK_THAT(text, Catch::Contains("\"agentId\": \"" + id + "\""));
        CHECK_FALSE(fs::exists(s.state / "openclaw.json.lock"));  // never left behind
        ++passed;
    }

    // set_agent_model: "none" is the runtime's "off"; the config stays valid.
    auto m = s.run("set_agent_model", R"({"agent_slug":")" + s.gw.agent +
                                          R"(","model":"openai/gpt-5","thinking":"none"})");
    INFO(m.error << m.stderr_);
    CHECK(m.status == "done");
    {
        auto cfg = config_of(s.state);
        const auto* a = agent_entry(cfg, id);
        REQUIRE(a);
        CHECK(std::string((*a)["model"].GetString()) == "openai/gpt-5");
        CHECK(std::string((*a)["thinkingDefault"].GetString()) == "off");
        ++passed;
    }

    // auth_set_api_key, then auth_set_default for the agent it names, then auth_remove.
    auto k = s.run(
        "auth_set_api_key",
        R"({"provider":"openai","api_key":"sk-real-runtime-test-0001","profile_name":"work"})");
    INFO(k.error << k.stderr_);
    CHECK(k.status == "done");
    CHECK_THAT(k.payload + k.stdout_ + k.stderr_, !Catch::Contains("sk-real-runtime-test-0001"));
    const fs::path main_store = s.state / "agents" / "main" / "agent" / "auth-profiles.json";
    CHECK_THAT(slurp(main_store), Catch::Contains("\"openai:work\""));
    passed += k.status == "done";

    // The gateway's default: the order of the runtime's default agent, whose profiles every
    // agent reads through to (a named agent gets its own order: --agent).
    auto d = s.run("auth_set_default", R"({"provider":"openai","profile_name":"work"})");
    INFO(d.error << d.stderr_);
    CHECK(d.status == "done");
    CHECK_THAT(slurp(s.state / "agents" / "main" / "agent" / "auth-state.json"),
               Catch::Contains("openai:work"));
    passed += d.status == "done";
    auto da =
        s.run("auth_set_default", R"({"provider":"openai","profile_name":"work"})", s.gw.agent);
    CHECK(da.status == "done");  // the order set with --agent <id> (argv: unit tests)
    CHECK_THAT(da.stdout_, Catch::Contains("\"profileId\":\"openai:work\""));
    passed += da.status == "done";

    // JSON outputs stored valid, whatever their size (the full catalogue is trimmed by entries).
    for (const char* payload : {R"({"provider":"openai"})", "{}"}) {
        auto l = s.run("list_models", payload);
        INFO(l.error << l.stderr_);
        CHECK(l.status == "done");
        CHECK(awp::core::json::try_parse(l.stdout_, awp::core::json::kDocument));
        passed += l.status == "done";
    }
    for (const char* action : {"auth_list", "auth_refresh"}) {
        auto a =
            s.run(action,
                  std::string(action) == "auth_refresh" ? R"({"profile_id":"openai:work"})" : "{}");
        INFO(action << ": " << a.error << a.stderr_);
        CHECK_FALSE(argv_error(a.error + a.stderr_ + a.stdout_));
        if (a.status == "done") {
            CHECK(awp::core::json::try_parse(a.stdout_, awp::core::json::kDocument));
        }
        ++passed;
    }

    auto rm = s.run("auth_remove", R"({"profile_id":"openai:work"})");
    INFO(rm.error);
    CHECK(rm.status == "done");
    CHECK_THAT(slurp(main_store), !Catch::Contains("\"openai:work\""));
    passed += rm.status == "done";

    // update / update_all: a workspace provisioned without a template has nothing to update.
    auto u = s.run("update", "{}", s.gw.agent);
    CHECK(u.status == "done");
    CHECK_THAT(u.stdout_, Catch::Contains("nothing to update"));
    auto ua = s.run("update_all", "{}");
    CHECK(ua.status == "done");
    passed += (u.status == "done") + (ua.status == "done");

    // What needs the network or the runtime's running gateway fails with the runtime's words.
    const std::vector<std::pair<std::string, std::string>> offline = {
        {"approve_pairing", R"({"pairing_code":"ABCD1234"})"},
        {"start_session", "{}"},
        {"restart_session", R"({"session_id":"s1"})"},
        {"end_session", "{}"},
        {"execute_prompt", R"({"prompt":"hello","thinking":"none","timeout_seconds":60})"},
        {"send_message", R"({"channel":"telegram","target":"12345","message":"hi"})"},
        {"restart_gateway", "{}"},
        {"auth_start", R"({"provider":"openai","mode":"device_code"})"},
    };
    for (const auto& [action, payload] : offline) {
        auto r = s.run(action, payload, s.gw.agent);
        INFO(action << ": " << r.status << " / " << r.error << " / " << r.stderr_.substr(0, 600));
        CHECK(r.status != "pending");
        CHECK_FALSE(argv_error(r.error + r.stderr_ + r.stdout_));
        if (r.status == "failed") CHECK_FALSE(r.error.empty());
        WARN(action << " -> " << r.status << ": " << r.error.substr(0, 240));
        CHECK(r.error.find('\x1b') == std::string::npos);  // no terminal codes stored
        ++passed;
    }

    // remove: the runtime forgets the agent.
    auto gone = s.run("remove", "{}", s.gw.agent);
    INFO(gone.error << gone.stderr_);
    CHECK(gone.status == "done");
    CHECK_FALSE(agent_entry(config_of(s.state), id));
    passed += gone.status == "done";

    const auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0);
    WARN("real runtime " << awp::runtime::cli::detect(real_runtime()).runtime_version().text << ": "
                         << passed << " action runs checked in " << secs.count() << " s");
    runner.signal(SIGTERM);
    CHECK(runner.wait(30s) == std::optional<int>(0));
}

TEST_CASE("real runtime: an unsupported version stops the runner at start with exit 78",
          "[runtime][e2e]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    const fs::path dir = fs::temp_directory_path() / awp::test::random_name("awp-old-rt-");
    fs::create_directories(dir);
    const std::string fake = std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime";
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"},
                            {{"DATABASE_URL", db.gateway_dsn(gw.slug)},
                             {"GATEWAY_ID", gw.slug},
                             {"AGENT_RUNTIME", fake},
                             {"FAKE_RUNTIME_VERSION", "2025.12.1"},
                             {"AWP_CHILD_ENV_ALLOW", "FAKE_*"},
                             {"AWP_STATE_DIR", (dir / "state").string()},
                             {"LOG_LEVEL", "warn"}});
    CHECK(runner.wait(30s) == std::optional<int>(78));
    CHECK_THAT(runner.log(), Catch::Contains("2025.12.1") && Catch::Contains("2026.6.x"));
    fs::remove_all(dir);
}

TEST_CASE("real runtime: the dispatcher's wake is accepted by the real CLI", "[runtime][e2e]") {
    if (!real_runtime()) {
        WARN("AWP_OPENCLAW is not set: skipped");
        return;
    }
    real_stack s;
    // The agent must exist in the runtime for a wake to reach its model.
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"}, s.env());
    REQUIRE(s.run("provision", R"({"channel":"none"})", s.gw.agent).status == "done");
    runner.signal(SIGTERM);
    runner.wait(30s);
    auto env = s.env();
    env["WAKE_TIMEOUT"] = "90";
    awp::test::child dispatcher({std::string(AWP_BIN_DIR) + "/awp-inbox-dispatcher"}, env);
    const std::string item =
        one(s.admin,
            "SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', $3, 'Hello', 'a test wake', "
            "'{\"thinking_override\":\"none\"}')",
            {kDefaultTenant, s.gw.agent_id, awp::test::random_name("wake-")});
    std::string status, reason;
    CHECK(eventually(
        [&] {
            auto r = s.admin.exec(
                "SELECT status::text, coalesce(last_error, '') FROM agent_inbox_items WHERE id = "
                "$1",
                {item});
            status = r.text(0, 0);
            reason = r.text(0, 1);
            return status != "pending" && status != "leased";
        },
        150s));
    INFO(status << ": " << reason);
    // Offline the model turn cannot happen; what stops it must be the runtime, not awp's argv.
    CHECK_FALSE(argv_error(reason));
    dispatcher.signal(SIGTERM);
    CHECK(dispatcher.wait(30s) == std::optional<int>(0));
}

TEST_CASE("real runtime: every flag the adapter passes exists in the real CLI's --help",
          "[runtime][e2e][slow]") {
    if (!real_runtime()) {
        WARN("AWP_OPENCLAW is not set: skipped");
        return;
    }
    const auto rt = awp::runtime::cli::detect(real_runtime());
    const std::optional<std::string> some("x"), none;
    // (the subcommand whose --help is read, a call the adapter makes)
    const std::vector<std::pair<std::vector<std::string>, awp::runtime::call>> calls = {
        {{"agents", "add"}, rt.add_agent("a", "/w", some)},
        {{"agents", "set-identity"}, *rt.set_identity("a", some, some)},
        {{"channels", "add"}, rt.add_channel("telegram", "a", "/f")},
        {{"agents", "bind"}, rt.bind("a", "telegram")},
        {{"agents", "delete"}, rt.delete_agent("a")},
        {{"agents", "list"}, rt.list_agents()},
        {{"config", "set"}, rt.set_agent_model("a", 1, some, std::string("low"))[0]},
        {{"config", "unset"}, rt.set_agent_model("a", 1, std::string(""), none)[0]},
        {{"gateway", "call"}, rt.session_create("a", some)},
        {{"gateway", "call"}, rt.session_patch("a", some, std::string("none"))},
        {{"agent"}, rt.agent_turn("a", "m", some, some, std::string("high"), 30)},
        {{"message", "send"}, rt.send_message("telegram", "t", "m", some)},
        {{"pairing", "approve"}, rt.approve_pairing("telegram", "C")},
        {{"gateway", "restart"}, rt.restart_gateway()},
        {{"models", "list"}, rt.list_models(some)},
        {{"models", "list"}, rt.list_models(none)},
        {{"models", "status"}, rt.auth_status(some)},
        {{"models", "status"}, rt.model_status()},
        {{"models", "set"}, rt.set_default_model("openai/gpt-5")},
        {{"models", "auth", "paste-api-key"}, rt.paste_api_key("p", "p:x", "k", none)},
        {{"models", "auth"}, rt.paste_api_key("p", "p:x", "k", some)},
        {{"models", "auth", "login"}, rt.login("p", "p:x", true, none)},
        {{"models", "auth", "order", "set"}, rt.auth_order("p", "p:x", some)},
    };
    for (const auto& [path, c] : calls) {
        awp::core::process::spawn_options o;
        o.argv = {real_runtime()};
        o.argv.insert(o.argv.end(), path.begin(), path.end());
        o.argv.emplace_back("--help");
        o.timeout = 60s;
        o.env["HOME"] = fs::temp_directory_path().string();
        const auto r = awp::core::process::run(o);
        REQUIRE(r.success());
        for (std::size_t i = 1 + path.size(); i < c.argv.size(); ++i) {
            const std::string& a = c.argv[i];
            // `models auth --agent A paste-api-key ...`: the rest is the subcommand's (checked
            // by the entry of its own).
            if (a == "paste-api-key" || a == "login") break;
            if (a.rfind("--", 0) != 0 || a == "--help") continue;
            INFO(path.back() << ": " << a);
            CHECK(r.out.find(a + " ") != std::string::npos);
        }
        // The subcommand words themselves are the CLI's.
        for (std::size_t i = 0; i < path.size(); ++i) CHECK(c.argv[1 + i] == path[i]);
    }
}

TEST_CASE(
    "real runtime: with AGENT_USER the runtime runs as that user and every file it keeps is "
    "that user's",
    "[runtime][e2e][security][slow]") {
    if (!real_runtime() || ::geteuid() != 0) {
        WARN("needs AWP_OPENCLAW and root: the real runtime as another user is not checked");
        return;
    }
    real_stack s;
    const auto nobody = awp::core::identity::lookup("nobody");
    const fs::path workspaces = s.root / "workspaces";
    for (const auto& d : {s.state, workspaces}) {
        fs::create_directories(d);
        REQUIRE(::chown(d.c_str(), nobody.uid, nobody.gid) == 0);
    }
    fs::permissions(s.root, fs::perms(0755));
    auto env = s.env();
    env["AGENT_USER"] = "nobody";
    env["AWP_WORKSPACES_DIR"] = workspaces.string();
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"}, env);
    const std::string id = awp::runtime::agent_id(s.gw.agent);

    auto p = s.run("provision", R"({"name":"Ada","channel":"none"})", s.gw.agent);
    INFO(p.error << p.stderr_);
    REQUIRE(p.status == "done");
    CHECK(fs::exists(workspaces / ("workspace-" + s.gw.agent) / "AGENTS.md"));  // seeded there
    auto m = s.run("set_agent_model", R"({"agent_slug":")" + s.gw.agent +
                                          R"(","model":"openai/gpt-5","thinking":"low"})");
    INFO(m.error << m.stderr_);
    CHECK(m.status == "done");
    CHECK(slurp(s.state / "openclaw.json").find("openai/gpt-5") != std::string::npos);
    auto u = s.run("upload_file", R"({"path":"notes/today.md","content":"hello"})", s.gw.agent);
    CHECK(u.status == "done");
    auto sh = s.run("run_shell", R"({"argv":["id","-u"]})", s.gw.agent);
    CHECK(sh.stdout_ == std::to_string(nobody.uid) + "\n");
    // Everything under the runtime's state and the workspaces belongs to the agent user.
    int files = 0;
    for (const auto& root : {s.state, workspaces}) {
        for (const auto& e : fs::recursive_directory_iterator(root)) {
            struct stat st {};
            REQUIRE(::lstat(e.path().c_str(), &st) == 0);
            INFO(e.path());
            CHECK(st.st_uid == nobody.uid);
            ++files;
        }
    }
    CHECK(files > 5);
    runner.signal(SIGTERM);
    CHECK(runner.wait(30s) == std::optional<int>(0));
}

namespace {

/// `git -C <dir> <args...>`'s stdout, trimmed; "" when it fails.
std::string git_in(const fs::path& dir, std::vector<std::string> args) {
    awp::core::process::spawn_options o;
    o.argv = {"git", "-C", dir.string()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.timeout = 30s;
    const auto r = awp::core::process::run(o);
    if (!r.success()) return "";
    std::string out = r.out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

void write_text(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::trunc) << text;
}

}  // namespace

TEST_CASE(
    "real runtime: provision accepts a template's branch as the templates endpoint lists it, "
    "update merges the template's new version, a conflicting local edit fails naming the path",
    "[runtime][e2e]") {
    if (!real_runtime()) {
        WARN("AWP_OPENCLAW is not set: skipped");
        return;
    }
    real_stack s;
    // The gateway's templates: a copy of deploy/templates the test can change.
    const fs::path templates = s.root / "templates";
    fs::copy(fs::path(AWP_SOURCE_DIR) / "deploy" / "templates", templates,
             fs::copy_options::recursive);
    auto env = s.env();
    env["AWP_TEMPLATES_DIR"] = templates.string();
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"}, env);
    const fs::path ws = s.state / ("workspace-" + s.gw.agent);
    const fs::path tmpl = templates / "engineer" / "AGENTS.md";

    // GET /api/agents/templates lists {"id":"engineer","branch":"template/engineer",...}.
    auto p = s.run("provision", R"({"channel":"none","source_template":"template/engineer"})",
                   s.gw.agent);
    INFO(p.error << p.stderr_ << p.stdout_);
    REQUIRE(p.status == "done");
    CHECK(slurp(ws / "AGENTS.md") == slurp(tmpl));  // the template's file over the seed
    CHECK(fs::exists(ws / "SOUL.md"));              // a seed file the template has not: kept
    CHECK(git_in(ws, {"rev-parse", "--abbrev-ref", "HEAD"}) == "agent/" + s.gw.agent);
    CHECK(git_in(ws, {"rev-parse", "--abbrev-ref", "@{u}"}) == "awp-template/template/engineer");

    // The template changes; the agent has a file of its own and edited a seed file.
    write_text(tmpl, slurp(tmpl) + "\nAlways write a test first.\n");
    auto own = s.run("upload_file", R"({"path":"notes/own.md","content":"mine"})", s.gw.agent);
    REQUIRE(own.status == "done");
    write_text(ws / "SOUL.md", "the agent's own soul\n");
    auto u = s.run("update", "{}", s.gw.agent);
    INFO(u.error << u.stderr_);
    CHECK(u.status == "done");
    CHECK_THAT(u.stdout_, Catch::Contains("updated to awp-template/template/engineer"));
    CHECK_THAT(slurp(ws / "AGENTS.md"), Catch::EndsWith("Always write a test first.\n"));
    CHECK(slurp(ws / "notes" / "own.md") == "mine");
    CHECK(slurp(ws / "SOUL.md") == "the agent's own soul\n");
    // Nothing new: nothing to merge.
    auto again = s.run("update", "{}", s.gw.agent);
    CHECK(again.status == "done");
    CHECK_THAT(again.stdout_, Catch::Contains("up to date"));

    // The agent and the template both change the first line: nothing is overwritten.
    std::string mine = slurp(ws / "AGENTS.md");
    mine.replace(0, mine.find('\n'), "# Engineer (as the agent likes it)");
    write_text(ws / "AGENTS.md", mine);
    std::string theirs = slurp(tmpl);
    theirs.replace(0, theirs.find('\n'), "# Engineer, second edition");
    write_text(tmpl, theirs);
    auto c = s.run("update", "{}", s.gw.agent);
    CHECK(c.status == "failed");
    CHECK_THAT(c.error, Catch::Contains("conflicts") && Catch::Contains("AGENTS.md") &&
                            Catch::Contains("nothing was changed"));
    CHECK(slurp(ws / "AGENTS.md") == mine);
    CHECK(git_in(ws, {"status", "--porcelain", "--untracked-files=no"}).empty());  // no merge left
    auto all = s.run("update_all", "{}");
    CHECK(all.status == "failed");
    CHECK_THAT(all.stdout_, Catch::Contains(" agent(s), 1 failed"));
    CHECK_THAT(all.error, Catch::Contains("AGENTS.md"));
    // A template this gateway does not have is refused before the runtime is called.
    auto none =
        s.run("provision", R"({"channel":"none","source_template":"template/nope"})", s.gw.agent);
    CHECK(none.status == "failed");
    CHECK_THAT(none.error, Catch::Contains("template \"nope\" does not exist"));
    runner.signal(SIGTERM);
    CHECK(runner.wait(30s) == std::optional<int>(0));
}

TEST_CASE(
    "real runtime: the agents row tells the truth: provision sets ready or error with the "
    "reason, set_agent_model its model and thinking, a session not reloaded is said",
    "[runtime][e2e][slow]") {
    if (!real_runtime()) {
        WARN("AWP_OPENCLAW is not set: skipped");
        return;
    }
    real_stack s;
    // The runner's own gateway login: the row is written through awp_command_agent_state only.
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"}, s.env());
    auto row = [&] {
        return one(s.admin,
                   "SELECT status::text || '|' || coalesce(error, '-') || '|' || "
                   "coalesce(model, '-') || '|' || coalesce(thinking, '-') FROM agents "
                   "WHERE id = $1",
                   {s.gw.agent_id});
    };
    // No telegram token stored: refused before the runtime is called; the row says why.
    auto bad = s.run("provision", "{}", s.gw.agent);
    CHECK(bad.status == "failed");
    CHECK_THAT(row(), Catch::StartsWith("error|provision: no TELEGRAM_BOT_TOKEN"));
    auto p = s.run("provision", R"({"channel":"none","model":"anthropic/claude-sonnet-4-6"})",
                   s.gw.agent);
    INFO(p.error << p.stderr_);
    REQUIRE(p.status == "done");
    CHECK(row() == "ready|-|anthropic/claude-sonnet-4-6|-");

    auto m = s.run("set_agent_model", R"({"agent_slug":")" + s.gw.agent +
                                          R"(","model":"openai/gpt-5","thinking":"low"})");
    INFO(m.error << m.stderr_);
    REQUIRE(m.status == "done");
    CHECK(row() == "ready|-|openai/gpt-5|low");
    // Offline there is no runtime gateway, so no live session to reload: the row's reader sees it.
    auto payload = awp::core::json::parse_object(m.payload, awp::core::json::kDocument);
    REQUIRE(payload.HasMember("session_reloaded"));
    CHECK(payload["session_reloaded"].IsBool());
    if (!payload["session_reloaded"].GetBool()) {
        REQUIRE(payload.HasMember("session_reload_error"));
        CHECK(payload["session_reload_error"].GetStringLength() > 0);
    }
    // "" resets the model to the gateway's default.
    auto reset = s.run("set_agent_model",
                       R"({"agent_slug":")" + s.gw.agent + R"(","model":"","thinking":"low"})");
    CHECK(reset.status == "done");
    CHECK(row() == "ready|-|-|low");
    runner.signal(SIGTERM);
    CHECK(runner.wait(30s) == std::optional<int>(0));
}

TEST_CASE(
    "real runtime: auth_set_default makes the provider the gateway's default, list_models lists "
    "the connected providers' models only, both scrub flags are set",
    "[runtime][e2e][slow]") {
    if (!real_runtime()) {
        WARN("AWP_OPENCLAW is not set: skipped");
        return;
    }
    real_stack s;
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"}, s.env());
    auto k =
        s.run("auth_set_api_key", R"({"provider":"anthropic","api_key":"sk-ant-real-test-0002"})");
    INFO(k.error << k.stderr_);
    REQUIRE(k.status == "done");
    auto kp = awp::core::json::parse_object(k.payload, awp::core::json::kDocument);
    CHECK((kp.HasMember("api_key_scrubbed") && kp["api_key_scrubbed"].GetBool()));
    CHECK((kp.HasMember("base_url_applied") && !kp["base_url_applied"].GetBool()));
    CHECK_FALSE(kp.HasMember("api_key"));

    // Connected: anthropic only. The whole catalogue has 242 models of 31 providers.
    auto l = s.run("list_models", "{}");
    INFO(l.error << l.stderr_);
    REQUIRE(l.status == "done");
    auto models = awp::core::json::parse_object(l.stdout_, awp::core::json::kDocument);
    REQUIRE(models["models"].IsArray());
    CHECK(models["models"].Size() > 0);
    for (const auto& m : models["models"].GetArray()) {
        INFO(m["key"].GetString());
        CHECK(std::string(m["key"].GetString()).rfind("anthropic/", 0) == 0);
    }
    CHECK(models["count"].GetUint() == models["models"].Size());

    // The runtime's default provider is its default model's (openai/… out of the box).
    auto d = s.run("auth_set_default", R"({"provider":"anthropic"})");
    INFO(d.error << d.stderr_);
    REQUIRE(d.status == "done");
    auto cfg = config_of(s.state);
    REQUIRE(cfg.HasMember("agents"));
    const auto& primary = cfg["agents"]["defaults"]["model"];
    const std::string model =
        primary.IsString() ? primary.GetString() : primary["primary"].GetString();
    CHECK_THAT(model, Catch::StartsWith("anthropic/"));
    CHECK_THAT(d.stdout_, Catch::Contains("\"defaultModel\":\"" + model + "\""));
    CHECK_THAT(slurp(s.state / "agents" / "main" / "agent" / "auth-state.json"),
               Catch::Contains("anthropic:default"));
    // A model named by the payload wins; one of another provider is refused.
    auto named = s.run("auth_set_default",
                       R"({"provider":"anthropic","model":"anthropic/claude-opus-4-8"})");
    CHECK(named.status == "done");
    CHECK_THAT(slurp(s.state / "openclaw.json"), Catch::Contains("anthropic/claude-opus-4-8"));
    runner.signal(SIGTERM);
    CHECK(runner.wait(30s) == std::optional<int>(0));
}

TEST_CASE(
    "real runtime: provision from the template repository an operator points at "
    "(AWP_TEMPLATES_SOURCE: the product's layout, templates/<name> over templates/_shared) "
    "reaches ready under the product's names, an unknown name fails listing the known ones, a "
    "traversal name is refused",
    "[runtime][e2e]") {
    if (!real_runtime()) {
        WARN("AWP_OPENCLAW is not set: skipped");
        return;
    }
    real_stack s;
    // A repository of awp's own small templates under the names the product's UI offers, laid
    // out as the product keeps them (never the product's files).
    const fs::path src = s.root / "template-library";
    const std::vector<std::string> names = {"crm-researcher", "ghostwriter",       "chief-of-staff",
                                            "assistant",      "cofounder",         "cmo",
                                            "analytics",      "market-researcher", "designer"};
    write_text(src / "templates" / "_shared" / "AGENTS.md", "# Shared\nReport every evening.\n");
    write_text(src / "templates" / "README.md", "not a template\n");
    for (const auto& n : names) {
        write_text(src / "templates" / n / "IDENTITY.md", "# " + n + "\nThe " + n + " agent.\n");
        write_text(src / "templates" / n / "agent.json", R"({"slug":")" + n +
                                                             R"("})"
                                                             "\n");
    }
    git_in(src, {"init", "-q", "-b", "main"});
    git_in(src, {"add", "-A"});
    git_in(src, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "library"});
    REQUIRE_FALSE(git_in(src, {"rev-parse", "HEAD"}).empty());
    // The bare clone is what a server hosts: the runner fetches it by URL.
    const fs::path bare = s.root / "template-library.git";
    git_in(s.root, {"clone", "-q", "--bare", src.string(), bare.string()});

    auto env = s.env();
    env["AWP_TEMPLATES_SOURCE"] = "git+file://" + bare.string();
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"}, env);
    const auto row = [&] {
        return one(s.admin,
                   "SELECT status::text || '|' || coalesce(error, '-') FROM agents WHERE id = $1",
                   {s.gw.agent_id});
    };

    // The product's UI writes the agent and a provision naming its roster's template as the
    // agent's meta.template_branch (apps/ui/src/app/dashboard/agents/actions.ts:650).
    auto p = s.run("provision", R"({"channel":"none","source_template":"template/crm-researcher"})",
                   s.gw.agent);
    INFO(p.error << p.stderr_ << p.stdout_);
    REQUIRE(p.status == "done");
    CHECK(row() == "ready|-");
    const fs::path ws = s.state / ("workspace-" + s.gw.agent);
    CHECK(slurp(ws / "IDENTITY.md") == "# crm-researcher\nThe crm-researcher agent.\n");
    CHECK(slurp(ws / "AGENTS.md") == "# Shared\nReport every evening.\n");  // _shared under it
    CHECK(git_in(ws, {"rev-parse", "--abbrev-ref", "@{u}"}) ==
          "awp-template/template/crm-researcher");
    const auto cfg = config_of(s.state);
    CHECK(agent_entry(cfg, awp::runtime::agent_id(s.gw.agent)) != nullptr);

    // Every name of the roster is known, beside awp's own; README.md and _shared are not.
    const fs::path repo = s.state / "awp-templates.git";
    const auto branches =
        git_in(repo, {"for-each-ref", "--format=%(refname:lstrip=3)", "refs/heads/template/"});
    for (const auto& n : names)
        CHECK_THAT(branches, Catch::Contains(n + "\n") || Catch::EndsWith(n));
    CHECK_THAT(branches, Catch::Contains("engineer"));
    CHECK_THAT(branches, !Catch::Contains("_shared") && !Catch::Contains("README"));

    // A name nobody has: failed before the runtime is called, naming what there is.
    auto none =
        s.run("provision", R"({"channel":"none","source_template":"astrologer"})", s.gw.agent);
    CHECK(none.status == "failed");
    CHECK_THAT(none.error, Catch::Contains("template \"astrologer\" does not exist") &&
                               Catch::Contains("known templates: ") &&
                               Catch::Contains("crm-researcher") && Catch::Contains("ghostwriter"));
    CHECK_THAT(row(), Catch::StartsWith("error|") && Catch::Contains("known templates"));
    // Names that would leave the templates: refused as the command is read.
    for (const char* bad : {"../../etc", "template/../x", "a/b", "..", "-rf"}) {
        auto t = s.run("provision",
                       std::string(R"({"channel":"none","source_template":")") + bad + "\"}",
                       s.gw.agent);
        INFO(bad);
        CHECK(t.status == "failed");
        CHECK_THAT(t.error, Catch::Contains("source_template"));
    }
    // The source's later version reaches the agent through update.
    write_text(src / "templates" / "crm-researcher" / "IDENTITY.md",
               "# crm-researcher\nThe crm-researcher agent, second edition.\n");
    git_in(src, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "v2"});
    git_in(src, {"push", "-q", bare.string(), "main"});
    auto u = s.run("update", "{}", s.gw.agent);
    INFO(u.error << u.stderr_);
    CHECK(u.status == "done");
    CHECK_THAT(slurp(ws / "IDENTITY.md"), Catch::Contains("second edition"));
    runner.signal(SIGTERM);
    CHECK(runner.wait(30s) == std::optional<int>(0));
}

}  // namespace runtime_real_test
