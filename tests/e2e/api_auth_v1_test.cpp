// /auth/v1 of awp-api-gateway as a process against a real database: what @supabase/supabase-js's
// auth client relies on (docs/data-api.md, "Signing in") — the password and refresh-token grants,
// the limiter, rotation and reuse detection, sign-out scopes and their effect on /api, the user,
// sign-up on and off, settings, CORS, and GET /api/config's url and anon key.
#include <sodium.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/child.hpp"
#include "support/test_db.hpp"

namespace api_auth_v1_test {

namespace {

namespace http = awp::http;
namespace crypto = awp::core::crypto;
using gateway_process = awp::test::api_gateway_process;
using namespace std::chrono_literals;

constexpr const char* kSecret = awp::test::kApiJwtSecret;
constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";

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

/// An app_users row with an Argon2id hash of `password`; its id.
std::string add_user(awp::core::pg::connection& admin, const std::string& email,
                     const std::string& password, const std::optional<std::string>& tenant,
                     bool disabled = false) {
    REQUIRE(sodium_init() >= 0);
    char hash[crypto_pwhash_STRBYTES];
    REQUIRE(crypto_pwhash_str(hash, password.c_str(), password.size(),
                              crypto_pwhash_OPSLIMIT_INTERACTIVE,
                              crypto_pwhash_MEMLIMIT_INTERACTIVE) == 0);
    return admin
        .exec(
            "INSERT INTO app_users (tenant_id, email, password_hash, disabled) VALUES ($1::uuid, "
            "$2, $3, $4::boolean) RETURNING id::text",
            {tenant, email, std::string(hash), disabled})
        .get<std::string>(0, 0);
}

http::headers json_headers(const std::string& token = {}) {
    http::headers h;
    h.add("Content-Type", "application/json;charset=UTF-8");
    if (!token.empty()) h.add("Authorization", "Bearer " + token);
    return h;
}

/// What auth-js sends: the API version it speaks.
http::headers client_headers(const std::string& token = {}) {
    auto h = json_headers(token);
    h.add("X-Supabase-Api-Version", "2024-01-01");
    return h;
}

struct session {
    std::string access, refresh, user_id, session_id;
};

session session_of(const http::response& r) {
    INFO(r.body);
    REQUIRE(r.status == 200);
    auto d = parse(r.body);
    session s;
    s.access = str(d, "access_token");
    s.refresh = str(d, "refresh_token");
    s.user_id = str(d["user"], "id");
    auto claims = parse(crypto::jwt_verify_hs256(s.access, kSecret));
    s.session_id = str(claims, "session_id");
    return s;
}

http::response password_grant(const gateway_process& gw, const std::string& email,
                              const std::string& password, http::headers h = json_headers()) {
    return gw.request("POST", "/auth/v1/token?grant_type=password", std::move(h),
                      R"({"email":")" + email + R"(","password":")" + password +
                          R"(","gotrue_meta_security":{}})");
}

http::response refresh_grant(const gateway_process& gw, const std::string& token) {
    return gw.request("POST", "/auth/v1/token?grant_type=refresh_token", json_headers(),
                      R"({"refresh_token":")" + token + R"("})");
}

/// The error code of a GoTrue error body (legacy shape: error_code; 2024-01-01: code).
std::string gotrue_code(const http::response& r) {
    auto d = parse(r.body);
    if (d.HasMember("error_code")) return str(d, "error_code");
    return str(d, "code");
}

std::string random_email(const std::string& prefix) {
    return awp::test::random_name(prefix) + "@example.com";
}

}  // namespace

