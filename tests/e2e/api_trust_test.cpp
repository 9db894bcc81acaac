// The trust boundaries of awp-api-gateway's HTTP face, attacked as a hostile user, tenant or
// site would (issue 17, docs/security.md): every route against every kind of caller, cross-site
// state changes, claimless tokens, operators, sessions bound to their workspace, concurrent
// wrong passwords, and workspace validation that is not a port or password scanner.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/child.hpp"
#include "support/net.hpp"
#include "support/test_db.hpp"

namespace api_trust_test {

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
namespace crypto = awp::core::crypto;
using awp::test::kApiJwtSecret;
using awp::test::kApiServiceKey;
using gateway_process = awp::test::api_gateway_process;

constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";

long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

/// Claims of a session; `app_metadata` is the object's inside ("" = no tenant at all).
std::string sign(const std::string& role, const std::string& app_metadata,
                 const std::string& workspace = {}, const std::string& key = kApiJwtSecret) {
    const std::string claims =
        R"({"sub":")" + awp::core::uuid::generate_v4().to_string() + R"(","role":")" + role +
        R"(","exp":)" + std::to_string(now_s() + 3600) +
        (workspace.empty() ? "" : R"(,"awp_workspace":")" + workspace + "\"") +
        R"(,"app_metadata":{)" + app_metadata + "}}";
    return crypto::jwt_sign_hs256(claims, key);
}

std::string tenant_md(const std::string& tenant) { return R"("tenant_id":")" + tenant + "\""; }

rapidjson::Document parse(const std::string& text) {
    rapidjson::Document d;
    d.Parse(text.c_str(), text.size());
    return d;
}

std::string error_code(const http::response& r) {
    auto d = parse(r.body);
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error") || !d["error"].IsObject()) {
        return "<" + r.body + ">";
    }
    return d["error"]["code"].GetString();
}

http::headers with(const std::string& authorization, const std::string& content_type = {}) {
    http::headers h;
    if (!authorization.empty()) h.add("Authorization", authorization);
    if (!content_type.empty()) h.add("Content-Type", content_type);
    return h;
}

/// awpctl user add into a database (the admin DSN), optionally an operator.
void add_user(const awp::test::scoped_database& db, const std::string& email,
              const std::string& password, bool op, const std::string& tenant = kDefaultTenant) {
    std::vector<std::string> argv{std::string(AWP_BIN_DIR) + "/awpctl",
                                  "user",
                                  "add",
                                  "--email",
                                  email,
                                  "--tenant-id",
                                  tenant};
    if (op) argv.emplace_back("--operator");
    awp::test::child c(argv, {{"DATABASE_URL", db.admin_dsn()}, {"AWP_USER_PASSWORD", password}});
    auto rc = c.wait(std::chrono::seconds(30));
    REQUIRE(rc.has_value());
    INFO(c.log());
    REQUIRE(*rc == 0);
}

std::string login_body(const std::string& email, const std::string& password,
                       const std::string& workspace = {}) {
    return R"({"email":")" + email + R"(","password":")" + password + "\"" +
           (workspace.empty() ? "" : R"(,"workspaceId":")" + workspace + "\"") + "}";
}

/// The session cookie of a login answer ("" when none).
std::string session_cookie(const http::response& r) {
    for (const auto& [k, v] : r.header.fields()) {
        if ((k == "set-cookie" || k == "Set-Cookie") && v.rfind("awp-auth-token=", 0) == 0) {
            return v.substr(0, v.find(';'));
        }
    }
    return {};
}

}  // namespace

