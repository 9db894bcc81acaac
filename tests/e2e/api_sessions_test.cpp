// One session model for both faces (issue 37; docs/security.md, "Sessions"), attacked through
// real gateway processes on one database: a session of /api/auth/login or of /auth/v1 ends by
// sign-out (every scope), a password change, a reused refresh token, or an operator disabling,
// moving, demoting or removing its user, and then its tokens are refused on every route — /api,
// /rest/v1, /auth/v1, /realtime/v1 — by every gateway process on the database, within a second
// (the tests allow more on a loaded machine), and after a restart.
#include <sodium.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/json.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/net.hpp"
#include "support/test_db.hpp"
#include "support/ws_client.hpp"

namespace api_sessions_test {

namespace {

namespace http = awp::http;
namespace crypto = awp::core::crypto;
using gateway_process = awp::test::api_gateway_process;
using awp::test::ws_client;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr const char* kSecret = awp::test::kApiJwtSecret;
constexpr const char* kServiceKey = awp::test::kApiServiceKey;
constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";
constexpr const char* kPassword = "correct horse 1";
/// How long another process may take to refuse a token signed out elsewhere. The promise is
/// a second (NOTIFY, then one read of the row); this leaves room for a loaded machine.
constexpr auto kPropagation = 10s;

long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

rapidjson::Document parse(const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.c_str(), body.size());
    INFO(body);
    REQUIRE_FALSE(d.HasParseError());
    return d;
}

std::string str(const rapidjson::Value& o, const char* k) {
    auto it = o.FindMember(k);
    return it != o.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

std::string add_user(awp::core::pg::connection& admin, const std::string& email,
                     const std::string& tenant = kDefaultTenant, bool op = false) {
    REQUIRE(sodium_init() >= 0);
    char hash[crypto_pwhash_STRBYTES];
    REQUIRE(crypto_pwhash_str(hash, kPassword, std::strlen(kPassword),
                              crypto_pwhash_OPSLIMIT_INTERACTIVE,
                              crypto_pwhash_MEMLIMIT_INTERACTIVE) == 0);
    return admin
        .exec(
            "INSERT INTO app_users (tenant_id, email, password_hash, is_operator) VALUES "
            "($1::uuid, $2, $3, $4::boolean) RETURNING id::text",
            {tenant, email, std::string(hash), op})
        .get<std::string>(0, 0);
}

std::string random_email(const std::string& prefix) {
    return awp::test::random_name(prefix) + "@example.com";
}

http::headers json_headers(const std::string& token = {}) {
    http::headers h;
    h.add("Content-Type", "application/json");
    h.add("X-Supabase-Api-Version", "2024-01-01");
    if (!token.empty()) h.add("Authorization", "Bearer " + token);
    return h;
}

/// The claims of a token the gateway issued (verified with the test secret).
rapidjson::Document claims_of(const std::string& token) {
    return parse(crypto::jwt_verify_hs256(token, kSecret));
}

/// POST /api/auth/login: the session cookie's token.
std::string api_login(const gateway_process& gw, const std::string& email,
                      const std::string& password = kPassword) {
    auto r = gw.request("POST", "/api/auth/login", json_headers(),
                        R"({"email":")" + email + R"(","password":")" + password + R"("})");
    INFO(r.body);
    REQUIRE(r.status == 200);
    for (const auto& [k, v] : r.header.fields()) {
        if (v.rfind("awp-auth-token=", 0) == 0) return v.substr(15, v.find(';') - 15);
    }
    FAIL("no session cookie");
    return {};
}

struct auth_session {
    std::string access, refresh, session_id;
};

/// POST /auth/v1/token?grant_type=password.
auth_session auth_login(const gateway_process& gw, const std::string& email,
                        const std::string& password = kPassword) {
    auto r = gw.request("POST", "/auth/v1/token?grant_type=password", json_headers(),
                        R"({"email":")" + email + R"(","password":")" + password + R"("})");
    INFO(r.body);
    REQUIRE(r.status == 200);
    auto d = parse(r.body);
    auth_session s{str(d, "access_token"), str(d, "refresh_token"), {}};
    s.session_id = str(claims_of(s.access), "session_id");
    return s;
}

/// A token of no session for `user` (what awpctl token mints), issued `ago` seconds ago.
std::string minted(const std::string& user, const std::string& tenant = kDefaultTenant,
                   long long ago = 1) {
    return crypto::jwt_sign_hs256(R"({"sub":")" + user + R"(","role":"authenticated","iat":)" +
                                      std::to_string(now_s() - ago) + R"(,"exp":)" +
                                      std::to_string(now_s() + 3600) +
                                      R"(,"app_metadata":{"tenant_id":")" + tenant + R"("}})",
                                  kSecret);
}

/// The answer of each route a session reaches, for `token`: the routes that did not refuse it
/// (empty when every one did). A refusal is 401 (on /auth/v1/user GoTrue's 403 or 404).
std::vector<std::string> accepted_by(const gateway_process& gw, const std::string& token) {
    const auto anon = crypto::anon_key(kSecret);
    http::headers data = awp::test::bearer(token);
    data.add("apikey", anon);
    const std::vector<std::pair<std::string, http::headers>> routes = {
        {"/api/auth/session", awp::test::bearer(token)},
        {"/api/agents/templates", awp::test::bearer(token)},
        {"/api/workspaces", awp::test::bearer(token)},
        {"/api/agents/nobody/files", awp::test::bearer(token)},
        {"/api/agents/nobody/browser/state", awp::test::bearer(token)},
        {"/rest/v1/agents?select=id", data},
        {"/rest/v1/tasks?select=id", data},
        {"/auth/v1/user", json_headers(token)},
    };
    std::vector<std::string> out;
    for (const auto& [path, h] : routes) {
        auto r = gw.get(path, h);
        // /auth/v1 answers as GoTrue: 403 session_not_found, or 403 user_not_found for a user
        // who is gone.
        const bool gotrue_refused =
            path == "/auth/v1/user" &&
            ((r.status == 403 && r.body.find("session_not_found") != std::string::npos) ||
             (r.status == 403 && r.body.find("user_not_found") != std::string::npos));
        const bool refused = r.status == 401 || gotrue_refused;
        if (!refused)
            out.push_back(path + " -> " + std::to_string(r.status) + " " + r.body.substr(0, 120));
    }
    // A cookie carries it too (the browser's way to /api).
    http::headers cookie;
    cookie.add("Cookie", std::string("awp-auth-token=") + token);
    if (auto r = gw.get("/api/auth/session", cookie); r.status != 401) {
        out.push_back("cookie /api/auth/session -> " + std::to_string(r.status));
    }
    return out;
}

bool refused_everywhere(const gateway_process& gw, const std::string& token) {
    auto left = accepted_by(gw, token);
    for (const auto& l : left) UNSCOPED_INFO("still accepted: " << l);
    return left.empty();
}

/// Until `pred` holds (true) or `limit` passed (false); how long it took in `took`.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit,
                std::chrono::milliseconds* took = nullptr) {
    const auto start = clock_type::now();
    for (;;) {
        if (pred()) {
            if (took) {
                *took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() -
                                                                              start);
            }
            return true;
        }
        if (clock_type::now() - start > limit) return false;
        std::this_thread::sleep_for(20ms);
    }
}