TEST_CASE(
    "auth/v1 password grant: a session for the right password, one answer for a wrong password "
    "and an unknown e-mail, user_banned only with the right password",
    "[api][auth]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("ada");
    const auto user_id = add_user(admin, email, "correct horse 1", std::string(kDefaultTenant));
    const auto banned = random_email("banned");
    add_user(admin, banned, "correct horse 2", std::string(kDefaultTenant), true);
    gateway_process gw(db.api_dsn(), {{"API_PUBLIC_URL", "https://awp.example"}});

    auto ok = password_grant(gw, email, "correct horse 1");
    REQUIRE(ok.status == 200);
    auto d = parse(ok.body);
    CHECK(str(d, "token_type") == "bearer");
    CHECK(d["expires_in"].GetInt64() == 3600);
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    CHECK(std::abs(d["expires_at"].GetInt64() - (now + 3600)) < 30);
    CHECK(str(d, "refresh_token").size() >= 40);
    const auto& user = d["user"];
    CHECK(str(user, "id") == user_id);
    CHECK(str(user, "email") == email);
    CHECK(str(user, "aud") == "authenticated");
    CHECK(str(user, "role") == "authenticated");
    CHECK(!str(user, "email_confirmed_at").empty());
    CHECK(!str(user, "last_sign_in_at").empty());
    CHECK(str(user["app_metadata"], "provider") == "email");
    CHECK(str(user["app_metadata"], "tenant_id") == kDefaultTenant);
    CHECK(user["identities"].IsArray());
    CHECK(user["is_anonymous"].IsFalse());
    // The access token: HS256 with JWT_SECRET and the claims the client and RLS read.
    auto claims = parse(crypto::jwt_verify_hs256(str(d, "access_token"), kSecret));
    CHECK(str(claims, "sub") == user_id);
    CHECK(str(claims, "role") == "authenticated");
    CHECK(str(claims, "aud") == "authenticated");
    CHECK(str(claims, "email") == email);
    CHECK(str(claims, "phone").empty());
    CHECK(str(claims, "iss") == "https://awp.example/auth/v1");
    CHECK(str(claims["app_metadata"], "tenant_id") == kDefaultTenant);
    CHECK(claims["user_metadata"].IsObject());
    CHECK(awp::core::is_valid_uuid(str(claims, "session_id")));
    CHECK(str(claims, "aal") == "aal1");
    CHECK(str(claims["amr"][0], "method") == "password");
    CHECK(claims["is_anonymous"].IsFalse());
    CHECK(claims["exp"].GetInt64() - claims["iat"].GetInt64() == 3600);
    CHECK(claims.HasMember("session_id"));
    // The session is in the database, its refresh token only as a SHA-256.
    CHECK(
        admin
            .exec("SELECT count(*) FROM app_refresh_tokens WHERE token_sha256 = sha256($1::bytea)",
                  {str(d, "refresh_token")})
            .get<int>(0, 0) == 1);
    CHECK(admin.exec("SELECT count(*) FROM app_sessions WHERE user_id = $1::uuid", {user_id})
              .get<int>(0, 0) == 1);
    // Mixed case: the same account.
    std::string upper = email;
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    CHECK(password_grant(gw, upper, "correct horse 1").status == 200);

    // Wrong password and unknown e-mail: the same answer, both after an Argon2id evaluation
    // (a dummy hash for the unknown account), so neither body nor time tells them apart.
    auto t0 = std::chrono::steady_clock::now();
    auto wrong = password_grant(gw, email, "wrong horse 1");
    auto t1 = std::chrono::steady_clock::now();
    auto unknown = password_grant(gw, random_email("nobody"), "correct horse 1");
    auto t2 = std::chrono::steady_clock::now();
    CHECK(wrong.status == 400);
    CHECK(wrong.body ==
          R"({"code":400,"error_code":"invalid_credentials","msg":"Invalid login credentials"})");
    CHECK(unknown.status == wrong.status);
    CHECK(unknown.body == wrong.body);
    CHECK(t1 - t0 > 15ms);
    CHECK(t2 - t1 > 15ms);
    // auth-js speaks API 2024-01-01: the code is the error code, the version is echoed.
    auto v = password_grant(gw, email, "wrong horse 2", client_headers());
    CHECK(v.status == 400);
    CHECK(v.body == R"({"code":"invalid_credentials","msg":"Invalid login credentials"})");
    CHECK(v.header.get("x-supabase-api-version") == "2024-01-01");

    // A disabled user: with a wrong password nothing is revealed; with the right one, banned.
    CHECK(password_grant(gw, banned, "wrong horse 3").body == wrong.body);
    auto b = password_grant(gw, banned, "correct horse 2");
    CHECK(b.status == 400);
    CHECK(gotrue_code(b) == "user_banned");

    // What this server does not do, said clearly.
    auto phone = gw.request("POST", "/auth/v1/token?grant_type=password", json_headers(),
                            R"({"phone":"+15555550100","password":"x"})");
    CHECK(phone.status == 422);
    CHECK(gotrue_code(phone) == "phone_provider_disabled");
    CHECK(gotrue_code(gw.request("POST", "/auth/v1/token?grant_type=id_token", json_headers(),
                                 "{}")) == "validation_failed");
    auto garbage =
        gw.request("POST", "/auth/v1/token?grant_type=password", json_headers(), "{nope");
    CHECK(garbage.status == 400);
    CHECK(gotrue_code(garbage) == "bad_json");
    CHECK(gw.logs().find("correct horse") == std::string::npos);
}

