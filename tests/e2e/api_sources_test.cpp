// awp-api-gateway's sources routes as a process against a real database and a fake OAuth 2 +
// resource server on a loopback port: PKCE start → callback, encrypted tokens the command
// runner can read, state checks, browse and validate through stored and given credentials.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <rapidjson/document.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "awp/http/server.hpp"
#include "secrets.hpp"
#include "sources.hpp"
#include "support/api_process.hpp"
#include "support/net.hpp"
#include "support/test_db.hpp"

namespace api_sources_test {

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
namespace net = boost::asio;
namespace crypto = awp::core::crypto;
using awp::test::free_port;
using awp::test::random_name;

constexpr const char* kSecret = "e2e-jwt-secret-that-is-long-enough-0123456789";
constexpr const char* kServiceKey = "e2e-service-role-key-0123456789abcdef";
constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";
constexpr const char* kClientId = "fake-client-id";
constexpr const char* kClientSecret = "fake-client-secret-5c1e7a9d";
constexpr const char* kStaticKey = "static-api-key-0d9f8e7c6b5a";
constexpr const char* kPublicUrl = "http://awp.test";

std::string bearer_of(const http::request& q) {
    auto h = q.header.get("authorization");
    if (!h || h->substr(0, 7) != "Bearer ") return {};
    return std::string(h->substr(7));
}

std::map<std::string, std::string> query_map(std::string_view q) {
    std::map<std::string, std::string> out;
    for (auto& [k, v] : http::parse_query(q)) out.emplace(k, v);
    return out;
}

std::string random_hex() { return crypto::hex_encode(crypto::random_bytes(16)); }

// ---- the fake provider: OAuth 2 authorization server + HTTP JSON resource server ----------

class fake_provider {
public:
    fake_provider() {
        http::router r;
        r.add("GET", "/oauth/authorize",
              [this](http::request q) { return authorize(std::move(q)); });
        r.add("POST", "/oauth/token", [this](http::request q) { return token(std::move(q)); });
        r.add("POST", "/api/validate", [this](http::request q) { return validate(std::move(q)); });
        r.add("POST", "/api/browse", [this](http::request q) { return browse(std::move(q)); });
        r.add("POST", "/slow/validate", [this](http::request q) { return slow(std::move(q)); });
        r.add("POST", "/slow/browse", [this](http::request q) { return slow(std::move(q)); });
        http::server_options o;
        o.port = 0;
        o.access_log = false;
        server_ = std::make_unique<http::server>(ioc_, std::move(r), o);
        server_->listen();
        net::co_spawn(ioc_, server_->run(), net::detached);
        thread_ = std::thread([this] { ioc_.run(); });
    }
    ~fake_provider() {
        server_->stop();
        thread_.join();
    }
    [[nodiscard]] std::string base() const {
        return "http://127.0.0.1:" + std::to_string(server_->port());
    }

    struct record {
        std::map<std::string, std::string> authorize;  // last authorize query
        std::vector<std::string> verifiers;            // every code_verifier received
        std::vector<std::string> access_tokens;
        std::vector<std::string> refresh_tokens;
        std::vector<std::string> codes;
        std::vector<std::string> browse_bodies;
        int token_calls = 0;
        int token_rejections = 0;
    };
    record seen() {
        std::lock_guard l(mu_);
        return rec_;
    }

private:
    struct issued_code {
        std::string challenge, redirect_uri;
        bool used = false;
    };

    static http::response json(unsigned status, std::string body) {
        return http::response::json(status, std::move(body));
    }

    net::awaitable<http::response> authorize(http::request q) {
        auto p = query_map(q.query);
        std::lock_guard l(mu_);
        rec_.authorize = p;
        if (p["response_type"] != "code" || p["client_id"] != kClientId ||
            p["code_challenge_method"] != "S256" || p["code_challenge"].empty() ||
            p["redirect_uri"].empty() || p["state"].empty()) {
            co_return json(400, R"({"error":"invalid_request"})");
        }
        const auto code = "code-" + random_hex();
        codes_[code] = issued_code{p["code_challenge"], p["redirect_uri"], false};
        rec_.codes.push_back(code);
        http::response res;
        res.status = 302;
        res.header.add("Location", p["redirect_uri"] + "?code=" + code +
                                       "&state=" + http::percent_encode(p["state"]));
        co_return res;
    }

