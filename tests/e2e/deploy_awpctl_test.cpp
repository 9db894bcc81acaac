// awpctl's deployment commands as operators and health checks run them: gateway registration
// tokens that register exactly one gateway, and health answers from heartbeat rows and HTTP.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <rapidjson/document.h>
#include <catch2/catch.hpp>

#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/test_db.hpp"

namespace deploy_awpctl_test {

using namespace std::chrono_literals;

namespace {

const std::string kAwpctl = std::string(AWP_BIN_DIR) + "/awpctl";

struct ran {
    int rc;
    std::string out;  // stdout only
    std::string err;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    std::remove(path.c_str());
    return s.str();
}

ran awpctl(const std::vector<std::string>& args) {
    const std::string base = "/tmp/" + awp::test::random_name("awpctl-deploy-");
    std::string cmd = "'" + kAwpctl + "'";
    for (const auto& a : args) cmd += " '" + a + "'";
    const int rc = std::system((cmd + " >" + base + ".out 2>" + base + ".err").c_str());
    return {WEXITSTATUS(rc), slurp(base + ".out"), slurp(base + ".err")};
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

std::string sqlstate_of(awp::core::pg::connection& c, const std::string& sql,
                        const awp::core::pg::params& p) {
    try {
        c.exec(sql, p);
    } catch (const awp::core::pg::sql_error& e) {
        return e.sqlstate();
    }
    return "";
}

std::string this_host() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("awpctl gateway token registers exactly one gateway, once, before it expires",
          "[awpctl][deploy]") {
    awp::test::scoped_database db;
    auto [rc, out, err] =
        awpctl({"--database-url", db.admin_dsn(), "gateway", "token", "--label", "Edge Box"});
    REQUIRE(rc == 0);
    const std::string token = trimmed(out);
    // Printed alone on stdout (GATEWAY_TOKEN=$(awpctl gateway token)); the rest on stderr.
    CHECK(token.rfind("awpgt_", 0) == 0);
    CHECK(token.find('\n') == std::string::npos);
    CHECK(err.find("single-use") != std::string::npos);
    CHECK(err.find(token) == std::string::npos);

    auto c = db.admin();
    // Only the hash is stored, and it expires within the default hour.
    CHECK(c.exec("SELECT count(*) FROM gateway_registration_tokens WHERE token_hash = $1", {token})
              .get<long>(0, 0) == 0);
    CHECK(c.exec("SELECT count(*) FROM gateway_registration_tokens WHERE label = 'Edge Box' AND "
                 "expires_at BETWEEN now() + interval '59 min' AND now() + interval '61 min' "
                 "AND created_by LIKE 'awpctl:%'")
              .get<long>(0, 0) == 1);

    // A fresh host's first registration, as anon would call it; a second host cannot reuse it.
    auto host_a = db.api();
    host_a.exec("SET ROLE anon");
    const auto reg = host_a.exec("SELECT consume_gateway_token($1)::text", {token});
    CHECK(reg.get<std::string>(0, 0).find("\"gateway_slug\": \"edge-box\"") != std::string::npos);
    auto host_b = db.api();
    host_b.exec("SET ROLE anon");
    CHECK(sqlstate_of(host_b, "SELECT consume_gateway_token($1)", {token}) == "AW008");
    CHECK(c.exec("SELECT status::text FROM gateways WHERE slug = 'edge-box'")
              .get<std::string>(0, 0) == "provisioning");
    // Its first heartbeat makes it ready.
    c.exec("SELECT * FROM daemon_heartbeat('edge-box', 'command-runner', 'edge:1', 1)");
    CHECK(c.exec("SELECT status::text FROM gateways WHERE slug = 'edge-box'")
              .get<std::string>(0, 0) == "ready");

    SECTION("an expired token registers nothing") {
        auto t = awpctl({"--database-url", db.admin_dsn(), "gateway", "token", "--ttl", "60"});
        REQUIRE(t.rc == 0);
        c.exec(
            "UPDATE gateway_registration_tokens SET expires_at = now() - interval '1 s' "
            "WHERE consumed_at IS NULL");
        CHECK(sqlstate_of(c, "SELECT consume_gateway_token($1)", {trimmed(t.out)}) == "AW007");
    }
    SECTION("--json carries the id, tenant and expiry") {
        auto t = awpctl({"--json", "--database-url", db.admin_dsn(), "gateway", "token", "--ttl",
                         "7200", "--tenant-id", "00000000-0000-0000-0000-000000000000"});
        REQUIRE(t.rc == 0);
        rapidjson::Document d;
        d.Parse(t.out.c_str());
        REQUIRE_FALSE(d.HasParseError());
        CHECK(std::string(d["token"].GetString()).rfind("awpgt_", 0) == 0);
        CHECK(std::string(d["tenant_id"].GetString()) == "00000000-0000-0000-0000-000000000000");
        CHECK(d["expires_at"].IsString());
    }
    SECTION("bad input: usage errors exit 78, an unknown tenant is an error") {
        CHECK(awpctl({"--database-url", db.admin_dsn(), "gateway", "token", "--ttl", "30"}).rc ==
              78);
        CHECK(
            awpctl({"--database-url", db.admin_dsn(), "gateway", "token", "--tenant-id", "x"}).rc ==
            78);
        CHECK(awpctl({"--database-url", db.admin_dsn(), "gateway"}).rc == 78);
        CHECK(awpctl({"--database-url", db.admin_dsn(), "gateway", "token", "--tenant-id",
                      "99999999-9999-4999-8999-999999999999"})
                  .rc == 1);
    }
}

TEST_CASE("awpctl health is healthy only while the daemon's heartbeat is fresh",
          "[awpctl][deploy]") {
    awp::test::scoped_database db;
    const std::string dsn = db.admin_dsn();
    auto health = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"--database-url", dsn, "health"};
        args.insert(args.end(), extra.begin(), extra.end());
        return awpctl(args);
    };
    CHECK(health({"--daemon", "command-runner"}).rc == 1);  // nothing reported yet

