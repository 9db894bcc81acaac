// awp-api-gateway's workspace registry and its databases, as processes against real Postgres:
// several gateways and threads adding and switching workspaces at once (nothing lost, files
// valid JSON with mode 0600), a corrupt file reported and never overwritten, and one pool per
// workspace - the same session sees the rows of whichever workspace is active.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/crypto.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/child.hpp"
#include "support/net.hpp"
#include "support/test_db.hpp"

namespace api_registry_test {

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
using awp::test::free_port;
using awp::test::random_name;
using std::chrono::milliseconds;

constexpr const char* kSecret = "e2e-jwt-secret-that-is-long-enough-0123456789";
constexpr const char* kServiceKey = "e2e-service-role-key-0123456789abcdef";
constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// One awp-api-gateway process on a free port with a given registry directory.
class gateway {
public:
    gateway(const std::string& dsn, const fs::path& config_dir,
            std::map<std::string, std::string> extra = {})
        : port_(free_port()), proc_({std::string(AWP_BIN_DIR) + "/awp-api-gateway"}, [&] {
              std::map<std::string, std::string> env = {
                  {"JWT_SECRET", kSecret},
                  {"SERVICE_ROLE_KEY", kServiceKey},
                  {"AWP_API_DATABASE_URL", dsn},
                  {"API_PORT", std::to_string(port_)},
                  {"API_THREADS", "2"},
                  {"API_DB_POOL", "2"},
                  {"AWP_CONFIG_DIR", config_dir.string()},
                  {"OPENCLAW_STATE_DIR", (config_dir.parent_path() / "openclaw").string()},
                  {"API_TEMPLATES_DIR", std::string(AWP_SOURCE_DIR) + "/deploy/templates"},
                  {"API_CONNECTORS_DIR", std::string(AWP_SOURCE_DIR) + "/deploy/connectors"},
                  {"EMBEDDER_URL", "http://127.0.0.1:9"},
                  {"API_ACCESS_LOG", "false"},
              };
              for (auto& [k, v] : extra) env[k] = v;
              return env;
          }()) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
        while (std::chrono::steady_clock::now() < deadline) {
            try {
                if (request("GET", "/api/health").status == 200) return;
            } catch (const std::exception&) {
            }
            std::this_thread::sleep_for(milliseconds(50));
        }
        FAIL("gateway did not come up: " << proc_.log());
    }
    http::response request(const std::string& method, const std::string& target,
                           http::headers h = {}, std::string body = {}) const {
        http::client_request r;
        r.method = method;
        r.url = "http://127.0.0.1:" + std::to_string(port_) + target;
        r.header = std::move(h);
        r.body = std::move(body);
        r.timeout = std::chrono::seconds(20);
        return http::fetch_sync(std::move(r));
    }
    [[nodiscard]] std::string log() const { return proc_.log(); }
    /// What a client sends as Host (and a page of the gateway as its Referer's authority).
    [[nodiscard]] std::string host() const { return "127.0.0.1:" + std::to_string(port_); }

private:
    unsigned short port_;
    awp::test::child proc_;
};

/// A session of the tenant: of the gateway's own database (workspace empty, signed with the
/// JWT secret) or of a registered workspace (its claim, signed with that workspace's key, as
/// POST /api/auth/login issues it); an operator's when `op`.
std::string user_token(const std::string& tenant, const std::string& workspace = {},
                       bool op = false) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const std::string claims =
        R"({"sub":")" + awp::core::uuid::generate_v4().to_string() +
        R"(","role":"authenticated","exp":)" + std::to_string(now + 3600) +
        (workspace.empty() ? "" : R"(,"awp_workspace":")" + workspace + "\"") +
        R"(,"app_metadata":{"tenant_id":")" + tenant + "\"" +
        (op ? R"(,"awp_role":"operator")" : "") + "}}";
    return awp::core::crypto::jwt_sign_hs256(
        claims,
        workspace.empty() ? kSecret : awp::core::crypto::workspace_session_key(kSecret, workspace));
}

std::string operator_token(const std::string& tenant) { return user_token(tenant, {}, true); }

/// The service-role key (an operator) as a JSON client sends it.
http::headers service() {
    http::headers h;
    h.add("Authorization", std::string("Bearer ") + kServiceKey);
    h.add("Content-Type", "application/json");
    return h;
}

