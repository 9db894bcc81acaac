// Outbound requests a tenant can steer, attacked through the real gateway: an agent's
// config.browser.cdpUrl pointing at the Postgres port, the cloud metadata address, another
// host; source connectors and an OAuth token endpoint on loopback, link-local or a database
// port, and a provider that answers with a redirect. Each is refused before a connection is
// made (403 outbound_refused naming the address class), unless the operator allows it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <rapidjson/document.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "awp/http/server.hpp"
#include "support/api_process.hpp"
#include "support/net.hpp"
#include "support/pooler.hpp"
#include "support/test_db.hpp"

namespace api_outbound_test {

namespace {

namespace fs = std::filesystem;
namespace http = awp::http;
namespace net = boost::asio;
using awp::test::free_port;
using awp::test::random_name;
using namespace std::chrono_literals;

using gateway_process = awp::test::api_gateway_process;

using awp::test::bearer;
using awp::test::user_token;

struct error_body {
    std::string code;
    std::string message;
};

error_body error_of(const http::response& r) {
    rapidjson::Document d;
    d.Parse(r.body.c_str(), r.body.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error") || !d["error"].IsObject()) {
        return {"<no error body>", r.body.substr(0, 200)};
    }
    return {d["error"]["code"].GetString(), d["error"]["message"].GetString()};
}

std::string seed_tenant(awp::core::pg::connection& admin) {
    const auto slug = random_name("t");
    return std::string(
        admin.exec("INSERT INTO tenants (name, slug) VALUES ($1, $1) RETURNING id::text", {slug})
            .get<std::string>(0, 0));
}

void seed_agent(awp::core::pg::connection& admin, const std::string& tenant,
                const std::string& slug, const std::string& cdp_url,
                const std::string& gateway_id = {}) {
    const auto config = R"({"browser":{"cdpUrl":")" + cdp_url + R"("}})";
    if (gateway_id.empty()) {
        admin.exec(
            "INSERT INTO agents (tenant_id, name, slug, config) VALUES ($1, $2, $2, $3::jsonb)",
            {tenant, slug, config});
    } else {
        admin.exec(
            "INSERT INTO agents (tenant_id, name, slug, config, gateway_id) "
            "VALUES ($1, $2, $2, $3::jsonb, $4)",
            {tenant, slug, config, gateway_id});
    }
}

/// The port of the test database (the DSN's), the one a DevTools URL must never reach.
std::uint16_t database_port(const std::string& dsn) {
    const auto ports = awp::core::pg::dsn_ports(dsn);
    REQUIRE(!ports.empty());
    return ports.front();
}

/// A loopback port that completes TCP handshakes (the kernel's backlog) but never answers, and
/// counts who came.
struct silent_listener {
    silent_listener() {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd, 16) == 0);
        socklen_t len = sizeof a;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        port = ntohs(a.sin_port);
    }
    ~silent_listener() { ::close(fd); }
    int accepted() {
        int n = 0;
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        for (int c; (c = ::accept(fd, nullptr, nullptr)) >= 0; ++n) ::close(c);
        return n;
    }
    [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
    int fd = -1;
    unsigned short port = 0;
};

void check_refused(const http::response& r, const std::string& names) {
    INFO(r.status << " " << r.body);
    CHECK(r.status == 403);
    const auto e = error_of(r);
    CHECK(e.code == "outbound_refused");
    CHECK(e.message.find(names) != std::string::npos);
}

}  // namespace