bool session_alive(const gateway_process& gw, const std::string& token) {
    return gw.get("/api/auth/session", awp::test::bearer(token)).status == 200;
}

bool rest_refuses(const gateway_process& gw, const std::string& token) {
    http::headers h = awp::test::bearer(token);
    h.add("apikey", crypto::anon_key(kSecret));
    return gw.get("/rest/v1/agents?select=id", h).status == 401;
}

/// A realtime socket acting as `token` with one channel on agents joined.
struct live_socket {
    ws_client ws;
    live_socket(const gateway_process& gw, const std::string& token)
        : ws(gw.port, "/realtime/v1/websocket?apikey=" + token + "&vsn=2.0.0") {
        REQUIRE(ws.open());
        REQUIRE(ws.send_text(
            R"(["1","1","realtime:agents","phx_join",{"config":{"broadcast":{"ack":false,)"
            R"("self":false},"presence":{"enabled":false,"key":""},"postgres_changes":[)"
            R"({"event":"*","schema":"public","table":"agents"}],"private":false},)"
            R"("access_token":")" +
            token + R"("}])"));
        auto reply = ws.read_until(
            [](const ws_client::frame& f) {
                return f.payload.find("phx_reply") != std::string::npos;
            },
            10s);
        REQUIRE(reply);
        INFO(reply->payload);
        REQUIRE(reply->payload.find(R"("status":"ok")") != std::string::npos);
    }
    /// The server closes it with 1008 (a policy violation: the token was refused).
    bool closed_for_policy(std::chrono::milliseconds limit) {
        auto f = ws.read_until(
            [](const ws_client::frame& x) { return x.op == ws_client::close_frame; }, limit);
        if (!f) return false;
        UNSCOPED_INFO("closed: " << f->close_code() << " " << f->close_reason());
        return f->close_code() == 1008;
    }
};

}  // namespace

