// Request rates and the client's address (issue 37), against a real gateway process: a user, an
// address, /auth/v1 and realtime joins each meet their limit with 429 and Retry-After in the
// dialect of the route; behind a trusted proxy the client's address is the one the proxy saw, so
// one attacker neither shares a bucket with everyone nor locks every sign-in; an untrusted
// peer's X-Forwarded-For is ignored, so rotating it evades nothing.
#include <sodium.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/test_db.hpp"
#include "support/ws_client.hpp"

namespace api_rates_test {

namespace {

namespace http = awp::http;
namespace crypto = awp::core::crypto;
using awp::test::api_gateway_process;
using awp::test::kApiJwtSecret;
using awp::test::kApiServiceKey;
using awp::test::random_name;
using awp::test::ws_client;

long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string user_jwt(const std::string& tenant) {
    return crypto::jwt_sign_hs256(R"({"sub":")" + awp::core::uuid::generate_v4().to_string() +
                                      R"(","role":"authenticated","exp":)" +
                                      std::to_string(now_s() + 3600) +
                                      R"(,"app_metadata":{"tenant_id":")" + tenant + R"("}})",
                                  kApiJwtSecret);
}

http::headers with(std::initializer_list<std::pair<std::string, std::string>> fields) {
    http::headers h;
    for (const auto& [k, v] : fields) h.add(k, v);
    return h;
}

http::headers bearer(const std::string& token, const std::string& forwarded_for = {}) {
    auto h = with({{"Authorization", "Bearer " + token}, {"apikey", token}});
    if (!forwarded_for.empty()) h.add("X-Forwarded-For", forwarded_for);
    return h;
}

rapidjson::Document parse(const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.c_str(), body.size());
    INFO(body);
    REQUIRE_FALSE(d.HasParseError());
    return d;
}

/// A 429 with a Retry-After of whole seconds (at least 1).
void check_retry_after(const http::response& r) {
    CHECK(r.status == 429);
    const auto ra = std::string(r.header.get("retry-after").value_or(""));
    INFO("Retry-After: " << ra);
    REQUIRE_FALSE(ra.empty());
    CHECK(ra.find_first_not_of("0123456789") == std::string::npos);
    CHECK(std::stol(ra) >= 1);
}

/// PostgREST's body of a rate refusal.
void check_rest_429(const http::response& r, const std::string& setting) {
    check_retry_after(r);
    auto d = parse(r.body);
    CHECK(d.MemberCount() == 4);
    CHECK(d["code"] == "over_request_rate_limit");
    CHECK(d["message"] == "Too many requests");
    REQUIRE(d["details"].IsString());
    CHECK(std::string(d["details"].GetString()).find(setting) != std::string::npos);
}

std::string add_user(awp::core::pg::connection& admin, const std::string& email,
                     const std::string& password) {
    REQUIRE(sodium_init() >= 0);
    char hash[crypto_pwhash_STRBYTES];
    REQUIRE(crypto_pwhash_str(hash, password.c_str(), password.size(),
                              crypto_pwhash_OPSLIMIT_INTERACTIVE,
                              crypto_pwhash_MEMLIMIT_INTERACTIVE) == 0);
    return admin
        .exec(
            "INSERT INTO app_users (tenant_id, email, password_hash) VALUES "
            "('00000000-0000-0000-0000-000000000000', $1, $2) RETURNING id::text",
            {email, std::string(hash)})
        .get<std::string>(0, 0);
}

http::response sign_in(const api_gateway_process& gw, const std::string& email,
                       const std::string& password, const std::string& forwarded_for) {
    auto h = with({{"Content-Type", "application/json"}, {"X-Supabase-Api-Version", "2024-01-01"}});
    h.add("X-Forwarded-For", forwarded_for);
    return gw.request("POST", "/auth/v1/token?grant_type=password", h,
                      R"({"email":")" + email + R"(","password":")" + password + R"("})");
}

/// One Phoenix join (vsn 2.0.0) on an open socket: the reply's status and its reason.
std::pair<std::string, std::string> join(ws_client& c, const std::string& topic, int ref) {
    const auto r = std::to_string(ref);
    REQUIRE(
        c.send_text("[\"" + r + "\",\"" + r + "\",\"" + topic + R"(","phx_join",{"config":{}}])"));
    auto f = c.read_until([&](const ws_client::frame& m) {
        return m.payload.find("\"phx_reply\"") != std::string::npos &&
               m.payload.rfind("[\"" + r + "\",\"" + r + "\"", 0) == 0;
    });
    REQUIRE(f);
    auto d = parse(f->payload);
    const auto& payload = d[4];
    std::string reason;
    if (payload["response"].IsObject() && payload["response"].HasMember("reason")) {
        reason = payload["response"]["reason"].GetString();
    }
    return {payload["status"].GetString(), reason};
}

}  // namespace

