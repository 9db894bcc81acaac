// Integration tests of the command runner against a real database and real processes (the fake
// runtime CLI, fake docker/systemctl on PATH): actions, validation, timeouts, auth flows,
// scrubbing, secrets, source_write, gateway isolation, two runners, a Postgres restart.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <set>

#include "awp/runtime/openclaw.hpp"
#include "runner_harness.hpp"
#include "support/private_cluster.hpp"

namespace runner_actions_test {

using namespace awp::runner_test;
namespace runner = awp::runner;

namespace {

bool pid_dead(pid_t pid) {
    if (::kill(pid, 0) != 0) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto p = s.rfind(')');
    return p != std::string::npos && p + 2 < s.size() && s[p + 2] == 'Z';
}

bool port_free(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

}  // namespace

TEST_CASE("runner: list_models without a provider lists each connected provider, or nothing",
          "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    const std::vector<std::string> status{"models", "status", "--json"};
    SECTION("no provider connected: no list is asked for, none is answered") {
        box.set("stdout", R"({"auth":{"providers":[]}})");
        running_runner r(base_config(db, box, gw.slug));
        auto s = wait_finished(admin, enqueue(admin, gw.id, "list_models", "{}"));
        CHECK(s.status == "done");
        CHECK(s.stdout_ == R"({"count":0,"models":[],"providers":[]})");
        CHECK(box.calls() == std::vector<std::vector<std::string>>{status});
    }
    SECTION("a provider's list that is not a list fails the command, saying so") {
        // The fake answers every call alike: the status of two providers, which is no list.
        box.set("stdout", R"({"auth":{"providers":[{"provider":"openai"},{"provider":"xai"}]}})");
        running_runner r(base_config(db, box, gw.slug));
        auto s = wait_finished(admin, enqueue(admin, gw.id, "list_models", "{}"));
        CHECK(s.status == "failed");
        CHECK_THAT(s.error, Catch::StartsWith("models list answered no JSON"));
        const auto calls = box.calls();
        REQUIRE(calls.size() == 3);
        CHECK(calls[0] == status);
        CHECK(calls[1] ==
              std::vector<std::string>{"models", "list", "--json", "--provider", "openai"});
        CHECK(calls[2] ==
              std::vector<std::string>{"models", "list", "--json", "--provider", "xai"});
    }
}

TEST_CASE("runner: spawned actions call the runtime with the documented argv and record done",
          "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    box.set("stdout", "{\"ok\":true}\n");
    running_runner r(base_config(db, box, gw.slug));

    const auto pairing = enqueue(admin, gw.id, "approve_pairing", R"({"pairing_code":"PAIR-1"})");
    const auto models = enqueue(admin, gw.id, "list_models", R"({"provider":"openai"})");
    const auto prompt =
        enqueue(admin, gw.id, "execute_prompt", R"({"prompt":"$(touch /tmp/x); hi"})", gw.agent);
    const auto session = enqueue(admin, gw.id, "start_session", "{}", gw.agent);
    for (const auto& id : {pairing, models, prompt, session}) {
        auto s = wait_finished(admin, id);
        CHECK(s.status == "done");
        CHECK(s.exit_code == "0");
        CHECK_THAT(s.stdout_, Catch::Contains("\"ok\":true"));
    }
    const auto calls = box.calls();
    REQUIRE(calls.size() == 4);
    // Oldest first, one after another.
    CHECK(calls[0] == std::vector<std::string>{"pairing", "approve", "telegram", "PAIR-1"});
    CHECK(calls[1] == std::vector<std::string>{"models", "list", "--json", "--provider", "openai"});
    CHECK(calls[2] == std::vector<std::string>{"agent", "--agent", gw.agent, "--message",
                                               "$(touch /tmp/x); hi"});
    const std::string id = awp::runtime::agent_id(gw.agent);
    CHECK(calls[3] == std::vector<std::string>{"gateway", "call", "sessions.create", "--json",
                                               "--params", "{\"agentId\":\"" + id + "\"}"});
}

TEST_CASE(
    "runner: provision registers the agent, its identity, its channel (token from the secrets "
    "sync, through a 0600 file) and its binding",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    running_runner r(cfg);
    // A channel token stored by the UI after the runner started: provision syncs first.
    const std::string token = "tg-123456:SECRET";
    admin.exec(
        "INSERT INTO secrets (tenant_id, gateway_id, agent_id, key, encrypted_value) VALUES ($1, "
        "$2, $3, "
        "'TELEGRAM_BOT_TOKEN', $4)",
        {kDefaultTenant, gw.id, gw.agent_id,
         awp::core::crypto::encrypt_secret(token, cfg.service_role_key)});
    box.set("echo_env", "");
    const auto id =
        enqueue(admin, gw.id, "provision", R"({"name":"Ana","model":"openai/gpt-5"})", gw.agent);
    auto s = wait_finished(admin, id);
    CHECK(s.status == "done");
    const auto calls = box.calls();
    using sv = std::vector<std::string>;
    const std::string rid = awp::runtime::agent_id(gw.agent);
    const std::string workspace = cfg.runtime_home + "/workspace-" + gw.agent;
    const std::string token_file = cfg.secrets_dir + "/channels/" + rid + ".telegram.token";
    REQUIRE(calls.size() == 4);
    CHECK(calls[0] == sv{"agents", "add", rid, "--workspace", workspace, "--non-interactive",
                         "--json", "--model", "openai/gpt-5"});
    CHECK(calls[1] == sv{"agents", "set-identity", "--agent", rid, "--name", "Ana"});
    CHECK(calls[2] == sv{"channels", "add", "--channel", "telegram", "--account", rid,
                         "--token-file", token_file});
    CHECK(calls[3] == sv{"agents", "bind", "--agent", rid, "--bind", "telegram:" + rid});
    // The runtime reads the token from a file only the runner's user can read; it is never in
    // argv, in the runtime's environment or in the row.
    std::ifstream tf(token_file);
    std::string stored((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
    CHECK(stored == token);
    struct stat st {};
    REQUIRE(::stat(token_file.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    std::ifstream env(box.fake("environ.3"));
    std::string child_env((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    CHECK_THAT(child_env, !Catch::Contains(token));
    CHECK_THAT(child_env, Catch::Contains("OPENCLAW_STATE_DIR=" + cfg.runtime_home));
    CHECK_THAT(s.stdout_ + s.stderr_ + s.payload, !Catch::Contains(token));
    // What the runtime has no place for is in awp's own record of the agent.
    std::ifstream rec(cfg.state_dir + "/agents/" + gw.agent + ".json");
    std::string record((std::istreambuf_iterator<char>(rec)), std::istreambuf_iterator<char>());
    CHECK_THAT(record, Catch::Contains("\"runtime_agent_id\":\"" + rid + "\""));

    // Without a token for the channel: refused before the runtime is called, saying what is
    // missing.
    const auto none = enqueue(admin, gw.id, "provision", R"({"channel":"slack"})", gw.agent);
    auto sn = wait_finished(admin, none);
    CHECK(sn.status == "failed");
    CHECK_THAT(sn.error, Catch::Contains("no SLACK_BOT_TOKEN"));
    CHECK(box.calls().size() == 4);
}

TEST_CASE(
    "runner: invalid payloads and unknown agents end failed with a named problem, the runtime is "
    "never called",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    running_runner r(base_config(db, box, gw.slug));
    const auto a = enqueue(admin, gw.id, "approve_pairing", R"({"pairing_code":"x; rm -rf /"})");
    const auto b = enqueue(admin, gw.id, "run_shell", R"({"argv":"rm -rf /"})");
    const auto c = enqueue(admin, gw.id, "execute_prompt",
                           R"({"prompt":"hi","timeout_seconds":"soon"})", gw.agent);
    const auto d = enqueue(admin, gw.id, "start_session", "{}");
    CHECK_THAT(wait_finished(admin, a).error, Catch::Contains("pairing_code"));
    CHECK_THAT(wait_finished(admin, b).error, Catch::Contains("\"argv\""));
    CHECK_THAT(wait_finished(admin, c).error, Catch::Contains("timeout_seconds"));
    auto sd = wait_finished(admin, d);
    CHECK(sd.status == "failed");
    CHECK_THAT(sd.error, Catch::Contains("needs an agent"));
    CHECK(box.calls().empty());
}

TEST_CASE("runner: the RUNTIME_MODE table reaches docker compose, systemctl and the runtime",
          "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    using sv = std::vector<std::string>;
    {
        auto cfg = base_config(db, box, gw.slug);
        cfg.compose_project = "awp-test";
        running_runner r(cfg);
        const auto a = enqueue(admin, gw.id, "restart_dispatcher");
        const auto b = enqueue(admin, gw.id, "update_gateway");
        CHECK(wait_finished(admin, a).status == "done");
        CHECK(wait_finished(admin, b).status == "done");
    }
    {
        auto cfg = base_config(db, box, gw.slug);
        cfg.mode = runner::runtime_mode::service_manager;
        running_runner r(cfg);
        const auto a = enqueue(admin, gw.id, "restart_dispatcher");
        const auto b = enqueue(admin, gw.id, "restart_gateway");
        CHECK(wait_finished(admin, a).status == "done");
        CHECK(wait_finished(admin, b).status == "done");
        box.set("exit.systemctl", "5");
        const auto c = enqueue(admin, gw.id, "restart_dispatcher");
        auto sc = wait_finished(admin, c);
        CHECK(sc.status == "failed");
        CHECK(sc.exit_code == "5");
        CHECK_THAT(sc.error, Catch::Contains("exited with code 5"));
    }
    const auto calls = box.calls();
    REQUIRE(calls.size() == 6);
    CHECK(calls[0] == sv{"docker", "compose", "-p", "awp-test", "restart", "awp-inbox-dispatcher"});
    CHECK(calls[1] == sv{"docker", "compose", "-p", "awp-test", "pull"});
    CHECK(calls[2] == sv{"docker", "compose", "-p", "awp-test", "up", "-d"});
    CHECK(calls[3] == sv{"systemctl", "--user", "restart", "awp-inbox-dispatcher"});
    CHECK(calls[4] == sv{"gateway", "restart", "--json"});
}

TEST_CASE("runner: COMMAND_TIMEOUT kills the whole process group and keeps the output tail",
          "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    cfg.command_timeout_s = 2;
    running_runner r(cfg);
    box.set("hang");
    const auto t0 = std::chrono::steady_clock::now();
    const auto id = enqueue(admin, gw.id, "auth_list");
    auto s = wait_finished(admin, id, 20s);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
    CHECK(s.status == "failed");
    CHECK(s.error == "timed out after 2 s (process group killed)");
    CHECK(s.exit_code == "<null>");
    CHECK_THAT(s.stdout_, Catch::Contains("working on it"));
    std::ifstream in(box.fake("grandchild.pid"));
    pid_t grandchild = 0;
    in >> grandchild;
    REQUIRE(grandchild > 0);
    CHECK(eventually([&] { return pid_dead(grandchild); }, 5s));
}

TEST_CASE("runner: output kept per command is bounded, with a marker", "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    cfg.output_limit = 1000;
    running_runner r(cfg);
    box.set("stdout", std::string(50000, 'a') + "THE END\n");
    auto s = wait_finished(admin, enqueue(admin, gw.id, "auth_list"));
    CHECK(s.status == "done");
    CHECK(s.stdout_.size() < 1100);
    CHECK_THAT(s.stdout_, Catch::StartsWith("[... ") && Catch::EndsWith("THE END\n"));
}

TEST_CASE(
    "runner: auth_set_api_key scrubs the key on success and on failure, it never reaches a row",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    running_runner r(base_config(db, box, gw.slug));
    box.set("echo_secret");
    const std::string key = "sk-live-0123456789abcdef";
    const auto ok = enqueue(
        admin, gw.id, "auth_set_api_key",
        R"({"provider":"openai","api_key":")" + key + R"(","base_url":"http://127.0.0.1:9/v1"})");
    auto s = wait_finished(admin, ok);
    CHECK(s.status == "done");
    CHECK_THAT(s.payload, Catch::Contains("\"api_key_scrubbed\": true") &&
                              Catch::Contains("\"base_url_applied\": true"));
    CHECK_THAT(s.payload, !Catch::Contains("api_key\": \"") && !Catch::Contains("127.0.0.1:9"));
    CHECK_THAT(s.stdout_ + s.stderr_ + s.error, !Catch::Contains(key));
    CHECK_THAT(s.stdout_, Catch::Contains("[redacted]"));
    // The key went to the runtime on stdin, not in argv.
    std::ifstream in(box.fake("stdin.1"));
    std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(got == key);
    const auto calls = box.calls();
    REQUIRE_FALSE(calls.empty());
    for (const auto& arg : calls[0]) CHECK(arg != key);

    box.set("exit", "1");
    box.set("stderr", "invalid key " + key + "\n");
    const auto bad = enqueue(admin, gw.id, "auth_set_api_key",
                             R"({"provider":"openai","api_key":")" + key + R"("})");
    auto f = wait_finished(admin, bad);
    CHECK(f.status == "failed");
    CHECK_THAT(f.payload, Catch::Contains("\"api_key_scrubbed\": true") && !Catch::Contains(key));
    CHECK_THAT(f.stdout_ + f.stderr_ + f.error, !Catch::Contains(key));
    CHECK_THAT(f.error, Catch::Contains("exited with code 1"));

    // Refused before running (bad provider): still scrubbed.
    const auto refused = enqueue(admin, gw.id, "auth_set_api_key",
                                 R"({"provider":"Bad Id","api_key":")" + key + R"("})");
    auto rf = wait_finished(admin, refused);
    CHECK(rf.status == "failed");
    CHECK_THAT(rf.payload, !Catch::Contains(key));
}

TEST_CASE("runner: auth_start + auth_paste complete an OAuth paste-back login end to end",
          "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    running_runner r(cfg);
    box.set("echo_secret");
    const auto start =
        enqueue(admin, gw.id, "auth_start", R"({"provider":"openai","profile_name":"work"})");
    REQUIRE(eventually(
        [&] { return read_command(admin, start).payload.find("url_ready") != std::string::npos; }));
    auto s = read_command(admin, start);
    CHECK(s.status == "running");
    CHECK_THAT(s.payload,
               Catch::Contains("https://auth.example.test/oauth/authorize?client_id=abc"));
    CHECK_THAT(s.payload, !Catch::Contains("autoCallback"));
    // The runner holds the callback port so the runtime falls back to paste-back.
    CHECK_FALSE(port_free(cfg.callback_port));

    const std::string value = "http://localhost:1455/callback?code=SECRET-CODE-42&state=xyz";
    const auto paste =
        enqueue(admin, gw.id, "auth_paste",
                R"({"parent_command_id":")" + start + R"(","value":")" + value + R"("})");
    auto p = wait_finished(admin, paste);
    CHECK(p.status == "done");
    CHECK_THAT(p.payload,
               Catch::Contains("\"value_scrubbed\": true") && !Catch::Contains("SECRET-CODE"));
    auto done = wait_finished(admin, start);
    CHECK(done.status == "done");
    CHECK_THAT(done.payload, Catch::Contains("\"stage\": \"completed\"") &&
                                 Catch::Contains("\"profileId\": \"openai:work\""));
    CHECK_THAT(done.stdout_ + done.stderr_, !Catch::Contains("SECRET-CODE"));
    std::ifstream in(box.fake("pasted"));
    std::string pasted;
    std::getline(in, pasted);
    CHECK(pasted == value);
    CHECK(eventually([&] { return port_free(cfg.callback_port); }, 5s));
}

TEST_CASE(
    "runner: auth_start in local networking mode reports autoCallback and leaves the port alone",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    cfg.networking_mode = "local";
    running_runner r(cfg);
    const auto start = enqueue(admin, gw.id, "auth_start", R"({"provider":"openai"})");
    REQUIRE(eventually(
        [&] { return read_command(admin, start).payload.find("url_ready") != std::string::npos; }));
    CHECK_THAT(read_command(admin, start).payload, Catch::Contains("\"autoCallback\": true"));
    CHECK(port_free(cfg.callback_port));
}

TEST_CASE(
    "runner: device-code login holds the callback port, reports the code while polling, then "
    "completes",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    cfg.networking_mode = "local";  // even so: only a local OAuth paste leaves the port free
    running_runner r(cfg);
    const auto start = enqueue(admin, gw.id, "auth_start",
                               R"({"provider":"github-copilot","mode":"device_code"})");
    REQUIRE(eventually(
        [&] { return read_command(admin, start).payload.find("WDJB-MJHT") != std::string::npos; }));
    auto s = read_command(admin, start);
    CHECK_THAT(s.payload, Catch::Contains("\"stage\": \"polling\"") &&
                              Catch::Contains("\"verificationCode\": \"WDJB-MJHT\"") &&
                              Catch::Contains("https://auth.example.test/device"));
    CHECK_FALSE(port_free(cfg.callback_port));  // the spec: the runner occupies 1455
    box.set("approve");
    auto done = wait_finished(admin, start);
    CHECK(done.status == "done");
    CHECK_THAT(done.payload, Catch::Contains("\"profileId\": \"github-copilot:default\""));
}

TEST_CASE(
    "runner: an auth flow ends failed at its ceiling, a paste for an unknown flow fails clearly",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    cfg.auth_timeout_s = 2;
    running_runner r(cfg);
    const auto start = enqueue(admin, gw.id, "auth_start", R"({"provider":"openai"})");
    auto s = wait_finished(admin, start, 20s);
    CHECK(s.status == "failed");
    CHECK(s.error == "auth flow timed out after 2 s");
    CHECK_THAT(s.payload, Catch::Contains("\"stage\": \"failed\"") && Catch::Contains("timed out"));

    const auto paste =
        enqueue(admin, gw.id, "auth_paste",
                R"({"parent_command_id":")" + start + R"(","value":"code=LATE-VALUE"})");
    auto p = wait_finished(admin, paste);
    CHECK(p.status == "failed");
    CHECK_THAT(p.error, Catch::Contains("no auth flow in progress for command " + start));
    CHECK_THAT(p.payload,
               Catch::Contains("\"value_scrubbed\": true") && !Catch::Contains("LATE-VALUE"));
}

TEST_CASE("runner: auth_start runs in the background while other commands go on", "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    running_runner r(base_config(db, box, gw.slug));
    const auto start = enqueue(admin, gw.id, "auth_start", R"({"provider":"openai"})");
    const auto other = enqueue(admin, gw.id, "auth_list");
    CHECK(wait_finished(admin, other).status == "done");
    CHECK(read_command(admin, start).status == "running");
}

TEST_CASE(
    "runner: a secret written in the original product's format decrypts into the env files, "
    "deleting it "
    "removes it",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    // Made by Python `cryptography` (HKDF-SHA256, salt yourhq-secrets-v1, info aes-256-gcm, AESGCM)
    // from service-role key "runner-test-service-role-key": plaintext tg-123:ABC'quote.
    const std::string original =
        "enc:v1:ZGVmZ2hpamtsbW5v._uXsWHbx7D948RceuUZGAQ.v5ZiNSqWWLYE__NOlMuerg";
    const auto secret_id =
        one(admin,
            "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) VALUES ($1, $2, "
            "'TELEGRAM_BOT_TOKEN', $3) RETURNING id",
            {kDefaultTenant, gw.id, original});
    admin.exec(
        "INSERT INTO secrets (tenant_id, gateway_id, agent_id, key, encrypted_value) VALUES ($1, "
        "$2, $3, "
        "'AGENT_ONLY', $4)",
        {kDefaultTenant, gw.id, gw.agent_id,
         awp::core::crypto::encrypt_secret("agent-value", cfg.service_role_key)});
    running_runner r(cfg);
    const auto gw_env = box.root / "secrets" / "gateway.env";
    const auto agent_env = box.root / "secrets" / "agents" / (gw.agent + ".env");
    auto read = [](const std::filesystem::path& p) {
        std::ifstream in(p);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    REQUIRE(
        eventually([&] { return read(gw_env).find("TELEGRAM_BOT_TOKEN") != std::string::npos; }));
    CHECK_THAT(read(gw_env), Catch::Contains("TELEGRAM_BOT_TOKEN='tg-123:ABC'\\''quote'"));
    CHECK_THAT(read(agent_env), Catch::Contains("AGENT_ONLY='agent-value'") &&
                                    Catch::Contains("TELEGRAM_BOT_TOKEN"));
    CHECK((std::filesystem::status(gw_env).permissions() & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
    CHECK(eventually([&] {
        return one(admin, "SELECT sync_status FROM secrets WHERE id = $1", {secret_id}) == "active";
    }));

    // The secrets NOTIFY triggers a sync: the deleted secret leaves the file.
    admin.exec("DELETE FROM secrets WHERE id = $1", {secret_id});
    CHECK(eventually([&] { return read(gw_env).find("TELEGRAM_BOT_TOKEN") == std::string::npos; }));
    // A value that does not decrypt is marked, never written.
    const auto bad = one(
        admin,
        "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) VALUES ($1, $2, 'BAD', "
        "'enc:v1:AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA.AAAA') RETURNING id",
        {kDefaultTenant, gw.id});
    CHECK(eventually([&] {
        return one(admin, "SELECT sync_status FROM secrets WHERE id = $1", {bad}) == "error";
    }));
    CHECK_THAT(read(gw_env), !Catch::Contains("BAD="));
}

namespace {

// A one-request-at-a-time HTTP server on 127.0.0.1 answering every POST with a fixed JSON body.
class tiny_http {
public:
    tiny_http() : acceptor_(io_, {net::ip::make_address("127.0.0.1"), 0}) {
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] { serve(); });
    }
    ~tiny_http() {
        stop_ = true;
        boost::system::error_code ec;
        net::ip::tcp::socket s(io_);
        s.connect({net::ip::make_address("127.0.0.1"), port_}, ec);
        thread_.join();
    }
    unsigned short port() const { return port_; }
    std::vector<std::string> requests() {
        std::lock_guard<std::mutex> l(m_);
        return requests_;
    }

private:
    void serve() {
        while (!stop_) {
            net::ip::tcp::socket s(io_);
            boost::system::error_code ec;
            acceptor_.accept(s, ec);
            if (ec || stop_) break;
            net::streambuf buf;
            net::read_until(s, buf, "\r\n\r\n", ec);
            std::string req(net::buffers_begin(buf.data()), net::buffers_end(buf.data()));
            const auto cl = req.find("Content-Length: ");
            if (cl != std::string::npos) {
                const auto len = std::stoul(req.substr(cl + 16));
                const auto have = req.size() - (req.find("\r\n\r\n") + 4);
                if (have < len) {
                    std::string rest(len - have, '\0');
                    net::read(s, net::buffer(rest), ec);
                    req += rest;
                }
            }
            {
                std::lock_guard<std::mutex> l(m_);
                requests_.push_back(req);
            }
            const std::string body = R"({"created":true,"id":"ext-1"})";
            const std::string resp =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
            net::write(s, net::buffer(resp), ec);
        }
    }
    net::io_context io_;
    net::ip::tcp::acceptor acceptor_;
    unsigned short port_ = 0;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::mutex m_;
    std::vector<std::string> requests_;
};

/// Answers every connection at once with plain-HTTP bytes and closes it (what a TLS client
/// meets when it is pointed at an http:// server); counts the connections.
class plain_answer {
public:
    plain_answer() : acceptor_(io_, {net::ip::make_address("127.0.0.1"), 0}) {
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] {
            while (!stop_) {
                net::ip::tcp::socket s(io_);
                boost::system::error_code ec;
                acceptor_.accept(s, ec);
                if (ec || stop_) break;
                ++connections_;
                net::write(s, net::buffer(std::string("HTTP/1.1 400 Bad Request\r\n\r\n")), ec);
            }
        });
    }
    ~plain_answer() {
        stop_ = true;
        boost::system::error_code ec;
        net::ip::tcp::socket s(io_);
        s.connect({net::ip::make_address("127.0.0.1"), port_}, ec);
        thread_.join();
    }
    unsigned short port() const { return port_; }
    int connections() const { return connections_; }

private:
    net::io_context io_;
    net::ip::tcp::acceptor acceptor_;
    unsigned short port_ = 0;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<int> connections_{0};
};

}  // namespace

TEST_CASE(
    "runner: source_write needs a writable connection and calls the provider with the gateway's "
    "credentials",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    tiny_http server;
    auto cfg = base_config(db, box, gw.slug);
    cfg.outbound_allow = "127.0.0.1";  // the test servers are on loopback
    const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/api";
    const auto writable =
        one(admin,
            "INSERT INTO source_connections (tenant_id, provider, writable, config) VALUES ($1, "
            "'http_json', true, jsonb_build_object('url', $2::text)) RETURNING id",
            {kDefaultTenant, url});
    const auto readonly =
        one(admin,
            "INSERT INTO source_connections (tenant_id, provider, writable, config) VALUES ($1, "
            "'http_json', false, jsonb_build_object('url', $2::text)) RETURNING id",
            {kDefaultTenant, url});
    std::string key_name = "HTTP_JSON_SOURCE_" + writable.substr(0, 8);
    for (auto& ch : key_name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    admin.exec(
        "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) VALUES ($1, $2, $3, $4)",
        {kDefaultTenant, gw.id, key_name,
         awp::core::crypto::encrypt_secret("src-api-key-77", cfg.service_role_key)});
    running_runner r(cfg);

    const auto refused = enqueue(
        admin, gw.id, "source_write",
        R"({"connection_id":")" + readonly + R"(","action":"create_page","params":{"t":1}})");
    auto f = wait_finished(admin, refused);
    CHECK(f.status == "failed");
    CHECK_THAT(f.error, Catch::Contains("not writable"));
    CHECK(server.requests().empty());

    const auto ok = enqueue(admin, gw.id, "source_write",
                            R"({"connection_id":")" + writable +
                                R"(","action":"create_page","params":{"title":"Hi"}})");
    auto s = wait_finished(admin, ok);
    CHECK(s.status == "done");
    CHECK(s.stdout_ == R"({"created":true,"id":"ext-1"})");
    const auto reqs = server.requests();
    REQUIRE(reqs.size() == 1);
    CHECK_THAT(reqs[0], Catch::StartsWith("POST /api/create_page HTTP/1.1") &&
                            Catch::Contains("Bearer src-api-key-77") &&
                            Catch::EndsWith(R"({"title":"Hi"})"));

    // https is spoken (a plain-HTTP server fails the TLS handshake, nothing is sent in the
    // clear), and a URL of another scheme is refused before any connection.
    plain_answer plain;
    const auto tls = one(admin,
                         "INSERT INTO source_connections (tenant_id, provider, writable, config) "
                         "VALUES ($1, 'http_json', true, jsonb_build_object('url', $2::text)) "
                         "RETURNING id",
                         {kDefaultTenant, "https://127.0.0.1:" + std::to_string(plain.port())});
    auto h = wait_finished(
        admin, enqueue(admin, gw.id, "source_write",
                       R"({"connection_id":")" + tls + R"(","action":"create_page","params":{}})"));
    CHECK(h.status == "failed");
    CHECK_THAT(h.error, Catch::StartsWith("http_json: ") && Catch::Contains("TLS"));
    CHECK(plain.connections() == 1);
    CHECK(server.requests().size() == 1);  // only the earlier http:// call
    const auto ftp = one(admin,
                         "INSERT INTO source_connections (tenant_id, provider, writable, config) "
                         "VALUES ($1, 'http_json', true, '{\"url\":\"ftp://127.0.0.1/x\"}') "
                         "RETURNING id",
                         {kDefaultTenant});
    auto fe = wait_finished(
        admin, enqueue(admin, gw.id, "source_write",
                       R"({"connection_id":")" + ftp + R"(","action":"create_page","params":{}})"));
    CHECK(fe.status == "failed");
    CHECK_THAT(fe.error, Catch::Contains("must be an http:// or https:// URL"));
    // A URL with credentials in it is refused without repeating them in the command row.
    const auto creds = one(admin,
                           "INSERT INTO source_connections (tenant_id, provider, writable, config) "
                           "VALUES ($1, 'http_json', true, "
                           "'{\"url\":\"http://bob:pw-in-url-991@127.0.0.1/x\"}') RETURNING id",
                           {kDefaultTenant});
    auto ce = wait_finished(admin, enqueue(admin, gw.id, "source_write",
                                           R"({"connection_id":")" + creds +
                                               R"(","action":"create_page","params":{}})"));
    CHECK(ce.status == "failed");
    CHECK_THAT(ce.error, Catch::Contains("user info"));
    CHECK(ce.error.find("pw-in-url-991") == std::string::npos);

    // The test double provider, and an unknown provider.
    const auto dbl = one(
        admin,
        "INSERT INTO source_connections (tenant_id, provider, writable) VALUES ($1, 'test', true) "
        "RETURNING id",
        {kDefaultTenant});
    auto t = wait_finished(admin, enqueue(admin, gw.id, "source_write",
                                          R"({"connection_id":")" + dbl +
                                              R"(","action":"append","params":{"a":[1]}})"));
    CHECK(t.stdout_ ==
          R"({"provider":"test","action":"append","params":{"a":[1]},"has_api_key":false})");
    auto tf = wait_finished(
        admin, enqueue(admin, gw.id, "source_write",
                       R"({"connection_id":")" + dbl + R"(","action":"fail","params":{}})"));
    CHECK(tf.status == "failed");
    CHECK_THAT(tf.error, Catch::Contains("always fails"));
}

TEST_CASE(
    "runner: set_agent_model goes through the runtime's config commands and reloads the session, "
    "auth_remove and upload_file change the files under the runtime's lock",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    const auto home = box.root / "home";
    const std::string id = awp::runtime::agent_id(gw.agent);
    std::filesystem::create_directories(home);
    std::ofstream(home / "openclaw.json")
        << R"({"agents":{"list":[{"id":"main"},{"id":")" << id << R"(","model":"a/b"}]}})";
    std::filesystem::create_directories(home / "agents" / "x" / "agent");
    std::ofstream(home / "agents" / "x" / "agent" / "auth-profiles.json")
        << R"({"profiles":{"openai:work":{"k":1},"anthropic:default":{}}})";
    std::filesystem::create_directories(home / ("workspace-" + gw.agent));
    running_runner r(cfg);
    auto read = [](const std::filesystem::path& p) {
        std::ifstream in(p);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    auto m = wait_finished(admin, enqueue(admin, gw.id, "set_agent_model",
                                          R"({"agent_slug":")" + gw.agent +
                                              R"(","model":"openai/gpt-5","thinking":"high"})"));
    CHECK(m.status == "done");
    using sv = std::vector<std::string>;
    auto calls = box.calls();
    REQUIRE(calls.size() == 2);
    CHECK(
        calls[0] ==
        sv{"config", "set", "--batch-json",
           R"([{"path":"agents.list[1].model","value":"openai/gpt-5"},{"path":"agents.list[1].thinkingDefault","value":"high"}])"});
    CHECK(calls[1] == sv{"gateway", "call", "sessions.patch", "--json", "--params",
                         R"({"key":"agent:)" + id + R"(:main","agentId":")" + id +
                             R"(","model":"openai/gpt-5","thinkingLevel":"high"})"});
    // The reload is said where the spec's reader looks: the payload.
    CHECK_THAT(m.payload, Catch::Contains("\"session_reloaded\": true"));
    // "none" is the runtime's "off"; an agent the runtime does not know is named.
    auto off =
        wait_finished(admin, enqueue(admin, gw.id, "set_agent_model",
                                     R"({"agent_slug":")" + gw.agent + R"(","thinking":"none"})"));
    CHECK(off.status == "done");
    CHECK_THAT(box.calls()[2][3], Catch::Contains(R"("value":"off")"));
    auto unknown = wait_finished(
        admin, enqueue(admin, gw.id, "set_agent_model", R"({"agent_slug":"ghost","model":"a/b"})"));
    CHECK(unknown.status == "failed");
    CHECK_THAT(unknown.error, Catch::Contains("\"ghost\" is not configured in the runtime"));
    auto rm = wait_finished(
        admin, enqueue(admin, gw.id, "auth_remove", R"({"profile_id":"openai:work"})"));
    CHECK(rm.status == "done");
    CHECK_THAT(read(home / "agents" / "x" / "agent" / "auth-profiles.json"),
               !Catch::Contains("openai:work") && Catch::Contains("anthropic:default"));
    CHECK_FALSE(
        std::filesystem::exists(home / "agents" / "x" / "agent" / "auth-profiles.json.lock"));
    auto rm2 = wait_finished(
        admin, enqueue(admin, gw.id, "auth_remove", R"({"profile_id":"openai:work"})"));
    CHECK(rm2.status == "failed");
    CHECK_THAT(rm2.error, Catch::Contains("not found"));
    auto up = wait_finished(
        admin,
        enqueue(admin, gw.id, "upload_file",
                R"({"path":"notes/a.txt","content":"aGVsbG8=","encoding":"base64"})", gw.agent));
    CHECK(up.status == "done");
    CHECK(read(home / ("workspace-" + gw.agent) / "notes" / "a.txt") == "hello");
}

TEST_CASE("runner: a command of another gateway is never touched", "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture mine(admin, "ana"), other(admin, "bob");
    sandbox box;
    running_runner r(base_config(db, box, mine.slug));
    const auto theirs = enqueue(admin, other.id, "auth_list");
    const auto ours = enqueue(admin, mine.id, "auth_list");
    CHECK(wait_finished(admin, ours).status == "done");
    CHECK(one(admin, "SELECT status::text || '/' || attempts FROM agent_commands WHERE id = $1",
              {theirs}) == "pending/0");
    CHECK(box.calls().size() == 1);
}

TEST_CASE(
    "runner: a command's end rides on the next lease, and a refused end still lets the next run",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    running_runner r(base_config(db, box, gw.slug));
    auto started = [&](const std::string& id) {
        return eventually([&] { return read_command(admin, id).status == "running"; }, 10s);
    };

    // Nothing follows: the end is written at once all the same.
    const auto alone = enqueue(admin, gw.id, "auth_list");
    CHECK(wait_finished(admin, alone, 15s).status == "done");

    // The first command's lease is taken from it while it runs (as a lease expiry and another
    // runner would): its end is refused, nothing of the combined call is written, and the
    // runner then leases the second on its own.
    box.set("sleep", "1");
    const auto first = enqueue(admin, gw.id, "auth_list");
    REQUIRE(started(first));
    const auto second = enqueue(admin, gw.id, "auth_list");
    const auto stolen = one(admin,
                            "UPDATE agent_commands SET lease_token = gen_random_uuid() "
                            "WHERE id = $1 RETURNING lease_token::text",
                            {first});
    CHECK(wait_finished(admin, second, 15s).status == "done");
    CHECK(read_command(admin, first).status == "running");  // not written by the one that lost it
    CHECK(one(admin, "SELECT lease_token::text FROM agent_commands WHERE id = $1", {first}) ==
          stolen);

    // SIGTERM during a command: no lease follows it, and its end is written on its own before
    // the runner exits.
    const auto last = enqueue(admin, gw.id, "auth_list");
    REQUIRE(started(last));
    r.stop();
    CHECK(read_command(admin, last).status == "done");
}

TEST_CASE("runner: two runners on one gateway never run a command twice", "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    running_runner a(base_config(db, box, gw.slug));
    running_runner b(base_config(db, box, gw.slug));
    constexpr int kCommands = 60;
    std::vector<std::string> ids;
    for (int i = 0; i < kCommands; ++i) {
        ids.push_back(enqueue(admin, gw.id, "list_models",
                              R"({"provider":"p)" + std::to_string(i) + R"("})"));
    }
    for (const auto& id : ids) CHECK(wait_finished(admin, id, 30s).status == "done");
    std::multiset<std::string> providers;
    for (const auto& c : box.calls()) providers.insert(c.at(4));
    CHECK(providers.size() == kCommands);
    for (int i = 0; i < kCommands; ++i) CHECK(providers.count("p" + std::to_string(i)) == 1);
    CHECK(one(admin, "SELECT count(DISTINCT leased_by) FROM agent_commands WHERE gateway_id = $1",
              {gw.id}) == "2");
}

TEST_CASE("runner: Postgres restarted under a running runner: it reconnects and goes on",
          "[runner][restart]") {
    awp::test::private_cluster pgc(true);
    auto admin = pg::connection::connect(pgc.dsn());
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(pgc.dsn(), box, gw.slug);
    running_runner r(cfg);
    CHECK(wait_finished(admin, enqueue(admin, gw.id, "auth_list")).status == "done");
    pgc.restart();
    admin = pg::connection::connect(pgc.dsn());
    const auto after = enqueue(admin, gw.id, "auth_list");
    // The reconnect re-scans: the command inserted while the listener was away is picked up.
    CHECK(wait_finished(admin, after, 20s).status == "done");
    CHECK(box.calls().size() == 2);
}

TEST_CASE(
    "runner: a source connector's url is under the outbound policy (loopback, link-local "
    "and the database port refused before any connection)",
    "[runner][security]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    tiny_http server;
    auto cfg = base_config(db, box, gw.slug);  // no OUTBOUND_ALLOW: the public internet only
    running_runner r(cfg);
    const auto pg_port = awp::test::require_env("AWP_PG_PORT");
    for (const auto& url : std::vector<std::string>{
             "http://127.0.0.1:" + std::to_string(server.port()) + "/api",
             std::string("http://169.254.169.254/latest/meta-data"), "http://10.0.0.7:" + pg_port,
             "http://[::ffff:127.0.0.1]:" + std::to_string(server.port())}) {
        INFO(url);
        const auto conn =
            one(admin,
                "INSERT INTO source_connections (tenant_id, provider, writable, config) VALUES "
                "($1, 'http_json', true, jsonb_build_object('url', $2::text)) RETURNING id",
                {kDefaultTenant, url});
        auto f = wait_finished(admin, enqueue(admin, gw.id, "source_write",
                                              R"({"connection_id":")" + conn +
                                                  R"(","action":"create_page","params":{}})"));
        CHECK(f.status == "failed");
        CHECK_THAT(f.error, Catch::Contains("refused by the outbound policy"));
    }
    CHECK(server.requests().empty());
}

TEST_CASE(
    "runner: a run_shell row not written by an operator is not run on an operators-only "
    "gateway",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    running_runner r(base_config(db, box, gw.slug));
    const std::string marker = (box.root / "ran").string();
    const std::string shell = R"({"argv":["/usr/bin/touch",")" + marker + R"("]})";
    // Written around the database's gate (a restored dump, a superuser with the trigger off).
    admin.exec("ALTER TABLE agent_commands DISABLE TRIGGER agent_commands_zz_run_shell_gate");
    const auto sneaked = enqueue(admin, gw.id, "run_shell", shell, gw.agent);
    admin.exec("ALTER TABLE agent_commands ENABLE TRIGGER agent_commands_zz_run_shell_gate");
    auto s = wait_finished(admin, sneaked);
    CHECK(s.status == "failed");
    CHECK_THAT(s.error, Catch::Contains("operators only"));
    CHECK_FALSE(std::filesystem::exists(marker));
    // An operator's (the admin session is one) runs.
    auto ok = wait_finished(admin, enqueue(admin, gw.id, "run_shell", shell, gw.agent));
    CHECK(ok.status == "done");
    CHECK(std::filesystem::exists(marker));
}

TEST_CASE(
    "runner: two agents the runtime would hold as one (slugs Ana and ana) are refused at "
    "provision and at remove, and the runtime is never called",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);  // agent slug "ana-<6 hex>"
    std::string twin = gw.agent;
    twin[0] = 'A';  // "Ana-<6 hex>": the runtime's id of both is "ana-<6 hex>"
    REQUIRE(awp::runtime::agent_id(twin) == awp::runtime::agent_id(gw.agent));
    admin.exec("INSERT INTO agents (tenant_id, name, slug, gateway_id) VALUES ($1, $2, $2, $3)",
               {kDefaultTenant, twin, gw.id});
    sandbox box;
    running_runner r(base_config(db, box, gw.slug));
    for (const auto& [action, slug] :
         {std::pair<std::string, std::string>{"provision", twin}, {"remove", gw.agent}}) {
        const auto id = enqueue(admin, gw.id, action, R"({"channel":"none"})", slug);
        auto s = wait_finished(admin, id);
        INFO(action << ": " << s.error);
        CHECK(s.status == "failed");
        CHECK_THAT(s.error, Catch::Contains("are the same agent in the runtime"));
        CHECK_THAT(s.error, Catch::Contains("nothing was changed"));
    }
    CHECK(box.calls().empty());
    // The twin gone, remove goes ahead.
    admin.exec("DELETE FROM agents WHERE slug = $1", {twin});
    const auto ok = enqueue(admin, gw.id, "remove", "{}", gw.agent);
    CHECK(wait_finished(admin, ok).status == "done");
}

TEST_CASE(
    "runner: provision with a template this gateway does not have, or a channel token file it "
    "cannot write, is refused before the runtime is called",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    sandbox box;
    auto cfg = base_config(db, box, gw.slug);
    running_runner r(cfg);
    auto s = wait_finished(
        admin, enqueue(admin, gw.id, "provision",
                       R"({"channel":"none","source_template":"no-such-template"})", gw.agent));
    CHECK(s.status == "failed");
    CHECK_THAT(s.error, Catch::Contains("template \"no-such-template\" does not exist"));
    // The channel tokens' folder is a file: the token cannot be written.
    admin.exec(
        "INSERT INTO secrets (tenant_id, gateway_id, agent_id, key, encrypted_value) VALUES ($1, "
        "$2, $3, 'TELEGRAM_BOT_TOKEN', $4)",
        {kDefaultTenant, gw.id, gw.agent_id,
         awp::core::crypto::encrypt_secret("tg-1:X", cfg.service_role_key)});
    std::filesystem::create_directories(cfg.secrets_dir);
    std::ofstream(cfg.secrets_dir + "/channels") << "not a folder";
    auto t = wait_finished(admin, enqueue(admin, gw.id, "provision", "{}", gw.agent));
    CHECK(t.status == "failed");
    CHECK_THAT(t.error, Catch::Contains("cannot write the channel token file"));
    CHECK_THAT(t.error + t.stdout_ + t.stderr_, !Catch::Contains("tg-1:X"));
    CHECK(box.calls().empty());
}

TEST_CASE(
    "runner: a connection cut right after the lease, at the run_shell policy check, is retried on "
    "a new one: the command runs once and ends done",
    "[runner]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_fixture gw(admin);
    // The policy check is the runner's one read of gateways (a gateway login, under row-level
    // security): a restrictive policy whose function ends the reading backend the first time a
    // run_shell command is running, as a database restart or a pooler would at that moment.
    admin.exec("CREATE SEQUENCE public.test_cuts");
    admin.exec(
        "CREATE FUNCTION public.test_cut_once(p_gateway uuid) RETURNS boolean LANGUAGE plpgsql "
        "VOLATILE SECURITY DEFINER SET search_path = '' AS $$ BEGIN "
        "IF p_gateway = '" +
        gw.id +
        "' AND EXISTS (SELECT 1 FROM public.agent_commands "
        "WHERE action = 'run_shell' AND status = 'running') THEN "
        "IF nextval('public.test_cuts') = 1 THEN "
        "PERFORM pg_terminate_backend(pg_backend_pid()); END IF; END IF; RETURN true; END $$");
    admin.exec("GRANT EXECUTE ON FUNCTION public.test_cut_once(uuid) TO awp_gateway");
    admin.exec(
        "CREATE POLICY test_cut ON public.gateways AS RESTRICTIVE FOR SELECT TO awp_gateway "
        "USING (public.test_cut_once(id))");
    sandbox box;
    running_runner r(base_config(db.gateway_dsn(gw.slug), box, gw.slug));
    const std::string marker = (box.root / "ran").string();
    // A member's command on a gateway open to members: the runner reads the policy before it
    // runs (an operator's command, the row says so, needs no read).
    admin.exec("UPDATE gateways SET run_shell_policy = 'members' WHERE id = $1", {gw.id});
    admin.exec("ALTER TABLE agent_commands DISABLE TRIGGER agent_commands_zz_run_shell_gate");
    const auto id =
        enqueue(admin, gw.id, "run_shell",
                R"({"argv":["/bin/sh","-c","echo once >> \"$0\"",")" + marker + R"("]})", gw.agent);
    admin.exec("ALTER TABLE agent_commands ENABLE TRIGGER agent_commands_zz_run_shell_gate");
    auto s = wait_finished(admin, id, 30s);
    INFO(s.error);
    // Cut once, then read again on a new connection.
    CHECK(one(admin, "SELECT (is_called AND last_value >= 2)::text FROM public.test_cuts") ==
          "true");
    CHECK(s.status == "done");
    CHECK(s.error.empty());
    std::ifstream in(marker);
    std::string ran((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(ran == "once\n");
}

}  // namespace runner_actions_test
