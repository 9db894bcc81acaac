// awp-api-gateway: configuration, the service (router + server + database pool) and the pieces
// its handlers share: authentication, per-request RLS transactions, the workspace registry.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/pg.hpp"
#include "awp/http/message.hpp"
#include "awp/http/outbound.hpp"
#include "awp/http/server.hpp"
#include "awp/rest/schema.hpp"
#include "limits.hpp"
#include "realtime.hpp"
#include "storage.hpp"

namespace awp::api {

namespace net = boost::asio;
namespace pg = awp::core::pg;
using http::request;
using http::response;

struct gateway_config {
    std::string bind = "127.0.0.1";  // API_BIND
    unsigned short port = 3000;      // API_PORT
    int threads = 0;                 // API_THREADS; 0 = one per core
    std::string database_url;        // AWP_API_DATABASE_URL, else DATABASE_URL
    std::string wake_database_url;   // AWP_API_WAKE_DATABASE_URL: LISTEN pgrst, else database_url
    std::string jwt_secret;          // JWT_SECRET (secret)
    std::string service_role_key;    // SERVICE_ROLE_KEY (secret)
    std::string embedder_url = "http://127.0.0.1:18801";  // EMBEDDER_URL
    double embed_timeout_s = 10;                          // EMBED_TIMEOUT
    std::string config_dir;                               // AWP_CONFIG_DIR: workspace registry
    /// OPENCLAW_STATE_DIR: the agent runtime's state; an agent's files are the folder the
    /// runtime works in, <dir>/workspace-<slug> (docs/runtime.md).
    std::string agents_dir;
    /// AWP_WORKSPACES_DIR: where the agents' workspaces are, when not in agents_dir (the layout
    /// with an agent user: a folder shared with the agent user's group; files are made 0660).
    std::string workspaces_dir;
    std::string templates_dir = "deploy/templates";  // API_TEMPLATES_DIR
    std::size_t db_pool_size = 16;                   // API_DB_POOL (per database)
    std::size_t workspace_pools = 8;                 // API_WORKSPACE_POOLS: open at once
    double session_ttl_s = 8 * 3600;                 // API_SESSION_TTL
    // /auth/v1 (gotrue.cpp, docs/data-api.md, "Signing in")
    double jwt_expiry_s = 3600;            // API_JWT_EXPIRY: access tokens of /auth/v1 (GoTrue's)
    double refresh_reuse_interval_s = 10;  // API_REFRESH_REUSE_INTERVAL (GoTrue's)
    /// API_REAUTHENTICATE_AFTER: a session signed in longer ago must send current_password to
    /// change the password (GoTrue's reauthentication, 24 h); 0 = always.
    double reauthenticate_after_s = 24 * 3600;
    bool signup = false;        // API_SIGNUP: self-service POST /auth/v1/signup
    std::string signup_tenant;  // API_SIGNUP_TENANT: the tenant new users join ("" none)
    // GET /api/config's entry for the gateway's own database (issue 34)
    std::string workspace_id;                     // API_WORKSPACE_ID (else derived from JWT_SECRET)
    std::string workspace_label = "awp";          // API_WORKSPACE_LABEL
    std::string workspace_emoji;                  // API_WORKSPACE_EMOJI
    bool cookie_secure = false;                   // API_COOKIE_SECURE
    bool hsts = false;                            // API_HSTS (behind a TLS proxy)
    bool access_log = true;                       // API_ACCESS_LOG
    std::vector<std::string> allowed_origins;     // API_ALLOWED_ORIGINS (comma list)
    std::size_t upload_limit = 10 * 1024 * 1024;  // API_UPLOAD_LIMIT bytes
    std::string upload_spool_dir;  // API_UPLOAD_SPOOL_DIR: upload bodies on disk; "" = $TMPDIR/tmp
    int login_max_failures = 5;    // API_LOGIN_MAX_FAILURES
    double login_window_s = 900;   // API_LOGIN_WINDOW
    std::string connectors_dir = "deploy/connectors";    // API_CONNECTORS_DIR
    std::string public_url;                              // API_PUBLIC_URL (else the Host)
    std::string sources_redirect = "/settings/sources";  // API_SOURCES_REDIRECT (UI page)
    double oauth_state_ttl_s = 600;                      // API_OAUTH_STATE_TTL
    std::string hosted_secrets_key;                      // HOSTED_SECRETS_KEY (secret)
    std::string gateway_id = "default";  // GATEWAY_ID: this host's gateway (slug or uuid)
    double proxy_timeout_s = 30;         // API_PROXY_TIMEOUT: requests to other gateways
    std::string browser_cdp_url = "http://127.0.0.1:9222";  // API_BROWSER_CDP_URL
    double browser_timeout_s = 10;                          // API_BROWSER_TIMEOUT
    // API_OUTBOUND_ALLOW: CIDRs / addresses / host names [:port] the gateway may reach on a
    // tenant's behalf beyond the default policy (loopback and private networks are refused for
    // source connectors, anything but the agent's own host for DevTools).
    std::string outbound_allow;
    // The data API (/rest/v1, rest.cpp; docs/data-api.md, "Settings").
    std::vector<std::string> rest_schemas{"public"};  // API_REST_SCHEMAS: exposed, first default
    std::vector<std::string> rest_extra_search_path{"public",
                                                    "extensions"};  // API_REST_EXTRA_SEARCH_PATH
    std::int64_t rest_max_rows = 1000;  // API_REST_MAX_ROWS (0 = no limit)
    bool rest_tx_override = false;      // API_REST_TX_OVERRIDE: honour Prefer: tx=rollback
    bool rest_aggregates = true;        // API_REST_AGGREGATES
    bool rest_plan = false;             // API_REST_PLAN: the EXPLAIN media types
    /// API_REST_STATEMENT_TIMEOUT: a request's statement_timeout unless its role sets one
    /// (ALTER ROLE anon SET statement_timeout = ...).
    std::string rest_statement_timeout = "30s";
    std::size_t rest_body_limit = 1024 * 1024;  // API_REST_BODY_LIMIT bytes
    double rest_schema_poll_s = 600;            // API_REST_SCHEMA_POLL: reload at least this often
    std::chrono::milliseconds drain_timeout{20'000};
    realtime_config realtime;  // REALTIME_* (realtime.hpp, docs/realtime.md)
    storage_config storage;    // STORAGE_* (storage.hpp, docs/storage.md)
    limits_config limits;      // API_TRUSTED_PROXIES, API_RATE_*, cost bounds (limits.hpp)
};

/// Adds every option with its environment name to the CLI (secrets marked).
void add_options(core::daemon::cli& cli, gateway_config& c);
/// Checks values after parsing; throws core::config_error.
void validate(gateway_config& c);
/// A Chromium DevTools endpoint: http://host:port with an explicit port and no path.
[[nodiscard]] bool is_cdp_url(std::string_view url);

/// 401 unauthenticated with `WWW-Authenticate: Bearer` (auth.cpp).
[[nodiscard]] http::http_error unauthorized(const std::string& message);

/// The request's headers as PostgREST hands them to SQL (request.headers): lower-case names,
/// the cookie header left out, the first of repeated names kept (rest.cpp).
[[nodiscard]] std::string request_headers_json(const http::request& r);

/// Who is calling.
struct principal {
    enum class kind { user, service };
    /// The service role of the gateway's own database.
    static principal service() {
        principal p;
        p.who = kind::service;
        return p;
    }
    kind who = kind::user;
    std::string claims_json;  // verified claims, as handed to request.jwt.claims
    std::string sub;
    std::string tenant_id;
    std::string email;
    std::string jti;
    std::string session_id;  // the session of the token, of either face ("" = none: awpctl token)
    std::string role;        // the token's role claim (service: "service_role")
    long long exp = 0;
    long long iat = 0;  // 0 = none
    /// An operator may change the host's configuration (the workspace registry): the service
    /// role, or a user whose verified claims carry app_metadata.awp_role = "operator".
    bool is_operator = false;
    // The database of this request (pick_database). A user session's is the workspace it was
    // issued for (its awp_workspace claim; none = the gateway's own DATABASE_URL); the service
    // role's is the workspace its awp_active_workspace cookie names, else the registry's
    // default. registry_error when the registry is unreadable.
    std::string workspace_id;
    std::string workspace_url;
    std::string registry_error;
};

/// The caller of a data-API request (/rest/v1, and /realtime/v1 later; docs/data-api.md,
/// "Roles and claims"): the Postgres role its transaction takes and the claims it sees, decided
/// as PostgREST decides them behind the platform's gateway. No token (neither Authorization nor
/// apikey) is the anon role; an apikey alone is used as the token.
struct data_principal {
    std::string role = "anon";  ///< anon, authenticated or service_role
    /// The verified claims, handed to request.jwt.claims ({"role":"anon"} without a token).
    std::string claims_json = R"({"role":"anon"})";
    /// A verified token of a role other than anon: PostgREST's "authed" (App.hs), which makes
    /// an insufficient privilege (42501) 403 rather than 401. The anon key is not authed.
    bool has_jwt = false;
    std::string sub;         ///< the user (authenticated), "" otherwise
    std::string session_id;  ///< the session the token belongs to ("" = none)
};

/// A login user (app_users) as the sign-in paths read it.
struct app_user {
    std::string id;
    std::string tenant_id;  // "" = none (a self-service sign-up)
    std::string email;
    bool disabled = false;
    bool is_operator = false;
    std::string user_metadata = "{}";    // JSON object
    std::string created_at, updated_at;  // RFC 3339, UTC
    std::string last_sign_in_at;         // "" = never
    std::string banned_until;            // RFC 3339, UTC; "" = no timed ban (sql/0039)
};

/// The answer of one password check (gateway::sign_in).
struct sign_in_result {
    long retry_after = 0;   ///< > 0: refused by the limiter, nothing evaluated
    bool verified = false;  ///< the password is this user's (who may still be disabled)
    app_user user;          ///< when verified
};

/// The stable id of the gateway's own database as a workspace: API_WORKSPACE_ID, else a uuid
/// derived from JWT_SECRET (HKDF), so it survives restarts without being stored.
[[nodiscard]] std::string own_workspace_id(const gateway_config& c);

/// Access tokens already verified (token text -> principal), so a session's next requests skip
/// libjwt's decode, the HMAC and the claims parse. exp and nbf are checked on every hit (with
/// the same leeway); revocation by the caller, on every hit too (session_store::check). At most
/// kMax entries (expired ones go first).
class token_cache {
public:
    static constexpr std::size_t kMax = 4096;
    std::optional<principal> find(const std::string& token, double now, double leeway);
    void put(const std::string& token, const principal& p, double exp, double nbf, double now);

private:
    struct entry {
        principal p;
        double exp = 0;
        double nbf = 0;
    };
    std::mutex mu_;
    std::map<std::string, entry, std::less<>> map_;
};

/// Failed-login limits (docs/security.md, "Signing in"), decided atomically: an attempt is
/// reserved before the password hash is evaluated, so concurrent wrong passwords beyond a limit
/// get 429 without costing an Argon2id evaluation. Three counters per window:
///  - an account from one address: `max_failures`;
///  - one address over all accounts (password spraying): 4 x `max_failures`;
///  - one account from all addresses: 10 x `max_failures`, which does not apply to an address
///    that signed in to that account successfully in the last 30 days, so an attacker cannot
///    lock the real user out from the user's own address.
/// In memory, per process; bounded (oldest windows are dropped past 100,000 keys).
class login_limiter {
public:
    login_limiter(int max_failures, std::chrono::seconds window)
        : max_(max_failures), window_(window) {}
    /// Reserves an attempt: 0 when it may go on (then end() must follow), else the seconds
    /// until it may be tried again.
    long begin(const std::string& account, const std::string& address);
    /// Ends a reserved attempt: a failure counts against every key, a success clears the
    /// account's counters and remembers the address for the account.
    void end(const std::string& account, const std::string& address, bool success);

private:
    struct entry {
        int count = 0;     // failures in this window
        int inflight = 0;  // attempts reserved and not ended
        std::chrono::steady_clock::time_point first;
    };
    using clock = std::chrono::steady_clock;
    void prune(clock::time_point now);
    std::mutex mu_;
    std::map<std::string, entry> entries_;
    std::map<std::string, clock::time_point> known_;  // account \n address -> last success
    int max_;
    std::chrono::seconds window_;
};

/// Connections of the api role, handed out one request at a time: one pool per database, the
/// gateway's own (DATABASE_URL) and one per workspace whose url is a Postgres DSN, each of at
/// most `size` connections. Workspace pools are made on first use, at most `max_pools` at once
/// (the least recently used is closed first), and closed when their workspace leaves the
/// registry or changes its url (retain).
class db_pool {
public:
    db_pool(net::io_context& ioc, std::string dsn, std::size_t size, std::size_t max_pools = 8);
    ~db_pool();
    struct impl;  // one database's connections