TEST_CASE(
    "sessions: a signed-out /api token is refused by GET and PUT /auth/v1/user and cannot change "
    "the password (finding 1)",
    "[api][sessions]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("f1");
    const auto id = add_user(admin, email);
    gateway_process gw(db.api_dsn());
    const auto t = api_login(gw, email);
    // An /api login is a session like any other: its token names it, the database holds it.
    const auto sid = str(claims_of(t), "session_id");
    REQUIRE(awp::core::is_valid_uuid(sid));
    CHECK(admin
              .exec("SELECT via FROM app_sessions WHERE id = $1::uuid AND user_id = $2::uuid",
                    {sid, id})
              .get<std::string>(0, 0) == "api");
    CHECK(gw.get("/auth/v1/user", json_headers(t)).status == 200);

    CHECK(gw.request("POST", "/api/auth/logout", awp::test::bearer(t)).status == 200);
    auto get = gw.get("/auth/v1/user", json_headers(t));
    CHECK(get.status == 403);
    CHECK(get.body.find("session_not_found") != std::string::npos);
    auto put = gw.request(
        "PUT", "/auth/v1/user", json_headers(t),
        R"({"password":"taken over 99","current_password":")" + std::string(kPassword) + R"("})");
    CHECK(put.status == 403);
    CHECK(gw.request("PUT", "/auth/v1/user", json_headers(t), R"({"password":"taken over 99"})")
              .status == 403);
    // The password is the one it was.
    CHECK(gw.request("POST", "/auth/v1/token?grant_type=password", json_headers(),
                     R"({"email":")" + email + R"(","password":"taken over 99"})")
              .status == 400);
    CHECK(auth_login(gw, email).access.size() > 0);
    CHECK(refused_everywhere(gw, t));
    // Signing out twice: the token is refused there too.
    CHECK(gw.request("POST", "/api/auth/logout", awp::test::bearer(t)).status == 401);
    CHECK(admin.exec("SELECT revoked_reason FROM app_sessions WHERE id = $1::uuid", {sid})
              .get<std::string>(0, 0) == "logout");
}

TEST_CASE(
    "sessions: a global sign-out or a password change ends the user's /api sessions on /rest/v1 "
    "and closes their realtime sockets (finding 2)",
    "[api][sessions]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("f2");
    add_user(admin, email);
    gateway_process gw(db.api_dsn());

    SECTION("global sign-out through /auth/v1") {
        const auto api = api_login(gw, email);
        REQUIRE_FALSE(rest_refuses(gw, api));
        live_socket socket(gw, api);
        const auto s = auth_login(gw, email);
        CHECK(gw.request("POST", "/auth/v1/logout?scope=global", json_headers(s.access)).status ==
              204);
        CHECK(rest_refuses(gw, api));
        CHECK(socket.closed_for_policy(10s));
        CHECK(refused_everywhere(gw, api));
        CHECK(refused_everywhere(gw, s.access));
    }
    SECTION("others: every session but the caller's") {
        const auto api = api_login(gw, email);
        const auto s = auth_login(gw, email);
        CHECK(gw.request("POST", "/auth/v1/logout?scope=others", json_headers(s.access)).status ==
              204);
        CHECK(rest_refuses(gw, api));
        CHECK_FALSE(rest_refuses(gw, s.access));
    }
    SECTION("a password change") {
        const auto api = api_login(gw, email);
        live_socket socket(gw, api);
        const auto s = auth_login(gw, email);
        auto put = gw.request("PUT", "/auth/v1/user", json_headers(s.access),
                              R"({"password":"a new horse 22"})");
        INFO(put.body);
        CHECK(put.status == 200);
        CHECK(rest_refuses(gw, api));
        CHECK(socket.closed_for_policy(10s));
        CHECK(refused_everywhere(gw, api));
        // The session that changed it goes on.
        CHECK_FALSE(rest_refuses(gw, s.access));
        CHECK(gw.get("/auth/v1/user", json_headers(s.access)).status == 200);
        CHECK(admin
                  .exec("SELECT count(*) FROM app_sessions s JOIN app_users u ON u.id = "
                        "s.user_id WHERE u.email = $1 AND s.revoked_reason = 'password_changed'",
                        {email})
                  .get<int>(0, 0) == 1);
    }
}

