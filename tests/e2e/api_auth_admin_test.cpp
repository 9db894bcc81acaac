// /auth/v1/admin of awp-api-gateway as a process against a real database, where a raw request
// attacks better than the client library (tests/data-api/admin.test.mjs drives it through
// auth-js): hostile bodies and paths, the service-role boundary on every admin path, and what
// must survive a restart — a removed or banned user's tokens stay refused by a gateway started
// afterwards, also when the user was removed by SQL rather than through the API.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/test_db.hpp"

namespace api_auth_admin_test {

namespace {

namespace http = awp::http;
namespace crypto = awp::core::crypto;
using gateway_process = awp::test::api_gateway_process;
using namespace std::chrono_literals;

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

/// What auth-js sends with the service-role key (or another token).
http::headers admin_headers(const std::string& token = awp::test::kApiServiceKey) {
    http::headers h;
    h.add("Content-Type", "application/json;charset=UTF-8");
    h.add("X-Supabase-Api-Version", "2024-01-01");
    if (!token.empty()) h.add("Authorization", "Bearer " + token);
    h.add("apikey", token);
    return h;
}

std::string code_of(const http::response& r) { return str(parse(r.body), "code"); }

std::string create_user(const gateway_process& gw, const std::string& email,
                        const std::string& password) {
    auto r = gw.request(
        "POST", "/auth/v1/admin/users", admin_headers(),
        R"({"email":")" + email + R"(","password":")" + password + R"(","email_confirm":true})");
    INFO(r.body);
    REQUIRE(r.status == 200);
    return str(parse(r.body), "id");
}

std::string sign_in(const gateway_process& gw, const std::string& email,
                    const std::string& password) {
    http::headers h;
    h.add("Content-Type", "application/json");
    auto r = gw.request("POST", "/auth/v1/token?grant_type=password", h,
                        R"({"email":")" + email + R"(","password":")" + password + R"("})");
    INFO(r.body);
    REQUIRE(r.status == 200);
    return str(parse(r.body), "access_token");
}

/// The token's standing on /api and on the data API: "200/200" alive, "401/401" refused.
std::string standing(const gateway_process& gw, const std::string& token) {
    const auto api = gw.get("/api/auth/session", awp::test::bearer(token)).status;
    const auto rest = gw.get("/rest/v1/agents?select=id", awp::test::bearer(token)).status;
    return std::to_string(api) + "/" + std::to_string(rest);
}

/// A restarted gateway loads the signed-out sessions beside its first requests: wait for the
/// refusal (or give up after 10 s and let the CHECK say what it saw).
std::string standing_after_start(const gateway_process& gw, const std::string& token) {
    std::string s;
    for (int i = 0; i < 100; ++i) {
        s = standing(gw, token);
        if (s == "401/401") break;
        std::this_thread::sleep_for(100ms);
    }
    return s;
}

}  // namespace

TEST_CASE(
    "auth/v1 admin: a user removed or banned through the API, or removed by SQL, stays signed "
    "out for a gateway started afterwards",
    "[api][auth][admin]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    auto gw = std::make_unique<gateway_process>(db.api_dsn());
    const auto removed = awp::test::random_name("removed") + "@example.com";
    const auto banned = awp::test::random_name("banned") + "@example.com";
    const auto by_sql = awp::test::random_name("bysql") + "@example.com";
    const auto removed_id = create_user(*gw, removed, "correct horse 1");
    const auto banned_id = create_user(*gw, banned, "correct horse 2");
    const auto by_sql_id = create_user(*gw, by_sql, "correct horse 3");
    const auto t_removed = sign_in(*gw, removed, "correct horse 1");
    const auto t_banned = sign_in(*gw, banned, "correct horse 2");
    const auto t_by_sql = sign_in(*gw, by_sql, "correct horse 3");
    REQUIRE(standing(*gw, t_removed) == "200/200");
    REQUIRE(standing(*gw, t_by_sql) == "200/200");

    auto del = gw->request("DELETE", "/auth/v1/admin/users/" + removed_id, admin_headers());
    CHECK(del.status == 200);
    CHECK(del.body == "{}");
    auto ban = gw->request("PUT", "/auth/v1/admin/users/" + banned_id, admin_headers(),
                           R"({"ban_duration":"87600h"})");
    CHECK(ban.status == 200);
    CHECK(standing(*gw, t_removed) == "401/401");
    CHECK(standing(*gw, t_banned) == "401/401");
    // An operator removes a user with SQL: the trigger signs its sessions out in the database
    // (sql/0032: reason user_removed; the admin API's own removal says user_deleted).
    admin.exec("DELETE FROM app_users WHERE id = $1::uuid", {by_sql_id});
    CHECK(
        admin.exec("SELECT revoked_reason FROM app_sessions WHERE user_id = $1::uuid", {by_sql_id})
            .get<std::string>(0, 0) == "user_removed");

    // Killed, not drained: nothing of the process's memory survives, only the database.
    gw->kill();
    gw = std::make_unique<gateway_process>(db.api_dsn());
    CHECK(standing_after_start(*gw, t_removed) == "401/401");
    CHECK(standing_after_start(*gw, t_banned) == "401/401");
    CHECK(standing_after_start(*gw, t_by_sql) == "401/401");
    // The banned user cannot sign in again until the ban is lifted.
    http::headers h;
    h.add("Content-Type", "application/json");
    h.add("X-Supabase-Api-Version", "2024-01-01");
    auto again = gw->request("POST", "/auth/v1/token?grant_type=password", h,
                             R"({"email":")" + banned + R"(","password":"correct horse 2"})");
    CHECK(again.status == 400);
    CHECK(code_of(again) == "user_banned");
    CHECK(gw->request("PUT", "/auth/v1/admin/users/" + banned_id, admin_headers(),
                      R"({"ban_duration":"none"})")
              .status == 200);
    CHECK(standing(*gw, sign_in(*gw, banned, "correct horse 2")) == "200/200");
}

TEST_CASE(
    "auth/v1 admin: every admin path refuses all but the service role before reading anything, "
    "hostile bodies and paths are 4xx that change nothing",
    "[api][auth][admin]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    gateway_process gw(db.api_dsn());
    const auto count = [&] {
        return admin.exec("SELECT count(*)::text FROM app_users").get<std::string>(0, 0);
    };
    const auto before = count();
    const auto user = awp::test::user_token(kDefaultTenant);
    // A user's claims with the role swapped keep the signature of the original: refused.
    const auto dot1 = user.find('.'), dot2 = user.rfind('.');
    auto claims = parse(crypto::base64url_decode(user.substr(dot1 + 1, dot2 - dot1 - 1)));
    claims["role"].SetString("service_role");
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    claims.Accept(w);
    const auto swapped =
        user.substr(0, dot1 + 1) + crypto::base64url_encode(sb.GetString()) + user.substr(dot2);
    const auto forged = crypto::jwt_sign_hs256(R"({"role":"service_role","exp":4102444800})",
                                               "another-secret-that-is-long-enough-0123456789");
    const struct {
        const char* method;
        std::string path;
    } paths[] = {{"GET", "/auth/v1/admin/users"},
                 {"POST", "/auth/v1/admin/users"},
                 {"GET", "/auth/v1/admin/users/00000000-0000-4000-8000-000000000001"},
                 {"PUT", "/auth/v1/admin/users/00000000-0000-4000-8000-000000000001"},
                 {"DELETE", "/auth/v1/admin/users/00000000-0000-4000-8000-000000000001"},
                 {"GET", "/auth/v1/admin/users/00000000-0000-4000-8000-000000000001/factors"},
                 {"POST", "/auth/v1/admin/generate_link"},
                 {"POST", "/auth/v1/invite"},
                 {"GET", "/auth/v1/admin/audit"}};
    const std::string sent = R"({"email":"intruder@example.com","password":"intruder-pass-1"})";
    for (const auto& p : paths) {
        INFO(p.method << " " << p.path);
        // A GET carries no body (its route takes none: 413 before anything else).
        const std::string body = std::string(p.method) == "GET" ? "" : sent;
        CHECK(gw.request(p.method, p.path, admin_headers(""), body).status == 401);
        auto anon = gw.request(p.method, p.path, admin_headers(user), body);
        CHECK(anon.status == 403);
        CHECK(code_of(anon) == "not_admin");
        for (const auto& bad : {swapped, forged, std::string("not.a.jwt")}) {
            auto r = gw.request(p.method, p.path, admin_headers(bad), body);
            CHECK(r.status == 403);
            CHECK(code_of(r) == "bad_jwt");
        }
    }
    CHECK(count() == before);

    // Hostile input from the service role itself: clear 4xx, nothing made.
    const auto post = [&](const std::string& b) {
        return gw.request("POST", "/auth/v1/admin/users", admin_headers(), b);
    };
    CHECK(post("{not json").status == 400);
    CHECK(code_of(post("{not json")) == "bad_json");
    CHECK(post("[1,2]").status == 400);
    CHECK(post(R"({"email":["a@b.c"]})").status == 400);
    CHECK(post(std::string(40 * 1024, ' ')).status == 413);
    CHECK(post(R"({"email":"big@example.com","password":"long-enough-1","user_metadata":{"x":")" +
               std::string(9000, 'x') + "\"}}")
              .status == 422);
    CHECK(
        post(R"({"email":"id@example.com","password":"long-enough-1","id":"../../etc"})").status ==
        400);
    CHECK(post(R"({"email":"hash@example.com","password_hash":"$2a$10$bcrypt"})").status == 400);
    CHECK(post(R"({"email":"role@example.com","password":"long-enough-1","role":"service_role"})")
              .status == 422);
    CHECK(
        post(
            R"({"email":"op@example.com","password":"long-enough-1","app_metadata":{"awp_role":"root"}})")
            .status == 400);
    CHECK(post(R"({"email":"ban@example.com","password":"long-enough-1","ban_duration":"1y"})")
              .status == 400);
    CHECK(count() == before);
    for (const std::string& target : std::vector<std::string>{
             "/auth/v1/admin/users/..%2F..%2Fapi%2Fhealth", "/auth/v1/admin/users/%00",
             "/auth/v1/admin/users?page=99999999999999999999", "/auth/v1/admin/users?per_page=0",
             "/auth/v1/admin/users?filter=" + std::string(300, 'a')}) {
        INFO(target);
        auto r = gw.get(target, admin_headers());
        CHECK(r.status >= 400);
        CHECK(r.status < 500);
    }
    // A filter's LIKE wildcards are taken literally.
    auto all = gw.get("/auth/v1/admin/users?filter=%25", admin_headers());
    CHECK(all.status == 200);
    CHECK(parse(all.body)["users"].Size() == 0);
    CHECK(all.header.get("x-total-count").value_or("") == "0");
    // The preflight of a browser's admin call is answered as for every /auth/v1 path.
    http::headers pre;
    pre.add("Origin", "https://ui.example");
    pre.add("Access-Control-Request-Method", "POST");
    CHECK(gw.request("OPTIONS", "/auth/v1/admin/users", pre).status == 204);
}

}  // namespace api_auth_admin_test