    /// One request's transaction. Queries run as the principal (RLS) or as service_role. Nothing
    /// is sent before the first statement: BEGIN and the transaction-local role and claims
    /// (set_config(..., true)) travel with it in one libpq pipeline, so a request of n
    /// statements costs n + 1 round trips (the + 1 is COMMIT), and query_and_commit makes a
    /// one-statement request one round trip (docs/api-gateway.md, "The request transaction").
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
        /// The transaction's last statement and its commit in one round trip. As the first
        /// statement: role and claims + sql in one pipeline without BEGIN, one implicit
        /// transaction (an error rolls it back and leaves the connection idle, role and claims
        /// reset, back in the pool). After other statements: sql + COMMIT pipelined.
        template <class... A>
        net::awaitable<pg::result> query_and_commit(std::string sql, A&&... args) {
            return exec_and_commit(std::move(sql), pg::params{pg::param(std::forward<A>(args))...});
        }
        net::awaitable<pg::result> exec_and_commit(std::string sql, pg::params p);
        net::awaitable<void> commit();
        /// Runs `statements` as the transaction's first ones, behind the setup, in one round
        /// trip: one implicit transaction (committed at the Sync, rolled back by an error) when
        /// `keep_open` is false; else after BEGIN, left open for commit() or rollback(). Returns
        /// the statements' results (not the setup's).
        net::awaitable<std::vector<pg::result>> run(
            std::vector<pg::connection::pipelined> statements, bool keep_open);
        /// Ends an open transaction without its changes.
        net::awaitable<void> rollback();