TEST_CASE("browser: a cdpUrl off the agent's own gateway host is refused before any connection",
          "[api][browser][outbound]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t1 = seed_tenant(admin);
    // The port of the database URL the gateway is given (PgBouncer's under label pgbouncer).
    const auto pg_port =
        std::to_string(database_port(awp::test::as_given_to_daemons(db.api_dsn())));
    silent_listener own_browser;  // loopback: the agent's own host
    seed_agent(admin, t1, "to-postgres", "http://127.0.0.1:" + pg_port);
    seed_agent(admin, t1, "to-postgres-by-name", "http://localhost:" + pg_port);
    seed_agent(admin, t1, "to-metadata", "http://169.254.169.254:80");
    seed_agent(admin, t1, "to-metadata-mapped", "http://[::ffff:169.254.169.254]:80");
    seed_agent(admin, t1, "to-metadata-v6", "http://[fe80::a9fe:a9fe]:80");
    seed_agent(admin, t1, "to-other-host", "http://10.255.0.1:9222");
    seed_agent(admin, t1, "to-public-host", "http://8.8.8.8:9222");
    seed_agent(admin, t1, "to-any", "http://0.0.0.0:9222");
    seed_agent(admin, t1, "to-own", own_browser.url());
    // An agent on this host's gateway, whose runner registered 10.77.0.5 as the host's address.
    const auto gw_slug = random_name("gw");
    const auto gw_id =
        std::string(admin
                        .exec("INSERT INTO gateways (tenant_id, slug, label, status) "
                              "VALUES ($1, $2, $2, 'ready') RETURNING id::text",
                              {t1, gw_slug})
                        .get<std::string>(0, 0));
    admin.exec(
        "INSERT INTO daemon_heartbeats (tenant_id, gateway_id, daemon, meta) VALUES ($1, $2, "
        "'command-runner', jsonb_build_object('api_url', 'http://10.77.0.5:3000'))",
        {t1, gw_id});
    seed_agent(admin, t1, "to-registered", "http://10.77.0.5:9222", gw_id);
    seed_agent(admin, t1, "to-unregistered", "http://10.77.0.6:9222", gw_id);

    gateway_process gw(db.api_dsn(), {{"GATEWAY_ID", gw_slug},
                                      {"API_BROWSER_CDP_URL", own_browser.url()},
                                      {"API_BROWSER_TIMEOUT", "1"}});
    const auto tok = bearer(user_token(t1));
    for (const std::string route : {"state", "screenshot"}) {
        INFO(route);
        const auto path = [&](const std::string& slug) {
            return "/api/agents/" + slug + "/browser/" + route;
        };
        check_refused(gw.get(path("to-postgres"), tok), "database port");
        check_refused(gw.get(path("to-postgres-by-name"), tok), "database port");
        check_refused(gw.get(path("to-metadata"), tok), "link-local");
        check_refused(gw.get(path("to-metadata-mapped"), tok), "link-local");
        check_refused(gw.get(path("to-metadata-v6"), tok), "link-local");
        check_refused(gw.get(path("to-other-host"), tok), "own gateway host");
        check_refused(gw.get(path("to-public-host"), tok), "own gateway host");
        check_refused(gw.get(path("to-unregistered"), tok), "own gateway host");
        check_refused(gw.get(path("to-any"), tok), "unspecified");
        CHECK(own_browser.accepted() == 0);  // nothing refused went anywhere
        // Loopback on a port that is no database: tried (the listener never answers: 504).
        auto own = gw.get(path("to-own"), tok);
        CHECK(own.status == 504);
        CHECK(own_browser.accepted() == 1);
        // The address the runner registered for the agent's gateway host is its own host.
        auto registered = gw.get(path("to-registered"), tok);
        CHECK(registered.status != 403);
        CHECK(error_of(registered).code != "outbound_refused");
    }
    CHECK(gw.get("/api/health").status == 200);

    // The operator may allow more (and only that).
    gateway_process wider(db.api_dsn(), {{"GATEWAY_ID", gw_slug},
                                         {"API_BROWSER_CDP_URL", own_browser.url()},
                                         {"API_BROWSER_TIMEOUT", "1"},
                                         {"API_OUTBOUND_ALLOW", "10.255.0.0/16, 169.254.0.0/16"}});
    auto allowed = wider.get("/api/agents/to-other-host/browser/state", tok);
    CHECK(allowed.status != 403);
    check_refused(wider.get("/api/agents/to-metadata/browser/state", tok), "link-local");
    check_refused(wider.get("/api/agents/to-public-host/browser/state", tok), "own gateway host");
}

namespace {

/// A provider that counts the calls it gets: /ok/validate answers 200, /redirect/validate
/// a 302 to `target`.
class counting_provider {
public:
    explicit counting_provider(std::string redirect_to) : redirect_to_(std::move(redirect_to)) {
        http::router r;
        r.add("POST", "/ok/validate", [this](http::request) -> net::awaitable<http::response> {
            ++calls;
            co_return http::response::json(200, R"({"ok":true})");
        });
        r.add("POST", "/redirect/validate",
              [this](http::request) -> net::awaitable<http::response> {
                  ++calls;
                  http::response res;
                  res.status = 302;
                  res.header.add("Location", redirect_to_);
                  co_return res;
              });
        http::server_options o;
        o.access_log = false;
        server_ = std::make_unique<http::server>(ioc_, std::move(r), o);
        server_->listen();
        net::co_spawn(ioc_, server_->run(), net::detached);
        thread_ = std::thread([this] { ioc_.run(); });
    }
    ~counting_provider() {
        server_->stop();
        thread_.join();
    }
    [[nodiscard]] std::string base() const {
        return "http://127.0.0.1:" + std::to_string(server_->port());
    }
    [[nodiscard]] unsigned short port() const { return server_->port(); }
    std::atomic<int> calls{0};

private:
    std::string redirect_to_;
    net::io_context ioc_;
    std::unique_ptr<http::server> server_;
    std::thread thread_;
};

void write_connector(const fs::path& dir, const std::string& id, const std::string& base) {
    fs::create_directories(dir / id);
    std::ofstream(dir / id / "connector.json")
        << R"({"id":")" << id << R"(","label":")" << id
        << R"(","auth":{"types":["api_key"]},"api":{"base_url":")" << base
        << R"(","timeout_seconds":1,"validate":{"path":"/validate"},"browse":{"path":"/browse"}}})";
}