    net::awaitable<http::response> token(http::request q) {
        auto p = query_map(q.body);
        std::lock_guard l(mu_);
        ++rec_.token_calls;
        rec_.verifiers.push_back(p["code_verifier"]);
        auto it = codes_.find(p["code"]);
        const bool ok =
            q.media_type() == "application/x-www-form-urlencoded" &&
            p["grant_type"] == "authorization_code" && p["client_id"] == kClientId &&
            p["client_secret"] == kClientSecret && it != codes_.end() && !it->second.used &&
            it->second.redirect_uri == p["redirect_uri"] && !p["code_verifier"].empty() &&
            crypto::base64url_encode(crypto::sha256(p["code_verifier"])) == it->second.challenge;
        if (!ok) {
            ++rec_.token_rejections;
            co_return json(
                400, R"({"error":"invalid_grant","error_description":"bad code or verifier"})");
        }
        it->second.used = true;
        const auto access = "fake-access-" + random_hex();
        const auto refresh = "fake-refresh-" + random_hex();
        valid_.insert(access);
        rec_.access_tokens.push_back(access);
        rec_.refresh_tokens.push_back(refresh);
        co_return json(200, R"({"access_token":")" + access + R"(","token_type":"bearer",)" +
                                R"("refresh_token":")" + refresh +
                                R"(","expires_in":3600,"scope":"read write",)" +
                                R"("account_name":"Fake Workspace"})");
    }

    bool authorised(const http::request& q) {
        const auto t = bearer_of(q);
        return t == kStaticKey || valid_.count(t) != 0;
    }

    net::awaitable<http::response> validate(http::request q) {
        std::lock_guard l(mu_);
        if (!authorised(q)) co_return json(401, R"({"error":"invalid_token"})");
        co_return json(200, R"({"ok":true,"account":{"name":"Fake Co"}})");
    }

    net::awaitable<http::response> browse(http::request q) {
        std::lock_guard l(mu_);
        if (!authorised(q)) co_return json(401, R"({"error":"invalid_token"})");
        rec_.browse_bodies.push_back(q.body);
        rapidjson::Document d;
        d.Parse(q.body.c_str(), q.body.size());
        const std::string cursor = d.IsObject() && d.HasMember("cursor") && d["cursor"].IsString()
                                       ? d["cursor"].GetString()
                                       : "";
        const std::string path = d.IsObject() && d.HasMember("path") && d["path"].IsString()
                                     ? d["path"].GetString()
                                     : "";
        if (path == "missing") co_return json(404, R"({"error":"no such folder"})");
        if (cursor == "page-2") {
            co_return json(200, R"({"items":[{"id":"doc-3","name":"Notes in )" + path +
                                    R"("}],"next_cursor":null})");
        }
        co_return json(
            200,
            R"({"items":[{"id":"doc-1","name":"Roadmap","type":"page","url":"http://fake/doc-1"},)"
            R"({"id":42,"name":"Folder A","type":"folder","has_children":true,"secret":"x"},)"
            R"({"name":"an item without an id is dropped"}],"next_cursor":"page-2"})");
    }

    net::awaitable<http::response> slow(http::request) {
        net::steady_timer t(co_await net::this_coro::executor, std::chrono::seconds(3));
        co_await t.async_wait(net::use_awaitable);
        co_return json(200, R"({"ok":true,"items":[]})");
    }

    net::io_context ioc_;
    std::unique_ptr<http::server> server_;
    std::thread thread_;
    std::mutex mu_;
    std::map<std::string, issued_code> codes_;
    std::set<std::string> valid_;
    record rec_;
};

// ---- the gateway under test -----------------------------------------------------------------