TEST_CASE("trust: every route against every kind of caller", "[api][trust]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    const std::string t = kDefaultTenant;
    const std::string bogus_ws = awp::core::uuid::generate_v4().to_string();
    struct caller {
        const char* name;
        std::string authorization;
    };
    const std::vector<caller> callers{
        {"nobody", ""},
        {"claimless", "Bearer " + sign("authenticated", "")},
        {"anon", "Bearer " + sign("anon", tenant_md(t))},
        {"other workspace",
         "Bearer " + sign("authenticated", tenant_md(t), bogus_ws,
                          crypto::workspace_session_key(kApiJwtSecret, bogus_ws))},
        {"forged workspace", "Bearer " + sign("authenticated", tenant_md(t), bogus_ws)},
        {"user", "Bearer " + sign("authenticated", tenant_md(t))},
        {"operator", "Bearer " + sign("authenticated", tenant_md(t) + R"(,"awp_role":"operator")")},
        {"service", std::string("Bearer ") + kApiServiceKey},
    };
    enum class need { nothing, session, service, session_or_service, operator_ };
    struct route {
        const char* method;
        std::string path;
        std::string body;
        need who;
    };
    const std::string ws = awp::core::uuid::generate_v4().to_string();
    const std::vector<route> routes{
        {"GET", "/api/health", "", need::nothing},
        {"GET", "/api/config", "", need::nothing},
        {"GET", "/api/auth/session", "", need::session},
        {"POST", "/api/auth/logout", "", need::session},
        {"GET", "/api/agents/templates", "", need::session},
        {"GET", "/api/agents/nobody/skills", "", need::service},
        {"POST", "/api/agents/nobody/skills", "{}", need::service},
        {"GET", "/api/agents/nobody/skills/x/versions", "", need::service},
        {"GET", "/api/agents/nobody/files", "", need::session},
        {"GET", "/api/agents/nobody/files/a.txt", "", need::session},
        {"GET", "/api/agents/nobody/browser/state", "", need::session},
        {"GET", "/api/agents/nobody/browser/screenshot", "", need::session},
        {"POST", "/api/embed", R"({"input":""})", need::session},
        {"GET", "/api/sources/browse?connection_id=" + ws, "", need::session},
        {"POST", "/api/sources/browse", R"({"connection_id":")" + ws + "\"}", need::session},
        {"POST", "/api/sources/validate", "{}", need::session},
        {"GET", "/api/workspaces", "", need::session_or_service},
        {"POST", "/api/workspaces/switch", R"({"workspaceId":")" + ws + "\"}",
         need::session_or_service},
        {"GET", "/api/workspaces/switch?workspaceId=" + ws, "", need::session_or_service},
        {"POST", "/api/workspaces", "{}", need::operator_},
        {"POST", "/api/workspaces/validate", "{}", need::operator_},
    };
    for (const auto& r : routes) {
        for (const auto& c : callers) {
            INFO(r.method << " " << r.path << " as " << c.name);
            auto res =
                gw.request(r.method, r.path,
                           with(c.authorization, r.body.empty() ? "" : "application/json"), r.body);
            const std::string who = c.name;
            const bool refused = res.status == 401 || res.status == 403;
            CHECK(res.status < 500);
            if (r.who == need::nothing) {
                CHECK(res.status == 200);
                continue;
            }
            if (r.who == need::service) {  // the service-role key only
                if (who == "service") {
                    CHECK_FALSE(refused);
                } else {
                    CHECK(refused);
                }
                continue;
            }
            if (who == "nobody" || who == "anon" || who == "other workspace" ||
                who == "forged workspace") {
                CHECK(res.status == 401);
            } else if (who == "claimless") {
                CHECK(res.status == 403);
                CHECK(error_code(res) == "no_tenant");
            } else if (who == "user") {
                CHECK(refused == (r.who == need::operator_));
                if (r.who == need::operator_) CHECK(error_code(res) == "operator_required");
            } else if (who == "operator") {
                CHECK_FALSE(refused);
            } else if (who == "service") {
                CHECK(refused == (r.who == need::session));
            }
        }
    }
    // Malformed input on every route (issue 18), from a caller the route accepts (the operator;
    // the service role for the service routes): every body of the corpus gets an answer below
    // 500 and, when refused, a JSON error code; nothing drops the connection or the gateway.
    std::string deep(100000, '[');
    const std::vector<std::pair<std::string, std::string>> bodies{
        {"application/json", deep},
        {"application/json", "{\"a\":"},
        {"application/json", "\xff\xfe\xfd"},
        {"application/json", R"({"input":"\ud800","label":"\u0000"})"},
        {"application/json", "[]"},
        {"application/json", "null"},
        {"application/json",
         R"({"label":123,"url":[],"workspaceId":{},"input":5,"connection_id":true,)"
         R"("provider":null,"credentials":"x","title":[],"content":{},"path":7})"},
        {"application/json", R"({"a":1,"a":2})"},
        {"text/plain", "hello"},
        {"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data\r\n"},
        {"application/x-www-form-urlencoded", "a=%zz&b"},
    };
    int answers = 0;
    for (const auto& r : routes) {
        if (std::string(r.method) != "POST") continue;
        const caller& c = callers[r.who == need::service ? 7 : 6];
        for (const auto& [type, body] : bodies) {
            INFO(r.path << " " << type << " " << body.substr(0, 30));
            auto res = gw.request(r.method, r.path, with(c.authorization, type), body);
            CHECK(res.status > 0);
            CHECK(res.status < 500);
            if (res.status >= 400 && res.status != 413) CHECK_FALSE(error_code(res).empty());
            ++answers;
        }
    }
    // Malformed path segments and queries on every route, from a caller it accepts: each path
    // and query is decoded once, before any handler, and what does not decode to text (invalid
    // or overlong UTF-8, a surrogate, NUL, a malformed escape, an overlong segment) is 400
    // bad_path or bad_query saying so, never a 500 from a handler that got it (issue 34).
    const std::vector<std::string> bad_segments{
        "%FF%FE", "%C0%AE%C0%AE", "%ED%A0%80", "a%00b", "%zz", "x%", std::string(2000, 'a')};
    const std::vector<std::string> bad_queries{"x=%FF%FE", "x=%zz", "%C0%AF=1", "x=a%00b",
                                               "x=%F4%90%80%80"};
    for (const auto& r : routes) {
        const caller& c = callers[r.who == need::service ? 7 : 6];
        const auto q = r.path.find('?');
        const std::string path = r.path.substr(0, q);
        const std::string query = q == std::string::npos ? "" : r.path.substr(q + 1);
        const auto type = r.body.empty() ? std::string() : std::string("application/json");
        for (const auto& seg : bad_segments) {
            // In the agent's slug where the route has one, else one segment more.
            auto bad = path;
            if (auto at = bad.find("/nobody"); at != std::string::npos) {
                bad.replace(at + 1, 6, seg);
            } else {
                bad += "/" + seg;
            }
            if (!query.empty()) bad += "?" + query;
            INFO(r.method << " " << bad.substr(0, 80));
            auto res = gw.request(r.method, bad, with(c.authorization, type), r.body);
            CHECK(res.status == 400);
            CHECK(error_code(res) == "bad_path");
            CHECK(res.body.find("path segment") != std::string::npos);
            ++answers;
        }
        for (const auto& bq : bad_queries) {
            const auto bad = path + "?" + (query.empty() ? "" : query + "&") + bq;
            INFO(r.method << " " << bad);
            auto res = gw.request(r.method, bad, with(c.authorization, type), r.body);
            CHECK(res.status == 400);
            CHECK(error_code(res) == "bad_query");
            CHECK(res.body.find("query parameter") != std::string::npos);
            ++answers;
        }
    }
    // The issue's own example, as an ordinary user: 400 that says why, not 500 internal.
    {
        auto res = gw.request("GET", "/api/agents/%FF%FE/files", with(callers[5].authorization));
        CHECK(res.status == 400);
        CHECK(error_code(res) == "bad_path");
        CHECK(res.body.find("path segment 3 is not UTF-8") != std::string::npos);
    }

    // Malformed paths, queries and headers on the GET routes.
    const std::string op = callers[6].authorization;
    for (const std::string& path : std::vector<std::string>{
             "/api/agents/%00/files", "/api/agents/" + std::string(5000, 'a') + "/files",
             std::string("/api/agents/..%2f..%2f/files"),
             std::string("/api/agents/nobody/files/%zz"),
             std::string("/api/sources/browse?connection_id=%ZZ&cursor=") + std::string(9000, 'c'),
             std::string("/api/agents/nobody/browser/screenshot?quality=-5&maxWidth=1e9"),
             std::string("/api/workspaces?x=\xff")}) {
        INFO(path.substr(0, 80));
        auto res = gw.request("GET", path, with(op));
        CHECK(res.status < 500);
        ++answers;
    }
    for (const std::string& auth :
         std::vector<std::string>{"Bearer " + std::string(60000, 'x'), std::string("Bearer a.b.c"),
                                  std::string("Bearer \x01\x02"), std::string("Basic Zm9vOmJhcg=="),
                                  std::string("Bearer ") + deep.substr(0, 5000)}) {
        auto res = gw.request("GET", "/api/auth/session", with(auth));
        CHECK(res.status >= 400);
        CHECK(res.status < 500);
        ++answers;
    }
    {
        http::headers h;
        std::string cookie;
        for (int i = 0; i < 2000; ++i) cookie += "awp-auth-token." + std::to_string(i) + "=x; ";
        h.add("Cookie", cookie);
        auto res = gw.request("GET", "/api/auth/session", h);
        CHECK(res.status >= 400);
        CHECK(res.status < 500);
        ++answers;
    }
    WARN(answers << " malformed requests: every answer below 500");
    CHECK(gw.get("/api/health").status == 200);

    // Another tenant's user against a real agent of tenant t: every agent route answers 404
    // (the agent does not exist for that tenant) before any file, browser or proxy is touched;
    // the owner's user reaches it.
    auto admin = db.admin();
    const auto other = std::string(
        admin
            .exec("INSERT INTO tenants (name, slug) VALUES ('Other', $1) RETURNING id::text",
                  {awp::test::random_name("other")})
            .get<std::string>(0, 0));
    admin.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'owned', 'owned')", {t});
    const auto owner = "Bearer " + sign("authenticated", tenant_md(t));
    const auto stranger = "Bearer " + sign("authenticated", tenant_md(other));
    auto raw = [&](const std::string& auth) {
        auto h = with(auth, "application/octet-stream");
        return gw.request("POST", "/api/agents/owned/files?path=n.txt", h, "mine");
    };
    CHECK(raw(stranger).status == 404);
    CHECK(raw(owner).status == 201);
    for (const std::string path :
         {"/api/agents/owned/files", "/api/agents/owned/files/n.txt",
          "/api/agents/owned/browser/state", "/api/agents/owned/browser/screenshot"}) {
        INFO(path);
        auto res = gw.get(path, with(stranger));
        CHECK(res.status == 404);
        CHECK(res.body.find("mine") == std::string::npos);
    }
    CHECK(gw.get("/api/agents/owned/files/n.txt", with(owner)).body == "mine");
}