http::response validate(const gateway_process& gw, const std::string& token,
                        const std::string& provider) {
    auto h = bearer(token);
    h.add("Content-Type", "application/json");
    return gw.request("POST", "/api/sources/validate", h,
                      R"({"provider":")" + provider + R"(","credentials":{"api_key":"k-123"}})");
}

}  // namespace

TEST_CASE(
    "sources: connectors and OAuth token endpoints on loopback, link-local or a database "
    "port are refused, and redirects are not followed",
    "[api][sources][outbound]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto t1 = seed_tenant(admin);
    // OAuth keeps the credentials on one of the tenant's gateways.
    admin.exec("INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, $2, $2, 'ready')",
               {t1, random_name("gw")});
    // The port of the database URL the gateway is given (PgBouncer's under label pgbouncer).
    const auto pg_port =
        std::to_string(database_port(awp::test::as_given_to_daemons(db.api_dsn())));
    silent_listener trap;  // where a redirect, or a token endpoint on loopback, would lead
    counting_provider provider(trap.url() + "/stolen");
    const auto setup = [&](const fs::path& scratch, gateway_process::env_map& env) {
        const auto dir = scratch / "connectors";
        write_connector(dir, "loop", provider.base() + "/ok");
        write_connector(dir, "loopname",
                        "http://localhost:" + std::to_string(provider.port()) + "/ok");
        write_connector(dir, "pgport", "http://127.0.0.1:" + pg_port);
        write_connector(dir, "metadata", "http://169.254.169.254/latest");
        write_connector(dir, "private", "http://10.0.0.1/api");
        write_connector(dir, "redir", provider.base() + "/redirect");
        fs::copy(fs::path(AWP_SOURCE_DIR) / "deploy/connectors/http_json", dir / "http_json",
                 fs::copy_options::recursive);
        env["API_CONNECTORS_DIR"] = dir.string();
    };
    const gateway_process::env_map oauth = {
        {"API_PUBLIC_URL", "http://awp.test"},
        {"HTTP_JSON_URL", trap.url() + "/api"},
        {"HTTP_JSON_AUTHORIZE_URL", "https://provider.example/authorize"},
        {"HTTP_JSON_TOKEN_URL", trap.url() + "/oauth/token"},
        {"HTTP_JSON_CLIENT_ID", "cid"},
        {"HTTP_JSON_CLIENT_SECRET", "csecret"},
    };
    const auto token = user_token(t1);

    // No allow list: loopback, link-local, private and the database port are all refused.
    {
        gateway_process gw(db.api_dsn(), oauth, "awp-outbound-e2e-", setup);
        check_refused(validate(gw, token, "loop"), "loopback");
        check_refused(validate(gw, token, "loopname"), "loopback");
        check_refused(validate(gw, token, "pgport"), "database port");
        check_refused(validate(gw, token, "metadata"), "link-local");
        check_refused(validate(gw, token, "private"), "private");
        CHECK(provider.calls.load() == 0);

        // The OAuth token exchange goes to the token endpoint on loopback: refused, and the
        // authorization code never leaves the gateway.
        auto start = gw.get("/api/sources/oauth/http_json/start", bearer(token));
        REQUIRE(start.status == 302);
        const auto location = std::string(start.header.get("location").value_or(""));
        std::string state;
        for (auto& [k, v] : http::parse_query(location.substr(location.find('?') + 1))) {
            if (k == "state") state = v;
        }
        REQUIRE(!state.empty());
        const auto set = std::string(start.header.get("set-cookie").value_or(""));
        auto h = bearer(token);
        h.add("Cookie", set.substr(0, set.find(';')));
        auto cb = gw.get("/api/sources/oauth/http_json/callback?code=secret-code&state=" +
                             http::percent_encode(state),
                         h);
        check_refused(cb, "loopback");
        CHECK(trap.accepted() == 0);
        CHECK(gw.logs().find("secret-code") == std::string::npos);
    }

    // The operator allows the provider's own port: it is reached; the database port is still
    // refused on that host; the provider's redirect is not followed to the trap.
    {
        auto env = oauth;
        env["API_OUTBOUND_ALLOW"] = "127.0.0.1:" + std::to_string(provider.port()) +
                                    ",localhost:" + std::to_string(provider.port()) +
                                    ",127.0.0.1:" + pg_port;
        gateway_process gw(db.api_dsn(), env, "awp-outbound-e2e-", setup);
        auto ok = validate(gw, token, "loop");
        CHECK(ok.status == 200);
        CHECK(provider.calls.load() == 1);
        check_refused(validate(gw, token, "pgport"), "database port");
        check_refused(validate(gw, token, "metadata"), "link-local");
        auto redirected = validate(gw, token, "redir");
        CHECK(redirected.status == 502);
        CHECK(provider.calls.load() == 2);
        CHECK(trap.accepted() == 0);
    }
}

}  // namespace api_outbound_test