void write_file(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

/// The shipped connectors plus test ones: a slow API, an unreachable one, two broken manifests.
fs::path connectors_dir(const fs::path& root, const std::string& fake_base) {
    const auto dir = root / "connectors";
    fs::create_directories(dir);
    fs::copy(fs::path(AWP_SOURCE_DIR) / "deploy/connectors", dir, fs::copy_options::recursive);
    const std::string api_part = R"(,"api":{"base_url":"BASE","timeout_seconds":1,)"
                                 R"("validate":{"path":"/validate"},"browse":{"path":"/browse"}}})";
    auto with_base = [&](std::string s, const std::string& base) {
        s.replace(s.find("BASE"), 4, base);
        return s;
    };
    write_file(dir / "slow/connector.json",
               with_base(R"({"id":"slow","label":"Slow","auth":{"types":["api_key"]})" + api_part,
                         fake_base + "/slow"));
    write_file(dir / "down/connector.json",
               with_base(R"({"id":"down","label":"Down","auth":{"types":["api_key"]})" + api_part,
                         "http://127.0.0.1:" + std::to_string(free_port())));
    write_file(dir / "broken/connector.json", R"({"id":"broken", "label": )");
    write_file(dir / "leaky/connector.json",
               R"({"id":"leaky","label":"Leaky","auth":{"types":["oauth2"],"oauth2":{)"
               R"("authorize_url":"http://x/a","token_url":"http://x/t","client_id_env":"X",)"
               R"("client_secret":"inline-secret"}},"api":{"base_url":"http://x",)"
               R"("validate":{"path":"/v"},"browse":{"path":"/b"}}})");
    return dir;
}

/// The gateway with the http_json connector pointed at the fake provider.
struct gateway_process : awp::test::api_gateway_process {
    gateway_process(const std::string& dsn, const fake_provider& fake,
                    std::map<std::string, std::string> extra = {})
        : api_gateway_process(dsn, with_provider(std::move(extra), fake), "awp-sources-e2e-",
                              [&fake](const fs::path& scratch, env_map& env) {
                                  env["API_CONNECTORS_DIR"] =
                                      connectors_dir(scratch, fake.base()).string();
                              }) {}
    static env_map with_provider(env_map extra, const fake_provider& fake) {
        env_map env = {
            {"API_PUBLIC_URL", kPublicUrl},
            {"HTTP_JSON_URL", fake.base() + "/api"},
            {"HTTP_JSON_AUTHORIZE_URL", fake.base() + "/oauth/authorize"},
            {"HTTP_JSON_TOKEN_URL", fake.base() + "/oauth/token"},
            {"HTTP_JSON_CLIENT_ID", kClientId},
            {"HTTP_JSON_CLIENT_SECRET", kClientSecret},
            // The fake provider (and the dead "down" connector) are on loopback, which the
            // gateway reaches for tenants only where the operator allows it.
            {"API_OUTBOUND_ALLOW", "127.0.0.1"},
        };
        for (auto& [k, v] : extra) env[k] = v;
        return env;
    }
    http::response post_json(const std::string& target, const std::string& token,
                             std::string body) const {
        http::headers h;
        if (!token.empty()) h.add("Authorization", "Bearer " + token);
        h.add("Content-Type", "application/json");
        return request("POST", target, std::move(h), std::move(body));
    }
};

std::string user_token(const std::string& tenant, const std::string& sub = {}) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const auto who = sub.empty() ? awp::core::uuid::generate_v4().to_string() : sub;
    std::string claims = R"({"sub":")" + who + R"(","role":"authenticated","exp":)" +
                         std::to_string(now + 3600) + R"(,"app_metadata":{"tenant_id":")" + tenant +
                         R"("}})";
    return crypto::jwt_sign_hs256(claims, kSecret);
}

http::headers bearer(const std::string& token) {
    http::headers h;
    h.add("Authorization", "Bearer " + token);
    return h;
}

std::string error_code(const http::response& r) {
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error") || !d["error"].IsObject()) {
        return "<no error body: " + r.body + ">";
    }
    return d["error"]["code"].GetString();
}

/// One OAuth flow as a browser runs it: start (302 + state cookie), the provider's authorize
/// page (302 back with a code), then the callback request it would make.
struct flow {
    http::response start;
    std::string authorize_url;
    std::map<std::string, std::string> params;  // of the authorize URL
    std::string cookie;                         // "name=value"
    std::string callback;                       // path + query on the gateway
};

flow start_flow(const gateway_process& gw, const std::string& token,
                const std::string& extra_query = {}) {
    flow f;
    f.start = gw.get("/api/sources/oauth/http_json/start" + extra_query, bearer(token));
    f.authorize_url = std::string(f.start.header.get("location").value_or(""));
    const auto q = f.authorize_url.find('?');
    if (q != std::string::npos) f.params = query_map(f.authorize_url.substr(q + 1));
    const auto set = std::string(f.start.header.get("set-cookie").value_or(""));
    f.cookie = set.substr(0, set.find(';'));
    return f;
}

/// The user approves at the provider; returns the callback target the provider redirects to.
std::string approve(flow& f) {
    http::client_request r;
    r.url = f.authorize_url;
    auto res = http::fetch_sync(std::move(r));
    auto loc = std::string(res.header.get("location").value_or(""));
    if (res.status != 302 || loc.rfind(kPublicUrl, 0) != 0) return {};
    f.callback = loc.substr(std::string(kPublicUrl).size());
    return f.callback;
}

http::response call_back(const gateway_process& gw, const std::string& token,
                         const std::string& target, const std::string& cookie) {
    auto h = bearer(token);
    if (!cookie.empty()) h.add("Cookie", cookie);
    return gw.get(target, h);
}

long long count(awp::core::pg::connection& admin, const std::string& sql) {
    return admin.exec(sql).get<long long>(0, 0);
}

long long stored_secrets(awp::core::pg::connection& admin) {
    return count(admin, "SELECT count(*) FROM secrets WHERE key LIKE '%\\_SOURCE\\_%'");
}

long long stored_connections(awp::core::pg::connection& admin) {
    return count(admin, "SELECT count(*) FROM source_connections");
}

std::string upper8(const std::string& id) {
    std::string s = id.substr(0, 8);
    for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return s;
}

}  // namespace