http::headers session(const std::string& token, const std::string& workspace = {}) {
    http::headers h;
    h.add("Authorization", "Bearer " + token);
    h.add("Content-Type", "application/json");
    if (!workspace.empty()) h.add("Cookie", "awp_active_workspace=" + workspace);
    return h;
}

rapidjson::Document parse(const std::string& text) {
    rapidjson::Document d;
    d.Parse(text.c_str(), text.size());
    return d;
}

std::string error_code(const http::response& r) {
    auto d = parse(r.body);
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error")) return "<" + r.body + ">";
    return d["error"]["code"].GetString();
}

/// The body of POST /api/workspaces. A platform (http) URL needs its database's connection
/// string: `database_url`, else one that is never connected to (the registry tests do not
/// reach a database).
std::string add_body(const std::string& label, const std::string& url,
                     const std::optional<std::string>& database_url = std::nullopt) {
    const bool platform = url.rfind("http", 0) == 0;
    return R"({"label":")" + label + R"(","url":")" + url +
           (platform ? R"(","databaseUrl":")" +
                           database_url.value_or("postgresql://awp_api@127.0.0.1:9/none")
                     : std::string()) +
           R"(","anonKey":"anon-key-0123456789abcdef","serviceRoleKey":"svc-key-0123456789abcdef0"})";
}

int file_mode(const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return -1;
    return static_cast<int>(st.st_mode & 0777);
}

/// Connections the gateway holds to a database (the api role's backends).
long backends(const awp::test::scoped_database& admin_side, const std::string& dbname) {
    auto c = admin_side.admin();
    return std::stol(std::string(
        c.exec("SELECT count(*)::text FROM pg_stat_activity WHERE datname = $1 AND usename = "
               "'awp_api'",
               {dbname})
            .get<std::string>(0, 0)));
}

