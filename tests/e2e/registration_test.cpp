// Adding a gateway host end to end (issue #9, point 4): `awpctl gateway token` prints a
// single-use, expiring token; a fresh host's runner started with GATEWAY_TOKEN registers through
// consume_gateway_token, keeps the registration, and its gateway becomes `ready`; a restart
// does not register again; a second host cannot reuse the token; an expired one is refused.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/test_db.hpp"

namespace registration_test {

namespace fs = std::filesystem;
namespace pg = awp::core::pg;
using awp::test::child;
using namespace std::chrono_literals;

namespace {

const std::string kAwpctl = std::string(AWP_BIN_DIR) + "/awpctl";
const std::string kRunner = std::string(AWP_BIN_DIR) + "/awp-command-runner";
constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    if (r.empty() || r.is_null(0, 0)) return {};
    return std::string(r.text(0, 0));
}

/// `awpctl gateway token ...` as an operator runs it: the token alone on stdout.
std::string issue_token(const awp::test::scoped_database& db,
                        const std::vector<std::string>& extra) {
    const std::string base = "/tmp/" + awp::test::random_name("awp-reg-");
    std::string cmd = "'" + kAwpctl + "' --database-url '" + db.admin_dsn() + "' gateway token";
    for (const auto& a : extra) cmd += " '" + a + "'";
    const int rc = std::system((cmd + " >" + base + ".out 2>" + base + ".err").c_str());
    std::string out = slurp(base + ".out");
    const std::string err = slurp(base + ".err");
    std::remove((base + ".out").c_str());
    std::remove((base + ".err").c_str());
    INFO(err);
    REQUIRE(WIFEXITED(rc));
    REQUIRE(WEXITSTATUS(rc) == 0);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    REQUIRE(out.rfind("awpgt_", 0) == 0);
    CHECK(out.find('\n') == std::string::npos);
    CHECK(err.find(out) == std::string::npos);  // printed once, on stdout only
    return out;
}

/// One host: its own state, runtime and secrets folders.
struct host {
    fs::path dir = fs::temp_directory_path() / awp::test::random_name("awp-reg-host-");
    host() { fs::create_directories(dir / "fake"); }
    ~host() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    fs::path registration() const { return dir / "state" / "registration.json"; }
    std::map<std::string, std::string> env(const awp::test::scoped_database& db,
                                           const std::string& token) const {
        return {{"DATABASE_URL", db.daemon_dsn()},
                {"GATEWAY_ID", ""},
                {"GATEWAY_TOKEN", token},
                {"GATEWAY_LABEL", "Edge Drill"},
                {"AWP_STATE_DIR", (dir / "state").string()},
                {"AGENT_RUNTIME", std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-runtime"},
                {"FAKE_RUNTIME_DIR", (dir / "fake").string()},
                {"AWP_CHILD_ENV_ALLOW", "FAKE_*"},
                {"OPENCLAW_STATE_DIR", (dir / "home").string()},
                {"SECRETS_DIR", (dir / "secrets").string()},
                {"SAFETY_POLL", "0.5"},
                {"LOG_LEVEL", "info"}};
    }
    std::unique_ptr<child> runner(const awp::test::scoped_database& db,
                                  const std::string& token) const {
        return std::make_unique<child>(std::vector<std::string>{kRunner}, env(db, token));
    }
};

long gateways(pg::connection& c) { return std::stol(one(c, "SELECT count(*) FROM gateways")); }

}  // namespace

TEST_CASE(
    "registration: a runner started with an awpctl gateway token registers once, is ready, "
    "keeps its registration, and a second host cannot reuse the token",
    "[registration][e2e]") {
    awp::test::scoped_database db;
    auto c = db.admin();
    const long before = gateways(c);
    const std::string token = issue_token(db, {"--label", "Edge Drill", "--ttl", "600"});

    host a;
    auto first = a.runner(db, token);
    INFO(first->log());
    REQUIRE(first->wait_for_log("\"msg\":\"ready\"", 15s));
    CHECK(first->log().find("\"msg\":\"gateway registered\"") != std::string::npos);

    // The registration is kept, 0600, with the slug the database handed out.
    REQUIRE(fs::exists(a.registration()));
    CHECK((fs::status(a.registration()).permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::owner_write));
    rapidjson::Document reg;
    reg.Parse(slurp(a.registration()).c_str());
    REQUIRE_FALSE(reg.HasParseError());
    const std::string slug = reg["gateway_slug"].GetString();
    const std::string id = reg["gateway_id"].GetString();
    CHECK(slug == "edge-drill");
    CHECK(gateways(c) == before + 1);
    // Its first heartbeat made it ready.
    CHECK(one(c, "SELECT status::text || ' ' || slug || ' ' || label FROM gateways WHERE id = $1",
              {id}) == "ready " + slug + " Edge Drill");
    CHECK(one(c,
              "SELECT count(*) FROM daemon_heartbeats WHERE gateway_id = $1 AND daemon = "
              "'command-runner'",
              {id}) == "1");
    CHECK(one(c,
              "SELECT count(*) FROM gateway_registration_tokens WHERE consumed_at IS NOT NULL "
              "AND consumed_by_gateway_id = $1",
              {id}) == "1");
    // And it runs the new gateway's commands.
    const std::string cmd = one(c,
                                "INSERT INTO agent_commands (tenant_id, gateway_id, action) "
                                "VALUES ($1, $2, 'auth_list') RETURNING id",
                                {kTenant, id});
    std::string status;
    for (int i = 0; i < 300 && status != "done" && status != "failed"; ++i) {
        std::this_thread::sleep_for(50ms);
        status = one(c, "SELECT status::text FROM agent_commands WHERE id = $1", {cmd});
    }
    CHECK(status == "done");

    // A restart (the token still in its environment) uses the stored registration.
    first->signal(SIGTERM);
    CHECK(first->wait(15s) == std::optional<int>(0));
    auto again = a.runner(db, token);
    REQUIRE(again->wait_for_log("\"msg\":\"ready\"", 15s));
    CHECK(again->log().find("\"msg\":\"gateway registration found\"") != std::string::npos);
    CHECK(again->log().find("\"msg\":\"gateway registered\"") == std::string::npos);
    CHECK(gateways(c) == before + 1);

    // A second host with the same token is refused: exit 78 (systemd does not loop on it), a
    // clear log line, no registration kept, no second gateway.
    host b;
    auto second = b.runner(db, token);
    const auto code = second->wait(15s);
    const std::string log = second->log();
    INFO(log);
    REQUIRE(code.has_value());
    CHECK(*code == 78);
    CHECK(log.find("gateway registration failed") != std::string::npos);
    CHECK(log.find("already used") != std::string::npos);
    CHECK_FALSE(fs::exists(b.registration()));
    CHECK(gateways(c) == before + 1);
    // The token is a secret: never in a log line.
    CHECK(log.find(token) == std::string::npos);
    CHECK(again->log().find(token) == std::string::npos);
    CHECK(first->log().find(token) == std::string::npos);

    again->signal(SIGTERM);
    CHECK(again->wait(15s) == std::optional<int>(0));
}

TEST_CASE("registration: an expired or unknown gateway token registers nothing",
          "[registration][e2e]") {
    awp::test::scoped_database db;
    auto c = db.admin();
    const long before = gateways(c);
    const std::string token = issue_token(db, {"--ttl", "60"});
    // An hour later, as far as the token is concerned.
    c.exec(
        "UPDATE gateway_registration_tokens SET created_at = now() - interval '2 hours', "
        "expires_at = now() - interval '1 hour' WHERE consumed_at IS NULL");

    host h;
    {
        auto r = h.runner(db, token);
        const auto code = r->wait(15s);
        const std::string log = r->log();
        INFO(log);
        REQUIRE(code.has_value());
        CHECK(*code == 78);
        CHECK(log.find("gateway registration failed") != std::string::npos);
        CHECK(log.find("expired") != std::string::npos);
        CHECK(log.find(token) == std::string::npos);
    }
    {
        auto r = h.runner(db, "awpgt_not-a-token-anyone-issued");
        const auto code = r->wait(15s);
        INFO(r->log());
        REQUIRE(code.has_value());
        CHECK(*code == 78);
        CHECK(r->log().find("invalid gateway registration token") != std::string::npos);
    }
    CHECK_FALSE(fs::exists(h.registration()));
    CHECK(gateways(c) == before);
    // Still unused: an operator can see it expired unused.
    CHECK(one(c, "SELECT count(*) FROM gateway_registration_tokens WHERE consumed_at IS NULL") ==
          "1");
}

}  // namespace registration_test