TEST_CASE(
    "sessions: two gateway processes on one database: a session signed out on one is refused by "
    "the other, and by a process started after",
    "[api][sessions]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("two");
    add_user(admin, email);
    gateway_process a(db.api_dsn());
    auto b = std::make_unique<gateway_process>(db.api_dsn());

    const auto api = api_login(a, email);
    const auto s = auth_login(a, email);
    const auto other = auth_login(*b, email);
    REQUIRE(session_alive(*b, api));
    REQUIRE(session_alive(*b, s.access));
    live_socket socket(*b, api);

    // /api's sign-out on a: b refuses the token (NOTIFY, then the row read).
    REQUIRE(a.request("POST", "/api/auth/logout", awp::test::bearer(api)).status == 200);
    std::chrono::milliseconds took{};
    CHECK(eventually([&] { return !session_alive(*b, api); }, kPropagation, &took));
    WARN("another gateway refused an /api token signed out elsewhere after " << took.count()
                                                                             << " ms");
    CHECK(socket.closed_for_policy(kPropagation));
    CHECK(refused_everywhere(*b, api));
    // /auth/v1's global sign-out on b: a refuses a's own session (and the one b issued).
    REQUIRE(b->request("POST", "/auth/v1/logout?scope=global", json_headers(other.access)).status ==
            204);
    CHECK(eventually([&] { return !session_alive(a, s.access); }, kPropagation, &took));
    WARN("another gateway refused an /auth/v1 token signed out elsewhere after " << took.count()
                                                                                 << " ms");
    CHECK(refused_everywhere(a, s.access));
    CHECK(refused_everywhere(a, other.access));

    // A restart forgets nothing: a process started now refuses them from its first request.
    const auto live = api_login(a, email);
    b.reset();
    b = std::make_unique<gateway_process>(db.api_dsn());
    CHECK(refused_everywhere(*b, api));
    CHECK(refused_everywhere(*b, s.access));
    CHECK(session_alive(*b, live));
    CHECK(b->logs().find("signed-out sessions loaded") != std::string::npos);

    // A lost NOTIFY: a session an operator ends while the LISTEN connections are gone (and cannot
    // come back) is read from the table all the same.
    const auto live_sid = str(claims_of(live), "session_id");
    // From another database: Postgres does not let a session disallow its own.
    auto cluster = awp::core::pg::connection::connect(awp::test::require_env("AWP_PG_ADMIN_DSN") +
                                                      " dbname=postgres");
    cluster.exec("ALTER DATABASE " + db.name() + " WITH ALLOW_CONNECTIONS false");
    admin.exec(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND "
        "query LIKE 'LISTEN %'",
        {db.name()});
    admin.exec(
        "UPDATE app_sessions SET revoked_at = now(), revoked_reason = 'revoked' WHERE id = $1",
        {live_sid});
    std::this_thread::sleep_for(300ms);
    cluster.exec("ALTER DATABASE " + db.name() + " WITH ALLOW_CONNECTIONS true");
    CHECK(eventually([&] { return !session_alive(*b, live); }, kPropagation + 10s));
    CHECK(eventually([&] { return !session_alive(a, live); }, kPropagation));
}

TEST_CASE(
    "sessions: a NOTIFY anyone sends on the revocation channel is only a hint: it revokes "
    "nothing the table does not hold",
    "[api][sessions]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("hint");
    add_user(admin, email);
    gateway_process gw(db.api_dsn());
    const auto api = api_login(gw, email);
    const auto sid = str(claims_of(api), "session_id");
    for (const std::string& payload : {sid, std::string("1,2,3,999999"), std::string("junk"),
                                       std::string(""), std::string("-1,0x10,") + sid}) {
        admin.exec("SELECT pg_notify('awp_session_revoked', $1)", {payload});
    }
    // The rows named (none exists) are read and found absent; a session is not a row id.
    std::this_thread::sleep_for(500ms);
    CHECK(session_alive(gw, api));
    CHECK_FALSE(rest_refuses(gw, api));
    CHECK(gw.logs().find("\"level\":\"error\"") == std::string::npos);
}