bool backends_become(const awp::test::scoped_database& admin_side, const std::string& dbname,
                     long want) {
    for (int i = 0; i < 100; ++i) {
        if (backends(admin_side, dbname) == want) return true;
        std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
}

struct temp_dir {
    fs::path path = fs::temp_directory_path() / random_name("awp-registry-e2e-");
    temp_dir() { fs::create_directories(path); }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

}  // namespace

TEST_CASE("registry: concurrent writers in several processes lose nothing, files stay valid",
          "[api][registry]") {
    awp::test::scoped_database db;
    temp_dir dir;
    const auto config = dir.path / "config";
    gateway a(db.api_dsn(), config);
    gateway b(db.api_dsn(), config);
    const auto token = operator_token(kDefaultTenant);
    constexpr int kThreads = 3;
    constexpr int kEach = 6;

    std::mutex mu;
    std::set<std::string> added;
    std::vector<std::string> failures;
    std::atomic<bool> writing{true};
    std::atomic<int> snapshots{0};

    // A reader that checks the files the whole time: always valid JSON objects, mode 0600.
    std::thread reader([&] {
        while (writing) {
            for (const char* name : {"workspaces.json", "secrets.json"}) {
                const auto p = config / name;
                if (!fs::exists(p)) continue;
                auto d = parse(read_file(p));
                std::lock_guard lock(mu);
                if (d.HasParseError() || !d.IsObject())
                    failures.push_back(std::string(name) + " invalid");
                if (file_mode(p) != 0600 && file_mode(p) != -1) {
                    failures.push_back(std::string(name) + " mode " + std::to_string(file_mode(p)));
                }
            }
            ++snapshots;
            std::this_thread::sleep_for(milliseconds(2));
        }
    });

    std::vector<std::thread> writers;
    for (int t = 0; t < 2 * kThreads; ++t) {
        writers.emplace_back([&, t] {
            const gateway& gw = t % 2 == 0 ? a : b;
            for (int i = 0; i < kEach; ++i) {
                const auto label = "w" + std::to_string(t) + "-" + std::to_string(i);
                auto res = gw.request("POST", "/api/workspaces", session(token),
                                      add_body(label, "http://127.0.0.1:9/" + label));
                auto d = parse(res.body);
                std::string target;
                {
                    std::lock_guard lock(mu);
                    if (res.status != 201 || !d.IsObject() || !d.HasMember("id")) {
                        failures.push_back("POST " + label + " -> " + std::to_string(res.status) +
                                           " " + res.body);
                        continue;
                    }
                    added.insert(d["id"].GetString());
                    // Switch to something added so far (maybe by the other process) at once.
                    target = *std::next(added.begin(),
                                        static_cast<long>(i) % static_cast<long>(added.size()));
                }
                auto sw = gw.request("POST", "/api/workspaces/switch", service(),
                                     R"({"workspaceId":")" + target + R"(","makeDefault":true})");
                if (sw.status != 200) {
                    std::lock_guard lock(mu);
                    failures.push_back("switch -> " + std::to_string(sw.status) + " " + sw.body);
                }
            }
        });
    }
    for (auto& w : writers) w.join();
    writing = false;
    reader.join();

    INFO((failures.empty() ? std::string() : failures.front()));
    CHECK(failures.empty());
    CHECK(snapshots > 0);
    REQUIRE(added.size() == static_cast<std::size_t>(2 * kThreads * kEach));

    // Every workspace is listed by both processes, with exactly one default and a known active.
    for (const gateway* gw : {&a, &b}) {
        auto list = gw->request("GET", "/api/workspaces", session(token));
        REQUIRE(list.status == 200);
        auto d = parse(list.body);
        REQUIRE(d.IsArray());  // the spec: a list
        std::set<std::string> listed;
        int defaults = 0, actives = 0;
        for (const auto& w : d.GetArray()) {
            listed.insert(w["id"].GetString());
            defaults += w["isDefault"].GetBool() ? 1 : 0;
            actives += w["active"].GetBool() ? 1 : 0;
        }
        CHECK(listed == added);
        CHECK(defaults == 1);
        CHECK(actives == 1);
    }
    // Every key is in secrets.json, which stays 0600 and is never served.
    auto secrets = parse(read_file(config / "secrets.json"));
    REQUIRE(secrets.IsObject());
    for (const auto& id : added) {
        INFO(id);
        CHECK(secrets["workspaces"].HasMember(id.c_str()));
    }
    CHECK(file_mode(config / "secrets.json") == 0600);
    CHECK(file_mode(config / "workspaces.json") == 0600);
    // No temporary file is left behind.
    for (const auto& e : fs::directory_iterator(config)) {
        INFO(e.path().filename().string());
        CHECK(e.path().extension() != ".tmp");
    }
}

TEST_CASE("registry: a corrupt file is reported as 500 registry_corrupt and never overwritten",
          "[api][registry]") {
    awp::test::scoped_database db;
    temp_dir dir;
    const auto config = dir.path / "config";
    gateway gw(db.api_dsn(), config);
    const auto token = operator_token(kDefaultTenant);
    auto first = gw.request("POST", "/api/workspaces", session(token),
                            add_body("First", "http://127.0.0.1:9"));
    REQUIRE(first.status == 201);
    const std::string first_id = parse(first.body)["id"].GetString();

    SECTION("workspaces.json") {
        const std::string broken = "{\"version\":1,\"workspaces\":[{\"id\":";  // cut mid-write
        { std::ofstream(config / "workspaces.json", std::ios::trunc) << broken; }
        const auto secrets_before = read_file(config / "secrets.json");
        // Writers and readers at once, all refused the same way.
        std::vector<std::thread> ts;
        std::atomic<int> refused{0};
        for (int t = 0; t < 4; ++t) {
            ts.emplace_back([&, t] {
                auto add = gw.request("POST", "/api/workspaces", session(token),
                                      add_body("x" + std::to_string(t), "http://127.0.0.1:9"));
                auto sw = gw.request("POST", "/api/workspaces/switch", session(token),
                                     R"({"workspaceId":")" + first_id + "\"}");
                auto list = gw.request("GET", "/api/workspaces", session(token));
                if (add.status == 500 && error_code(add) == "registry_corrupt" &&
                    sw.status == 500 && error_code(sw) == "registry_corrupt" &&
                    list.status == 500 && error_code(list) == "registry_corrupt") {
                    ++refused;
                }
            });
        }
        for (auto& t : ts) t.join();
        CHECK(refused == 4);
        CHECK(read_file(config / "workspaces.json") == broken);
        CHECK(read_file(config / "secrets.json") == secrets_before);
        // Database routes cannot tell which database is meant: 500 as well, never a guess.
        auto who = gw.request("GET", "/api/auth/session", session(token));
        CHECK(who.status == 500);
        CHECK(error_code(who) == "registry_corrupt");
        // Routes without a database still work.
        CHECK(gw.request("GET", "/api/agents/templates", session(token)).status == 200);
        CHECK(gw.request("GET", "/api/health").status == 200);

        // Fixed by the operator: everything works again.
        fs::remove(config / "workspaces.json");
        CHECK(gw.request("GET", "/api/auth/session", session(token)).status == 200);
        CHECK(gw.request("POST", "/api/workspaces", session(token),
                         add_body("Again", "http://127.0.0.1:9"))
                  .status == 201);
    }
    SECTION("secrets.json") {
        { std::ofstream(config / "secrets.json", std::ios::trunc) << "not json"; }
        const auto registry_before = read_file(config / "workspaces.json");
        auto add = gw.request("POST", "/api/workspaces", session(token),
                              add_body("Second", "http://127.0.0.1:9"));
        CHECK(add.status == 500);
        CHECK(error_code(add) == "registry_corrupt");
        CHECK(read_file(config / "secrets.json") == "not json");
        CHECK(read_file(config / "workspaces.json") == registry_before);  // nothing half-added
        CHECK(gw.request("GET", "/api/workspaces", session(token)).status == 200);
    }
    CHECK(gw.log().find("workspace registry unusable") != std::string::npos);
}

