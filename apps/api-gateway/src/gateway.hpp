// awp-api-gateway: configuration, the service (router + server + database pool) and the pieces
// its handlers share: authentication, per-request RLS transactions, the workspace registry.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/pg.hpp"
#include "awp/http/message.hpp"
#include "awp/http/server.hpp"

namespace awp::api {

namespace net = boost::asio;
namespace pg = awp::core::pg;
using http::request;
using http::response;

struct gateway_config {
    std::string bind = "127.0.0.1";                       // API_BIND
    unsigned short port = 3000;                           // API_PORT
    int threads = 0;                                      // API_THREADS; 0 = one per core
    std::string database_url;                             // AWP_API_DATABASE_URL, else DATABASE_URL
    std::string jwt_secret;                               // JWT_SECRET (secret)
    std::string service_role_key;                         // SERVICE_ROLE_KEY (secret)
    std::string embedder_url = "http://127.0.0.1:18801";  // EMBEDDER_URL
    double embed_timeout_s = 10;                          // EMBED_TIMEOUT
    std::string config_dir;                               // AWP_CONFIG_DIR: workspace registry
    std::string agents_dir;  // AGENTS_DIR: agent sandboxes <dir>/<tenant>/<slug>
    std::string templates_dir = "deploy/templates";  // API_TEMPLATES_DIR
    std::size_t db_pool_size = 16;                   // API_DB_POOL
    double session_ttl_s = 8 * 3600;                 // API_SESSION_TTL
    bool cookie_secure = false;                      // API_COOKIE_SECURE
    bool hsts = false;                               // API_HSTS (behind a TLS proxy)
    bool access_log = true;                          // API_ACCESS_LOG
    std::vector<std::string> allowed_origins;        // API_ALLOWED_ORIGINS (comma list)
    std::size_t upload_limit = 10 * 1024 * 1024;     // API_UPLOAD_LIMIT bytes
    int login_max_failures = 5;                      // API_LOGIN_MAX_FAILURES
    double login_window_s = 900;                     // API_LOGIN_WINDOW
    std::chrono::milliseconds drain_timeout{20'000};
};

/// Adds every option with its environment name to the CLI (secrets marked).
void add_options(core::daemon::cli& cli, gateway_config& c);
/// Checks values after parsing; throws core::config_error.
void validate(gateway_config& c);

/// Who is calling.
struct principal {
    enum class kind { user, service };
    kind who = kind::user;
    std::string claims_json;  // verified claims, as handed to request.jwt.claims
    std::string sub;
    std::string tenant_id;
    std::string email;
    std::string jti;
    long long exp = 0;
};

/// Failed-login bookkeeping per account and per address (in memory, one process).
class login_limiter {
public:
    login_limiter(int max_failures, std::chrono::seconds window)
        : max_(max_failures), window_(window) {}
    /// Seconds until this key may try again; 0 when allowed.
    long retry_after(const std::string& key);
    void failure(const std::string& key);
    void success(const std::string& key);

private:
    struct entry {
        int count = 0;
        std::chrono::steady_clock::time_point first;
    };
    std::mutex mu_;
    std::map<std::string, entry> entries_;
    int max_;
    std::chrono::seconds window_;
};

/// Connections of the api role, handed out one request at a time.
class db_pool {
public:
    db_pool(net::io_context& ioc, std::string dsn, std::size_t size);
    ~db_pool();
    struct impl;

    /// One request's transaction. Queries run as the principal (RLS) or as service_role.
    class tx {
    public:
        tx() = default;
        tx(tx&&) noexcept;
        tx& operator=(tx&&) noexcept;
        ~tx();
        template <class... A>
        net::awaitable<pg::result> query(std::string sql, A&&... args) {
            return exec(std::move(sql), pg::params{pg::param(std::forward<A>(args))...});
        }
        net::awaitable<pg::result> exec(std::string sql, pg::params p);
        net::awaitable<void> commit();

    private:
        friend class db_pool;
        std::shared_ptr<impl> pool_;
        std::shared_ptr<pg::connection> conn_;
        bool open_ = false;
    };

    /// BEGIN; role authenticated + request.jwt.claims (user) or role service_role.
    net::awaitable<tx> begin(principal p);

private:
    std::shared_ptr<impl> impl_;
};

class registry;

/// The daemon's service: owns the router, server, pool and state.
class gateway : public core::daemon::service {
public:
    gateway(net::io_context& ioc, gateway_config cfg);
    ~gateway() override;
    /// Binds the listening socket (config_error when it cannot).
    void listen();
    [[nodiscard]] unsigned short port() const;
    net::awaitable<void> run() override;
    void request_stop() override;

    // ---- shared by handlers ----
    /// A user session from the Authorization header or a session cookie; 401/403 otherwise.
    principal require_session(const request& r) const;
    /// The service-role key in Authorization: Bearer; 401/403 otherwise.
    principal require_service(const request& r) const;
    /// Cross-site state-changing requests are refused (403).
    void check_same_origin(const request& r) const;
    [[nodiscard]] const gateway_config& config() const noexcept { return cfg_; }
    db_pool& db() { return *db_; }
    registry& workspaces() { return *registry_; }

private:
    http::router routes();
    // handlers (member coroutines taking the request by value)
    net::awaitable<response> health(request r);
    net::awaitable<response> public_config(request r);
    net::awaitable<response> login(request r);
    net::awaitable<response> logout(request r);
    net::awaitable<response> whoami(request r);
    net::awaitable<response> embed(request r);
    net::awaitable<response> templates(request r);
    net::awaitable<response> skills_get(request r);
    net::awaitable<response> skills_post(request r);
    net::awaitable<response> skill_versions(request r);
    net::awaitable<response> workspaces_get(request r);
    net::awaitable<response> workspaces_post(request r);
    net::awaitable<response> workspaces_switch(request r);
    net::awaitable<response> workspaces_validate(request r);
    net::awaitable<response> files_get(request r);
    net::awaitable<response> files_post(request r);
    // browser.cpp: the agent's Chromium over the DevTools protocol
    net::awaitable<response> browser_state(request r);
    net::awaitable<response> browser_screenshot(request r);
    // sources.cpp: connectors, browse/validate, OAuth 2 + PKCE
    net::awaitable<response> sources_browse(request r);
    net::awaitable<response> sources_validate(request r);
    net::awaitable<response> oauth_start(request r);
    net::awaitable<response> oauth_callback(request r);

    net::awaitable<bool> verify_password(std::string hash, std::string password);
    std::optional<principal> token_principal(std::string_view token, bool& service_key) const;
    void load_templates();

    net::io_context& ioc_;
    gateway_config cfg_;
    std::unique_ptr<db_pool> db_;
    std::unique_ptr<registry> registry_;
    std::unique_ptr<http::server> server_;
    net::thread_pool cpu_{2};  // Argon2id off the io threads
    login_limiter limiter_;
    mutable std::mutex revoked_mu_;
    std::map<std::string, long long> revoked_;  // jti → exp, logged-out sessions
    std::string templates_json_ = "[]";
    std::string dummy_hash_;  // equalises login timing for unknown accounts
};

/// Session cookie written by POST /api/auth/login.
inline constexpr const char* kSessionCookie = "awp-auth-token";

/// The access token carried by a request's cookies: the plain awp cookie, or an
/// @supabase/ssr cookie (sb-<ref>-auth-token / hq-<id8>, chunked .0/.1, "base64-" prefix,
/// JSON session or array). Empty when there is none.
std::string token_from_cookies(const request& r);

}  // namespace awp::api