TEST_CASE("trust: cross-site state changes are refused on every state-changing route",
          "[api][trust]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    const auto op =
        "Bearer " + sign("authenticated", tenant_md(kDefaultTenant) + R"(,"awp_role":"operator")");
    const std::string add =
        R"({"label":"Evil","url":"http://127.0.0.1:9","databaseUrl":"postgresql://awp_api@127.0.0.1:9/x","anonKey":"anon-key-0123456789abcdef","serviceRoleKey":"svc-key-0123456789abcdef0"})";
    const std::vector<std::pair<std::string, std::string>> posts{
        {"/api/auth/login", R"({"email":"a@b.c","password":"x"})"},
        {"/api/auth/logout", ""},
        {"/api/workspaces", add},
        {"/api/workspaces/switch", R"({"workspaceId":"00000000-0000-0000-0000-000000000001"})"},
        {"/api/workspaces/validate", R"({"url":"http://127.0.0.1:9"})"},
        {"/api/agents/a/skills", "{}"},
        {"/api/agents/a/files", ""},
        {"/api/embed", R"({"input":"x"})"},
        {"/api/sources/browse", "{}"},
        {"/api/sources/validate", "{}"},
    };
    for (const auto& [path, body] : posts) {
        for (int variant = 0; variant < 2; ++variant) {
            INFO(path << (variant == 0 ? " Origin" : " Sec-Fetch-Site"));
            auto h = with(op, "application/json");
            if (variant == 0) {
                h.add("Origin", "https://evil.example");
            } else {
                h.add("Sec-Fetch-Site", "cross-site");
            }
            auto res = gw.request("POST", path, h, body);
            CHECK(res.status == 403);
            CHECK(error_code(res) == "cross_site");
        }
    }
    // Nothing was registered by any of them.
    CHECK_FALSE(fs::exists(gw.dir / "config" / "workspaces.json"));
    // The same request from the gateway's own origin goes through.
    auto h = with(op, "application/json");
    h.add("Origin", gw.url());
    h.add("Sec-Fetch-Site", "same-origin");
    CHECK(gw.request("POST", "/api/workspaces", h, add).status == 201);
}

TEST_CASE(
    "trust: logins - operators from app_users, concurrent wrong passwords get 429 without "
    "a hash, sessions stay in the workspace they were issued for",
    "[api][trust]") {
    awp::test::scoped_database own;
    awp::test::scoped_database alpha;
    add_user(own, "op@example.com", "operator-password-1", true);
    add_user(own, "user@example.com", "user-password-1", false);
    add_user(alpha, "user@example.com", "alpha-password-1", false);
    {
        auto c = alpha.admin();
        c.exec("UPDATE tenants SET name = 'Alpha' WHERE id = $1", {std::string(kDefaultTenant)});
        auto o = own.admin();
        o.exec("UPDATE tenants SET name = 'Own' WHERE id = $1", {std::string(kDefaultTenant)});
    }
    gateway_process gw(own.api_dsn(), {{"API_LOGIN_MAX_FAILURES", "3"}});
    auto login = [&](const std::string& body) {
        return gw.request("POST", "/api/auth/login", with("", "application/json"), body);
    };

    // The session cookie: HttpOnly, SameSite=Lax.
    auto op_login = login(login_body("op@example.com", "operator-password-1"));
    REQUIRE(op_login.status == 200);
    CHECK(parse(op_login.body)["user"]["isOperator"].GetBool());
    std::string set_cookie;
    for (const auto& [k, v] : op_login.header.fields()) {
        if (v.rfind("awp-auth-token=", 0) == 0) set_cookie = v;
    }
    CHECK(set_cookie.find("HttpOnly") != std::string::npos);
    CHECK(set_cookie.find("SameSite=Lax") != std::string::npos);
    http::headers op_cookie;
    op_cookie.add("Cookie", session_cookie(op_login));
    op_cookie.add("Content-Type", "application/json");

    // The operator (a cookie session) registers alpha; an ordinary user cannot.
    auto user_login = login(login_body("user@example.com", "user-password-1"));
    REQUIRE(user_login.status == 200);
    CHECK_FALSE(parse(user_login.body)["user"]["isOperator"].GetBool());
    http::headers user_cookie;
    user_cookie.add("Cookie", session_cookie(user_login));
    user_cookie.add("Content-Type", "application/json");
    const std::string add_alpha =
        R"({"label":"Alpha","url":")" + awp::test::api_role_url(alpha) +
        R"(","anonKey":"anon-key-0123456789abcdef","serviceRoleKey":"svc-key-0123456789abcdef0"})";
    auto refused = gw.request("POST", "/api/workspaces", user_cookie, add_alpha);
    CHECK(refused.status == 403);
    CHECK(error_code(refused) == "operator_required");
    auto added = gw.request("POST", "/api/workspaces", op_cookie, add_alpha);
    REQUIRE(added.status == 201);
    const std::string a = parse(added.body)["id"].GetString();

    // A login for alpha checks alpha's accounts and gives a session of alpha only.
    CHECK(login(login_body("user@example.com", "user-password-1", a)).status == 401);
    auto alpha_login = login(login_body("user@example.com", "alpha-password-1", a));
    REQUIRE(alpha_login.status == 200);
    CHECK(std::string(parse(alpha_login.body)["workspaceId"].GetString()) == a);
    http::headers alpha_cookie;
    alpha_cookie.add("Cookie", session_cookie(alpha_login) + "; awp_active_workspace=" + a);
    auto who = gw.request("GET", "/api/auth/session", alpha_cookie);
    REQUIRE(who.status == 200);
    CHECK(std::string(parse(who.body)["tenant"]["name"].GetString()) == "Alpha");
    // The own database's session stays there, whatever workspace the cookie names.
    http::headers user_in_alpha;
    user_in_alpha.add("Cookie", session_cookie(user_login) + "; awp_active_workspace=" + a);
    auto still_own = gw.request("GET", "/api/auth/session", user_in_alpha);
    REQUIRE(still_own.status == 200);
    CHECK(std::string(parse(still_own.body)["tenant"]["name"].GetString()) == "Own");
    // And alpha's session cannot switch into the own database's workspaces or list others.
    CHECK(gw.request("GET", "/api/workspaces", alpha_cookie).body.find("postgresql") ==
          std::string::npos);

    // Twelve wrong passwords at once for one account: at most three are evaluated (401), the
    // rest are refused at once (429); the account's real password then waits too.
    std::atomic<int> unauthorized{0}, limited{0}, other{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 12; ++i) {
        ts.emplace_back([&] {
            auto r = login(login_body("user@example.com", "wrong-password"));
            (r.status == 401 ? unauthorized : r.status == 429 ? limited : other)++;
        });
    }
    for (auto& th : ts) th.join();
    CHECK(unauthorized <= 3);
    CHECK(unauthorized + limited == 12);
    CHECK(other == 0);
    auto later = login(login_body("user@example.com", "user-password-1"));
    CHECK(later.status == 429);
    CHECK(later.header.get("retry-after").has_value());
}