    private:
        friend class db_pool;
        /// Sends statements in one pipeline; a connection taken idle from the pool that turns
        /// out broken before the server finished any of them is replaced once and the
        /// pipeline sent again (nothing ran).
        net::awaitable<std::vector<pg::result>> send(
            std::vector<pg::connection::pipelined> statements);
        std::shared_ptr<impl> pool_;
        std::shared_ptr<pg::connection> conn_;
        bool open_ = false;     // a transaction (or a pipeline) is in flight: a failure drops conn_
        bool pending_ = false;  // BEGIN, role and claims not sent yet
        bool pooled_ = false;   // conn_ came idle from the pool (it may have broken since)
        std::string workspace_id_;
        pg::connection::pipelined setup_;  // the set_config of role (and claims)
    };

    /// A transaction as p (role authenticated + request.jwt.claims for a user, role
    /// service_role for the service), on the database p names (its workspace's, else the
    /// gateway's own); BEGIN and the settings go with its first statement. 500
    /// registry_corrupt, 502 workspace_needs_database_url (a platform URL without its
    /// connection string), 502 database_unreachable or workspace_role_unsafe otherwise.
    /// `background` (the session module's reads): a workspace's pool is neither opened (throws
    /// when it is closed) nor counted as used.
    net::awaitable<tx> begin(principal p, bool background = false);
    /// A transaction on the gateway's own database whose setup is `setup` (the data API's role,
    /// claims and settings: rest.cpp), sent with the first statements.
    net::awaitable<tx> begin_own(pg::connection::pipelined setup);