TEST_CASE("workspaces: a session is bound to its workspace's database, one pool per workspace",
          "[api][workspaces]") {
    awp::test::scoped_database own;
    awp::test::scoped_database alpha;
    awp::test::scoped_database beta;
    awp::test::scoped_database gamma;
    struct seed {
        const awp::test::scoped_database* db;
        const char* tenant_name;
        const char* agent;
    };
    for (const auto& s :
         {seed{&own, "Own", "own-agent"}, seed{&alpha, "Alpha", "alpha-agent"},
          seed{&beta, "Beta", "beta-agent"}, seed{&gamma, "Gamma", "gamma-agent"}}) {
        auto c = s.db->admin();
        c.exec("UPDATE tenants SET name = $1 WHERE id = $2", {s.tenant_name, kDefaultTenant});
        c.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, $2, $2)",
               {kDefaultTenant, s.agent});
    }
    temp_dir dir;
    const auto config = dir.path / "config";
    gateway gw(own.api_dsn(), config, {{"API_WORKSPACE_POOLS", "2"}});
    const auto own_token = user_token(kDefaultTenant);
    auto tenant_name = [&](const std::string& token, const std::string& cookie = {}) {
        auto r = gw.request("GET", "/api/auth/session", session(token, cookie));
        if (r.status != 200) return "<" + std::to_string(r.status) + " " + r.body + ">";
        auto d = parse(r.body);
        return std::string(d["tenant"]["name"].GetString());
    };
    auto sees_agent = [&](const std::string& workspace, const std::string& agent) {
        http::headers h;
        h.add("Authorization", std::string("Bearer ") + kServiceKey);
        if (!workspace.empty()) h.add("Cookie", "awp_active_workspace=" + workspace);
        return gw.request("GET", "/api/agents/" + agent + "/skills", h).status;
    };

    // No workspace registered: the gateway's own database.
    CHECK(tenant_name(own_token) == "Own");
    CHECK(parse(gw.request("GET", "/api/auth/session", session(own_token)).body)["workspaceId"]
              .IsNull());

    auto add = [&](const std::string& label, const std::string& url) {
        auto r = gw.request("POST", "/api/workspaces", session(operator_token(kDefaultTenant)),
                            add_body(label, url));
        REQUIRE(r.status == 201);
        return std::string(parse(r.body)["id"].GetString());
    };
    const auto a = add("Alpha", awp::test::api_role_url(alpha));
    const auto b = add("Beta", awp::test::api_role_url(beta));
    const auto ta = user_token(kDefaultTenant, a);
    const auto tb = user_token(kDefaultTenant, b);

    // Each session reaches its own workspace's database, whatever the cookie says.
    CHECK(tenant_name(ta) == "Alpha");
    CHECK(tenant_name(tb) == "Beta");
    CHECK(tenant_name(ta, b) == "Alpha");
    CHECK(tenant_name(own_token, b) == "Own");  // a cookie never moves a session
    auto who = parse(gw.request("GET", "/api/auth/session", session(tb)).body);
    CHECK(std::string(who["workspaceId"].GetString()) == b);
    // A session of one workspace is refused by every other: the claim names b but the token is
    // signed for a, or with the gateway's own secret.
    {
        const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
        const std::string claims = R"({"sub":"u","role":"authenticated","exp":)" +
                                   std::to_string(now + 600) + R"(,"awp_workspace":")" + b +
                                   R"(","app_metadata":{"tenant_id":")" + kDefaultTenant + "\"}}";
        for (const auto& key :
             {awp::core::crypto::workspace_session_key(kSecret, a), std::string(kSecret)}) {
            auto forged = awp::core::crypto::jwt_sign_hs256(claims, key);
            CHECK(gw.request("GET", "/api/auth/session", session(forged)).status == 401);
        }
    }
    // The service role picks a workspace by cookie.
    CHECK(sees_agent(b, "beta-agent") == 200);
    CHECK(sees_agent(b, "alpha-agent") == 404);
    CHECK(sees_agent(a, "alpha-agent") == 200);
    CHECK(sees_agent(a, "beta-agent") == 404);
    // Switching needs a session of the workspace switched to.
    CHECK(
        gw.request("POST", "/api/workspaces/switch", session(tb), R"({"workspaceId":")" + b + "\"}")
            .status == 200);
    CHECK(
        gw.request("POST", "/api/workspaces/switch", session(ta), R"({"workspaceId":")" + b + "\"}")
            .status == 403);
    // Each workspace has its own connections.
    CHECK(backends(own, alpha.name()) >= 1);
    CHECK(backends(own, beta.name()) >= 1);

    // The password of a DSN never leaves the registry file; users see no DSN at all.
    const auto password = awp::test::require_env("AWP_PG_API_PASSWORD");
    CHECK(gw.request("GET", "/api/workspaces", session(operator_token(kDefaultTenant)))
              .body.find(password) == std::string::npos);
    auto user_view = gw.request("GET", "/api/workspaces", session(ta));
    CHECK(user_view.body.find("postgresql://") == std::string::npos);
    CHECK(user_view.body.find(b) == std::string::npos);  // nor the other workspaces
    CHECK(user_view.body.find(a) != std::string::npos);
    CHECK(gw.request("GET", "/api/config").body.find("postgresql://") == std::string::npos);
    CHECK(gw.request("GET", "/api/config").body.find("awp_api") == std::string::npos);
    CHECK(gw.log().find(password) == std::string::npos);

    // At most two workspace pools (API_WORKSPACE_POOLS=2): a third closes the least recently
    // used one (alpha, last used before beta), and its connections go.
    const auto g = add("Gamma", awp::test::api_role_url(gamma));
    const auto tg = user_token(kDefaultTenant, g);
    CHECK(tenant_name(tb) == "Beta");
    CHECK(tenant_name(tg) == "Gamma");
    CHECK(backends_become(own, alpha.name(), 0));
    CHECK(backends(own, gamma.name()) >= 1);
    CHECK(tenant_name(ta) == "Alpha");  // reopened on demand

    // A workspace removed from the registry (or given another url) loses its pool.
    {
        auto d = parse(read_file(config / "workspaces.json"));
        auto& list = d["workspaces"];
        for (auto it = list.Begin(); it != list.End();) {
            if (std::string((*it)["id"].GetString()) == a) {
                it = list.Erase(it);
            } else {
                if (std::string((*it)["id"].GetString()) == g) {
                    (*it)["url"].SetString(awp::test::api_role_url(beta).c_str(), d.GetAllocator());
                }
                ++it;
            }
        }
        rapidjson::StringBuffer sb;
        rapidjson::Writer<rapidjson::StringBuffer> w(sb);
        d.Accept(w);
        const auto tmp = config / "workspaces.json.edit";
        { std::ofstream(tmp) << sb.GetString(); }
        fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write);
        fs::rename(tmp, config / "workspaces.json");
    }
    CHECK(tenant_name(tb) == "Beta");  // the next request sees the change
    CHECK(backends_become(own, alpha.name(), 0));
    CHECK(backends_become(own, gamma.name(), 0));
    CHECK(tenant_name(tg) == "Beta");  // gamma's workspace now points at beta's database
    // A session of a workspace that left the registry is refused, never sent elsewhere.
    CHECK(gw.request("GET", "/api/auth/session", session(ta)).status == 401);
    CHECK(gw.log().find("workspace pool closed") != std::string::npos);

    // A hosted platform URL (https, anon and service-role keys) is served through the
    // connection string the operator adds as databaseUrl; its url and keys stay what users see.
    {
        auto body = add_body("Hosted", "https://abcdefghijklmnop.supabase.co",
                             awp::test::api_role_url(beta));
        auto r =
            gw.request("POST", "/api/workspaces", session(operator_token(kDefaultTenant)), body);
        REQUIRE(r.status == 201);
        const std::string hosted = parse(r.body)["id"].GetString();
        CHECK(r.body.find(password) == std::string::npos);  // the DSN's password is masked
        CHECK(tenant_name(user_token(kDefaultTenant, hosted)) == "Beta");
        auto seen =
            gw.request("GET", "/api/workspaces", session(user_token(kDefaultTenant, hosted)));
        CHECK(seen.body.find("https://abcdefghijklmnop.supabase.co") != std::string::npos);
        CHECK(seen.body.find("databaseUrl") == std::string::npos);  // users never see it
        // A connection string that is not one, or one given for a DSN workspace: 422.
        auto bad = add_body("Bad", "https://x.supabase.co", "https://x.supabase.co");
        CHECK(gw.request("POST", "/api/workspaces", session(operator_token(kDefaultTenant)), bad)
                  .status == 422);
    }
    // A platform URL in the registry without its connection string (written before the gateway
    // refused to add one, or by hand): database routes say what to add, others keep working.
    const auto platform = awp::core::uuid::generate_v4().to_string();
    {
        auto d = parse(read_file(config / "workspaces.json"));
        rapidjson::Value entry(rapidjson::kObjectType);
        auto& al = d.GetAllocator();
        entry.AddMember("id", rapidjson::Value(platform.c_str(), al), al);
        entry.AddMember("label", "Platform", al);
        entry.AddMember("emoji", "x", al);
        entry.AddMember("url", "http://127.0.0.1:9", al);
        entry.AddMember("anonKey", "anon-key-0123456789abcdef", al);
        entry.AddMember("isDefault", false, al);
        entry.AddMember("createdAt", "2026-01-01T00:00:00Z", al);
        d["workspaces"].PushBack(entry, al);
        rapidjson::StringBuffer sb;
        rapidjson::Writer<rapidjson::StringBuffer> w(sb);
        d.Accept(w);
        const auto tmp = config / "workspaces.json.edit";
        { std::ofstream(tmp) << sb.GetString(); }
        fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write);
        fs::rename(tmp, config / "workspaces.json");
    }
    const auto tp = user_token(kDefaultTenant, platform);
    auto unsupported = gw.request("GET", "/api/auth/session", session(tp));
    CHECK(unsupported.status == 502);
    CHECK(error_code(unsupported) == "workspace_needs_database_url");
    CHECK(gw.request("GET", "/api/agents/templates", session(tp)).status == 200);

    // A DSN whose database cannot be reached: 502 database_unreachable, no password anywhere.
    const auto dead = add("Dead", "postgresql://awp_api:" + password +
                                      "@127.0.0.1:" + std::to_string(free_port()) + "/nothing");
    auto unreachable =
        gw.request("GET", "/api/auth/session", session(user_token(kDefaultTenant, dead)));
    CHECK(unreachable.status == 502);
    CHECK(error_code(unreachable) == "database_unreachable");
    CHECK(unreachable.body.find(password) == std::string::npos);
    CHECK(gw.log().find(password) == std::string::npos);

    // A DSN of a role that escapes row-level security (here the superuser through the Unix
    // socket) is refused at connect, whoever registered it.
    const auto admin_url = "postgresql://postgres@/" + beta.name() +
                           "?host=" + awp::test::require_env("AWP_PG_SOCKET_DIR") +
                           "&port=" + awp::test::require_env("AWP_PG_PORT");
    const auto su = add("Superuser", admin_url);
    auto unsafe = gw.request("GET", "/api/auth/session", session(user_token(kDefaultTenant, su)));
    CHECK(unsafe.status == 502);
    CHECK(error_code(unsafe) == "workspace_role_unsafe");
    CHECK(unsafe.body.find("Beta") == std::string::npos);
}