TEST_CASE(
    "sources: OAuth with PKCE stores an encrypted token the runner reads, browse and "
    "validate use it, a replay is refused, a reconnect updates the row",
    "[api][sources]") {
    awp::test::scoped_database db;
    fake_provider fake;
    gateway_process gw(db.api_dsn(), fake);
    auto admin = db.admin();
    const auto sub = awp::core::uuid::generate_v4().to_string();
    const auto token = user_token(kDefaultTenant, sub);

    // start: 302 to the provider with PKCE S256 and a sealed, HttpOnly, Lax state cookie.
    auto f = start_flow(gw, token);
    REQUIRE(f.start.status == 302);
    CHECK(f.authorize_url.rfind(fake.base() + "/oauth/authorize?", 0) == 0);
    CHECK(f.params["response_type"] == "code");
    CHECK(f.params["client_id"] == kClientId);
    CHECK(f.params["redirect_uri"] ==
          std::string(kPublicUrl) + "/api/sources/oauth/http_json/callback");
    CHECK(f.params["scope"] == "read write");
    CHECK(f.params["code_challenge_method"] == "S256");
    CHECK(f.params["code_challenge"].size() == 43);
    CHECK(f.params["state"].size() >= 43);
    const auto set_cookie = std::string(f.start.header.get("set-cookie").value_or(""));
    CHECK(set_cookie.rfind("awp_oauth_http_json=", 0) == 0);
    CHECK(set_cookie.find("HttpOnly") != std::string::npos);
    CHECK(set_cookie.find("SameSite=Lax") != std::string::npos);
    CHECK(set_cookie.find("Max-Age=600") != std::string::npos);
    CHECK(set_cookie.find("Path=/api/sources/oauth/http_json") != std::string::npos);
    // Neither the state nor the verifier is readable in the cookie.
    CHECK(set_cookie.find(f.params["state"]) == std::string::npos);
    CHECK(f.authorize_url.find(kClientSecret) == std::string::npos);

    REQUIRE(!approve(f).empty());
    auto cb = call_back(gw, token, f.callback, f.cookie);
    REQUIRE(cb.status == 302);
    const auto done = std::string(cb.header.get("location").value_or(""));
    CHECK(done.rfind("/settings/sources?connected=http_json&connection_id=", 0) == 0);
    const auto cleared = std::string(cb.header.get("set-cookie").value_or(""));
    CHECK(cleared.rfind("awp_oauth_http_json=;", 0) == 0);
    CHECK(cleared.find("Max-Age=0") != std::string::npos);

    auto seen = fake.seen();
    REQUIRE(seen.access_tokens.size() == 1);
    const auto access = seen.access_tokens[0];
    const auto refresh = seen.refresh_tokens[0];
    REQUIRE(seen.verifiers.size() == 1);
    CHECK(crypto::base64url_encode(crypto::sha256(seen.verifiers[0])) ==
          f.params["code_challenge"]);
    for (const auto& secret : {access, refresh, seen.verifiers[0]}) {
        CHECK(done.find(secret) == std::string::npos);
        CHECK(cb.body.find(secret) == std::string::npos);
    }

    // The rows: a connection (not writable) and enc:v1 gateway secrets named as the runner
    // looks them up, decrypting to the provider's tokens.
    auto conn = admin.exec(
        "SELECT id::text, provider, writable, status, account_label, secret_id::text, "
        "config->>'connector', config->>'url', config->>'gateway_id' FROM source_connections");
    REQUIRE(conn.size() == 1);
    const auto conn_id = conn.get<std::string>(0, 0);
    CHECK(done.find(conn_id) != std::string::npos);
    CHECK(conn.get<std::string>(0, 1) == "http_json");
    CHECK_FALSE(conn.get<bool>(0, 2));
    CHECK(conn.get<std::string>(0, 3) == "active");
    CHECK(conn.get<std::string>(0, 4) == "Fake Workspace");
    CHECK(conn.get<std::string>(0, 6) == "http_json");
    CHECK(conn.get<std::string>(0, 7) == fake.base() + "/api");
    // The original UI's sync fields (sql/0029): credentials just confirmed, a first sync due now.
    auto recent = [&](const char* column) {
        return admin
            .exec(std::string("SELECT ") + column +
                  " BETWEEN now() - interval '1 minute' AND now() FROM source_connections")
            .get<bool>(0, 0);
    };
    CHECK(recent("last_verified_at"));
    CHECK(recent("next_sync_at"));
    CHECK(admin.exec("SELECT sync_interval_hours FROM source_connections").get<int>(0, 0) == 6);
    const auto gateway_id = conn.get<std::string>(0, 8);
    CHECK(
        gateway_id ==
        admin.exec("SELECT id::text FROM gateways WHERE slug = 'default'").get<std::string>(0, 0));
    auto secrets = admin.exec(
        "SELECT id::text, key, encrypted_value, category, agent_id IS NULL, gateway_id::text "
        "FROM secrets ORDER BY key");
    REQUIRE(secrets.size() == 2);
    const auto key_name = "HTTP_JSON_SOURCE_" + upper8(conn_id);
    CHECK(secrets.get<std::string>(0, 1) == key_name);
    CHECK(secrets.get<std::string>(1, 1) == key_name + "__REFRESH_TOKEN");
    CHECK(secrets.get<std::string>(0, 0) == conn.get<std::string>(0, 5));
    std::vector<awp::runner::secret_row> rows;
    for (int i = 0; i < 2; ++i) {
        const auto value = secrets.get<std::string>(i, 2);
        CHECK(value.rfind("enc:v1:", 0) == 0);
        CHECK(value.find(access) == std::string::npos);
        CHECK(secrets.get<std::string>(i, 3) == "integration");
        CHECK(secrets.get<bool>(i, 4));
        CHECK(secrets.get<std::string>(i, 5) == gateway_id);
        rows.push_back(
            {secrets.get<std::string>(i, 0), std::nullopt, secrets.get<std::string>(i, 1), value});
    }
    CHECK(crypto::decrypt_secret(secrets.get<std::string>(0, 2), kServiceKey) == access);
    CHECK(crypto::decrypt_secret(secrets.get<std::string>(1, 2), kServiceKey) == refresh);
    // What the command runner does with them: sync to gateway.env, then source_write's lookup.
    const auto runner_dir = gw.dir / "runner-secrets";
    auto synced = awp::runner::write_secret_files(runner_dir.string(),
                                                  awp::runner::secrets_key("", kServiceKey), rows);
    CHECK(synced.failed_ids.empty());
    auto creds = awp::runner::source_credentials(
        awp::runner::read_env_file((runner_dir / "gateway.env").string()), "http_json", conn_id);
    CHECK(creds["api_key"] == access);
    CHECK(creds["refresh_token"] == refresh);

    // Replaying the same callback (cookie, state and code) is refused; nothing more is stored.
    auto replay = call_back(gw, token, f.callback, f.cookie);
    CHECK(replay.status == 400);
    CHECK(error_code(replay) == "oauth_state_replayed");
    CHECK(stored_connections(admin) == 1);
    CHECK(fake.seen().token_calls == 1);

    // browse through the stored connection: normalised items and a cursor, GET and POST.
    auto b1 =
        gw.get("/api/sources/browse?connection_id=" + conn_id + "&path=%2Fteam", bearer(token));
    REQUIRE(b1.status == 200);
    rapidjson::Document d1;
    d1.Parse(b1.body.c_str());
    REQUIRE(d1.IsObject());
    REQUIRE(d1["items"].IsArray());
    REQUIRE(d1["items"].Size() == 2);
    CHECK(std::string(d1["items"][0]["id"].GetString()) == "doc-1");
    CHECK(std::string(d1["items"][0]["name"].GetString()) == "Roadmap");
    CHECK(std::string(d1["items"][0]["type"].GetString()) == "page");
    CHECK(std::string(d1["items"][0]["url"].GetString()) == "http://fake/doc-1");
    CHECK(std::string(d1["items"][1]["id"].GetString()) == "42");
    CHECK(std::string(d1["items"][1]["type"].GetString()) == "folder");
    CHECK(d1["items"][1]["has_children"].GetBool());
    CHECK_FALSE(d1["items"][1].HasMember("secret"));  // only mapped fields come through
    CHECK(std::string(d1["next_cursor"].GetString()) == "page-2");
    CHECK(fake.seen().browse_bodies.back() == R"({"path":"/team"})");
    auto b2 =
        gw.post_json("/api/sources/browse", token,
                     R"({"connection_id":")" + conn_id + R"(","path":"/team","cursor":"page-2"})");
    REQUIRE(b2.status == 200);
    CHECK(b2.body == R"({"items":[{"id":"doc-3","name":"Notes in /team","type":"item"}],)"
                     R"("next_cursor":null})");
    auto b404 = gw.post_json("/api/sources/browse", token,
                             R"({"connection_id":")" + conn_id + R"(","path":"missing"})");
    CHECK(b404.status == 404);
    CHECK(error_code(b404) == "provider_not_found");

    // validate through the stored connection: the credentials were confirmed just now.
    admin.exec(
        "UPDATE source_connections SET last_verified_at = '2020-01-01', next_sync_at = "
        "'2020-01-01'");
    auto v =
        gw.post_json("/api/sources/validate", token, R"({"connection_id":")" + conn_id + R"("})");
    CHECK(v.status == 200);
    CHECK(v.body == R"({"ok":true,"provider":"http_json","account":"Fake Co"})");
    CHECK(recent("last_verified_at"));
    CHECK_FALSE(recent("next_sync_at"));  // validation syncs nothing

    // Reconnect (start with connection_id): the same row gets the new token; writable kept.
    admin.exec("UPDATE source_connections SET writable = true, last_verified_at = '2020-01-01'");
    auto again = start_flow(gw, token, "?connection_id=" + conn_id);
    REQUIRE(again.start.status == 302);
    REQUIRE(!approve(again).empty());
    auto cb2 = call_back(gw, token, again.callback, again.cookie);
    REQUIRE(cb2.status == 302);
    CHECK(stored_connections(admin) == 1);
    CHECK(stored_secrets(admin) == 2);
    const auto access2 = fake.seen().access_tokens.back();
    CHECK(access2 != access);
    auto row2 = admin.exec(
        "SELECT s.encrypted_value, c.writable FROM source_connections c JOIN secrets s ON s.id = "
        "c.secret_id");
    REQUIRE(row2.size() == 1);
    CHECK(crypto::decrypt_secret(row2.get<std::string>(0, 0), kServiceKey) == access2);
    CHECK(row2.get<bool>(0, 1));
    CHECK(recent("last_verified_at"));
    CHECK(recent("next_sync_at"));  // new credentials: a sync is due now

    // No token, code, verifier or client secret in the daemon's log.
    const auto logs = gw.logs();
    CHECK(logs.find("source connected") != std::string::npos);
    seen = fake.seen();
    std::vector<std::string> secrets_seen = {kClientSecret, access2};
    for (const auto& s : seen.access_tokens) secrets_seen.push_back(s);
    for (const auto& s : seen.refresh_tokens) secrets_seen.push_back(s);
    for (const auto& s : seen.verifiers) secrets_seen.push_back(s);
    for (const auto& s : seen.codes) secrets_seen.push_back(s);
    for (const auto& s : secrets_seen) {
        INFO(s);
        CHECK(logs.find(s) == std::string::npos);
    }
}