TEST_CASE(
    "an authenticated user has a request rate on /rest/v1, and other users and the service role "
    "are not held by it",
    "[api][rest][rates]") {
    awp::test::scoped_database db;
    api_gateway_process gw(db.api_dsn(),
                           {{"API_RATE_REST_USER", "3/min:3"}, {"API_RATE_REST_ADDRESS", "off"}});
    const std::string tenant = "00000000-0000-0000-0000-000000000000";
    const auto ada = user_jwt(tenant);
    for (int i = 0; i < 3; ++i)
        CHECK(gw.get("/rest/v1/agents?select=id", bearer(ada)).status == 200);
    const auto r = gw.get("/rest/v1/agents?select=id", bearer(ada));
    check_rest_429(r, "API_RATE_REST_USER");
    CHECK(std::stol(std::string(r.header.get("retry-after").value_or("0"))) <= 20);
    // A refused request is charged nothing, and other users have their own bucket.
    CHECK(gw.get("/rest/v1/agents?select=id", bearer(user_jwt(tenant))).status == 200);
    for (int i = 0; i < 10; ++i) {
        CHECK(gw.get("/rest/v1/agents?select=id", bearer(kApiServiceKey)).status == 200);
    }
    // The browser can read why (CORS exposes Retry-After).
    auto h = bearer(ada);
    h.add("Origin", "https://ui.example");
    const auto cors = gw.get("/rest/v1/agents?select=id", h);
    CHECK(cors.status == 429);
    CHECK(cors.header.get("access-control-allow-origin").value_or("") == "*");
    CHECK(std::string(cors.header.get("access-control-expose-headers").value_or(""))
              .find("Retry-After") != std::string::npos);
}

