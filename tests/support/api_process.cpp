#include "support/api_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "awp/core/crypto.hpp"
#include "awp/core/uuid.hpp"
#include "support/net.hpp"
#include "support/pooler.hpp"
#include "support/test_db.hpp"

namespace awp::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

http::headers bearer(const std::string& token) {
    http::headers h;
    h.add("Authorization", "Bearer " + token);
    return h;
}

std::string user_token(const std::string& tenant) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const std::string claims = R"({"sub":")" + core::uuid::generate_v4().to_string() +
                               R"(","role":"authenticated","exp":)" + std::to_string(now + 3600) +
                               R"(,"app_metadata":{"tenant_id":")" + tenant + R"("}})";
    return core::crypto::jwt_sign_hs256(claims, kApiJwtSecret);
}

std::string api_role_url(const scoped_database& db) {
    return "postgresql://awp_api:" + require_env("AWP_PG_API_PASSWORD") +
           "@127.0.0.1:" + require_env("AWP_PG_PORT") + "/" + db.name();
}

api_gateway_process::api_gateway_process(
    const std::string& dsn, env_map extra, const std::string& prefix,
    const std::function<void(const fs::path& dir, env_map& env)>& prepare) {
    dir = fs::temp_directory_path() / random_name(prefix);
    fs::create_directories(dir);
    port = extra.count("API_PORT") ? static_cast<unsigned short>(std::stoi(extra["API_PORT"]))
                                   : free_port();
    env_map env = {
        {"PATH", "/usr/bin:/bin"},
        {"JWT_SECRET", kApiJwtSecret},
        {"SERVICE_ROLE_KEY", kApiServiceKey},
        {"AWP_API_DATABASE_URL", dsn},
        {"API_PORT", std::to_string(port)},
        {"API_THREADS", "2"},
        {"API_DB_POOL", "4"},
        {"AWP_CONFIG_DIR", (dir / "config").string()},
        {"OPENCLAW_STATE_DIR", (dir / "openclaw").string()},
        {"API_TEMPLATES_DIR", std::string(AWP_SOURCE_DIR) + "/deploy/templates"},
        {"API_CONNECTORS_DIR", std::string(AWP_SOURCE_DIR) + "/deploy/connectors"},
        // Nothing listens there: /api/embed answers 502 unless a test sets its own.
        {"EMBEDDER_URL", "http://127.0.0.1:" + std::to_string(free_port())},
        {"API_LOGIN_MAX_FAILURES", "3"},
    };
    for (auto& [k, v] : extra) env[k] = v;
    if (prepare) prepare(dir, env);
    route_through_pgbouncer(env);  // AWP_TEST_PGBOUNCER=1: AWP_API_DATABASE_URL via PgBouncer
    std::vector<std::string> strs;
    for (auto& [k, v] : env) strs.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : strs) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string bin = std::string(AWP_BIN_DIR) + "/awp-api-gateway";
    log_path = (dir / "stderr.log").string();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> argv{bin.data(), nullptr};
    const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < deadline) {
        try {
            if (get("/api/health").status == 200) return;
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(50ms);
    }
    FAIL("gateway did not come up: " << logs());
}

api_gateway_process::~api_gateway_process() {
    if (pid > 0) {
        ::kill(pid, SIGTERM);
        int st = 0;
        for (int i = 0; i < 200 && ::waitpid(pid, &st, WNOHANG) == 0; ++i)
            std::this_thread::sleep_for(25ms);
        if (::waitpid(pid, &st, WNOHANG) == 0) kill();
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
}

int api_gateway_process::stop() {
    if (pid <= 0) return -1;
    ::kill(pid, SIGTERM);
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void api_gateway_process::kill() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
}

std::string api_gateway_process::logs() const {
    std::ifstream in(log_path);
    return {std::istreambuf_iterator<char>(in), {}};
}

std::string api_gateway_process::url() const { return "http://127.0.0.1:" + std::to_string(port); }

http::response api_gateway_process::request(const std::string& method, const std::string& target,
                                            http::headers h, std::string body) const {
    http::client_request r;
    r.method = method;
    r.url = url() + target;
    r.header = std::move(h);
    r.body = std::move(body);
    r.timeout = 30s;
    return http::fetch_sync(std::move(r));
}

http::response api_gateway_process::get(const std::string& target, http::headers h) const {
    return request("GET", target, std::move(h));
}

}  // namespace awp::test