TEST_CASE(
    "sources: OAuth state is checked (missing cookie, mismatch, another session, wrong "
    "verifier, provider refusal, expiry) and nothing is stored",
    "[api][sources]") {
    awp::test::scoped_database db;
    fake_provider fake;
    gateway_process gw(db.api_dsn(), fake);
    auto admin = db.admin();
    const auto token = user_token(kDefaultTenant);

    // No session: 401 before anything else.
    CHECK(gw.get("/api/sources/oauth/http_json/start").status == 401);
    CHECK(gw.get("/api/sources/oauth/http_json/callback?code=x&state=y").status == 401);
    // Unknown connector, and one whose OAuth is not configured here (OUTLINE_URL unset).
    auto unknown = gw.get("/api/sources/oauth/nope/start", bearer(token));
    CHECK(unknown.status == 404);
    CHECK(error_code(unknown) == "unknown_provider");
    auto outline = gw.get("/api/sources/oauth/outline/start", bearer(token));
    CHECK(outline.status == 503);
    CHECK(error_code(outline) == "oauth_not_configured");
    CHECK(outline.body.find("OUTLINE_URL") != std::string::npos);

    auto a = start_flow(gw, token);
    auto b = start_flow(gw, token);
    REQUIRE(a.start.status == 302);
    REQUIRE(b.start.status == 302);
    CHECK(a.params["state"] != b.params["state"]);
    CHECK(a.params["code_challenge"] != b.params["code_challenge"]);
    REQUIRE(!approve(a).empty());

    // Missing cookie.
    auto no_cookie = call_back(gw, token, a.callback, "");
    CHECK(no_cookie.status == 400);
    CHECK(error_code(no_cookie) == "oauth_state_missing");
    // Another flow's cookie: the state does not match.
    auto mismatch = call_back(gw, token, a.callback, b.cookie);
    CHECK(mismatch.status == 400);
    CHECK(error_code(mismatch) == "oauth_state_mismatch");
    // A forged cookie.
    auto forged = call_back(gw, token, a.callback, "awp_oauth_http_json=AAAA.BBBB.CCCC");
    CHECK(forged.status == 400);
    CHECK(error_code(forged) == "oauth_state_invalid");
    // The right cookie and state, but another user's session.
    auto other_user = call_back(gw, user_token(kDefaultTenant), a.callback, a.cookie);
    CHECK(other_user.status == 400);
    CHECK(error_code(other_user) == "oauth_state_mismatch");
    CHECK(fake.seen().token_calls == 0);

    // Code injection: flow a's code with flow b's state and cookie → b's verifier does not
    // match a's challenge; the provider refuses and nothing is stored.
    const auto code_a = query_map(a.callback.substr(a.callback.find('?') + 1))["code"];
    auto injected = call_back(gw, token,
                              "/api/sources/oauth/http_json/callback?code=" + code_a +
                                  "&state=" + http::percent_encode(b.params["state"]),
                              b.cookie);
    CHECK(injected.status == 422);
    CHECK(error_code(injected) == "oauth_grant_rejected");
    CHECK(injected.header.get("set-cookie").value_or("").find("Max-Age=0") != std::string::npos);
    CHECK(fake.seen().token_rejections == 1);

    // The provider's refusal: back to the UI with the error, nothing stored.
    auto c = start_flow(gw, token);
    auto denied = call_back(gw, token,
                            "/api/sources/oauth/http_json/callback?error=access_denied&"
                            "error_description=The+user+said+no&state=" +
                                http::percent_encode(c.params["state"]),
                            c.cookie);
    CHECK(denied.status == 302);
    CHECK(std::string(denied.header.get("location").value_or("")) ==
          "/settings/sources?error=access_denied&provider=http_json");
    CHECK(denied.header.get("set-cookie").value_or("").find("Max-Age=0") != std::string::npos);
    // Its state is spent: a code arriving later with it is refused.
    auto late = call_back(gw, token,
                          "/api/sources/oauth/http_json/callback?code=x&state=" +
                              http::percent_encode(c.params["state"]),
                          c.cookie);
    CHECK(late.status == 400);
    CHECK(error_code(late) == "oauth_state_replayed");

    CHECK(stored_secrets(admin) == 0);
    CHECK(stored_connections(admin) == 0);

    // Expiry: a gateway whose flows last one second.
    gateway_process quick(db.api_dsn(), fake, {{"API_OAUTH_STATE_TTL", "1"}});
    auto e = start_flow(quick, token);
    REQUIRE(e.start.status == 302);
    REQUIRE(!approve(e).empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(2200));
    auto expired = call_back(quick, token, e.callback, e.cookie);
    CHECK(expired.status == 400);
    CHECK(error_code(expired) == "oauth_state_expired");
    CHECK(stored_secrets(admin) == 0);
    CHECK(stored_connections(admin) == 0);
    CHECK(fake.seen().token_calls == 1);  // only the injected code reached the provider
}