TEST_CASE(
    "request rates per client address: behind a trusted proxy each client has its own "
    "bucket, and an untrusted peer's X-Forwarded-For is ignored",
    "[api][rest][rates]") {
    awp::test::scoped_database db;
    const auto anon = crypto::anon_key(kApiJwtSecret);
    {
        api_gateway_process gw(db.api_dsn(), {{"API_TRUSTED_PROXIES", "127.0.0.1/32"},
                                              {"API_RATE_REST_ADDRESS", "3/min:3"}});
        for (int i = 0; i < 3; ++i) {
            CHECK(gw.get("/rest/v1/agents?select=id", bearer(anon, "203.0.113.1")).status < 429);
        }
        check_rest_429(gw.get("/rest/v1/agents?select=id", bearer(anon, "203.0.113.1")),
                       "API_RATE_REST_ADDRESS");
        // A client that writes its own header cannot pose as another: the proxy appends the
        // address it saw, and that is the one counted.
        check_rest_429(
            gw.get("/rest/v1/agents?select=id", bearer(anon, "198.51.100.7, 203.0.113.1")),
            "API_RATE_REST_ADDRESS");
        // Another client behind the same proxy is not held.
        CHECK(gw.get("/rest/v1/agents?select=id", bearer(anon, "203.0.113.2")).status < 429);
        // The access log names the client, not the proxy (written once the answer is sent).
        bool logged = false;
        for (int i = 0; i < 100 && !logged; ++i) {
            logged = gw.logs().find("\"remote\":\"203.0.113.2\"") != std::string::npos;
            if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        CHECK(logged);
    }
    {
        // No trusted proxy: the header is ignored, so changing it evades nothing.
        api_gateway_process gw(db.api_dsn(), {{"API_RATE_REST_ADDRESS", "3/min:3"}});
        for (int i = 0; i < 3; ++i) {
            CHECK(gw.get("/rest/v1/agents?select=id",
                         bearer(anon, "203.0.113." + std::to_string(10 + i)))
                      .status < 429);
        }
        check_rest_429(gw.get("/rest/v1/agents?select=id", bearer(anon, "203.0.113.99")),
                       "API_RATE_REST_ADDRESS");
    }
}

TEST_CASE("/auth/v1 requests have a rate per address, refused in GoTrue's shape",
          "[api][auth][rates]") {
    awp::test::scoped_database db;
    api_gateway_process gw(db.api_dsn(), {{"API_RATE_AUTH_ADDRESS", "3/min:3"}});
    for (int i = 0; i < 3; ++i) CHECK(gw.get("/auth/v1/settings").status == 200);
    // auth-js's API version: {code, msg}.
    const auto r =
        gw.get("/auth/v1/settings",
               with({{"X-Supabase-Api-Version", "2024-01-01"}, {"Origin", "https://ui.example"}}));
    check_retry_after(r);
    auto d = parse(r.body);
    CHECK(d["code"] == "over_request_rate_limit");
    CHECK(std::string(d["msg"].GetString()).rfind("Request rate limit reached", 0) == 0);
    CHECK(r.header.get("x-supabase-api-version").value_or("") == "2024-01-01");
    CHECK(r.header.get("access-control-allow-origin").value_or("") == "*");
    // The older shape without the header.
    const auto legacy = gw.get("/auth/v1/settings");
    check_retry_after(legacy);
    auto l = parse(legacy.body);
    CHECK(l["code"].IsInt());
    CHECK(l["code"].GetInt() == 429);
    CHECK(l["error_code"] == "over_request_rate_limit");
    // Every route of /auth/v1 shares it: a sign-in is refused before any password is checked.
    const auto token = gw.request("POST", "/auth/v1/token?grant_type=password",
                                  with({{"Content-Type", "application/json"}}),
                                  R"({"email":"x@example.com","password":"whatever-1"})");
    check_retry_after(token);
}

TEST_CASE("realtime joins have a rate per user across sockets", "[api][realtime][rates]") {
    awp::test::scoped_database db;
    api_gateway_process gw(db.api_dsn(), {{"API_RATE_JOIN_USER", "2/min:2"}});
    const std::string tenant = "00000000-0000-0000-0000-000000000000";
    const auto ada = user_jwt(tenant);
    ws_client one(gw.port, "/realtime/v1/websocket?apikey=" + ada + "&vsn=2.0.0");
    REQUIRE(one.open());
    CHECK(join(one, "realtime:a", 1).first == "ok");
    CHECK(join(one, "realtime:b", 2).first == "ok");
    // A second socket of the same user does not start a fresh count.
    ws_client two(gw.port, "/realtime/v1/websocket?apikey=" + ada + "&vsn=2.0.0");
    REQUIRE(two.open());
    const auto [status, reason] = join(two, "realtime:c", 1);
    CHECK(status == "error");
    CHECK(reason.find("too many joins") != std::string::npos);
    CHECK(reason.find("API_RATE_JOIN_USER") != std::string::npos);
    // Another user joins.
    ws_client three(gw.port, "/realtime/v1/websocket?apikey=" + user_jwt(tenant) + "&vsn=2.0.0");
    REQUIRE(three.open());
    CHECK(join(three, "realtime:a", 1).first == "ok");
}

TEST_CASE(
    "sign-in limits behind a trusted proxy: one attacker does not lock out other clients, "
    "and without one, rotating X-Forwarded-For evades nothing",
    "[api][auth][rates]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto email = random_name("victim") + "@example.com";
    const std::string password = "the-right-password-1";
    add_user(admin, email, password);
    // 2 failures per account and address, 8 from one address over all accounts.
    const api_gateway_process::env_map limits = {{"API_LOGIN_MAX_FAILURES", "2"},
                                                 {"API_RATE_AUTH_ADDRESS", "off"}};
    {
        auto env = limits;
        env["API_TRUSTED_PROXIES"] = "127.0.0.1";
        api_gateway_process gw(db.api_dsn(), env);
        // The attacker sprays wrong passwords over many accounts until its address is locked.
        int refused = 0;
        for (int i = 0; i < 12; ++i) {
            const auto r =
                sign_in(gw, random_name("u") + "@example.com", "wrong-password-1", "203.0.113.66");
            if (r.status == 429) ++refused;
        }
        CHECK(refused >= 4);
        CHECK(sign_in(gw, email, password, "203.0.113.66").status == 429);
        // Every other client signs in.
        CHECK(sign_in(gw, email, password, "198.51.100.5").status == 200);
        CHECK(sign_in(gw, email, password, "198.51.100.6").status == 200);
    }
    {
        api_gateway_process gw(db.api_dsn(), limits);
        // No trusted proxy: each "new" X-Forwarded-For is the same peer, 127.0.0.1.
        int refused = 0;
        for (int i = 0; i < 12; ++i) {
            const auto r = sign_in(gw, random_name("u") + "@example.com", "wrong-password-1",
                                   "203.0.113." + std::to_string(i + 1));
            if (r.status == 429) ++refused;
        }
        CHECK(refused >= 4);
        CHECK(sign_in(gw, random_name("u") + "@example.com", "wrong-password-1", "192.0.2.77")
                  .status == 429);
    }
}

}  // namespace api_rates_test