TEST_CASE("auth/v1 password grant is limited with the /api login's limiter: 429 with Retry-After",
          "[api][auth]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("limited");
    add_user(admin, email, "correct horse 1", std::string(kDefaultTenant));
    gateway_process gw(db.api_dsn());  // API_LOGIN_MAX_FAILURES=3
    for (int i = 0; i < 3; ++i) CHECK(password_grant(gw, email, "wrong horse").status == 400);
    // Now even the right password waits: the attempt is refused before Argon2id runs.
    auto limited = password_grant(gw, email, "correct horse 1", client_headers());
    CHECK(limited.status == 429);
    CHECK(limited.body ==
          R"({"code":"over_request_rate_limit","msg":"Request rate limit reached"})");
    REQUIRE(limited.header.get("retry-after").has_value());
    CHECK(std::stol(std::string(*limited.header.get("retry-after"))) > 0);
    // One limiter for both ways in: /api/auth/login is refused too.
    http::headers jh;
    jh.add("Content-Type", "application/json");
    CHECK(gw.request("POST", "/api/auth/login", jh,
                     R"({"email":")" + email + R"(","password":"correct horse 1"})")
              .status == 429);
}

TEST_CASE(
    "auth/v1 refresh: rotated on use, a used token within the reuse interval gets the same "
    "child, a reuse after it signs the whole session out (also its access tokens on /api)",
    "[api][auth]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("rot");
    add_user(admin, email, "correct horse 1", std::string(kDefaultTenant));
    gateway_process gw(db.api_dsn(), {{"API_REFRESH_REUSE_INTERVAL", "2"}});
    auto s0 = session_of(password_grant(gw, email, "correct horse 1"));
    CHECK(gw.get("/api/auth/session", awp::test::bearer(s0.access)).status == 200);

    auto r1 = refresh_grant(gw, s0.refresh);
    auto s1 = session_of(r1);
    CHECK(s1.refresh != s0.refresh);
    CHECK(s1.session_id == s0.session_id);  // the same session, renewed
    CHECK(s1.user_id == s0.user_id);
    auto c1 = parse(crypto::jwt_verify_hs256(s1.access, kSecret));
    CHECK(str(c1["amr"][0], "method") == "password");
    // Two tabs refreshing with the same token at once: the second gets what the first got.
    auto again = session_of(refresh_grant(gw, s0.refresh));
    CHECK(again.refresh == s1.refresh);
    // The chain goes on from the child.
    auto s2 = session_of(refresh_grant(gw, s1.refresh));
    CHECK(s2.refresh != s1.refresh);
    // Within the interval the first token still leads to the live end of the chain.
    CHECK(session_of(refresh_grant(gw, s0.refresh)).refresh == s2.refresh);

    // After the interval a used token is a stolen or replayed one: the session ends.
    std::this_thread::sleep_for(2500ms);
    auto reuse = refresh_grant(gw, s0.refresh);
    CHECK(reuse.status == 400);
    CHECK(gotrue_code(reuse) == "refresh_token_already_used");
    CHECK(reuse.body.find("Invalid Refresh Token: Already Used") != std::string::npos);
    // Every token of the family is dead, the live one included...
    auto live = refresh_grant(gw, s2.refresh);
    CHECK(live.status == 400);
    CHECK(gotrue_code(live) == "refresh_token_not_found");
    // ...and so are the session's access tokens, on /api and on /auth/v1.
    auto api = gw.get("/api/auth/session", awp::test::bearer(s2.access));
    CHECK(api.status == 401);
    CHECK(api.body.find("signed out") != std::string::npos);
    auto user = gw.get("/auth/v1/user", client_headers(s1.access));
    CHECK(user.status == 403);
    CHECK(gotrue_code(user) == "session_not_found");
    CHECK(admin.exec("SELECT revoked_reason FROM app_sessions WHERE id = $1::uuid", {s0.session_id})
              .get<std::string>(0, 0) == "refresh_token_reuse");
    // An unknown token, an empty one.
    CHECK(gotrue_code(refresh_grant(gw, "not-a-token")) == "refresh_token_not_found");
    CHECK(gotrue_code(refresh_grant(gw, "")) == "refresh_token_not_found");
    // A disabled user's session does not refresh.
    auto s3 = session_of(password_grant(gw, email, "correct horse 1"));
    admin.exec("UPDATE app_users SET disabled = true WHERE email = $1", {email});
    CHECK(gotrue_code(refresh_grant(gw, s3.refresh)) == "user_banned");
}