TEST_CASE(
    "sources: validate and browse: field errors, rejected credentials, upstream down and "
    "slow, tenant isolation, bad manifests skipped",
    "[api][sources]") {
    awp::test::scoped_database db;
    fake_provider fake;
    gateway_process gw(db.api_dsn(), fake);
    auto admin = db.admin();
    const auto token = user_token(kDefaultTenant);

    // Bad manifests are reported at start-up and skipped; the others work.
    const auto logs = gw.logs();
    CHECK(logs.find("bad connector manifest skipped") != std::string::npos);
    CHECK(logs.find(R"("connector":"broken")") != std::string::npos);
    CHECK(logs.find(R"("connector":"leaky")") != std::string::npos);
    CHECK(logs.find("inline-secret") == std::string::npos);
    CHECK(logs.find(kClientSecret) == std::string::npos);

    auto ok = gw.post_json("/api/sources/validate", token,
                           R"({"provider":"http_json","credentials":{"api_key":")" +
                               std::string(kStaticKey) + R"("}})");
    CHECK(ok.status == 200);
    CHECK(ok.body == R"({"ok":true,"provider":"http_json","account":"Fake Co"})");
    auto rejected =
        gw.post_json("/api/sources/validate", token,
                     R"({"provider":"http_json","credentials":{"api_key":"wrong-key"}})");
    CHECK(rejected.status == 422);
    CHECK(error_code(rejected) == "credentials_rejected");

    auto unknown = gw.post_json("/api/sources/validate", token,
                                R"({"provider":"broken","credentials":{"api_key":"k"}})");
    CHECK(unknown.status == 404);
    CHECK(error_code(unknown) == "unknown_provider");
    struct bad_case {
        std::string body, field;
    };
    for (const auto& [body, field] : std::vector<bad_case>{
             {R"({"provider":"http_json"})", "credentials"},
             {R"({"provider":7,"credentials":{"api_key":"k"}})", "provider"},
             {R"({"credentials":{"api_key":"k"}})", "provider"},
             {R"({"provider":"http_json","credentials":"k"})", "credentials"},
             {R"({"provider":"http_json","credentials":{}})", "credentials.api_key"},
             {R"({"provider":"http_json","credentials":{"api_key":5}})", "credentials.api_key"},
             {R"({"connection_id":"nope"})", "connection_id"},
         }) {
        auto r = gw.post_json("/api/sources/validate", token, body);
        INFO(body << " → " << r.body);
        CHECK(r.status == 422);
        CHECK(error_code(r) == "invalid_field");
        CHECK(r.body.find(field) != std::string::npos);
    }
    CHECK(gw.post_json("/api/sources/validate", token, "not json").status == 400);
    CHECK(gw.request("POST", "/api/sources/validate", bearer(token), "{}").status == 415);

    auto down = gw.post_json("/api/sources/validate", token,
                             R"({"provider":"down","credentials":{"api_key":"k"}})");
    CHECK(down.status == 502);
    CHECK(error_code(down) == "provider_unreachable");
    auto slow = gw.post_json("/api/sources/validate", token,
                             R"({"provider":"slow","credentials":{"api_key":"k"}})");
    CHECK(slow.status == 504);
    CHECK(error_code(slow) == "provider_timeout");
    auto outline = gw.post_json("/api/sources/validate", token,
                                R"({"provider":"outline","credentials":{"api_key":"k"}})");
    CHECK(outline.status == 503);
    CHECK(error_code(outline) == "connector_not_configured");

    // No session: 401 on every sources route.
    CHECK(gw.post_json("/api/sources/validate", "", R"({"provider":"http_json"})").status == 401);
    CHECK(gw.get("/api/sources/browse?connection_id=" + awp::core::uuid::generate_v4().to_string())
              .status == 401);

    // An API-key connection of another tenant, stored as the UI stores it (enc:v1 secret).
    const auto tenant_b =
        admin
            .exec("INSERT INTO tenants (name, slug) VALUES ('b', $1) RETURNING id::text",
                  {random_name("t")})
            .get<std::string>(0, 0);
    const auto gw_b = admin
                          .exec(
                              "INSERT INTO gateways (tenant_id, slug, status) VALUES ($1, 'gw-b', "
                              "'ready') RETURNING id::text",
                              {tenant_b})
                          .get<std::string>(0, 0);
    const auto conn_b = awp::core::uuid::generate_v4().to_string();
    const auto secret_b =
        admin
            .exec(
                "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value, category) "
                "VALUES ($1, $2, $3, $4, 'integration') RETURNING id::text",
                {tenant_b, gw_b, "HTTP_JSON_SOURCE_" + upper8(conn_b),
                 crypto::encrypt_secret(kStaticKey, kServiceKey)})
            .get<std::string>(0, 0);
    admin.exec(
        "INSERT INTO source_connections (id, tenant_id, provider, secret_id, config) VALUES ($1, "
        "$2, 'http_json', $3, '{}')",
        {conn_b, tenant_b, secret_b});
    const auto token_b = user_token(tenant_b);
    auto mine = gw.get("/api/sources/browse?connection_id=" + conn_b, bearer(token_b));
    CHECK(mine.status == 200);
    CHECK(mine.body.find(R"("id":"doc-1")") != std::string::npos);
    auto theirs = gw.get("/api/sources/browse?connection_id=" + conn_b, bearer(token));
    CHECK(theirs.status == 404);
    CHECK(error_code(theirs) == "not_found");
    auto theirs_v =
        gw.post_json("/api/sources/validate", token, R"({"connection_id":")" + conn_b + R"("})");
    CHECK(theirs_v.status == 404);
    auto missing = gw.get("/api/sources/browse", bearer(token));
    CHECK(missing.status == 422);
    CHECK(missing.body.find("connection_id") != std::string::npos);

    // Stored credentials the provider refuses, and a connection without credentials.
    admin.exec("UPDATE secrets SET encrypted_value = $1 WHERE id = $2",
               {crypto::encrypt_secret("revoked-key", kServiceKey), secret_b});
    auto refused = gw.get("/api/sources/browse?connection_id=" + conn_b, bearer(token_b));
    CHECK(refused.status == 422);
    CHECK(error_code(refused) == "credentials_rejected");
    // Undecryptable (another key): a clear 409, no plaintext leaks.
    admin.exec("UPDATE secrets SET encrypted_value = $1 WHERE id = $2",
               {crypto::encrypt_secret("x-key", "some-other-service-role-key-123456"), secret_b});
    auto unreadable = gw.get("/api/sources/browse?connection_id=" + conn_b, bearer(token_b));
    CHECK(unreadable.status == 409);
    CHECK(error_code(unreadable) == "credentials_unreadable");
    admin.exec("UPDATE source_connections SET secret_id = NULL");
    admin.exec("DELETE FROM secrets");
    auto none = gw.get("/api/sources/browse?connection_id=" + conn_b, bearer(token_b));
    CHECK(none.status == 409);
    CHECK(error_code(none) == "no_credentials");

    const auto all_logs = gw.logs();
    CHECK(all_logs.find(kStaticKey) == std::string::npos);
    CHECK(all_logs.find("wrong-key") == std::string::npos);
    CHECK(all_logs.find("revoked-key") == std::string::npos);
}

}  // namespace api_sources_test