TEST_CASE(
    "sessions: an operator disabling, moving, demoting or removing a user ends its sessions "
    "and its tokens of no session on every gateway (suspected: they stayed valid until expiry)",
    "[api][sessions]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_process a(db.api_dsn());
    gateway_process b(db.api_dsn());
    const auto other_tenant = std::string(
        admin
            .exec("INSERT INTO tenants (name, slug) VALUES ('Other', $1) RETURNING id::text",
                  {awp::test::random_name("other")})
            .text(0, 0));
    struct change {
        const char* what;
        std::string sql;
        std::string reason;
    };
    const std::vector<change> changes = {
        {"disabled", "UPDATE app_users SET disabled = true WHERE id = $1::uuid", "user_disabled"},
        {"moved", "UPDATE app_users SET tenant_id = '" + other_tenant + "' WHERE id = $1::uuid",
         "user_moved"},
        {"demoted", "UPDATE app_users SET is_operator = false WHERE id = $1::uuid",
         "operator_role_removed"},
        {"removed", "DELETE FROM app_users WHERE id = $1::uuid", ""},
        {"given a new password by an operator",
         "UPDATE app_users SET password_hash = password_hash || 'x' WHERE id = $1::uuid",
         "password_changed"},
    };
    for (const auto& c : changes) {
        DYNAMIC_SECTION(c.what) {
            const auto email = random_email("op");
            const auto id = add_user(admin, email, kDefaultTenant, true);
            const auto api = api_login(a, email);
            const auto s = auth_login(a, email);
            const auto mint = minted(id);
            REQUIRE(session_alive(b, api));
            REQUIRE(session_alive(b, s.access));
            REQUIRE(session_alive(b, mint));
            live_socket socket(b, s.access);
            admin.exec(c.sql, {id});
            CHECK(eventually([&] { return refused_everywhere(b, api); }, kPropagation));
            CHECK(refused_everywhere(a, api));
            CHECK(refused_everywhere(b, s.access));
            CHECK(socket.closed_for_policy(kPropagation));
            const bool password = std::string(c.what).find("password") != std::string::npos;
            // Tokens of no session: a password changes nothing for them (they carry none).
            if (!password) {
                CHECK(refused_everywhere(a, mint));
                CHECK(refused_everywhere(b, mint));
            }
            auto refresh = a.request("POST", "/auth/v1/token?grant_type=refresh_token",
                                     json_headers(), R"({"refresh_token":")" + s.refresh + R"("})");
            CHECK(refresh.status == 400);
            if (!c.reason.empty()) {
                CHECK(admin
                          .exec("SELECT count(*) FROM app_sessions WHERE user_id = $1::uuid AND "
                                "revoked_reason = $2",
                                {id, c.reason})
                          .get<int>(0, 0) == 2);
            }
            CHECK(admin
                      .exec("SELECT count(*) FROM app_token_revocations WHERE user_id = $1::uuid",
                            {id})
                      .get<int>(0, 0) == (password ? 2 : 3));
        }
    }
    // A token minted after the change is a new one: a moved user's next token works.
    const auto email = random_email("later");
    const auto id = add_user(admin, email);
    admin.exec("UPDATE app_users SET tenant_id = $2::uuid WHERE id = $1::uuid", {id, other_tenant});
    CHECK(eventually([&] { return !session_alive(b, minted(id, other_tenant, 5)); }, kPropagation));
    // iat is in seconds: a token minted in a later second than the move is a new one.
    CHECK(eventually([&] { return session_alive(b, minted(id, other_tenant, 0)); }, kPropagation));
    CHECK(session_alive(b, api_login(b, email)));
}