TEST_CASE(
    "auth/v1 logout scopes others, local and global: a signed-out token is refused on /api (also "
    "in an @supabase/ssr cookie) and after a restart",
    "[api][auth]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("out");
    add_user(admin, email, "correct horse 1", std::string(kDefaultTenant));
    auto gw = std::make_unique<gateway_process>(db.api_dsn());
    auto a = session_of(password_grant(*gw, email, "correct horse 1"));
    auto b = session_of(password_grant(*gw, email, "correct horse 1"));
    auto c = session_of(password_grant(*gw, email, "correct horse 1"));
    auto alive = [&](const session& s) {
        return gw->get("/api/auth/session", awp::test::bearer(s.access)).status == 200;
    };
    REQUIRE(alive(a));
    REQUIRE(alive(b));
    // An @supabase/ssr cookie holding the session works on /api.
    http::headers cookie;
    cookie.add("Cookie", "sb-127-auth-token=" +
                             http::percent_encode(R"({"access_token":")" + c.access + R"("})"));
    REQUIRE(gw->get("/api/auth/session", cookie).status == 200);

    auto bad_scope =
        gw->request("POST", "/auth/v1/logout?scope=everyone", client_headers(a.access));
    CHECK(bad_scope.status == 400);
    CHECK(gotrue_code(bad_scope) == "validation_failed");
    CHECK(gw->request("POST", "/auth/v1/logout", json_headers()).status == 401);

    // others: every session but the caller's.
    auto others = gw->request("POST", "/auth/v1/logout?scope=others", client_headers(a.access));
    CHECK(others.status == 204);
    CHECK(others.body.empty());
    CHECK(alive(a));
    CHECK_FALSE(alive(b));
    CHECK(gw->get("/api/auth/session", cookie).status == 401);
    CHECK(gotrue_code(refresh_grant(*gw, b.refresh)) == "refresh_token_not_found");
    CHECK(refresh_grant(*gw, a.refresh).status == 200);

    // local: the caller's session only.
    auto d = session_of(password_grant(*gw, email, "correct horse 1"));
    auto e = session_of(password_grant(*gw, email, "correct horse 1"));
    CHECK(gw->request("POST", "/auth/v1/logout?scope=local", client_headers(d.access)).status ==
          204);
    CHECK_FALSE(alive(d));
    CHECK(gotrue_code(refresh_grant(*gw, d.refresh)) == "refresh_token_not_found");
    CHECK(alive(e));
    // A second sign-out with the dead token: the session is gone (auth-js ignores the 403).
    auto twice = gw->request("POST", "/auth/v1/logout?scope=local", client_headers(d.access));
    CHECK(twice.status == 403);
    CHECK(gotrue_code(twice) == "session_not_found");

    // global (auth-js's default): all of the user's sessions.
    CHECK(gw->request("POST", "/auth/v1/logout", client_headers(e.access)).status == 204);
    CHECK_FALSE(alive(e));
    CHECK(gotrue_code(refresh_grant(*gw, e.refresh)) == "refresh_token_not_found");

    // /api's logout with a token of /auth/v1 signs that session out in the database too.
    auto f = session_of(password_grant(*gw, email, "correct horse 1"));
    CHECK(gw->request("POST", "/api/auth/logout", awp::test::bearer(f.access)).status == 200);
    CHECK(gotrue_code(refresh_grant(*gw, f.refresh)) == "refresh_token_not_found");

    // Another process (a restart) refuses them too: the signed-out sessions whose tokens may
    // still be alive are loaded from the database when it starts.
    auto g = session_of(password_grant(*gw, email, "correct horse 1"));
    gw.reset();
    gw = std::make_unique<gateway_process>(db.api_dsn());
    int status = 0;
    for (int i = 0; i < 50; ++i) {  // the load runs beside the first requests
        status = gw->get("/api/auth/session", awp::test::bearer(e.access)).status;
        if (status == 401) break;
        std::this_thread::sleep_for(100ms);
    }
    CHECK(status == 401);
    CHECK(alive(g));
    CHECK(gw->logs().find("signed-out sessions loaded") != std::string::npos);
}