TEST_CASE(
    "workspaces: GET /api/workspaces/switch switches on a direct or same-site navigation, "
    "answers a browser with a redirect, and refuses a GET from another site",
    "[api][workspaces]") {
    awp::test::scoped_database own;
    temp_dir dir;
    const auto config = dir.path / "config";
    gateway gw(own.api_dsn(), config);
    auto added = gw.request("POST", "/api/workspaces", session(operator_token(kDefaultTenant)),
                            add_body("Alpha", awp::test::api_role_url(own)));
    REQUIRE(added.status == 201);
    const std::string a = parse(added.body)["id"].GetString();
    const auto token = user_token(kDefaultTenant, a);
    const std::string host = "127.0.0.1";
    auto get = [&](const std::string& query,
                   const std::vector<std::pair<std::string, std::string>>& extra) {
        auto h = session(token);
        for (const auto& [k, v] : extra) h.add(k, v);
        return gw.request("GET", "/api/workspaces/switch" + query, h);
    };
    auto cookie_of = [](const http::response& r) {
        return std::string(r.header.get("set-cookie").value_or(""));
    };
    const std::string q = "?workspaceId=" + a;

    // A script (or curl) with the session: 200 JSON and the cookie, like POST.
    auto direct = get(q, {});
    REQUIRE(direct.status == 200);
    CHECK(parse(direct.body)["workspaceId"].GetString() == a);
    CHECK(cookie_of(direct).rfind("awp_active_workspace=" + a + ";", 0) == 0);
    CHECK(direct.header.get("cache-control") == std::optional<std::string_view>("no-store"));

    // A browser following a link on the gateway's own pages: 303 back to the page's section.
    auto nav = get(q, {{"Sec-Fetch-Site", "same-origin"},
                       {"Sec-Fetch-Mode", "navigate"},
                       {"Referer", "http://" + gw.host() + "/dashboard/agents/sierra?tab=1"}});
    REQUIRE(nav.status == 303);
    CHECK(nav.header.get("location") == std::optional<std::string_view>("/dashboard/agents"));
    CHECK(cookie_of(nav).rfind("awp_active_workspace=" + a + ";", 0) == 0);
    // An address typed (no Referer, Sec-Fetch-Site: none): 303 to the root, or to ?next=.
    auto typed = get(q, {{"Sec-Fetch-Site", "none"}, {"Sec-Fetch-Mode", "navigate"}});
    REQUIRE(typed.status == 303);
    CHECK(typed.header.get("location") == std::optional<std::string_view>("/"));
    auto next = get(q + "&next=%2Fdashboard%2Ftasks%3Fview%3Dboard", {{"Sec-Fetch-Site", "none"}});
    REQUIRE(next.status == 303);
    CHECK(next.header.get("location") ==
          std::optional<std::string_view>("/dashboard/tasks?view=board"));
    // An older browser without Sec-Fetch headers, from the same origin.
    auto old = get(q, {{"Accept", "text/html,application/xhtml+xml"},
                       {"Referer", "http://" + gw.host() + "/settings"}});
    CHECK(old.status == 303);
    CHECK(old.header.get("location") == std::optional<std::string_view>("/settings"));

    // From another site: refused before anything is set, whatever says so.
    for (const auto& extra : std::vector<std::vector<std::pair<std::string, std::string>>>{
             {{"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Mode", "navigate"}},
             {{"Sec-Fetch-Site", "same-site"}},
             {{"Origin", "https://evil.example"}},
             {{"Referer", "https://evil.example/page"}},
             {{"Referer", "http://" + host + ".evil.example/"}},
             {{"Referer", "not a url"}},
         }) {
        INFO(extra.front().first << ": " << extra.front().second);
        auto r = get(q, extra);
        CHECK(r.status == 403);
        CHECK(error_code(r) == "cross_site");
        CHECK(cookie_of(r).empty());
    }
    // next must stay on this site; makeDefault is for POST.
    for (const std::string bad : {"https://evil.example/", "//evil.example/x", "/\\evil.example",
                                  "dashboard", "/a\r\nSet-Cookie: x=1"}) {
        INFO(bad);
        auto r = get(q + "&next=" + http::percent_encode(bad), {});
        CHECK(r.status == 422);
        CHECK(cookie_of(r).empty());
    }
    CHECK(get(q + "&makeDefault=true", {}).status == 422);
    // The checks POST has: a session of that workspace, a registered workspace.
    auto other =
        gw.request("GET", "/api/workspaces/switch" + q, session(user_token(kDefaultTenant)));
    CHECK(other.status == 403);
    CHECK(error_code(other) == "workspace_session_required");
    CHECK(gw.request("GET", "/api/workspaces/switch" + q).status == 401);
    CHECK(get("?workspaceId=" + awp::core::uuid::generate_v4().to_string(), {}).status == 404);
    CHECK(get("?workspaceId=nope", {}).status == 422);
    // POST stays as it was.
    CHECK(gw.request("POST", "/api/workspaces/switch", session(token),
                     R"({"workspaceId":")" + a + "\"}")
              .status == 200);
}