    /// Closes the workspace pools whose workspace is not in `live` (id -> url) or whose url
    /// changed; `generation` is the registry snapshot's, so a caller can skip unchanged ones.
    void retain(std::uint64_t generation, const std::map<std::string, std::string>& live);
    [[nodiscard]] std::uint64_t retained_generation() const noexcept { return generation_; }
    /// Called (outside the pool's lock) when a workspace's pool closes: the workspace left the
    /// registry, changed its url, or was the least recently used. Set once, before use.
    std::function<void(const std::string& workspace_id)> on_workspace_closed;

private:
    std::shared_ptr<impl> pool_for(const principal& p, bool background);
    void on_closed(const std::string& workspace_id) const;

    net::io_context& ioc_;
    std::size_t size_;
    std::size_t max_pools_;
    std::shared_ptr<impl> own_;
    struct workspace_pool {
        std::string url;
        std::shared_ptr<impl> pool;
        std::uint64_t used = 0;
    };
    mutable std::mutex mu_;
    std::map<std::string, workspace_pool> pools_;  // workspace id -> pool
    std::uint64_t tick_ = 0;
    std::atomic<std::uint64_t> generation_{0};
};

/// Why the connection's role escapes row-level security ("" when it does not): a superuser,
/// BYPASSRLS, a member of such a role, or an owner of an unFORCEd RLS table (db.cpp).
net::awaitable<std::string> rls_bypass_reason(pg::connection& c);

class registry;
class connector_registry;
class session_store;
struct registry_snapshot;
struct rest_state;
struct workspace;

/// An agent the caller can see under RLS and where it lives (files.cpp: locate_agent).
struct agent_home {
    std::string tenant_id;
    std::string slug;
    std::string config_json;   // agents.config
    bool local = true;         // no gateway, or this process's GATEWAY_ID
    std::string gateway_slug;  // the agent's gateway, when it has one
    std::string api_url;       // gateways.meta.api_url of a remote gateway ("" = none registered)
};

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
    /// A user session, or the service role (the service-role key or a service_role token,
    /// which is an operator); 401 otherwise.
    principal require_session_or_service(const request& r) const;
    /// An operator: the service-role key (or a service_role token), or a user session whose
    /// claims say operator; 401 without a session, 403 operator_required otherwise.
    principal require_operator(const request& r) const;
    /// The caller of a /rest/v1 request (auth.cpp): throws rest::api_error 401 (PGRST301
    /// an invalid or expired token, PGRST303 bad claims, a signed-out session) with
    /// WWW-Authenticate.
    data_principal data_api_principal(const request& r) const;
    /// Cross-site state-changing requests are refused (403). The router calls it for every
    /// method but GET, HEAD and OPTIONS (routes()).
    void check_same_origin(const request& r) const;
    [[nodiscard]] const gateway_config& config() const noexcept { return cfg_; }
    /// The outbound policy of a call made on a tenant's behalf (outbound.cpp): API_OUTBOUND_ALLOW
    /// and, refused on every host, the ports of the gateway's database and of every workspace's.
    [[nodiscard]] http::outbound_check outbound_check(http::outbound_scope scope,
                                                      std::vector<net::ip::address> own = {}) const;
    db_pool& db() { return *db_; }
    /// Request rates per client address and user (limits.hpp): /rest/v1, /auth/v1, joins.
    request_rates& rates() { return *rates_; }
    registry& workspaces() { return *registry_; }
    session_store& sessions() { return *sessions_; }
    connector_registry& connectors() { return *connectors_; }

private:
    friend class realtime_hub;  // the schema cache and the pool, for realtime's checks
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
    // files.cpp: the agent behind :slug (404 when the caller cannot see it), and the request
    // forwarded to the api-gateway of the agent's gateway when that is not this one.
    net::awaitable<agent_home> locate_agent(principal p, std::string slug);
    /// GATEWAY_ID as this host's gateway id in p's database: itself when a uuid, else resolved
    /// once per database (core::gateway::kResolveSql) and kept; nullopt while it cannot be.
    net::awaitable<std::optional<std::string>> own_gateway_id(const principal& p);
    net::awaitable<response> proxy_to_gateway(request r, agent_home a);
    // sources.cpp: connectors, browse/validate; sources_oauth.cpp: OAuth 2 + PKCE
    net::awaitable<response> sources_browse(request r);
    net::awaitable<response> sources_validate(request r);
    net::awaitable<response> oauth_start(request r);
    net::awaitable<response> oauth_callback(request r);
    // gotrue.cpp: /auth/v1, the GoTrue subset the client library needs (docs/data-api.md, "Signing
    // in")
    net::awaitable<response> auth_token(request r);
    net::awaitable<response> auth_signup(request r);
    net::awaitable<response> auth_user_get(request r);
    net::awaitable<response> auth_user_put(request r);
    net::awaitable<response> auth_logout(request r);
    net::awaitable<response> auth_reauthenticate(request r);
    net::awaitable<response> auth_settings(request r);
    net::awaitable<response> auth_health(request r);
    net::awaitable<response> auth_jwks(request r);
    // gotrue_admin.cpp: /auth/v1/admin (GoTrue's admin API, the service role only;
    // docs/data-api.md, "The admin API")
    net::awaitable<response> admin_users_list(request r);
    net::awaitable<response> admin_user_create(request r);
    net::awaitable<response> admin_user_get(request r);
    net::awaitable<response> admin_user_update(request r);
    net::awaitable<response> admin_user_delete(request r);
    net::awaitable<response> admin_user_factors(request r);
    net::awaitable<response> admin_unsupported(request r);
    net::awaitable<response> password_grant(request r);
    net::awaitable<response> refresh_grant(request r);
    /// A new session of user `user_id` through /auth/v1: its JSON as auth-js reads it.
    net::awaitable<response> start_auth_session(std::string user_id, request r);
    /// The caller of an /auth/v1 route that needs a user (GET/PUT /user, /logout,
    /// /reauthenticate): its bearer token verified, its user read, its session live in the
    /// database and not revoked (session_store::check); GoTrue's refusals otherwise.
    struct auth_caller {
        app_user user;
        std::string session_id;  // "" = a token of no session
        double session_age_s = 0;
        std::string password_hash;  // for_update only
    };
    net::awaitable<auth_caller> auth_caller_of(const request& r, bool for_update);
    /// A password change's proof that the session's user is there (PUT /user): a live session,
    /// and when it signed in more than API_REAUTHENTICATE_AFTER ago, the current password.
    net::awaitable<void> check_reauthentication(const auth_caller& c, std::string current,
                                                std::string nonce, std::string remote);
    /// An /api handler once the session module watches the workspace of the request's session
    /// (the router's way when a registered workspace is not watched: sessions.hpp).
    net::awaitable<response> ready_then(net::awaitable<response> (gateway::*fn)(request),
                                        request r);
    /// The workspace of the request's user session when its token verifies ("" otherwise, and
    /// for the gateway's own database), the registry retained first (auth.cpp).
    std::string session_workspace(const request& r) const;
    /// Runs an /auth/v1 handler: any failure answered in GoTrue's error shape, CORS on every
    /// answer.
    net::awaitable<response> auth_v1(net::awaitable<response> (gateway::*fn)(request), request r);
    /// auth_v1 behind the request rates of /auth/v1 (limits.cpp): 429 over_request_rate_limit.
    net::awaitable<response> auth_v1_limited(net::awaitable<response> (gateway::*fn)(request),
                                             request r);
    /// OPTIONS on a data-API path (/auth/v1, /rest/v1): the CORS preflight.
    net::awaitable<response> data_api_preflight(request r);
    // rest.cpp: the data API (/rest/v1), its schema cache and its reloads
    net::awaitable<response> rest_request(request r);
    net::awaitable<std::shared_ptr<const rest::schema_cache>> schema_cache();
    net::awaitable<void> reload_schema(std::string why);
    void start_schema_listener();