TEST_CASE(
    "auth/v1 user: GET answers the user of a live session, PUT merges metadata and changes the "
    "password (others signed out), refuses a weak or unchanged one and an e-mail change",
    "[api][auth]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_email("me");
    const auto id = add_user(admin, email, "correct horse 1", std::string(kDefaultTenant));
    gateway_process gw(db.api_dsn());
    auto a = session_of(password_grant(gw, email, "correct horse 1"));
    auto b = session_of(password_grant(gw, email, "correct horse 1"));

    auto me = gw.get("/auth/v1/user", client_headers(a.access));
    REQUIRE(me.status == 200);
    auto u = parse(me.body);
    CHECK(str(u, "id") == id);
    CHECK(str(u, "email") == email);
    CHECK(u["user_metadata"].ObjectEmpty());

    // Without a token, with a bad one, with the anon key: refused as GoTrue does.
    auto none = gw.get("/auth/v1/user", client_headers());
    CHECK(none.status == 401);
    CHECK(gotrue_code(none) == "no_authorization");
    auto forged = gw.get("/auth/v1/user",
                         client_headers(crypto::jwt_sign_hs256(
                             R"({"sub":")" + id + R"(","role":"authenticated","exp":9999999999})",
                             "another-secret-that-is-long-enough-0123456789")));
    CHECK(forged.status == 403);
    CHECK(gotrue_code(forged) == "bad_jwt");
    auto anon = gw.get("/auth/v1/user", client_headers(crypto::anon_key(kSecret)));
    CHECK(anon.status == 403);
    CHECK(gotrue_code(anon) == "bad_jwt");

    // Metadata: keys set, a key set to null removed; in the next access token too.
    auto put = gw.request("PUT", "/auth/v1/user", client_headers(a.access),
                          R"({"data":{"name":"Ada","theme":"dark"}})");
    REQUIRE(put.status == 200);
    CHECK(str(parse(put.body)["user_metadata"], "name") == "Ada");
    put = gw.request("PUT", "/auth/v1/user", client_headers(a.access),
                     R"({"data":{"theme":null,"lang":"en"}})");
    REQUIRE(put.status == 200);
    auto md = parse(put.body);
    CHECK(str(md["user_metadata"], "name") == "Ada");
    CHECK(str(md["user_metadata"], "lang") == "en");
    CHECK_FALSE(md["user_metadata"].HasMember("theme"));
    auto refreshed = session_of(refresh_grant(gw, a.refresh));
    a = refreshed;
    auto claims = parse(crypto::jwt_verify_hs256(a.access, kSecret));
    CHECK(str(claims["user_metadata"], "name") == "Ada");
    CHECK(admin.exec("SELECT raw_user_meta_data->>'lang' FROM auth.users WHERE id = $1::uuid", {id})
              .get<std::string>(0, 0) == "en");
    auto huge = gw.request("PUT", "/auth/v1/user", client_headers(a.access),
                           R"({"data":{"x":")" + std::string(9000, 'x') + R"("}})");
    CHECK(huge.status == 422);

    // Passwords: the policy (GoTrue's weak_password shape), not the same one, then changed.
    auto weak =
        gw.request("PUT", "/auth/v1/user", client_headers(a.access), R"({"password":"short"})");
    CHECK(weak.status == 422);
    auto w = parse(weak.body);
    CHECK(str(w, "code") == "weak_password");
    REQUIRE(w.HasMember("weak_password"));
    CHECK(std::string(w["weak_password"]["reasons"][0].GetString()) == "length");
    auto same = gw.request("PUT", "/auth/v1/user", client_headers(a.access),
                           R"({"password":"correct horse 1"})");
    CHECK(same.status == 422);
    CHECK(gotrue_code(same) == "same_password");
    auto changed = gw.request("PUT", "/auth/v1/user", client_headers(a.access),
                              R"({"password":"a new horse 22"})");
    CHECK(changed.status == 200);
    CHECK(gw.get("/api/auth/session", awp::test::bearer(a.access)).status == 200);
    CHECK(gw.get("/api/auth/session", awp::test::bearer(b.access)).status == 401);
    CHECK(password_grant(gw, email, "correct horse 1").status == 400);
    CHECK(password_grant(gw, email, "a new horse 22").status == 200);

    // The e-mail: the same one is no change; another is not supported here.
    CHECK(gw.request("PUT", "/auth/v1/user", client_headers(a.access),
                     R"({"email":")" + email + R"("})")
              .status == 200);
    auto moved = gw.request("PUT", "/auth/v1/user", client_headers(a.access),
                            R"({"email":"elsewhere@example.com"})");
    CHECK(moved.status == 422);
    CHECK(gotrue_code(moved) == "email_change_not_supported");

    // A user removed meanwhile.
    admin.exec("DELETE FROM app_users WHERE id = $1::uuid", {id});
    auto gone =
        gw.get("/auth/v1/user",
               client_headers(crypto::jwt_sign_hs256(
                   R"({"sub":")" + id + R"(","role":"authenticated","exp":9999999999})", kSecret)));
    CHECK(gone.status == 403);
    CHECK(gotrue_code(gone) == "user_not_found");
    CHECK(admin.exec("SELECT count(*) FROM auth.users WHERE id = $1::uuid", {id}).get<int>(0, 0) ==
          0);
}

