// The data API's caller (gateway::data_api_principal): who a /rest/v1 request runs as, decided as
// PostgREST decides it behind the platform's gateway — the bearer token, else the apikey header,
// else anon; the anon key of /api/config; the service-role key; PostgREST's 401s (PGRST301,
// PGRST303) with WWW-Authenticate; workspace sessions and signed-out sessions refused. No
// database: the gateway is built but never connects.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>

#include <rapidjson/document.h>
#include <boost/asio/io_context.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/uuid.hpp"
#include "awp/rest/error.hpp"
#include "gateway.hpp"
#include "sessions.hpp"

namespace data_api_principal_test {

namespace {

namespace crypto = awp::core::crypto;
namespace fs = std::filesystem;
using awp::api::data_principal;
using awp::http::request;

constexpr const char* kSecret = "unit-jwt-secret-that-is-long-enough-0123456789";
constexpr const char* kServiceKey = "unit-service-role-key-0123456789";

long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

/// A gateway that is built and never listens nor connects; its database's signed-out sessions
/// are handed in as if read (none).
struct fixture {
    fs::path dir =
        fs::temp_directory_path() / ("awp-principal-" + awp::core::uuid::generate_v4().to_string());
    boost::asio::io_context ioc;
    std::unique_ptr<awp::api::gateway> gw;
    explicit fixture(bool read = true) {
        fs::create_directories(dir);
        awp::api::gateway_config c;
        c.jwt_secret = kSecret;
        c.service_role_key = kServiceKey;
        c.database_url = "postgresql://nobody@127.0.0.1:1/none";
        c.config_dir = (dir / "config").string();
        c.templates_dir = (dir / "none").string();
        c.connectors_dir = (dir / "none").string();
        c.port = 0;
        gw = std::make_unique<awp::api::gateway>(ioc, c);
        if (read) gw->sessions().watch_of("")->replace({});
    }
    ~fixture() {
        gw.reset();
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

request with(std::initializer_list<std::pair<std::string, std::string>> headers) {
    request r;
    r.method = "GET";
    r.path = "/rest/v1/todos";
    for (const auto& [k, v] : headers) r.header.add(k, v);
    return r;
}

std::string user_token(const std::string& extra = {}, long long exp_in = 3600,
                       const std::string& secret = kSecret) {
    return crypto::jwt_sign_hs256(R"({"sub":"0b6c3d1e-5f8a-4b7c-9d2e-1f3a5b7c9d0e",)"
                                  R"("role":"authenticated","session_id":)"
                                  R"("6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b","exp":)" +
                                      std::to_string(now_s() + exp_in) + extra + "}",
                                  secret);
}

/// The refusal a call throws: status, code, message, WWW-Authenticate.
struct refusal {
    unsigned status = 0;
    std::string code, message, www;
};

refusal refused(fixture& f, const request& r) {
    try {
        (void)f.gw->data_api_principal(r);
    } catch (const awp::rest::api_error& e) {
        refusal out{e.status(), e.code(), e.message(), {}};
        for (const auto& [k, v] : e.headers) {
            if (k == "WWW-Authenticate") out.www = v;
        }
        return out;
    }
    return {};
}

std::string claim(const data_principal& p, const char* name) {
    rapidjson::Document d;
    d.Parse(p.claims_json.c_str());
    REQUIRE(d.IsObject());
    auto it = d.FindMember(name);
    return it != d.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

}  // namespace

TEST_CASE("data API caller: no token is anon, and the anon key of /api/config is anon",
          "[api][data-api]") {
    fixture f;
    auto none = f.gw->data_api_principal(with({}));
    CHECK(none.role == "anon");
    CHECK(none.claims_json == R"({"role":"anon"})");
    CHECK_FALSE(none.has_jwt);
    CHECK(none.sub.empty());

    // What supabase-js sends without a session: the anon key as apikey and as the bearer.
    const auto anon = crypto::anon_key(kSecret);
    for (const auto& r : {with({{"apikey", anon}}),
                          with({{"apikey", anon}, {"Authorization", "Bearer " + anon}})}) {
        auto p = f.gw->data_api_principal(r);
        CHECK(p.role == "anon");
        CHECK(claim(p, "role") == "anon");
        CHECK(claim(p, "iss") == "awp");
        CHECK_FALSE(p.has_jwt);  // PostgREST: a 42501 of the anon role is 401
    }
    // The key is the same for the same secret, every time.
    CHECK(crypto::anon_key(kSecret) == anon);
    CHECK(crypto::anon_key("another-secret-that-is-long-enough-0123456789") != anon);
}

TEST_CASE(
    "data API caller: a user's token (a tenant or none), the service-role key and a service_role "
    "token",
    "[api][data-api]") {
    fixture f;
    const auto anon = crypto::anon_key(kSecret);
    // The bearer wins over the apikey; no tenant is needed here (row-level security decides).
    auto user = f.gw->data_api_principal(
        with({{"apikey", anon}, {"Authorization", "Bearer " + user_token()}}));
    CHECK(user.role == "authenticated");
    CHECK(user.has_jwt);
    CHECK(user.sub == "0b6c3d1e-5f8a-4b7c-9d2e-1f3a5b7c9d0e");
    CHECK(user.session_id == "6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b");
    CHECK(claim(user, "sub") == user.sub);
    // "bearer" in any case, as PostgREST reads it; a second call (the cache) says the same.
    auto again = f.gw->data_api_principal(with({{"Authorization", "bEaReR " + user_token()}}));
    CHECK(again.role == "authenticated");
    CHECK(f.gw->data_api_principal(with({{"Authorization", "Bearer " + user_token()}})).sub ==
          user.sub);
    // Another scheme is no token: the apikey is used.
    auto basic =
        f.gw->data_api_principal(with({{"Authorization", "Basic dTpw"}, {"apikey", anon}}));
    CHECK(basic.role == "anon");

    for (const auto& r :
         {with({{"apikey", kServiceKey}}),
          with({{"apikey", anon}, {"Authorization", std::string("Bearer ") + kServiceKey}})}) {
        auto s = f.gw->data_api_principal(r);
        CHECK(s.role == "service_role");
        CHECK(s.claims_json == R"({"role":"service_role"})");
    }
    auto svc_jwt = f.gw->data_api_principal(
        with({{"Authorization",
               "Bearer " + crypto::jwt_sign_hs256(R"({"role":"service_role","exp":)" +
                                                      std::to_string(now_s() + 60) + "}",
                                                  kSecret)}}));
    CHECK(svc_jwt.role == "service_role");
    // A token without a role is the anon role, and its claims say so.
    auto roleless = f.gw->data_api_principal(with(
        {{"Authorization",
          "Bearer " + crypto::jwt_sign_hs256(
                          R"({"sub":"x","exp":)" + std::to_string(now_s() + 60) + "}", kSecret)}}));
    CHECK(roleless.role == "anon");
    CHECK(claim(roleless, "role") == "anon");
}

TEST_CASE("data API caller: PostgREST's refusals of a token, with WWW-Authenticate",
          "[api][data-api]") {
    fixture f;
    auto expired = refused(f, with({{"Authorization", "Bearer " + user_token({}, -120)}}));
    CHECK(expired.status == 401);
    CHECK(expired.code == "PGRST303");
    CHECK(expired.message == "JWT expired");
    CHECK(expired.www == R"(Bearer error="invalid_token", error_description="JWT expired")");

    auto forged = refused(
        f, with({{"Authorization",
                  "Bearer " + user_token({}, 3600, "another-secret-long-enough-0123456789")}}));
    CHECK(forged.status == 401);
    CHECK(forged.code == "PGRST301");
    CHECK(forged.message == "JWT cryptographic operation failed");

    auto empty = refused(f, with({{"Authorization", "Bearer "}}));
    CHECK(empty.code == "PGRST301");
    CHECK(empty.message == "Empty JWT is sent in Authorization header");
    auto parts = refused(f, with({{"Authorization", "Bearer abc.def"}}));
    CHECK(parts.code == "PGRST301");
    CHECK(parts.message == "Expected 3 parts in JWT; got 2");
    // An apikey that is not a key is refused too (it is used as the token).
    CHECK(refused(f, with({{"apikey", "nonsense"}})).message == "Expected 3 parts in JWT; got 1");

    const auto none_alg = crypto::base64url_encode(R"({"alg":"none","typ":"JWT"})") + "." +
                          crypto::base64url_encode(R"({"role":"service_role"})") + ".";
    auto alg = refused(f, with({{"Authorization", "Bearer " + none_alg}}));
    CHECK(alg.code == "PGRST301");
    CHECK(alg.message == "Wrong or unsupported encoding algorithm");

    auto future =
        refused(f, with({{"Authorization",
                          "Bearer " + user_token(R"(,"iat":)" + std::to_string(now_s() + 3000))}}));
    CHECK(future.code == "PGRST303");
    CHECK(future.message == "JWT issued at future");

    // A role the data API does not take.
    auto postgres =
        refused(f, with({{"Authorization",
                          "Bearer " + crypto::jwt_sign_hs256(R"({"role":"postgres","exp":)" +
                                                                 std::to_string(now_s() + 60) + "}",
                                                             kSecret)}}));
    CHECK(postgres.status == 401);
    CHECK(postgres.code == "PGRST303");
    CHECK(postgres.message.find("anon, authenticated or service_role") != std::string::npos);

    // A session awp issued for a registered workspace belongs to that workspace's database.
    const auto ws = awp::core::uuid::generate_v4().to_string();
    auto bound = refused(
        f, with({{"Authorization",
                  "Bearer " + crypto::jwt_sign_hs256(
                                  R"({"sub":"u","role":"authenticated","awp_workspace":")" + ws +
                                      R"(","exp":)" + std::to_string(now_s() + 60) + "}",
                                  crypto::workspace_session_key(kSecret, ws))}}));
    CHECK(bound.status == 401);
    CHECK(bound.message.find("gateway's own database") != std::string::npos);
}

TEST_CASE("data API caller: a token of a signed-out session is refused from then on",
          "[api][data-api]") {
    fixture f;
    const auto token = user_token();
    CHECK(f.gw->data_api_principal(with({{"Authorization", "Bearer " + token}})).role ==
          "authenticated");  // now in the cache
    f.gw->sessions().watch_of("")->apply(
        {{"6a1f0c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b", "0b6c3d1e-5f8a-4b7c-9d2e-1f3a5b7c9d0e", 0,
          now_s() + 3600}});
    auto out = refused(f, with({{"Authorization", "Bearer " + token}}));
    CHECK(out.status == 401);
    CHECK(out.code == "PGRST303");
    // Another session of the same user is not affected.
    auto other = crypto::jwt_sign_hs256(
        R"({"sub":"0b6c3d1e-5f8a-4b7c-9d2e-1f3a5b7c9d0e","role":"authenticated",)"
        R"("session_id":"11111111-2222-4333-8444-555555555555","exp":)" +
            std::to_string(now_s() + 3600) + "}",
        kSecret);
    CHECK(f.gw->data_api_principal(with({{"Authorization", "Bearer " + other}})).role ==
          "authenticated");
}

TEST_CASE(
    "data API caller: until its database's signed-out sessions are read, a user's token is 503, "
    "never let through, and the anon key and the service role are not sessions",
    "[api][data-api]") {
    fixture unread(false);
    auto out = refused(unread, with({{"Authorization", "Bearer " + user_token()}}));
    CHECK(out.status == 503);
    CHECK(out.code == "PGRST000");
    CHECK(unread.gw->data_api_principal(with({{"apikey", crypto::anon_key(kSecret)}})).role ==
          "anon");
    CHECK(unread.gw
              ->data_api_principal(with({{"Authorization", std::string("Bearer ") + kServiceKey}}))
              .role == "service_role");
}

}  // namespace data_api_principal_test