    auto c = db.admin();
    const std::string here = this_host() + ":awp-command-runner:4242";
    c.exec("SELECT * FROM daemon_heartbeat('default', 'command-runner', $1, 4242)", {here});
    const auto ok = health({"--daemon", "awp-command-runner", "--local"});
    CHECK(ok.rc == 0);
    CHECK(ok.out.find("alive") != std::string::npos);
    CHECK(health({"--daemon", "command-runner", "--gateway", "default"}).rc == 0);
    CHECK(health({"--daemon", "command-runner", "--instance", here}).rc == 0);
    CHECK(health({"--daemon", "command-runner", "--instance", "elsewhere:x:1"}).rc == 1);
    CHECK(health({"--daemon", "command-runner", "--gateway", "no-such-gateway"}).rc == 1);
    CHECK(health({"--daemon", "inbox-dispatcher"}).rc == 1);

    // Another host's fresh heartbeat does not make this host's daemon alive.
    c.exec(
        "SELECT * FROM daemon_heartbeat('default', 'scheduler', 'other-host:awp-scheduler:7', 7)");
    CHECK(health({"--daemon", "scheduler"}).rc == 0);
    CHECK(health({"--daemon", "scheduler", "--local"}).rc == 1);

    // Silent for 200 s: unhealthy at the default 90 s, healthy with a wider limit.
    c.exec(
        "UPDATE daemon_heartbeats SET last_seen_at = now() - interval '200 s' "
        "WHERE daemon = 'command-runner'");
    const auto silent = health({"--daemon", "command-runner", "--local"});
    CHECK(silent.rc == 1);
    CHECK(silent.err.find("silent") != std::string::npos);
    CHECK(health({"--daemon", "command-runner", "--within", "300"}).rc == 0);

    auto j = awpctl({"--json", "--database-url", dsn, "health", "--daemon", "command-runner"});
    CHECK(j.rc == 1);
    rapidjson::Document d;
    d.Parse(j.out.c_str());
    REQUIRE_FALSE(d.HasParseError());
    CHECK_FALSE(d["healthy"].GetBool());

    // No database is an unhealthy answer (1), never a crash or a usage error.
    CHECK(awpctl({"--database-url", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2",
                  "health", "--daemon", "scheduler"})
              .rc == 1);
    CHECK(awpctl({"health"}).rc == 78);
    CHECK(awpctl({"health", "--url", "https://127.0.0.1/"}).rc == 78);
}

TEST_CASE("awpctl health --url is healthy on a 2xx answer only", "[awpctl][deploy]") {
    const int port = free_port();
    const std::string dir = "/tmp/" + awp::test::random_name("awp-health-http-");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/healthz") << "ok\n";
    awp::test::child server({"/usr/bin/python3", "-m", "http.server", std::to_string(port),
                             "--bind", "127.0.0.1", "--directory", dir});
    const std::string base = "http://127.0.0.1:" + std::to_string(port);
    int rc = 1;
    for (int i = 0; i < 300 && rc != 0; ++i) {
        rc = awpctl({"health", "--url", base + "/healthz"}).rc;
        if (rc != 0) std::this_thread::sleep_for(100ms);
    }
    CHECK(rc == 0);
    const auto missing = awpctl({"health", "--url", base + "/missing"});
    CHECK(missing.rc == 1);
    CHECK(missing.err.find("HTTP 404") != std::string::npos);
    server.signal(SIGTERM);
    server.wait(5s);
    CHECK(awpctl({"health", "--url", base + "/healthz", "--timeout", "2"}).rc == 1);
    std::filesystem::remove_all(dir);
}

}  // namespace deploy_awpctl_test