TEST_CASE("auth/v1 sign-up is off unless the operator turns it on", "[api][auth]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    auto r =
        gw.request("POST", "/auth/v1/signup", client_headers(),
                   R"({"email":")" + random_email("new") + R"(","password":"correct horse 1"})");
    CHECK(r.status == 422);
    CHECK(r.body == R"({"code":"signup_disabled","msg":"Signups not allowed for this instance"})");
    auto settings = parse(gw.get("/auth/v1/settings").body);
    CHECK(settings["disable_signup"].IsTrue());
    auto admin = db.admin();
    CHECK(admin.exec("SELECT count(*) FROM app_users").get<int>(0, 0) == 0);
}

TEST_CASE(
    "auth/v1 sign-up with API_SIGNUP=on: a session at once, no tenant (so nothing of /api), "
    "duplicate e-mail and weak password in GoTrue's shapes",
    "[api][auth]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_process gw(db.api_dsn(), {{"API_SIGNUP", "on"}});
    const auto email = random_email("self");
    auto r = gw.request("POST", "/auth/v1/signup", client_headers(),
                        R"({"email":")" + email +
                            R"(","password":"correct horse 1","data":{"name":"Self"},)"
                            R"("gotrue_meta_security":{},"code_challenge":null})");
    auto s = session_of(r);
    auto d = parse(r.body);
    CHECK(str(d["user"], "email") == email);
    CHECK(str(d["user"]["user_metadata"], "name") == "Self");
    CHECK_FALSE(d["user"]["app_metadata"].HasMember("tenant_id"));
    auto claims = parse(crypto::jwt_verify_hs256(s.access, kSecret));
    CHECK_FALSE(claims["app_metadata"].HasMember("tenant_id"));
    // The database's view: a user of no tenant, mirrored into auth.users.
    CHECK(admin.exec("SELECT tenant_id IS NULL FROM app_users WHERE id = $1::uuid", {s.user_id})
              .get<bool>(0, 0));
    CHECK(admin.exec("SELECT email FROM auth.users WHERE id = $1::uuid", {s.user_id})
              .get<std::string>(0, 0) == email);
    // /api has nothing for a user of no tenant; /auth/v1 knows the user.
    auto api = gw.get("/api/auth/session", awp::test::bearer(s.access));
    CHECK(api.status == 403);
    CHECK(api.body.find("no_tenant") != std::string::npos);
    CHECK(gw.get("/auth/v1/user", client_headers(s.access)).status == 200);
    CHECK(password_grant(gw, email, "correct horse 1").status == 200);
    CHECK(parse(gw.get("/auth/v1/settings").body)["disable_signup"].IsFalse());

    auto dup = gw.request("POST", "/auth/v1/signup", client_headers(),
                          R"({"email":")" + email + R"(","password":"another horse 1"})");
    CHECK(dup.status == 422);
    CHECK(dup.body == R"({"code":"user_already_exists","msg":"User already registered"})");
    // Weak password, as the pinned client reads it in either API version.
    auto weak = gw.request("POST", "/auth/v1/signup", json_headers(),
                           R"({"email":")" + random_email("weak") + R"(","password":"short"})");
    CHECK(weak.status == 422);
    CHECK(
        weak.body ==
        R"({"code":422,"error_code":"weak_password","msg":"Password should be at least 8 characters.","weak_password":{"reasons":["length"]}})");
    auto bad = gw.request("POST", "/auth/v1/signup", client_headers(),
                          R"({"email":"not an email","password":"correct horse 1"})");
    CHECK(bad.status == 400);
    CHECK(gotrue_code(bad) == "email_address_invalid");
    CHECK(gotrue_code(gw.request("POST", "/auth/v1/signup", client_headers(),
                                 R"({"phone":"+15555550100","password":"correct horse 1"})")) ==
          "phone_provider_disabled");
}