TEST_CASE(
    "sessions: a refresh token used again after the reuse interval ends its whole family on every "
    "gateway",
    "[api][sessions]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("reuse");
    add_user(admin, email);
    gateway_process a(db.api_dsn(), {{"API_REFRESH_REUSE_INTERVAL", "1"}});
    gateway_process b(db.api_dsn(), {{"API_REFRESH_REUSE_INTERVAL", "1"}});
    const auto s0 = auth_login(a, email);
    auto r1 = a.request("POST", "/auth/v1/token?grant_type=refresh_token", json_headers(),
                        R"({"refresh_token":")" + s0.refresh + R"("})");
    REQUIRE(r1.status == 200);
    const auto s1 = parse(r1.body);
    const std::string access1 = str(s1, "access_token");
    REQUIRE(session_alive(b, access1));
    live_socket socket(a, access1);
    std::this_thread::sleep_for(1500ms);  // past the interval: a replay, not a second tab
    auto stolen = b.request("POST", "/auth/v1/token?grant_type=refresh_token", json_headers(),
                            R"({"refresh_token":")" + s0.refresh + R"("})");
    CHECK(stolen.status == 400);
    CHECK(stolen.body.find("refresh_token_already_used") != std::string::npos);
    // Every token of the family: the access tokens on the other process, the live refresh token.
    CHECK(eventually([&] { return refused_everywhere(a, access1); }, kPropagation));
    CHECK(refused_everywhere(a, s0.access));
    CHECK(socket.closed_for_policy(kPropagation));
    CHECK(a.request("POST", "/auth/v1/token?grant_type=refresh_token", json_headers(),
                    R"({"refresh_token":")" + str(s1, "refresh_token") + R"("})")
              .status == 400);
}

TEST_CASE(
    "sessions: a password change needs a live session, and the current password from a session "
    "signed in longer ago than API_REAUTHENTICATE_AFTER (limited like a sign-in)",
    "[api][sessions]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("reauth");
    const auto id = add_user(admin, email);
    gateway_process gw(db.api_dsn(), {{"API_REAUTHENTICATE_AFTER", "1"}});
    const auto s = auth_login(gw, email);
    auto put = [&](const std::string& token, const std::string& body) {
        return gw.request("PUT", "/auth/v1/user", json_headers(token), body);
    };
    // A token of no session never changes a password; its metadata it may.
    auto mint = put(minted(id), R"({"password":"minted horse 3"})");
    CHECK(mint.status == 403);
    CHECK(mint.body.find("session_not_found") != std::string::npos);
    CHECK(put(minted(id), R"({"data":{"theme":"dark"}})").status == 200);

    std::this_thread::sleep_for(2s);  // the session signed in more than a second ago
    auto stale = put(s.access, R"({"password":"new horse 33"})");
    CHECK(stale.status == 400);
    CHECK(stale.body.find("reauthentication_needed") != std::string::npos);
    auto nonce = put(s.access, R"({"password":"new horse 33","nonce":"123456"})");
    CHECK(nonce.status == 422);
    CHECK(nonce.body.find("reauthentication_not_valid") != std::string::npos);
    auto reauth = gw.get("/auth/v1/reauthenticate", json_headers(s.access));
    CHECK(reauth.status == 422);
    CHECK(reauth.body.find("current_password") != std::string::npos);
    // Wrong current passwords count against the sign-in limits (3 in this run): then 429.
    for (int i = 0; i < 3; ++i) {
        auto wrong = put(s.access, R"({"password":"new horse 33","current_password":"guess"})");
        CHECK(wrong.status == 400);
        CHECK(wrong.body.find("current_password_invalid") != std::string::npos);
    }
    auto limited = put(s.access, R"({"password":"new horse 33","current_password":")" +
                                     std::string(kPassword) + R"("})");
    CHECK(limited.status == 429);
    CHECK(limited.header.get("retry-after").has_value());
    // Another user of the same database, from a fresh gateway (a limiter of its own): the
    // current password lets it through.
    const auto email2 = random_email("reauth2");
    add_user(admin, email2);
    gateway_process gw2(db.api_dsn(), {{"API_REAUTHENTICATE_AFTER", "1"}});
    const auto s2 = auth_login(gw2, email2);
    std::this_thread::sleep_for(2s);
    auto ok = gw2.request(
        "PUT", "/auth/v1/user", json_headers(s2.access),
        R"({"password":"new horse 33","current_password":")" + std::string(kPassword) + R"("})");
    INFO(ok.body);
    CHECK(ok.status == 200);
    CHECK(gw2.request("POST", "/auth/v1/token?grant_type=password", json_headers(),
                      R"({"email":")" + email2 + R"(","password":"new horse 33"})")
              .status == 200);
}