    net::awaitable<bool> verify_password(std::string hash, std::string password);
    /// A password sign-in (/api/auth/login and /auth/v1/token): the limiter's reservation for
    /// `account` from `remote`, the user's row from p's database, Argon2id on the cpu pool (a
    /// dummy hash for an unknown account, so timing does not tell). A failure or a disabled
    /// user counts against the limits.
    net::awaitable<sign_in_result> sign_in(principal p, std::string account, std::string password,
                                           std::string remote);
    /// Argon2id hash of a new password on the cpu pool.
    net::awaitable<std::string> hash_password(std::string password);
    /// Refuses a user token whose session (or, for a token of no session, whose user) was
    /// revoked: 401 signed out; 503 while its database's revocations are not loaded yet.
    void admit(const principal& p) const;
    /// A verified token (cached), not yet checked for revocation (admit does, after
    /// pick_database); nullopt with service_key for the service-role key.
    std::optional<principal> token_principal(std::string_view token, bool& service_key) const;
    /// Sets p's database (auth.cpp): a user's from its session's workspace (401 when that
    /// workspace left the registry); the service role's from the awp_active_workspace cookie,
    /// else the registry's default, else the gateway's own.
    void pick_database(const request& r, principal& p) const;
    /// The registry now: pools and session watches of workspaces that left it (or changed their
    /// url) close, watches of new ones start (auth.cpp).
    void retain_workspaces(const registry_snapshot& snap) const;
    /// The workspace a login (or the public config) is for: `wanted` if registered, else the
    /// awp_active_workspace cookie's, else the registry's default; nullopt = the gateway's own
    /// database. 404 when `wanted` names no workspace.
    std::optional<workspace> login_workspace(const request& r,
                                             const std::optional<std::string>& wanted) const;
    void load_templates();
    /// The gateway's public base URL: API_PUBLIC_URL, else http://<the request's Host> (a Host
    /// that is not a plain host[:port] gives http://<bind>:<port>).
    [[nodiscard]] std::string public_base_url(const request& r) const;

