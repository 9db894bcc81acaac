// The hostile-agent drill (docs/security.md, "The agent user"): the runner and the dispatcher run
// as root with AGENT_USER=nobody, and an agent that does what a compromised agent would —
// through run_shell, the one action that runs text as written, and through a woken agent's own
// process — tries to read the daemons' environment and memory, their state and secrets folders,
// another agent's secrets, the database credential, the Docker socket, and to make the runner
// write through a symlink or block on a FIFO it planted. Each attempt gets nothing; the daemons
// keep serving. Needs root (CI runs as root); elsewhere it says so and checks nothing.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "awp/core/crypto.hpp"
#include "awp/core/identity.hpp"
#include "integration/runner_harness.hpp"
#include "support/child.hpp"

namespace hostile_agent_test {

namespace {

using namespace awp::runner_test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string argv_json(const std::vector<std::string>& argv) {
    std::string out = "[";
    for (std::size_t i = 0; i < argv.size(); ++i) out += (i ? "," : "") + json_string(argv[i]);
    return out + "]";
}

// The daemons' own secrets, each of which must stay out of every agent's reach.
const std::map<std::string, std::string> kDaemonSecrets = {
    {"SERVICE_ROLE_KEY", "drill-service-role-key-4e1c9a7b2d"},
    {"JWT_SECRET", "drill-jwt-secret-0f6b3e8d1c2a9b7e5d4c3b2a1f0e9d8c"},
    {"AWP_DRILL_API_KEY", "drill-api-key-77aa55cc33ee11"},
};

struct drill {
    awp::test::scoped_database db;
    pg::connection admin = db.admin();
    gateway_fixture gw{admin, "ana"};
    std::string bob_id, bob_slug;
    awp::core::identity::user agent = awp::core::identity::lookup("nobody");
    fs::path root = fs::temp_directory_path() / awp::test::random_name("awp-hostile-");
    fs::path home = root / "home", workspaces = root / "workspaces", secrets = root / "secrets",
             state = root / "state", bin = root / "bin", fake = root / "fake",
             wakes = root / "wakes", socket_path = root / "docker.sock";
    std::string gateway_dsn, gateway_password;
    int socket_fd = -1;

    drill() {
        bob_id = one(admin,
                     "INSERT INTO agents (tenant_id, name, slug, gateway_id) VALUES ($1, 'Bob', "
                     "'bob-' || left(md5(random()::text), 6), $2::uuid) RETURNING id",
                     {kDefaultTenant, gw.id});
        bob_slug = one(admin, "SELECT slug FROM agents WHERE id = $1", {bob_id});
        const auto key = kDaemonSecrets.at("SERVICE_ROLE_KEY");
        admin.exec(
            "INSERT INTO secrets (tenant_id, gateway_id, agent_id, key, encrypted_value) VALUES "
            "($1, $2, NULL, 'GW_TOKEN', $3), ($1, $2, $4, 'BOB_KEY', $5)",
            {kDefaultTenant, gw.id, awp::core::crypto::encrypt_secret("gateway-secret-d41l", key),
             bob_id, awp::core::crypto::encrypt_secret("bob-secret-6c2f", key)});
        gateway_dsn = db.gateway_dsn(gw.slug);
        gateway_password = awp::test::require_env("AWP_PG_GATEWAY_PASSWORD");

        // The layout of a host: the runtime's state is the agent user's; the daemons' state and
        // secrets folders are root's own, outside it.
        fs::create_directories(home);
        fs::create_directories(workspaces / ("workspace-" + gw.agent));
        fs::create_directories(state);
        for (const auto& d : {bin, fake, wakes}) fs::create_directories(d);
        fs::permissions(root, fs::perms(0755));
        fs::permissions(state, fs::perms(0700));
        for (const auto& p : fs::recursive_directory_iterator(home))
            REQUIRE(::chown(p.path().c_str(), agent.uid, agent.gid) == 0);
        for (const auto& p : fs::recursive_directory_iterator(workspaces))
            REQUIRE(::chown(p.path().c_str(), agent.uid, agent.gid) == 0);
        for (const auto& d : {home, workspaces, fake, wakes})
            REQUIRE(::chown(d.c_str(), agent.uid, agent.gid) == 0);
        // The stand-in runtimes where the agent user can run them (the checkout may be in a
        // folder it cannot enter).
        for (const char* f : {"fake-runtime", "fake-agent-wake"}) {
            fs::copy_file(fs::path(AWP_SOURCE_DIR) / "tests" / "fakes" / f, bin / f);
            fs::permissions(bin / f, fs::perms(0755));
        }
        // A stand-in for the Docker socket: root:root 0660, as a host's docker group would have
        // it; the runner (root) can reach it, the agent user cannot.
        socket_fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path.c_str());
        REQUIRE(::bind(socket_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::listen(socket_fd, 4) == 0);
        ::chmod(socket_path.c_str(), 0660);
    }
    ~drill() {
        if (socket_fd >= 0) ::close(socket_fd);
        std::error_code ec;
        fs::remove_all(root, ec);
    }