TEST_CASE(
    "sessions: a session of a registered workspace is ended in that workspace's database and "
    "refused by every gateway that serves it",
    "[api][sessions]") {
    awp::test::scoped_database own;
    awp::test::scoped_database alpha;
    auto own_admin = own.admin();
    auto alpha_admin = alpha.admin();
    add_user(own_admin, "op@example.com", kDefaultTenant, true);
    const auto email = random_email("alpha");
    add_user(alpha_admin, email);
    // Two processes of one host: one registry.
    const auto config = std::filesystem::temp_directory_path() / awp::test::random_name("cfg");
    gateway_process a(own.api_dsn(), {{"AWP_CONFIG_DIR", config.string()}});
    gateway_process b(own.api_dsn(), {{"AWP_CONFIG_DIR", config.string()}});
    http::headers op = json_headers(api_login(a, "op@example.com"));
    auto added = a.request("POST", "/api/workspaces", op,
                           R"({"label":"Alpha","url":")" + awp::test::api_role_url(alpha) +
                               R"(","anonKey":"anon-key-0123456789abcdef",)"
                               R"("serviceRoleKey":"svc-key-0123456789abcdef0"})");
    REQUIRE(added.status == 201);
    const std::string ws = parse(added.body)["id"].GetString();
    auto login = a.request("POST", "/api/auth/login", json_headers(),
                           R"({"email":")" + email + R"(","password":")" + kPassword +
                               R"(","workspaceId":")" + ws + R"("})");
    REQUIRE(login.status == 200);
    std::string token;
    for (const auto& [k, v] : login.header.fields()) {
        if (v.rfind("awp-auth-token=", 0) == 0) token = v.substr(15, v.find(';') - 15);
    }
    const auto sid =
        str(parse(crypto::jwt_verify_hs256(token, crypto::workspace_session_key(kSecret, ws))),
            "session_id");
    // The session is alpha's: its row is in alpha's database, not the gateway's own.
    CHECK(alpha_admin.exec("SELECT count(*) FROM app_sessions WHERE id = $1::uuid", {sid})
              .get<int>(0, 0) == 1);
    CHECK(own_admin.exec("SELECT count(*) FROM app_sessions WHERE id = $1::uuid", {sid})
              .get<int>(0, 0) == 0);
    CHECK(session_alive(a, token));
    // b reads alpha's signed-out sessions when it first meets the workspace (503 until then).
    CHECK(eventually([&] { return session_alive(b, token); }, kPropagation));
    REQUIRE(a.request("POST", "/api/auth/logout", awp::test::bearer(token)).status == 200);
    CHECK(eventually(
        [&] { return b.get("/api/auth/session", awp::test::bearer(token)).status == 401; },
        kPropagation));
    CHECK_FALSE(session_alive(a, token));
    std::error_code ec;
    std::filesystem::remove_all(config, ec);
}

TEST_CASE(
    "sessions: a gateway that cannot read its database's signed-out sessions refuses session "
    "tokens, never lets them through",
    "[api][sessions]") {
    // Nothing listens on this port: no revocation can be read.
    gateway_process gw(
        "postgresql://awp_api:x@127.0.0.1:" + std::to_string(awp::test::free_port()) + "/nowhere");
    const auto token = awp::test::user_token(kDefaultTenant);
    // Even a route that needs no database: what a request on that database is told.
    auto r = gw.get("/api/agents/templates", awp::test::bearer(token));
    CHECK(r.status == 502);
    CHECK(r.body.find("database_unreachable") != std::string::npos);
    http::headers data = awp::test::bearer(token);
    data.add("apikey", crypto::anon_key(kSecret));
    auto rest = gw.get("/rest/v1/agents?select=id", data);
    CHECK(rest.status == 503);
    CHECK(rest.header.get("retry-after").has_value());
    CHECK(gw.get("/auth/v1/user", json_headers(token)).status >= 500);
    // What needs no session is served: health, the service role.
    CHECK(gw.get("/api/health").status == 200);
    CHECK(gw.get("/api/workspaces", awp::test::bearer(kServiceKey)).status == 200);
}

}  // namespace api_sessions_test
