// awp-api-gateway as a process on a loopback port against a real database: public routes,
// errors, the authentication matrix, login, tenant isolation, skills, files, embed.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/net.hpp"
#include "support/test_db.hpp"

namespace api_gateway_test {

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
namespace crypto = awp::core::crypto;
using awp::test::free_port;
using awp::test::random_name;

constexpr const char* kSecret = "e2e-jwt-secret-that-is-long-enough-0123456789";
constexpr const char* kServiceKey = "e2e-service-role-key-0123456789abcdef";
constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";

using gateway_process = awp::test::api_gateway_process;

http::headers bearer(const std::string& token) {
    http::headers h;
    h.add("Authorization", "Bearer " + token);
    return h;
}

http::headers json_bearer(const std::string& token) {
    auto h = bearer(token);
    h.add("Content-Type", "application/json");
    return h;
}

std::string user_token(const std::string& tenant, long ttl = 3600,
                       const std::string& role = "authenticated",
                       const std::string& secret = kSecret) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    std::string claims = R"({"sub":")" + awp::core::uuid::generate_v4().to_string() +
                         R"(","role":")" + role + R"(","exp":)" + std::to_string(now + ttl) +
                         R"(,"app_metadata":{"tenant_id":")" + tenant + R"("}})";
    return crypto::jwt_sign_hs256(claims, secret);
}

/// A session of a user whose claims say operator (awpctl user add --operator).
std::string operator_token(const std::string& tenant) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    return crypto::jwt_sign_hs256(
        R"({"sub":")" + awp::core::uuid::generate_v4().to_string() +
            R"(","role":"authenticated","exp":)" + std::to_string(now + 3600) +
            R"(,"app_metadata":{"tenant_id":")" + tenant + R"(","awp_role":"operator"}})",
        kSecret);
}

std::string error_code(const http::response& r) {
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error") || !d["error"].IsObject()) {
        return "<no error body: " + r.body + ">";
    }
    return d["error"]["code"].GetString();
}

std::string seed_tenant(awp::core::pg::connection& admin, const std::string& slug) {
    return std::string(
        admin.exec("INSERT INTO tenants (name, slug) VALUES ($1, $1) RETURNING id::text", {slug})
            .get<std::string>(0, 0));
}

void seed_agent(awp::core::pg::connection& admin, const std::string& tenant,
                const std::string& slug) {
    admin.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, $2, $2)", {tenant, slug});
}

}  // namespace