TEST_CASE("auth/v1 sign-up with API_SIGNUP_TENANT: the new user joins that tenant", "[api][auth]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto tenant =
        admin
            .exec("INSERT INTO tenants (name, slug) VALUES ('Joiners', $1) RETURNING id::text",
                  {awp::test::random_name("join")})
            .get<std::string>(0, 0);
    gateway_process gw(db.api_dsn(), {{"API_SIGNUP", "on"}, {"API_SIGNUP_TENANT", tenant}});
    auto s = session_of(gw.request(
        "POST", "/auth/v1/signup", client_headers(),
        R"({"email":")" + random_email("joiner") + R"(","password":"correct horse 1"})"));
    auto claims = parse(crypto::jwt_verify_hs256(s.access, kSecret));
    CHECK(str(claims["app_metadata"], "tenant_id") == tenant);
    auto who = gw.get("/api/auth/session", awp::test::bearer(s.access));
    CHECK(who.status == 200);
    CHECK(str(parse(who.body), "tenantId") == tenant);
}

TEST_CASE(
    "auth/v1 settings, health, CORS for any origin (no same-origin check: no cookies), and the "
    "preflight",
    "[api][auth]") {
    awp::test::scoped_database db;
    gateway_process gw(db.api_dsn());
    auto settings = parse(gw.get("/auth/v1/settings").body);
    CHECK(settings["external"]["email"].IsTrue());
    CHECK(settings["external"]["google"].IsFalse());
    CHECK(settings["external"]["phone"].IsFalse());
    CHECK(settings["mailer_autoconfirm"].IsTrue());
    auto health = gw.get("/auth/v1/health");
    CHECK(health.status == 200);
    CHECK(str(parse(health.body), "name") == "GoTrue");
    CHECK(gw.get("/auth/v1/.well-known/jwks.json").body == R"({"keys":[]})");

    http::headers pre;
    pre.add("Origin", "https://ui.example");
    pre.add("Access-Control-Request-Method", "POST");
    pre.add("Access-Control-Request-Headers", "authorization, apikey, x-client-info, content-type");
    auto p = gw.request("OPTIONS", "/auth/v1/token", pre);
    CHECK(p.status == 204);
    CHECK(p.header.get("access-control-allow-origin") == "*");
    CHECK(p.header.get("access-control-allow-headers") ==
          "authorization, apikey, x-client-info, content-type");
    CHECK(p.header.get("access-control-allow-methods").value_or("").find("POST") !=
          std::string::npos);

    // A cross-origin POST is served (the /api routes would refuse it: they take cookies), and
    // its answer, an error too, may be read by the page.
    auto h = client_headers();
    h.add("Origin", "https://ui.example");
    h.add("Sec-Fetch-Site", "cross-site");
    auto r = gw.request("POST", "/auth/v1/token?grant_type=password", h,
                        R"({"email":"x@example.com","password":"whatever 1"})");
    CHECK(r.status == 400);
    CHECK(gotrue_code(r) == "invalid_credentials");
    CHECK(r.header.get("access-control-allow-origin") == "*");
    CHECK(
        r.header.get("access-control-expose-headers").value_or("").find("X-Supabase-Api-Version") !=
        std::string::npos);
    // Cookies are never read here: an /api session cookie does not make a /user request.
    http::headers ck;
    ck.add("Cookie", "awp-auth-token=" + awp::test::user_token(kDefaultTenant));
    CHECK(gw.get("/auth/v1/user", ck).status == 401);
}

