// awpctl as an operator runs it: status figures from real rows, tokens that verify, exit codes.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <rapidjson/document.h>
#include <catch2/catch.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/test_db.hpp"

namespace awpctl_test {

using awp::test::child;
using namespace std::chrono_literals;

namespace {
const std::string kAwpctl = std::string(AWP_BIN_DIR) + "/awpctl";

// Runs awpctl; returns its exit code and stdout (captured through a file).
std::pair<int, std::string> awpctl(std::vector<std::string> args,
                                   std::map<std::string, std::string> env = {}) {
    const std::string out = "/tmp/" + awp::test::random_name("awpctl-") + ".out";
    std::string cmd = "'" + kAwpctl + "'";
    for (const auto& a : args) cmd += " '" + a + "'";
    std::string envs;
    for (const auto& [k, v] : env) envs += k + "='" + v + "' ";
    const int rc = std::system((envs + cmd + " >" + out + " 2>&1").c_str());
    std::ifstream in(out);
    std::stringstream s;
    s << in.rdbuf();
    std::remove(out.c_str());
    return {WEXITSTATUS(rc), s.str()};
}
}  // namespace

TEST_CASE("awpctl status reports queue depths per gateway from the rows", "[awpctl]") {
    awp::test::scoped_database db;
    auto c = db.admin();
    c.exec(
        "INSERT INTO gateways (slug, label, tenant_id) VALUES ('gw-a', 'A', "
        "'00000000-0000-0000-0000-000000000000')");
    c.exec(
        "INSERT INTO agent_commands (gateway_id, action, status) "
        "SELECT id, 'update_all'::command_action, 'pending'::command_status FROM gateways "
        "WHERE slug = 'gw-a' "
        "UNION ALL SELECT id, 'update_all', 'pending' FROM gateways WHERE slug = 'gw-a'");
    auto [rc, out] = awpctl({"--json", "--database-url", db.admin_dsn(), "status"});
    REQUIRE(rc == 0);
    rapidjson::Document d;
    d.Parse(out.c_str());
    REQUIRE_FALSE(d.HasParseError());
    bool found = false;
    for (const auto& g : d["gateways"].GetArray()) {
        if (std::string(g["slug"].GetString()) != "gw-a") continue;
        found = true;
        CHECK(g["commands"]["pending"].GetInt() == 2);
        CHECK(g["oldest_pending_command_s"].IsInt64());
    }
    CHECK(found);

    auto [rc2, human] = awpctl({"--database-url", db.admin_dsn(), "status"});
    CHECK(rc2 == 0);
    CHECK(human.find("gateway gw-a") != std::string::npos);
    CHECK(human.find("pending 2") != std::string::npos);
}

TEST_CASE("awpctl status shows realtime's slots and their lag, and realtime drop-slot removes them",
          "[awpctl][realtime]") {
    awp::test::scoped_database db;
    auto c = db.admin();
    const auto slot = awp::test::random_name("awp_rt_");
    auto [rc0, none] =
        awpctl({"--database-url", db.admin_dsn(), "status", "--realtime-slot", slot});
    CHECK(rc0 == 0);
    CHECK(none.find("realtime: no slot " + slot + "_* yet") != std::string::npos);

    // Two gateways' slots of the prefix; another prefix's is not theirs.
    c.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", {slot + "_a1"});
    c.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", {slot + "_b2"});
    c.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", {slot + "x_c3"});
    c.exec("CREATE TABLE rt_lag (id int PRIMARY KEY, body text)");
    c.exec("INSERT INTO rt_lag SELECT g, repeat('x', 1000) FROM generate_series(1, 200) g");
    auto [rc, out] =
        awpctl({"--json", "--database-url", db.admin_dsn(), "status", "--realtime-slot", slot});
    REQUIRE(rc == 0);
    rapidjson::Document d;
    d.Parse(out.c_str());
    REQUIRE_FALSE(d.HasParseError());
    const auto& rt = d["realtime"];
    CHECK(std::string(rt["wal_level"].GetString()) == "logical");
    CHECK(std::string(rt["slot"].GetString()) == slot);
    REQUIRE(rt["slots"].IsArray());
    REQUIRE(rt["slots"].Size() == 2);
    CHECK(std::string(rt["slots"][0]["name"].GetString()) == slot + "_a1");
    CHECK_FALSE(rt["slots"][0]["active"].GetBool());
    CHECK(std::string(rt["slots"][0]["wal_status"].GetString()) == "reserved");
    CHECK(rt["slots"][1]["lag_bytes"].GetInt64() > 100'000);  // nobody read the inserts
    auto [rc2, human] =
        awpctl({"--database-url", db.admin_dsn(), "status", "--realtime-slot", slot});
    CHECK(rc2 == 0);
    CHECK(human.find("realtime: slot " + slot + "_a1 INACTIVE") != std::string::npos);
    CHECK(human.find("realtime: slot " + slot + "_b2 INACTIVE") != std::string::npos);

    auto [rc3, dropped] =
        awpctl({"--database-url", db.admin_dsn(), "realtime", "drop-slot", "--slot", slot});
    CHECK(rc3 == 0);
    CHECK(c.exec("SELECT 1 FROM pg_replication_slots WHERE slot_name LIKE $1 || '\\_%'", {slot})
              .empty());
    CHECK(c.exec("SELECT pg_drop_replication_slot($1)", {slot + "x_c3"}).size() == 1);
}

TEST_CASE("awpctl token mints tokens that verify with the same secret only", "[awpctl]") {
    const std::string secret(40, 's');
    auto [rc, tok] = awpctl({"token", "--user-id", "11111111-1111-4111-8111-111111111111",
                             "--tenant-id", "22222222-2222-4222-8222-222222222222"},
                            {{"JWT_SECRET", secret}});
    REQUIRE(rc == 0);
    while (!tok.empty() && (tok.back() == '\n')) tok.pop_back();
    const auto claims = awp::core::crypto::jwt_verify_hs256(tok, secret);
    CHECK(claims.find("22222222-2222-4222-8222-222222222222") != std::string::npos);
    CHECK(claims.find("\"role\":\"authenticated\"") != std::string::npos);
    CHECK_THROWS(awp::core::crypto::jwt_verify_hs256(tok, std::string(40, 't')));

    CHECK(awpctl({"token", "--user-id", "not-a-uuid", "--tenant-id",
                  "22222222-2222-4222-8222-222222222222"},
                 {{"JWT_SECRET", secret}})
              .first == 78);
    CHECK(awpctl({"token", "--role", "anon"}, {{"JWT_SECRET", "short"}}).first == 78);
}

TEST_CASE("awpctl migrate is idempotent and status refuses an empty database", "[awpctl]") {
    awp::test::scoped_database db;
    auto [rc, out] = awpctl({"--database-url", db.admin_dsn(), "migrate"});
    CHECK(rc == 0);
    CHECK(out.find("0 applied") != std::string::npos);
    auto c = db.admin();
    c.exec("CREATE DATABASE " + db.name() + "_empty");
    const auto empty_dsn = db.admin_dsn() + "_empty";
    CHECK(awpctl({"--database-url", empty_dsn, "status"}).first == 1);
    c.exec("DROP DATABASE " + db.name() + "_empty");
}

TEST_CASE(
    "awpctl gateway credential creates a new gateway and its own login, whose URL reaches only "
    "that gateway, and a second run rotates the password",
    "[awpctl][gateway]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    admin.exec(
        "INSERT INTO gateways (slug, label, tenant_id) VALUES ('other-gw', 'O', "
        "'00000000-0000-0000-0000-000000000000')");
    const auto issue = [&] {
        auto [rc, out] = awpctl({"--json", "--database-url", db.admin_dsn(), "gateway",
                                 "credential", "edge-box", "--create"});
        REQUIRE(rc == 0);
        rapidjson::Document d;
        const auto last = out.substr(out.rfind('{'));
        d.Parse(last.c_str());
        REQUIRE_FALSE(d.HasParseError());
        CHECK(std::string(d["slug"].GetString()) == "edge-box");
        return std::string(d["database_url"].GetString());
    };
    const auto first = issue();
    CHECK(first.rfind("postgresql://awp_gw_", 0) == 0);
    {
        auto gw = awp::core::pg::connection::connect(first);
        auto r = gw.exec("SELECT slug FROM gateways");
        REQUIRE(r.size() == 1);  // its own, not other-gw nor default
        CHECK(r.get<std::string>(0, 0) == "edge-box");
        CHECK(
            gw.exec(
                  "SELECT gateway_status::text FROM daemon_heartbeat('edge-box', 'command-runner')")
                .get<std::string>(0, 0) == "ready");
    }
    const auto second = issue();  // the gateway exists: only a new password
    CHECK(second != first);
    CHECK_THROWS(awp::core::pg::connection::connect(first));
    auto gw = awp::core::pg::connection::connect(second);
    CHECK(gw.exec("SELECT 1 FROM gateways").size() == 1);
    CHECK(admin.exec("SELECT 1 FROM gateways WHERE slug = 'edge-box'").size() == 1);
    // Not for anyone but an administrator.
    CHECK(awpctl({"--database-url", db.daemon_dsn(), "gateway", "credential", "edge-box"}).first ==
          1);
}

TEST_CASE(
    "awpctl gateway pool-login and gateway key: the pool login's URL reaches nothing alone, with "
    "the printed key only that gateway, and a second key retires the first",
    "[awpctl][gateway]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    admin.exec(
        "INSERT INTO gateways (slug, label, tenant_id) VALUES ('other-gw', 'O', "
        "'00000000-0000-0000-0000-000000000000')");
    // A role of its own: pool logins are the cluster's, and other tests run at once.
    const auto role = awp::test::random_name("awp_pool_e2e_");
    auto [rc, out] = awpctl(
        {"--json", "--database-url", db.admin_dsn(), "gateway", "pool-login", "--role", role});
    REQUIRE(rc == 0);
    rapidjson::Document pool;
    pool.Parse(out.substr(out.rfind('{')).c_str());
    REQUIRE_FALSE(pool.HasParseError());
    const std::string url = pool["database_url"].GetString();
    REQUIRE(url.rfind("postgresql://" + role + ":", 0) == 0);
    const auto key = [&] {
        auto [krc, kout] = awpctl(
            {"--json", "--database-url", db.admin_dsn(), "gateway", "key", "edge-box", "--create"});
        REQUIRE(krc == 0);
        rapidjson::Document d;
        d.Parse(kout.substr(kout.rfind('{')).c_str());
        REQUIRE_FALSE(d.HasParseError());
        CHECK(std::string(d["slug"].GetString()) == "edge-box");
        const std::string k = d["gateway_key"].GetString();
        CHECK(awp::core::pg::is_gateway_key(k));
        return k;
    };
    const auto first = key();
    auto alone = awp::core::pg::connection::connect(url);
    CHECK(alone.exec("SELECT 1 FROM gateways").size() == 0);
    auto host = awp::core::pg::connection::connect(url);
    host.set_gateway_key(first);
    auto r = host.exec("SELECT slug FROM gateways");
    REQUIRE(r.size() == 1);  // its own, not other-gw nor default
    CHECK(r.get<std::string>(0, 0) == "edge-box");
    // Only the secret's hash reached the database.
    CHECK(admin
              .exec("SELECT 1 FROM gateway_keys WHERE secret_sha256 = sha256(convert_to($1, "
                    "'UTF8'))",
                    {first.substr(38)})
              .size() == 1);
    const auto second = key();
    CHECK(second != first);
    CHECK(host.exec("SELECT 1 FROM gateways").size() == 0);  // the first key reaches nothing
    host.set_gateway_key(second);
    CHECK(host.exec("SELECT 1 FROM gateways").size() == 1);
    // Not for anyone but an administrator.
    CHECK(awpctl({"--database-url", db.daemon_dsn(), "gateway", "key", "edge-box"}).first == 1);
    CHECK(awpctl({"--database-url", db.daemon_dsn(), "gateway", "pool-login", "--role", role})
              .first == 1);
}

}  // namespace awpctl_test