TEST_CASE("health and config are public, errors are JSON with honest statuses", "[api]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());

    auto h = gw.get("/api/health");
    CHECK(h.status == 200);
    CHECK(h.body.find("\"ok\":true") != std::string::npos);
    CHECK(h.body.find("\"ts\":\"20") != std::string::npos);
    CHECK(h.header.get("x-content-type-options") == "nosniff");
    CHECK(h.header.get("content-security-policy") == "frame-ancestors 'none'");
    CHECK(h.header.get("referrer-policy").has_value());

    // With no workspace registered, the gateway's own database (issue 34: never null).
    auto c = gw.get("/api/config");
    CHECK(c.status == 200);
    CHECK(c.body.find(R"("url":"http://127.0.0.1:)" + std::to_string(gw.port) + "\"") !=
          std::string::npos);
    CHECK(c.body.find(R"("label":"awp")") != std::string::npos);
    CHECK(c.body.find(R"("anonKey":"ey)") != std::string::npos);

    auto nf = gw.get("/api/nothing-here");
    CHECK(nf.status == 404);
    CHECK(error_code(nf) == "not_found");

    auto m = gw.request("DELETE", "/api/health");
    CHECK(m.status == 405);
    CHECK(m.header.get("allow") == "GET");
    CHECK(error_code(m) == "method_not_allowed");

    auto big = gw.request("POST", "/api/embed", json_bearer(user_token(kDefaultTenant)),
                          std::string(300 * 1024, 'x'));
    CHECK(big.status == 413);
}

TEST_CASE("authentication matrix on session and service-role routes", "[api]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    const auto t = std::string(kDefaultTenant);

    // Session route.
    CHECK(gw.get("/api/agents/templates").status == 401);
    CHECK(gw.get("/api/agents/templates", bearer(user_token(t))).status == 200);
    CHECK(gw.get("/api/agents/templates", bearer(user_token(t, -120))).status == 401);  // expired
    CHECK(gw.get("/api/agents/templates", bearer(user_token(t, 3600, "authenticated",
                                                            "another-secret-0123456789abcdef0123")))
              .status == 401);  // wrong key
    const std::string none_token =
        crypto::base64url_encode(R"({"alg":"none","typ":"JWT"})") + "." +
        crypto::base64url_encode(R"({"sub":"x","role":"authenticated","exp":9999999999})") + ".";
    CHECK(gw.get("/api/agents/templates", bearer(none_token)).status == 401);
    CHECK(gw.get("/api/agents/templates", bearer(user_token(t, 3600, "anon"))).status == 401);
    CHECK(gw.get("/api/agents/templates", bearer(kServiceKey)).status == 403);
    CHECK(gw.get("/api/agents/templates", bearer(user_token(t, 3600, "service_role"))).status ==
          403);

    // Cookies: the plain awp cookie, @supabase/ssr base64- and chunked forms.
    const auto tok = user_token(t);
    http::headers plain;
    plain.add("Cookie", "other=1; awp-auth-token=" + tok);
    CHECK(gw.get("/api/agents/templates", plain).status == 200);
    const auto session = crypto::base64url_encode(
        R"({"access_token":")" + tok + R"(","refresh_token":"r","token_type":"bearer"})");
    http::headers ssr;
    ssr.add("Cookie", "sb-abcdefgh-auth-token=base64-" + session);
    CHECK(gw.get("/api/agents/templates", ssr).status == 200);
    const auto value = "base64-" + session;
    http::headers chunked;
    chunked.add("Cookie", "sb-abcdefgh-auth-token.0=" + value.substr(0, 40) +
                              "; sb-abcdefgh-auth-token.1=" + value.substr(40));
    CHECK(gw.get("/api/agents/templates", chunked).status == 200);
    http::headers junk;
    junk.add("Cookie", "sb-abcdefgh-auth-token=base64-!!!");
    CHECK(gw.get("/api/agents/templates", junk).status == 401);

    // Service-role route.
    auto admin = db.admin();
    seed_agent(admin, t, "helper");
    CHECK(gw.get("/api/agents/helper/skills").status == 401);
    CHECK(gw.get("/api/agents/helper/skills", bearer("wrong-key-0123456789abcdef")).status == 401);
    CHECK(gw.get("/api/agents/helper/skills", bearer(tok)).status == 403);
    CHECK(gw.get("/api/agents/helper/skills", bearer(kServiceKey)).status == 200);
    // The key never shows up in logs.
    CHECK(gw.logs().find(kServiceKey) == std::string::npos);
    CHECK(gw.logs().find(kSecret) == std::string::npos);
}

TEST_CASE("login with Argon2id, HttpOnly cookie, rate limit, logout", "[api]") {
    awp::test::scoped_database db;
    const auto email = random_name("user") + "@example.com";
    {
        std::string cmd = std::string(AWP_BIN_DIR) + "/awpctl --database-url '" + db.daemon_dsn() +
                          "' user add --email " + email +
                          " --password 'correct horse battery' >/dev/null";
        REQUIRE(std::system(cmd.c_str()) == 0);
    }
    gateway_process gw(db.api_dsn());
    http::headers jh;
    jh.add("Content-Type", "application/json");
    auto ok = gw.request("POST", "/api/auth/login", jh,
                         R"({"email":")" + email + R"(","password":"correct horse battery"})");
    REQUIRE(ok.status == 200);
    auto cookie = std::string(ok.header.get("set-cookie").value_or(""));
    CHECK(cookie.find("HttpOnly") != std::string::npos);
    CHECK(cookie.find("SameSite=Lax") != std::string::npos);
    const auto pair = cookie.substr(0, cookie.find(';'));
    http::headers ch;
    ch.add("Cookie", pair);
    auto who = gw.get("/api/auth/session", ch);
    CHECK(who.status == 200);
    CHECK(who.body.find(kDefaultTenant) != std::string::npos);

    // Cross-site logout is refused; same-origin works and the session is dead afterwards.
    http::headers cross = ch;
    cross.add("Origin", "https://evil.example");
    CHECK(gw.request("POST", "/api/auth/logout", cross).status == 403);
    CHECK(gw.request("POST", "/api/auth/logout", ch).status == 200);
    CHECK(gw.get("/api/auth/session", ch).status == 401);

    // Wrong passwords: 401 then 429 after the limit (3 in this run).
    for (int i = 0; i < 3; ++i) {
        auto bad = gw.request("POST", "/api/auth/login", jh,
                              R"({"email":")" + email + R"(","password":"nope nope"})");
        CHECK(bad.status == 401);
    }
    auto limited = gw.request("POST", "/api/auth/login", jh,
                              R"({"email":")" + email + R"(","password":"correct horse battery"})");
    CHECK(limited.status == 429);
    CHECK(limited.header.get("retry-after").has_value());
    CHECK(gw.request("POST", "/api/auth/login", jh, "{not json").status == 400);
    http::headers text;
    text.add("Content-Type", "text/plain");
    CHECK(gw.request("POST", "/api/auth/login", text, "x").status == 415);
}

TEST_CASE("skills: create, update with reason, versions, 422s, tenant scoping", "[api]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t1 = seed_tenant(admin, random_name("t"));
    seed_agent(admin, t1, "writer");
    gateway_process gw(db.api_dsn());
    auto h = json_bearer(kServiceKey);

    auto created =
        gw.request("POST", "/api/agents/writer/skills", h,
                   R"({"title":"Greeting","content":"Say hi","action":"create","reason":"first"})");
    REQUIRE(created.status == 201);
    rapidjson::Document d;
    d.Parse(created.body.c_str());
    const std::string id = d["id"].GetString();
    CHECK(d["version"].GetInt() == 1);

    auto missing = gw.request("POST", "/api/agents/writer/skills", h,
                              R"({"title":"Greeting","content":"x","action":"update"})");
    CHECK(missing.status == 422);
    CHECK(missing.body.find("knowledge_item_id") != std::string::npos);
    CHECK(gw.request("POST", "/api/agents/writer/skills", h, R"({"content":"x","action":"create"})")
              .status == 422);
    CHECK(gw.request("POST", "/api/agents/writer/skills", h, "[1,2").status == 400);

    auto updated = gw.request(
        "POST", "/api/agents/writer/skills", h,
        R"({"title":"Greeting","content":"Say hello","action":"update","reason":"warmer","knowledge_item_id":")" +
            id + "\"}");
    CHECK(updated.status == 200);
    CHECK(updated.body.find("\"version\":2") != std::string::npos);

    auto list = gw.get("/api/agents/writer/skills", bearer(kServiceKey));
    CHECK(list.status == 200);
    CHECK(list.body.find("Say hello") != std::string::npos);
    auto versions = gw.get("/api/agents/writer/skills/" + id + "/versions", bearer(kServiceKey));
    CHECK(versions.status == 200);
    CHECK(versions.body.find("warmer") != std::string::npos);
    CHECK(versions.body.find("first") != std::string::npos);
    CHECK(gw.get("/api/agents/nobody/skills", bearer(kServiceKey)).status == 404);
}

TEST_CASE("agent files: upload, read, traversal refused, size limit, tenant isolation", "[api]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t1 = seed_tenant(admin, random_name("t"));
    const auto t2 = seed_tenant(admin, random_name("t"));
    seed_agent(admin, t1, "bob");
    gateway_process gw(db.api_dsn(), {{"API_UPLOAD_LIMIT", "1024"}});
    const auto tok = user_token(t1);
    auto raw = bearer(tok);
    raw.add("Content-Type", "application/octet-stream");
    CHECK(gw.request("POST", "/api/agents/bob/files?path=notes/a.md", raw, "# hello").status ==
          201);
    auto got = gw.get("/api/agents/bob/files/notes/a.md", bearer(tok));
    CHECK(got.status == 200);
    CHECK(got.body == "# hello");
    CHECK(got.header.get("content-type").value_or("").find("text/markdown") == 0);

    // multipart
    auto mp = bearer(tok);
    mp.add("Content-Type", "multipart/form-data; boundary=XyZ");
    std::string body =
        "--XyZ\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\ndocs/b.txt\r\n"
        "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\n"
        "Content-Type: text/plain\r\n\r\nbee\r\n--XyZ--\r\n";
    CHECK(gw.request("POST", "/api/agents/bob/files", mp, body).status == 201);
    CHECK(gw.get("/api/agents/bob/files/docs/b.txt", bearer(tok)).body == "bee");

    // A secret outside the sandbox and a symlink pointing at it.
    const auto outside = gw.dir / "secret.txt";
    { std::ofstream(outside) << "TOP SECRET"; }
    const auto sandbox = gw.dir / "openclaw" / "workspace-bob";
    fs::create_symlink(outside, sandbox / "link.txt");
    for (const std::string p : {"../../../secret.txt", "..%2F..%2F..%2Fsecret.txt", "%2e%2e/x",
                                "link.txt", "notes/%00a.md", "%2Fetc%2Fpasswd", "notes/%zz"}) {
        auto r = gw.get("/api/agents/bob/files/" + p, bearer(tok));
        INFO(p);
        CHECK((r.status == 400 || r.status == 403 || r.status == 404));
        CHECK(r.body.find("TOP SECRET") == std::string::npos);
    }
    CHECK(gw.request("POST", "/api/agents/bob/files?path=../escape.txt", raw, "x").status == 400);
    CHECK(gw.request("POST", "/api/agents/bob/files?path=link.txt/x", raw, "x").status == 400);
    CHECK(!fs::exists(gw.dir / "openclaw" / "escape.txt"));
    {
        std::ifstream in(outside);
        std::string s;
        std::getline(in, s);
        CHECK(s == "TOP SECRET");
    }

    CHECK(gw.request("POST", "/api/agents/bob/files?path=big.bin", raw, std::string(4096, 'x'))
              .status == 413);

    // Another tenant does not see the agent at all.
    CHECK(gw.get("/api/agents/bob/files/notes/a.md", bearer(user_token(t2))).status == 404);
}

TEST_CASE("embed: 502 when the embedder is down, 422 for bad input", "[api]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    auto h = json_bearer(user_token(kDefaultTenant));
    CHECK(gw.request("POST", "/api/embed", h, R"({"input":"hello"})").status == 502);
    CHECK(gw.request("POST", "/api/embed", h, R"({"input":5})").status == 422);
    CHECK(gw.request("POST", "/api/embed", h, R"({})").status == 422);
    CHECK(gw.request("POST", "/api/embed", h, R"(nope)").status == 400);
    CHECK(gw.request("POST", "/api/embed", bearer("x"), R"({"input":"a"})").status == 401);
}

TEST_CASE("workspace registry: add, list without keys, switch, corrupt file reported", "[api]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    auto h = json_bearer(operator_token(kDefaultTenant));
    const std::string main_body =
        R"({"label":"Main","emoji":"🏠","url":"http://127.0.0.1:9","databaseUrl":"postgresql://awp_api@127.0.0.1:9/none","anonKey":"anon-key-0123456789abcdef","serviceRoleKey":"svc-key-SHOULD-NOT-LEAK-0123"})";
    // Only an operator registers a workspace.
    auto refused =
        gw.request("POST", "/api/workspaces", json_bearer(user_token(kDefaultTenant)), main_body);
    CHECK(refused.status == 403);
    CHECK(error_code(refused) == "operator_required");
    auto add = gw.request("POST", "/api/workspaces", h, main_body);
    REQUIRE(add.status == 201);
    CHECK(add.body.find("SHOULD-NOT-LEAK") == std::string::npos);
    auto list = gw.get("/api/workspaces", bearer(operator_token(kDefaultTenant)));
    CHECK(list.status == 200);
    CHECK(list.body.find("Main") != std::string::npos);
    CHECK(list.body.find("SHOULD-NOT-LEAK") == std::string::npos);
    // An ordinary user of the gateway's own database sees no workspace of the registry.
    auto user_list = gw.get("/api/workspaces", bearer(user_token(kDefaultTenant)));
    CHECK(user_list.status == 200);
    CHECK(user_list.body.find("Main") == std::string::npos);
    auto cfg = gw.get("/api/config");
    CHECK(cfg.body.find("\"label\":\"Main\"") != std::string::npos);
    CHECK(cfg.body.find("SHOULD-NOT-LEAK") == std::string::npos);
    struct stat st {};
    REQUIRE(::stat((gw.dir / "config" / "secrets.json").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(::stat((gw.dir / "config" / "workspaces.json").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    rapidjson::Document d;
    d.Parse(add.body.c_str());
    const std::string id = d["id"].GetString();
    auto svc = json_bearer(kServiceKey);
    auto sw = gw.request("POST", "/api/workspaces/switch", svc, R"({"workspaceId":")" + id + "\"}");
    CHECK(sw.status == 200);
    CHECK(sw.header.get("set-cookie").value_or("").find(id) != std::string::npos);
    // GET, the spec's method, switches too (tests/e2e/api_registry_test.cpp: navigations and
    // cross-site refusals).
    auto get_sw = gw.get("/api/workspaces/switch?workspaceId=" + id, bearer(kServiceKey));
    CHECK(get_sw.status == 200);
    CHECK(get_sw.header.get("set-cookie").value_or("").find(id) != std::string::npos);
    // A session of another database cannot switch into this workspace.
    auto foreign =
        gw.request("POST", "/api/workspaces/switch", json_bearer(user_token(kDefaultTenant)),
                   R"({"workspaceId":")" + id + "\"}");
    CHECK(foreign.status == 403);
    CHECK(error_code(foreign) == "workspace_session_required");
    CHECK(gw.request("POST", "/api/workspaces/switch", svc,
                     R"({"workspaceId":")" + awp::core::uuid::generate_v4().to_string() + "\"}")
              .status == 404);
    CHECK(gw.request("POST", "/api/workspaces/switch", svc, R"({"workspaceId":"nope"})").status ==
          422);

    auto val =
        gw.request("POST", "/api/workspaces/validate", h,
                   R"({"url":"http://127.0.0.1:9","serviceRoleKey":"svc-key-0123456789abcdef"})");
    CHECK(val.status == 422);
    CHECK(error_code(val) == "needs_database_url");
    auto val_dsn = gw.request(
        "POST", "/api/workspaces/validate", h,
        R"({"url":"http://127.0.0.1:9","databaseUrl":"postgresql://awp_api:x@127.0.0.1:9/none"})");
    CHECK(val_dsn.status == 422);
    CHECK(error_code(val_dsn) == "unreachable_or_rejected");

    { std::ofstream(gw.dir / "config" / "workspaces.json") << "{broken"; }
    auto corrupt = gw.get("/api/workspaces", bearer(user_token(kDefaultTenant)));
    CHECK(corrupt.status == 500);
    CHECK(error_code(corrupt) == "registry_corrupt");
    auto add2 = gw.request(
        "POST", "/api/workspaces", h,
        R"({"label":"B","url":"postgresql://awp_api@127.0.0.1:9/none","anonKey":"anon-key-0123456789abcdef","serviceRoleKey":"svc-key-0123456789abcdef0"})");
    CHECK(add2.status == 500);
    std::ifstream in(gw.dir / "config" / "workspaces.json");
    std::string s;
    std::getline(in, s);
    CHECK(s == "{broken");  // never silently replaced
}

TEST_CASE("SIGTERM drains and exits 0", "[api]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    CHECK(gw.get("/api/health").status == 200);
    CHECK(gw.stop() == 0);
}

}  // namespace api_gateway_test