TEST_CASE(
    "GET /api/config: the gateway's own database with its public URL and an anon key that is "
    "stable across restarts and the one awpctl token --anon prints",
    "[api][auth]") {
    awp::test::scoped_database db;
    std::string key, id;
    {
        gateway_process gw(db.api_dsn(),
                           {{"API_WORKSPACE_LABEL", "Home"}, {"API_WORKSPACE_EMOJI", "🏡"}});
        auto c = parse(gw.get("/api/config").body);
        REQUIRE(c["workspace"].IsObject());
        const auto& w = c["workspace"];
        id = str(w, "workspaceId");
        CHECK(awp::core::is_valid_uuid(id));
        CHECK(str(w, "label") == "Home");
        CHECK(str(w, "emoji") == "🏡");
        CHECK(str(w, "url") == gw.url());
        key = str(w, "anonKey");
        auto claims = parse(crypto::jwt_verify_hs256(key, kSecret));
        CHECK(str(claims, "role") == "anon");
        CHECK(claims["exp"].GetInt64() > 4000000000LL);
    }
    gateway_process again(db.api_dsn(), {{"API_PUBLIC_URL", "https://awp.example/"}});
    auto c2 = parse(again.get("/api/config").body);
    CHECK(str(c2["workspace"], "anonKey") == key);
    CHECK(str(c2["workspace"], "workspaceId") == id);
    CHECK(str(c2["workspace"], "url") == "https://awp.example");
    CHECK(str(c2["workspace"], "label") == "awp");

    // awpctl prints the same key (stdout read through a pipe).
    const std::string cmd =
        "JWT_SECRET='" + std::string(kSecret) + "' '" + AWP_BIN_DIR + "/awpctl' token --anon";
    std::string out;
    if (FILE* f = ::popen(cmd.c_str(), "r")) {
        char buf[512];
        while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
        CHECK(::pclose(f) == 0);
    }
    CHECK(out == key + "\n");
}

TEST_CASE("awpctl user add --no-tenant: a user who signs in to /auth/v1 and whom /api refuses",
          "[api][auth]") {
    awp::test::scoped_database db;
    const auto email = random_email("tenantless");
    awp::test::child add(
        {std::string(AWP_BIN_DIR) + "/awpctl", "user", "add", "--email", email, "--no-tenant"},
        {{"DATABASE_URL", db.admin_dsn()}, {"AWP_USER_PASSWORD", "correct horse 1"}});
    auto rc = add.wait(std::chrono::seconds(30));
    REQUIRE(rc.has_value());
    INFO(add.log());
    REQUIRE(*rc == 0);
    gateway_process gw(db.api_dsn());
    auto s = session_of(password_grant(gw, email, "correct horse 1"));
    CHECK(gw.get("/api/auth/session", awp::test::bearer(s.access)).status == 403);
    // /api's own login lets the user in and says there is no tenant; every route refuses it.
    http::headers jh;
    jh.add("Content-Type", "application/json");
    auto login = gw.request("POST", "/api/auth/login", jh,
                            R"({"email":")" + email + R"(","password":"correct horse 1"})");
    CHECK(login.status == 200);
    CHECK(login.body.find(R"("tenantId":null)") != std::string::npos);
}

TEST_CASE(
    "the data API takes the anon key of /api/config as anon and an /auth/v1 session as its "
    "user, and refuses the session once it signed out",
    "[api][auth]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto tenant =
        admin
            .exec("INSERT INTO tenants (name, slug) VALUES ('Rest', $1) RETURNING id::text",
                  {awp::test::random_name("rest")})
            .get<std::string>(0, 0);
    admin.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, 'Scout', 'scout')",
               {tenant});
    const auto email = random_email("rest");
    add_user(admin, email, "correct horse 1", tenant);
    gateway_process gw(db.api_dsn());
    const auto anon = str(parse(gw.get("/api/config").body)["workspace"], "anonKey");
    // What supabase-js sends without a session: the anon key as apikey and bearer. anon has no
    // privilege on awp's tables (PostgREST's 401 for the anon role).
    http::headers as_anon;
    as_anon.add("apikey", anon);
    as_anon.add("Authorization", "Bearer " + anon);
    auto refused = gw.get("/rest/v1/agents?select=slug", as_anon);
    CHECK(refused.status == 401);
    CHECK(str(parse(refused.body), "code") == "42501");

    auto s = session_of(password_grant(gw, email, "correct horse 1"));
    http::headers as_user;
    as_user.add("apikey", anon);
    as_user.add("Authorization", "Bearer " + s.access);
    auto mine = gw.get("/rest/v1/agents?select=slug", as_user);
    CHECK(mine.status == 200);
    CHECK(mine.body == R"([{"slug":"scout"}])");

    CHECK(gw.request("POST", "/auth/v1/logout?scope=local", client_headers(s.access)).status ==
          204);
    auto out = gw.get("/rest/v1/agents?select=slug", as_user);
    CHECK(out.status == 401);
    CHECK(str(parse(out.body), "code") == "PGRST303");
    CHECK(out.header.get("www-authenticate").value_or("").find("invalid_token") !=
          std::string::npos);
    // A token that is not one: PostgREST's PGRST301.
    as_user.set("Authorization", "Bearer not.a.jwt");
    CHECK(str(parse(gw.get("/rest/v1/agents", as_user).body), "code") == "PGRST301");
}

}  // namespace api_auth_v1_test