    net::io_context& ioc_;
    gateway_config cfg_;
    std::unique_ptr<db_pool> db_;
    std::unique_ptr<session_store> sessions_;  // after db_: it goes first (its reads use the pool)
    std::unique_ptr<registry> registry_;
    std::unique_ptr<connector_registry> connectors_;
    std::unique_ptr<http::server> server_;
    std::unique_ptr<rest_state> rest_;
    std::unique_ptr<request_rates> rates_;
    std::unique_ptr<realtime_hub> realtime_;    // after db_: it goes first
    std::unique_ptr<storage_service> storage_;  // after db_: it goes first
    net::thread_pool cpu_{2};                   // Argon2id off the io threads
    login_limiter limiter_;
    std::mutex gateway_mu_;
    struct resolved_gateway {
        std::optional<std::string> id;
        std::chrono::steady_clock::time_point retry_at;  // when id is nullopt
    };
    std::map<std::string, resolved_gateway> own_gateway_ids_;  // workspace id ("" = own) ->
    mutable std::mutex validate_mu_;
    std::map<std::string, std::chrono::steady_clock::time_point> validate_last_;  // rate limit
    std::atomic<bool> stopping_{false};
    mutable token_cache tokens_;
    mutable token_cache data_tokens_;  // the data API's (other roles, another leeway)
    std::string templates_json_ = "[]";
    std::string dummy_hash_;  // equalises login timing for unknown accounts
};