TEST_CASE(
    "trust: workspace validation is operator-only, rate-limited and answers alike "
    "whatever is behind the address",
    "[api][trust]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    const auto op = with(
        "Bearer " + sign("authenticated", tenant_md(kDefaultTenant) + R"(,"awp_role":"operator")"),
        "application/json");
    auto validate = [&](const std::string& url) {
        auto r = gw.request("POST", "/api/workspaces/validate", op, R"({"url":")" + url + "\"}");
        std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // the rate limit
        return r;
    };
    const auto port = awp::test::require_env("AWP_PG_PORT");
    // A closed port, and the real database with a wrong password: the same answer.
    auto closed =
        validate("postgresql://awp_api:x@127.0.0.1:" + std::to_string(awp::test::free_port()) +
                 "/" + db.name());
    auto wrong =
        validate("postgresql://awp_api:wrong-password@127.0.0.1:" + port + "/" + db.name());
    CHECK(closed.status == 422);
    CHECK(closed.status == wrong.status);
    CHECK(closed.body == wrong.body);
    CHECK(error_code(closed) == "unreachable_or_rejected");
    // A role that escapes row-level security is refused even with the right credentials.
    auto su = validate("postgresql://postgres@/" + db.name() +
                       "?host=" + awp::test::require_env("AWP_PG_SOCKET_DIR") + "&port=" + port);
    CHECK(su.status == 422);
    CHECK(error_code(su) == "role_bypasses_rls");
    // The api role on a migrated database is fine.
    auto good = validate(awp::test::api_role_url(db));
    INFO(good.body);
    CHECK(good.status == 200);
    // Twice within the limit: 429.
    gw.request("POST", "/api/workspaces/validate", op,
               R"({"url":")" + awp::test::api_role_url(db) + "\"}");
    auto fast = gw.request("POST", "/api/workspaces/validate", op,
                           R"({"url":")" + awp::test::api_role_url(db) + "\"}");
    CHECK(fast.status == 429);
    // Not for ordinary users at all.
    auto user = gw.request(
        "POST", "/api/workspaces/validate",
        with("Bearer " + sign("authenticated", tenant_md(kDefaultTenant)), "application/json"),
        R"({"url":")" + awp::test::api_role_url(db) + "\"}");
    CHECK(user.status == 403);
}

}  // namespace api_trust_test