    std::map<std::string, std::string> runner_env() const {
        std::map<std::string, std::string> env = {
            {"DATABASE_URL", gateway_dsn},
            {"GATEWAY_ID", gw.slug},
            {"AGENT_USER", "nobody"},
            {"AGENT_RUNTIME", (bin / "fake-runtime").string()},
            {"FAKE_RUNTIME_DIR", fake.string()},
            {"AWP_CHILD_ENV_ALLOW", "FAKE_*"},
            {"OPENCLAW_STATE_DIR", home.string()},
            {"AWP_WORKSPACES_DIR", workspaces.string()},
            {"SECRETS_DIR", secrets.string()},
            {"AWP_STATE_DIR", state.string()},
            {"COMMAND_TIMEOUT", "20"},
            {"RUNTIME_MODE", "service_manager"},
            {"LOG_LEVEL", "info"}};
        env.insert(kDaemonSecrets.begin(), kDaemonSecrets.end());
        return env;
    }

    command_state shell(const std::vector<std::string>& argv) {
        const auto id =
            enqueue(admin, gw.id, "run_shell", "{\"argv\":" + argv_json(argv) + "}", gw.agent);
        return wait_finished(admin, id, 30s);
    }

    /// Everything secret this drill knows: none may appear in what an agent saw.
    std::vector<std::string> all_secrets() const {
        std::vector<std::string> s = {gateway_password, "gateway-secret-d41l", "bob-secret-6c2f"};
        for (const auto& [k, v] : kDaemonSecrets) s.push_back(v);
        return s;
    }
};

void check_no_secret(const std::string& text, const std::vector<std::string>& secrets) {
    for (const auto& s : secrets) {
        INFO("secret " << s);
        CHECK(text.find(s) == std::string::npos);
    }
}

bool is_root() {
    if (::geteuid() == 0) return true;
    WARN("not root: the hostile-agent drill needs to start daemons as root with AGENT_USER");
    return false;
}

}  // namespace

TEST_CASE(
    "hostile agent: a shell command and a woken agent run as AGENT_USER and reach none of the "
    "daemons' secrets, files, credentials or the Docker socket, and what they plant never leads "
    "the runner",
    "[security][e2e]") {
    if (!is_root()) return;
    drill d;
    awp::test::child runner({std::string(AWP_BIN_DIR) + "/awp-command-runner"}, d.runner_env());
    REQUIRE(runner.wait_for_log("\"msg\":\"ready\"", 20s));
    // The secrets sync wrote both files (root's, 0600): what the agent is after.
    REQUIRE(
        eventually([&] { return fs::exists(d.secrets / "agents" / (d.bob_slug + ".env")); }, 15s));
    const std::string gateway_env = read_all(d.secrets / "gateway.env");
    REQUIRE(gateway_env.find("gateway-secret-d41l") != std::string::npos);

    std::map<std::string, std::string> wake_env = {
        {"DATABASE_URL", d.gateway_dsn},
        {"GATEWAY_ID", d.gw.slug},
        {"AGENT_USER", "nobody"},
        {"AGENT_RUNTIME", (d.bin / "fake-agent-wake").string()},
        {"FAKE_WAKE_ARGV_DIR", d.wakes.string()},
        {"AWP_CHILD_ENV_ALLOW", "FAKE_*"},
        {"OPENCLAW_STATE_DIR", d.home.string()},
        {"SAFETY_POLL", "0.5"},
        {"LOG_LEVEL", "info"}};
    wake_env.insert(kDaemonSecrets.begin(), kDaemonSecrets.end());
    awp::test::child dispatcher({std::string(AWP_BIN_DIR) + "/awp-inbox-dispatcher"}, wake_env);
    REQUIRE(dispatcher.wait_for_log("\"msg\":\"ready\"", 20s));
    const auto secrets = d.all_secrets();

    SECTION("who it is: the agent user, no supplementary group, no capability") {
        auto s =
            d.shell({"sh", "-c", "id -u; id -G; grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status"});
        REQUIRE(s.status == "done");
        CHECK(s.stdout_.rfind(
                  std::to_string(d.agent.uid) + "\n" + std::to_string(d.agent.gid) + "\n", 0) == 0);
        CHECK(s.stdout_.find("CapEff:\t0000000000000000") != std::string::npos);
        CHECK(s.stdout_.find("CapAmb:\t0000000000000000") != std::string::npos);
        // Its environment: the allowlist, none of the daemon's secrets or its DSN.
        auto e = d.shell({"env"});
        REQUIRE(e.status == "done");
        check_no_secret(e.stdout_, secrets);
    }

    SECTION("the daemons' environment and memory are out of reach") {
        for (const pid_t pid : {runner.pid(), dispatcher.pid()}) {
            for (const char* what : {"environ", "mem", "maps", "fd/0"}) {
                const auto path = "/proc/" + std::to_string(pid) + "/" + what;
                INFO(path);
                auto s = d.shell({"cat", path});
                CHECK(s.status == "failed");
                check_no_secret(s.stdout_ + s.stderr_ + s.error, secrets);
            }
            // Its command line is public, as every process's, and holds no secret.
            auto c = d.shell({"cat", "/proc/" + std::to_string(pid) + "/cmdline"});
            check_no_secret(c.stdout_, secrets);
        }
    }

    SECTION("the daemons' state and secrets folders, another agent's secrets: nothing") {
        for (const auto& path :
             {d.secrets / "gateway.env", d.secrets / "agents" / (d.bob_slug + ".env"),
              d.secrets / "agents", d.state}) {
            INFO(path);
            auto s = d.shell({"sh", "-c", "cat \"$0\" || ls -la \"$0\"", path.string()});
            CHECK(s.status == "failed");
            check_no_secret(s.stdout_ + s.stderr_, secrets);
        }
        // Nor anything under the folders a search of the host could turn up.
        auto s = d.shell({"sh", "-c",
                          "grep -rIl -e gateway-secret-d41l -e bob-secret-6c2f -e \"$0\" "
                          "/proc/[0-9]*/environ \"$1\" \"$2\" \"$3\" 2>/dev/null; exit 0",
                          d.gateway_password, d.root.string(), "/etc", "/tmp"});
        REQUIRE(s.status == "done");
        CHECK(s.stdout_.find(d.secrets.string()) == std::string::npos);
        CHECK(s.stdout_.find(d.state.string()) == std::string::npos);
        CHECK(s.stdout_.find("/proc/" + std::to_string(runner.pid()) + "/") == std::string::npos);
    }

    SECTION("the Docker socket is not reachable") {
        auto s = d.shell({"test", "-w", d.socket_path.string()});
        CHECK(s.status == "failed");  // connect(2) needs write permission on the socket
        auto r = d.shell({"test", "-r", d.socket_path.string()});
        CHECK(r.status == "failed");
    }

    SECTION("a symlink or FIFO the agent planted never leads the runner") {
        const auto ws = d.workspaces / ("workspace-" + d.gw.agent);
        // A symlink to the secrets file where an upload will land: refused, file unchanged.
        REQUIRE(d.shell({"ln", "-s", (d.secrets / "gateway.env").string(), "notes.md"}).status ==
                "done");
        auto up = wait_finished(d.admin,
                                enqueue(d.admin, d.gw.id, "upload_file",
                                        R"({"path":"notes.md","content":"pwned"})", d.gw.agent),
                                30s);
        CHECK(up.status == "failed");
        CHECK(read_all(d.secrets / "gateway.env") == gateway_env);
        // A folder symlink into the runner's state: refused, nothing written there.
        REQUIRE(d.shell({"ln", "-s", d.state.string(), "statelink"}).status == "done");
        up = wait_finished(
            d.admin,
            enqueue(d.admin, d.gw.id, "upload_file",
                    R"({"path":"statelink/agents.json","content":"pwned"})", d.gw.agent),
            30s);
        CHECK(up.status == "failed");
        CHECK_FALSE(fs::exists(d.state / "agents.json"));
        // A FIFO: the upload replaces it and never blocks on it.
        REQUIRE(d.shell({"mkfifo", "pipe"}).status == "done");
        const auto t0 = std::chrono::steady_clock::now();
        up = wait_finished(d.admin,
                           enqueue(d.admin, d.gw.id, "upload_file",
                                   R"({"path":"pipe","content":"plain"})", d.gw.agent),
                           30s);
        CHECK(up.status == "done");
        CHECK(std::chrono::steady_clock::now() - t0 < 10s);
        CHECK(fs::is_regular_file(ws / "pipe"));
        // What the runner writes for the agent is the agent's.
        struct stat st {};
        REQUIRE(::stat((ws / "pipe").c_str(), &st) == 0);
        CHECK(st.st_uid == d.agent.uid);
    }

    SECTION("a woken agent: the agent user, none of the dispatcher's secrets") {
        one(d.admin,
            "SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'drill', 'title', 'wake up', "
            "'{}')",
            {kDefaultTenant, d.gw.agent_id});
        REQUIRE(eventually(
            [&] {
                // Written by the wake with a shell redirect: complete once its last field is.
                for (const auto& e : fs::directory_iterator(d.wakes))
                    if (e.path().extension() == ".status" &&
                        read_all(e.path()).find("CapAmb:") != std::string::npos)
                        return true;
                return false;
            },
            20s));
        std::string status, environ_text;
        for (const auto& e : fs::directory_iterator(d.wakes)) {
            if (e.path().extension() == ".status") status = read_all(e.path());
            if (e.path().extension() == ".environ") environ_text = read_all(e.path());
        }
        const auto uid_line = "Uid:\t" + std::to_string(d.agent.uid) + "\t";
        CHECK(status.find(uid_line) != std::string::npos);
        CHECK(status.find("CapEff:\t0000000000000000") != std::string::npos);
        check_no_secret(environ_text, secrets);
    }

    // Whatever the agent tried, both daemons are up and serving.
    CHECK(d.shell({"true"}).status == "done");
    CHECK(runner.running());
    CHECK(dispatcher.running());
    runner.signal(SIGTERM);
    dispatcher.signal(SIGTERM);
    CHECK(runner.wait(30s) == std::optional<int>(0));
    CHECK(dispatcher.wait(30s) == std::optional<int>(0));
}

TEST_CASE(
    "agent user: a daemon refuses to start when it cannot switch, when the user is root, or when "
    "its own folders lie inside the agent user's",
    "[security][e2e]") {
    if (!is_root()) return;
    drill d;
    const std::string runner = std::string(AWP_BIN_DIR) + "/awp-command-runner";
    const auto start = [&](std::map<std::string, std::string> changes,
                           std::vector<std::string> prefix = {}) {
        auto env = d.runner_env();
        for (auto& [k, v] : changes) env[k] = v;
        prefix.push_back(runner);
        awp::test::child c(prefix, env);
        const auto code = c.wait(20s);
        return std::make_pair(code.value_or(-1), c.log());
    };
    auto [code, log] = start({{"SECRETS_DIR", (d.home / "secrets").string()}});
    CHECK(code == 78);
    CHECK(log.find("SECRETS_DIR") != std::string::npos);
    std::tie(code, log) = start({{"AWP_STATE_DIR", (d.home / "state").string()}});
    CHECK(code == 78);
    std::tie(code, log) = start({{"OPENCLAW_STATE_DIR", d.state.string()}});  // root's folder
    CHECK(code == 78);
    CHECK(log.find("must be a folder of AGENT_USER") != std::string::npos);
    std::tie(code, log) = start({{"AGENT_USER", "root"}});
    CHECK(code == 78);
    std::tie(code, log) = start({{"AGENT_USER", "no-such-user-awp"}});
    CHECK(code == 78);
    // Started as an unprivileged user itself (no CAP_SETUID): it says how to grant the switch.
    std::tie(code, log) =
        start({{"AGENT_USER", "daemon"}}, {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                           "--clear-groups", "--inh-caps=-all"});
    CHECK(code == 78);
    CHECK(log.find("CAP_SETUID") != std::string::npos);
}

}  // namespace hostile_agent_test