/// CORS of the data API's answers (/rest/v1 and /auth/v1: rest.cpp): like the hosted platform,
/// any origin may read them (Access-Control-Allow-Origin: *, no credentials: these routes take
/// a bearer token, never a cookie), with the headers the client library reads exposed.
void add_data_api_cors(const request& r, response& res);

/// A refusal of /auth/v1 in GoTrue's error shape for the client's API version, with CORS
/// (gotrue.cpp): the answers the gateway gives before a GoTrue handler runs (429, 413).
response gotrue_refusal(const http::headers& request_headers, unsigned status, std::string code,
                        std::string msg, long retry_after = 0);

/// Session cookie written by POST /api/auth/login.
inline constexpr const char* kSessionCookie = "awp-auth-token";
/// The claim of a session awp issued for a registered workspace: the workspace id. Such a
/// session is signed with core::crypto::workspace_session_key(JWT_SECRET, id).
inline constexpr const char* kWorkspaceClaim = "awp_workspace";
/// The browser's active workspace (set at login and by /api/workspaces/switch): the workspace
/// the next login is for. It never moves a session to another database.
inline constexpr const char* kActiveWorkspaceCookie = "awp_active_workspace";

/// The access token carried by a request's cookies: the plain awp cookie, or an
/// @supabase/ssr cookie (sb-<ref>-auth-token / hq-<id8>, chunked .0/.1, "base64-" prefix,
/// JSON session or array). Empty when there is none.
std::string token_from_cookies(const request& r);

}  // namespace awp::api