TEST_CASE(
    "workspaces: a hosted platform URL without its connection string is refused up front with "
    "where the platform shows it, by validate and by add alike",
    "[api][workspaces]") {
    awp::test::scoped_database own;
    temp_dir dir;
    const auto config = dir.path / "config";
    gateway gw(own.api_dsn(), config);
    const auto op = session(operator_token(kDefaultTenant));
    const std::string keys =
        R"("anonKey":"anon-key-0123456789abcdef","serviceRoleKey":"svc-key-0123456789abcdef0")";
    auto body = [&](const std::string& url, const std::string& extra = {}) {
        return R"({"label":"Hosted","url":")" + url + R"(",)" + keys + extra + "}";
    };
    struct platform {
        std::string url;
        std::string where;  // a piece of the answer's "where"
    };
    for (const auto& p : std::vector<platform>{
             {"https://abcdefghijklmnop.supabase.co", "db.abcdefghijklmnop.supabase.co:5432"},
             {"http://127.0.0.1:54321", "supabase status"},
             {"https://db.example.com", "database settings"},
         }) {
        INFO(p.url);
        auto v = gw.request("POST", "/api/workspaces/validate", op, body(p.url));
        REQUIRE(v.status == 422);
        auto d = parse(v.body);
        CHECK_FALSE(d["ok"].GetBool());
        CHECK(std::string(d["error"]["code"].GetString()) == "needs_database_url");
        CHECK(std::string(d["error"]["field"].GetString()) == "databaseUrl");
        CHECK(std::string(d["error"]["where"].GetString()).find(p.where) != std::string::npos);
        CHECK(std::string(d["error"]["message"].GetString()).find("databaseUrl") !=
              std::string::npos);
        CHECK(v.body.find("unsupported") == std::string::npos);
        // Adding it is refused with the same error, and nothing is registered.
        auto add = gw.request("POST", "/api/workspaces", op, body(p.url));
        REQUIRE(add.status == 422);
        auto e = parse(add.body);
        CHECK(std::string(e["error"]["code"].GetString()) == "needs_database_url");
        CHECK(std::string(e["error"]["message"].GetString()) ==
              std::string(d["error"]["message"].GetString()));
        CHECK_FALSE(fs::exists(config / "workspaces.json"));
    }
    // With its connection string the database is validated, and the workspace is added and
    // served (here the api role of the gateway's own database stands in for the platform's).
    const auto with_dsn = body("https://abcdefghijklmnop.supabase.co",
                               R"(,"databaseUrl":")" + awp::test::api_role_url(own) + "\"");
    auto v = gw.request("POST", "/api/workspaces/validate", op, with_dsn);
    INFO(v.body);
    CHECK(v.status == 200);
    auto add = gw.request("POST", "/api/workspaces", op, with_dsn);
    REQUIRE(add.status == 201);
    const std::string id = parse(add.body)["id"].GetString();
    CHECK(gw.request("GET", "/api/auth/session", session(user_token(kDefaultTenant, id))).status ==
          200);
}

}  // namespace api_registry_test
