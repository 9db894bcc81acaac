// The gateway service: configuration, the route table, the public routes (health, config),
// the embedder proxy and the agent templates.
#include "gateway.hpp"

#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "awp/http/outbound.hpp"
#include "connectors.hpp"
#include "json.hpp"
#include "registry.hpp"
#include "rest_state.hpp"
#include "sessions.hpp"

namespace awp::api {

namespace fs = std::filesystem;
using http::http_error;

void add_options(core::daemon::cli& cli, gateway_config& c) {
    auto& app = cli.app();
    app.add_option("--bind", c.bind, "Listen address")->envname("API_BIND")->capture_default_str();
    app.add_option("--port", c.port, "Listen port")->envname("API_PORT")->capture_default_str();
    app.add_option("--threads", c.threads, "I/O threads (0 = one per core)")
        ->envname("API_THREADS")
        ->check(CLI::Range(0, 256))
        ->capture_default_str();
    cli.secret(app.add_option("--jwt-secret", c.jwt_secret, "HS256 secret of access tokens")
                   ->envname("JWT_SECRET"));
    cli.secret(app.add_option("--service-role-key", c.service_role_key,
                              "Service-role key accepted by the skills routes")
                   ->envname("SERVICE_ROLE_KEY"));
    cli.secret(app.add_option("--api-database-url", c.database_url,
                              "DSN of the api role (else DATABASE_URL)")
                   ->envname("AWP_API_DATABASE_URL"));
    cli.secret(app.add_option("--api-wake-database-url", c.wake_database_url,
                              "DSN where the schema cache's LISTEN pgrst connects, a direct "
                              "session (else the api DSN; set it when that is a transaction "
                              "pooler)")
                   ->envname("AWP_API_WAKE_DATABASE_URL"));
    app.add_option("--embedder-url", c.embedder_url, "Base URL of awp-embedder")
        ->envname("EMBEDDER_URL")
        ->capture_default_str();
    app.add_option("--embed-timeout", c.embed_timeout_s, "Seconds before /api/embed answers 504")
        ->envname("EMBED_TIMEOUT")
        ->check(CLI::Range(0.1, 600.0))
        ->capture_default_str();
    app.add_option("--config-dir", c.config_dir, "Workspace registry directory")
        ->envname("AWP_CONFIG_DIR");
    app.add_option("--runtime-state-dir", c.agents_dir,
                   "The agent runtime's state folder: agent files are its workspace-<slug>/ "
                   "(the runner's and the runtime's OPENCLAW_STATE_DIR)")
        ->envname("OPENCLAW_STATE_DIR");
    app.add_option("--workspaces-dir", c.workspaces_dir,
                   "Where the agents' workspaces are when not in the runtime's state folder (the "
                   "runner's AWP_WORKSPACES_DIR; shared with the agent user's group)")
        ->envname("AWP_WORKSPACES_DIR");
    app.add_option("--templates-dir", c.templates_dir, "Agent templates (one folder each)")
        ->envname("API_TEMPLATES_DIR")
        ->capture_default_str();
    app.add_option("--db-pool", c.db_pool_size, "Database connections (per database)")
        ->envname("API_DB_POOL")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--workspace-pools", c.workspace_pools,
                   "Workspace database pools open at once (least recently used closes first)")
        ->envname("API_WORKSPACE_POOLS")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--session-ttl", c.session_ttl_s, "Seconds a login session lasts")
        ->envname("API_SESSION_TTL")
        ->check(CLI::Range(60.0, 31.0 * 24 * 3600))
        ->capture_default_str();
    app.add_option("--jwt-expiry", c.jwt_expiry_s,
                   "Seconds an access token of /auth/v1 lasts (its refresh token renews it)")
        ->envname("API_JWT_EXPIRY")
        ->check(CLI::Range(30.0, 7.0 * 24 * 3600))
        ->capture_default_str();
    app.add_option("--refresh-reuse-interval", c.refresh_reuse_interval_s,
                   "Seconds a used refresh token still gets the token its first use gave (two "
                   "tabs refreshing at once); a use after that signs the session out")
        ->envname("API_REFRESH_REUSE_INTERVAL")
        ->check(CLI::Range(0.0, 600.0))
        ->capture_default_str();
    app.add_option("--reauthenticate-after", c.reauthenticate_after_s,
                   "Seconds after its sign-in a session must send current_password to change "
                   "the password (PUT /auth/v1/user; 0 = always)")
        ->envname("API_REAUTHENTICATE_AFTER")
        ->check(CLI::Range(0.0, 365.0 * 24 * 3600))
        ->capture_default_str();
    app.add_option("--signup", c.signup,
                   "Self-service sign-up on POST /auth/v1/signup (on/off; off: users are made by "
                   "an operator, awpctl user add)")
        ->envname("API_SIGNUP")
        ->capture_default_str();
    app.add_option("--signup-tenant", c.signup_tenant,
                   "The tenant a self-service sign-up joins (a UUID; none when unset: such a "
                   "user sees nothing of awp's tables)")
        ->envname("API_SIGNUP_TENANT");
    app.add_option("--workspace-id", c.workspace_id,
                   "The id GET /api/config gives the gateway's own database (default: derived "
                   "from JWT_SECRET, stable across restarts)")
        ->envname("API_WORKSPACE_ID");
    app.add_option("--workspace-label", c.workspace_label,
                   "The label GET /api/config gives the gateway's own database")
        ->envname("API_WORKSPACE_LABEL")
        ->capture_default_str();
    app.add_option("--workspace-emoji", c.workspace_emoji,
                   "The emoji GET /api/config gives the gateway's own database")
        ->envname("API_WORKSPACE_EMOJI");
    app.add_option("--cookie-secure", c.cookie_secure, "Mark session cookies Secure")
        ->envname("API_COOKIE_SECURE")
        ->capture_default_str();
    app.add_option("--hsts", c.hsts, "Send Strict-Transport-Security (behind a TLS proxy)")
        ->envname("API_HSTS")
        ->capture_default_str();
    app.add_option("--access-log", c.access_log, "One JSON log line per request")
        ->envname("API_ACCESS_LOG")
        ->capture_default_str();
    app.add_option("--allowed-origins", c.allowed_origins,
                   "Extra origins allowed on state-changing requests")
        ->envname("API_ALLOWED_ORIGINS")
        ->delimiter(',');
    app.add_option("--upload-limit", c.upload_limit, "Largest agent file upload in bytes")
        ->envname("API_UPLOAD_LIMIT")
        ->capture_default_str();
    app.add_option("--upload-spool-dir", c.upload_spool_dir,
                   "Directory for upload bodies while they arrive (unlinked files; default "
                   "$TMPDIR, else /tmp)")
        ->envname("API_UPLOAD_SPOOL_DIR");
    app.add_option("--login-max-failures", c.login_max_failures,
                   "Failed logins per account or address before 429")
        ->envname("API_LOGIN_MAX_FAILURES")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--login-window", c.login_window_s, "Seconds the failed-login count lasts")
        ->envname("API_LOGIN_WINDOW")
        ->capture_default_str();
    app.add_option("--connectors-dir", c.connectors_dir, "Source connectors (one folder each)")
        ->envname("API_CONNECTORS_DIR")
        ->capture_default_str();
    app.add_option("--public-url", c.public_url, "Public base URL (OAuth redirect_uri)")
        ->envname("API_PUBLIC_URL");
    app.add_option("--sources-redirect", c.sources_redirect,
                   "UI page the OAuth callback redirects to")
        ->envname("API_SOURCES_REDIRECT")
        ->capture_default_str();
    app.add_option("--oauth-state-ttl", c.oauth_state_ttl_s, "Seconds an OAuth flow may take")
        ->envname("API_OAUTH_STATE_TTL")
        ->check(CLI::Range(1.0, 3600.0))
        ->capture_default_str();
    cli.secret(app.add_option("--hosted-secrets-key", c.hosted_secrets_key,
                              "32-byte key of enc:v1 secrets (else derived from SERVICE_ROLE_KEY)")
                   ->envname("HOSTED_SECRETS_KEY"));
    app.add_option("--gateway-id", c.gateway_id,
                   "This host's gateway (slug or id); agents of others are proxied")
        ->envname("GATEWAY_ID")
        ->capture_default_str();
    app.add_option("--proxy-timeout", c.proxy_timeout_s,
                   "Seconds before a request proxied to another gateway answers 504")
        ->envname("API_PROXY_TIMEOUT")
        ->check(CLI::Range(0.1, 600.0))
        ->capture_default_str();
    app.add_option("--browser-cdp-url", c.browser_cdp_url,
                   "Chromium DevTools endpoint of agents without config.browser.cdpUrl")
        ->envname("API_BROWSER_CDP_URL")
        ->capture_default_str();
    app.add_option("--browser-timeout", c.browser_timeout_s,
                   "Seconds before a browser route answers 504")
        ->envname("API_BROWSER_TIMEOUT")
        ->check(CLI::Range(0.1, 600.0))
        ->capture_default_str();
    app.add_option("--rest-schemas", c.rest_schemas,
                   "Schemas the data API (/rest/v1) exposes, the first the default")
        ->envname("API_REST_SCHEMAS")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--rest-extra-search-path", c.rest_extra_search_path,
                   "Schemas after the exposed one in a data-API request's search_path")
        ->envname("API_REST_EXTRA_SEARCH_PATH")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--rest-max-rows", c.rest_max_rows,
                   "Most rows one data-API response holds (0 = no limit)")
        ->envname("API_REST_MAX_ROWS")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
        ->capture_default_str();
    app.add_option("--rest-tx-override", c.rest_tx_override,
                   "Honour Prefer: tx=commit|rollback on the data API")
        ->envname("API_REST_TX_OVERRIDE")
        ->capture_default_str();
    app.add_option("--rest-aggregates", c.rest_aggregates,
                   "Allow aggregate functions (count(), sum() ...) in the data API's select")
        ->envname("API_REST_AGGREGATES")
        ->capture_default_str();
    app.add_option("--rest-plan", c.rest_plan,
                   "Answer the EXPLAIN media type (application/vnd.pgrst.plan) on the data API")
        ->envname("API_REST_PLAN")
        ->capture_default_str();
    app.add_option("--rest-statement-timeout", c.rest_statement_timeout,
                   "statement_timeout of a data-API request unless its role sets its own")
        ->envname("API_REST_STATEMENT_TIMEOUT")
        ->capture_default_str();
    app.add_option("--rest-body-limit", c.rest_body_limit, "Largest data-API request body, bytes")
        ->envname("API_REST_BODY_LIMIT")
        ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30))
        ->capture_default_str();
    app.add_option("--rest-schema-poll", c.rest_schema_poll_s,
                   "Seconds between schema-cache reloads besides NOTIFY pgrst")
        ->envname("API_REST_SCHEMA_POLL")
        ->check(CLI::Range(1.0, 86400.0))
        ->capture_default_str();
    // Realtime (docs/realtime.md, "Settings").
    auto& rt = c.realtime;
    app.add_option("--realtime", rt.enabled, "Serve /realtime/v1/websocket and capture changes")
        ->envname("REALTIME")
        ->capture_default_str();
    cli.secret(app.add_option("--realtime-database-url", rt.database_url,
                              "The REPLICATION login realtime reads the change stream with")
                   ->envname("REALTIME_DATABASE_URL"));
    app.add_option("--realtime-slot", rt.slot,
                   "The prefix of the logical replication slot realtime reads (<slot>_<instance>)")
        ->envname("REALTIME_SLOT")
        ->capture_default_str();
    app.add_option("--realtime-publication", rt.publication, "The publication the slot streams")
        ->envname("REALTIME_PUBLICATION")
        ->capture_default_str();
    app.add_option("--realtime-max-sockets", rt.max_sockets, "Realtime sockets this process holds")
        ->envname("REALTIME_MAX_SOCKETS")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1'000'000}))
        ->capture_default_str();
    app.add_option("--realtime-max-channels", rt.max_channels, "Channels one socket may join")
        ->envname("REALTIME_MAX_CHANNELS")
        ->check(CLI::Range(std::size_t{1}, std::size_t{10'000}))
        ->capture_default_str();
    app.add_option("--realtime-max-bindings", rt.max_bindings,
                   "postgres_changes bindings one channel may have")
        ->envname("REALTIME_MAX_BINDINGS")
        ->check(CLI::Range(std::size_t{1}, std::size_t{10'000}))
        ->capture_default_str();
    app.add_option("--realtime-message-limit", rt.message_limit,
                   "Largest message a realtime client may send, bytes")
        ->envname("REALTIME_MESSAGE_LIMIT")
        ->check(CLI::Range(std::size_t{1024}, std::size_t{16} << 20))
        ->capture_default_str();
    app.add_option("--realtime-queue-limit", rt.queue_limit,
                   "Bytes queued for one realtime client before it is dropped as too slow")
        ->envname("REALTIME_QUEUE_LIMIT")
        ->check(CLI::Range(std::size_t{4096}, std::size_t{1} << 30))
        ->capture_default_str();
    app.add_option("--realtime-joins-per-second", rt.joins_per_second,
                   "Channel joins one socket may make a second (bursts of twice that)")
        ->envname("REALTIME_JOINS_PER_SECOND")
        ->check(CLI::Range(0.1, 10'000.0))
        ->capture_default_str();
    app.add_option("--realtime-idle-timeout", rt.idle_timeout_s,
                   "Seconds without a frame from a realtime client before it is closed")
        ->envname("REALTIME_IDLE_TIMEOUT")
        ->check(CLI::Range(1.0, 3600.0))
        ->capture_default_str();
    app.add_option("--realtime-heartbeat-timeout", rt.heartbeat_timeout_s,
                   "Seconds without a Phoenix message (heartbeat) before a realtime socket closes")
        ->envname("REALTIME_HEARTBEAT_TIMEOUT")
        ->check(CLI::Range(5.0, 3600.0))
        ->capture_default_str();
    app.add_option("--realtime-max-sockets-per-address", rt.max_sockets_per_address,
                   "Realtime sockets one client address may hold (0: no cap)")
        ->envname("REALTIME_MAX_SOCKETS_PER_ADDRESS")
        ->capture_default_str();
    app.add_option("--realtime-max-sockets-per-user", rt.max_sockets_per_user,
                   "Realtime sockets one user may hold (0: no cap)")
        ->envname("REALTIME_MAX_SOCKETS_PER_USER")
        ->capture_default_str();
    app.add_option("--realtime-instance", rt.instance,
                   "This gateway's part of its slot's name (default: from host name and port)")
        ->envname("REALTIME_INSTANCE");
    app.add_option(
           "--realtime-slot-abandon", rt.slot_abandon_s,
           "Seconds another gateway's inactive slot is kept before it is dropped (0: never)")
        ->envname("REALTIME_SLOT_ABANDON")
        ->check(CLI::Range(0.0, 30.0 * 86400))
        ->capture_default_str();
    add_storage_options(cli, c.storage);  // STORAGE_* (storage.cpp, docs/storage.md)
    add_limit_options(cli, c.limits);
    app.add_option("--outbound-allow", c.outbound_allow,
                   "Comma list of CIDRs, addresses or host names (each optionally :port) the "
                   "gateway may reach for tenants besides public addresses (connectors) and the "
                   "agent's own host (DevTools); database ports and link-local stay refused")
        ->envname("API_OUTBOUND_ALLOW");
}

void validate(gateway_config& c) {
    if (c.database_url.empty()) {
        if (const char* d = std::getenv("DATABASE_URL")) c.database_url = d;
    }
    if (c.jwt_secret.size() < 32) {
        throw core::config_error("JWT_SECRET must be set and at least 32 characters");
    }
    if (!c.service_role_key.empty() && c.service_role_key.size() < 20) {
        throw core::config_error("SERVICE_ROLE_KEY must be at least 20 characters");
    }
    if (!http::parse_url(c.embedder_url)) {
        throw core::config_error("EMBEDDER_URL must be an http:// URL");
    }
    if (c.config_dir.empty()) {
        const char* home = std::getenv("HOME");
        c.config_dir = std::string(home ? home : ".") + "/.config/awp";
    }
    if (c.agents_dir.empty()) {
        const char* home = std::getenv("HOME");
        c.agents_dir = std::string(home ? home : ".") + "/.openclaw";
    }
    if (!c.hosted_secrets_key.empty()) {
        (void)core::crypto::parse_hosted_secrets_key(c.hosted_secrets_key);  // config_error
    }
    while (!c.public_url.empty() && c.public_url.back() == '/') c.public_url.pop_back();
    if (!c.public_url.empty() && c.public_url.rfind("http://", 0) != 0 &&
        c.public_url.rfind("https://", 0) != 0) {
        throw core::config_error("API_PUBLIC_URL must be an http(s):// URL");
    }
    if (!c.upload_spool_dir.empty()) {
        std::error_code ec;
        // Made on first start, for the daemon's user alone.
        if (fs::create_directories(c.upload_spool_dir, ec)) {
            fs::permissions(c.upload_spool_dir, fs::perms::owner_all, ec);
        }
        if (!fs::is_directory(c.upload_spool_dir, ec) ||
            ::access(c.upload_spool_dir.c_str(), W_OK | X_OK) != 0) {
            throw core::config_error("API_UPLOAD_SPOOL_DIR must be a writable directory, got \"" +
                                     c.upload_spool_dir + "\"");
        }
    }
    if (c.sources_redirect.empty()) c.sources_redirect = "/settings/sources";
    if (!c.signup_tenant.empty() && !core::is_valid_uuid(c.signup_tenant)) {
        throw core::config_error("API_SIGNUP_TENANT must be a tenant's UUID, got \"" +
                                 c.signup_tenant + "\"");
    }
    if (!c.workspace_id.empty() && !core::is_valid_uuid(c.workspace_id)) {
        throw core::config_error("API_WORKSPACE_ID must be a UUID, got \"" + c.workspace_id + "\"");
    }
    if (c.workspace_label.empty()) c.workspace_label = "awp";
    if (c.gateway_id.empty()) throw core::config_error("GATEWAY_ID must not be empty");
    if (!is_cdp_url(c.browser_cdp_url)) {
        throw core::config_error("API_BROWSER_CDP_URL must be http://host:port, got \"" +
                                 c.browser_cdp_url + "\"");
    }
    (void)http::outbound_policy(c.outbound_allow, {});  // config_error naming a bad entry
    if (c.rest_schemas.empty()) throw core::config_error("API_REST_SCHEMAS must name a schema");
    for (const auto& sch : c.rest_schemas) {
        if (sch.empty() || sch.size() > 63) {
            throw core::config_error("API_REST_SCHEMAS: \"" + sch + "\" is not a schema name");
        }
        // Rows of storage.objects name bytes in the store: written through /storage/v1 only.
        if (sch == "storage") {
            throw core::config_error(
                "API_REST_SCHEMAS must not expose schema storage "
                "(its files are served by /storage/v1)");
        }
    }
    validate_storage(c.storage);
    for (const char ch : c.rest_statement_timeout) {
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != ' ' && ch != '.') {
            throw core::config_error("API_REST_STATEMENT_TIMEOUT must be a duration like 30s");
        }
    }
    validate_limits(c.limits);
    if (c.threads == 0)
        c.threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

gateway::gateway(net::io_context& ioc, gateway_config cfg)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      limiter_(cfg_.login_max_failures,
               std::chrono::seconds(static_cast<long>(cfg_.login_window_s))) {
    if (sodium_init() < 0) throw core::error("libsodium failed to initialise");
    db_ =
        std::make_unique<db_pool>(ioc_, cfg_.database_url, cfg_.db_pool_size, cfg_.workspace_pools);
    session_store::options so;
    so.jwt_secret = cfg_.jwt_secret;
    so.api_ttl_s = cfg_.session_ttl_s;
    so.jwt_expiry_s = cfg_.jwt_expiry_s;
    so.refresh_reuse_interval_s = cfg_.refresh_reuse_interval_s;
    // LISTEN needs a session: behind a transaction pooler it is the direct DSN.
    so.listen_dsn = cfg_.wake_database_url.empty() ? cfg_.database_url : cfg_.wake_database_url;
    sessions_ = std::make_unique<session_store>(ioc_, *db_, std::move(so));
    db_->on_workspace_closed = [this](const std::string& id) { sessions_->deactivate(id); };
    registry_ = std::make_unique<registry>(cfg_.config_dir);
    char buf[crypto_pwhash_STRBYTES];
    const auto pw = core::crypto::random_bytes(16);
    if (crypto_pwhash_str(buf, pw.data(), pw.size(), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                          crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0) {
        throw core::error("cannot compute the dummy password hash");
    }
    dummy_hash_ = buf;
    load_templates();
    connectors_ = std::make_unique<connector_registry>(cfg_.connectors_dir);
    http::server_options o;
    o.bind = cfg_.bind;
    o.port = cfg_.port;
    o.name = "awp-api-gateway";
    o.hsts = cfg_.hsts;
    o.access_log = cfg_.access_log;
    o.trusted = cfg_.limits.proxies;
    rates_ = std::make_unique<request_rates>(cfg_.limits);
    rest_ = std::make_unique<rest_state>();
    realtime_ = std::make_unique<realtime_hub>(*this, ioc_, cfg_.realtime);
    storage_ = std::make_unique<storage_service>(*this, ioc_, cfg_.storage);
    server_ = std::make_unique<http::server>(ioc_, routes(), o);
}

gateway::~gateway() = default;

void gateway::listen() { server_->listen(); }
unsigned short gateway::port() const { return server_->port(); }

net::awaitable<void> gateway::run() {
    start_schema_listener();
    // The signed-out sessions of every database a token may name (the own one, each registered
    // workspace's) are read before the first request is served: a restart forgets no sign-out.
    // A database that does not answer within the wait is read in the background; until then
    // its sessions' tokens are refused (503), never let through.
    sessions_->start();
    try {
        retain_workspaces(*registry_->snapshot());
    } catch (const registry_error& e) {
        core::log::warn("workspace registry unreadable at start", {{"error", e.what()}});
    }
    co_await sessions_->wait_all_ready(std::chrono::seconds(5));
    core::daemon::notify_ready();
    realtime_->start();
    storage_->start();
    co_await server_->run();
    co_await realtime_->wait_stopped(std::chrono::seconds(5));
    co_await storage_->wait_stopped(std::chrono::seconds(5));
    // Its reads hold pooled connections: let them end before the pool goes.
    co_await sessions_->wait_stopped(std::chrono::seconds(5));
}

net::awaitable<response> gateway::ready_then(net::awaitable<response> (gateway::*fn)(request),
                                             request r) {
    const auto workspace = session_workspace(r);
    if (!workspace.empty()) co_await sessions_->wait_ready(workspace, std::chrono::seconds(5));
    co_return co_await (this->*fn)(std::move(r));
}

void gateway::request_stop() {
    stopping_ = true;
    if (rest_ && rest_->listener) rest_->listener->stop();
    if (sessions_) sessions_->stop();
    if (realtime_) realtime_->stop();
    if (storage_) storage_->stop();
    server_->stop();
}

http::router gateway::routes() {
    http::router r;
    // Every state-changing method is refused cross-site here, once, before any handler runs
    // (Origin / Sec-Fetch-Site); GET and HEAD change nothing (docs/security.md), except the
    // spec's GET /api/workspaces/switch, which refuses a cross-site GET itself (registry.cpp).
    auto bind = [this](net::awaitable<response> (gateway::*fn)(request)) -> http::handler {
        return [this, fn](request req) {
            if (req.method != "GET" && req.method != "HEAD" && req.method != "OPTIONS") {
                check_same_origin(req);
            }
            // A registered workspace not watched now: its sessions' sign-outs are read before a
            // request of one of them is handled (sessions.hpp); else straight to the handler.
            if (sessions_->idle_workspaces() != 0) return ready_then(fn, std::move(req));
            return (this->*fn)(std::move(req));
        };
    };
    http::route_options small;
    small.body_limit = 0;
    http::route_options json_body;
    json_body.body_limit = 256 * 1024;
    http::route_options upload;
    upload.body_limit = cfg_.upload_limit + 64 * 1024;  // multipart framing on top
    upload.spool_body = true;  // to an unlinked file, not memory: uploads of any size
    upload.spool_dir = cfg_.upload_spool_dir;
    r.add("GET", "/api/health", bind(&gateway::health), small);
    r.add("GET", "/api/config", bind(&gateway::public_config), small);
    r.add("POST", "/api/auth/login", bind(&gateway::login), json_body);
    r.add("POST", "/api/auth/logout", bind(&gateway::logout), small);
    r.add("GET", "/api/auth/session", bind(&gateway::whoami), small);
    r.add("GET", "/api/workspaces", bind(&gateway::workspaces_get), small);
    r.add("POST", "/api/workspaces", bind(&gateway::workspaces_post), json_body);
    r.add(std::vector<std::string>{"GET", "POST"}, "/api/workspaces/switch",
          bind(&gateway::workspaces_switch), json_body);
    r.add("POST", "/api/workspaces/validate", bind(&gateway::workspaces_validate), json_body);
    r.add("GET", "/api/agents/templates", bind(&gateway::templates), small);
    r.add("GET", "/api/agents/:slug/skills", bind(&gateway::skills_get), small);
    r.add("POST", "/api/agents/:slug/skills", bind(&gateway::skills_post), json_body);
    r.add("GET", "/api/agents/:slug/skills/:id/versions", bind(&gateway::skill_versions), small);
    r.add("GET", "/api/agents/:slug/files", bind(&gateway::files_get), small);
    r.add("GET", "/api/agents/:slug/files/*path", bind(&gateway::files_get), small);
    r.add("POST", "/api/agents/:slug/files", bind(&gateway::files_post), upload);
    r.add("POST", "/api/embed", bind(&gateway::embed), json_body);
    r.add("GET", "/api/agents/:slug/browser/state", bind(&gateway::browser_state), small);
    r.add("GET", "/api/agents/:slug/browser/screenshot", bind(&gateway::browser_screenshot), small);
    r.add(std::vector<std::string>{"GET", "POST"}, "/api/sources/browse",
          bind(&gateway::sources_browse), json_body);
    r.add("POST", "/api/sources/validate", bind(&gateway::sources_validate), json_body);
    r.add("GET", "/api/sources/oauth/:provider/start", bind(&gateway::oauth_start), small);
    r.add("GET", "/api/sources/oauth/:provider/callback", bind(&gateway::oauth_callback), small);

    // /auth/v1 (gotrue.cpp): bearer-token routes that read no cookie, so a cross-site request
    // gains nothing a script could not do: no same-origin check; any origin may read the answers
    // (CORS), as on the hosted platform. Errors in GoTrue's shape.
    auto gotrue = [this](net::awaitable<response> (gateway::*fn)(request)) -> http::handler {
        return [this, fn](request req) { return auth_v1_limited(fn, std::move(req)); };
    };
    // What the server itself refuses on these routes (413 ...) answers in each dialect's shape.
    auto gotrue_shape = [](const http::headers& h, unsigned status, std::string_view code,
                           std::string_view message) {
        return gotrue_refusal(h, status, status == 413 ? "validation_failed" : std::string(code),
                              std::string(message));
    };
    http::route_options auth_small = small;
    auth_small.error_shape = gotrue_shape;
    http::route_options auth_body;
    auth_body.body_limit = 32 * 1024;  // credentials and at most 16 KiB of user metadata
    auth_body.error_shape = gotrue_shape;
    r.add("POST", "/auth/v1/token", gotrue(&gateway::auth_token), auth_body);
    r.add("POST", "/auth/v1/signup", gotrue(&gateway::auth_signup), auth_body);
    r.add("GET", "/auth/v1/user", gotrue(&gateway::auth_user_get), auth_small);
    r.add("PUT", "/auth/v1/user", gotrue(&gateway::auth_user_put), auth_body);
    r.add("POST", "/auth/v1/logout", gotrue(&gateway::auth_logout), auth_body);
    r.add("GET", "/auth/v1/reauthenticate", gotrue(&gateway::auth_reauthenticate), auth_small);
    r.add("GET", "/auth/v1/settings", gotrue(&gateway::auth_settings), auth_small);
    r.add("GET", "/auth/v1/health", gotrue(&gateway::auth_health), auth_small);
    r.add("GET", "/auth/v1/.well-known/jwks.json", gotrue(&gateway::auth_jwks), auth_small);
    // The admin API (gotrue_admin.cpp): the service role only; what awp does not serve is
    // answered after the same check, in GoTrue's words.
    r.add("GET", "/auth/v1/admin/users", gotrue(&gateway::admin_users_list), auth_small);
    r.add("POST", "/auth/v1/admin/users", gotrue(&gateway::admin_user_create), auth_body);
    r.add("GET", "/auth/v1/admin/users/:id", gotrue(&gateway::admin_user_get), auth_small);
    r.add("PUT", "/auth/v1/admin/users/:id", gotrue(&gateway::admin_user_update), auth_body);
    r.add("DELETE", "/auth/v1/admin/users/:id", gotrue(&gateway::admin_user_delete), auth_body);
    r.add("GET", "/auth/v1/admin/users/:id/factors", gotrue(&gateway::admin_user_factors),
          auth_small);
    r.add(std::vector<std::string>{"PUT", "DELETE"}, "/auth/v1/admin/users/:id/factors/:factor",
          gotrue(&gateway::admin_user_factors), auth_body);
    r.add("POST", "/auth/v1/invite", gotrue(&gateway::admin_unsupported), auth_body);
    r.add(std::vector<std::string>{"GET", "POST", "PUT", "PATCH", "DELETE"}, "/auth/v1/admin/*path",
          gotrue(&gateway::admin_unsupported), auth_body);
    r.add(
        "OPTIONS", "/auth/v1/*path",
        [this](request req) { return data_api_preflight(std::move(req)); }, small);
    // The data API: a bearer token (never a cookie) says who calls, so cross-site requests carry
    // no ambient authority and the same-origin check does not apply (docs/security.md).
    http::route_options rest_body;
    rest_body.body_limit = cfg_.rest_body_limit;
    rest_body.raw_query = true;  // PostgREST's own grammar reads it (PGRST100, not bad_query)
    rest_body.error_shape = [](const http::headers& h, unsigned status, std::string_view,
                               std::string_view message) {
        return rest_error(
            h, status, "PGRST102",
            status == 413   ? "The request body is too large"
            : status == 408 ? "The request body was not received in time"
                            : "The request body is malformed",
            message, status == 413 ? "Send a smaller body: the limit is API_REST_BODY_LIMIT." : "");
    };
    const std::vector<std::string> rest_methods{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
    auto rest_handler = [this](request req) { return rest_request(std::move(req)); };
    r.add(rest_methods, "/rest/v1", rest_handler, rest_body);
    r.add(rest_methods, "/rest/v1/*path", rest_handler, rest_body);
    // Files (storage*.cpp): /storage/v1 takes a bearer token or apikey, never a cookie, so no
    // same-origin check (as /rest/v1).
    storage_->add_routes(r);
    // Realtime (realtime*.cpp): a websocket whose apikey parameter says who calls; no cookie is
    // read, so no same-origin check (as /rest/v1).
    if (cfg_.realtime.enabled) {
        r.add_websocket("/realtime/v1/websocket", realtime_->handler(),
                        realtime_->socket_options());
    }
    return r;
}

// ---- public ---------------------------------------------------------------------------------

net::awaitable<response> gateway::health(request r) {
    // Anyone may ask whether the gateway is up (and realtime's state); the figures (sockets,
    // channels, events, visibility checks, the slot's lag, rate-limit buckets, the object store)
    // are an operator's: the service role or an operator's session.
    bool op = false;
    if (r.header.has("authorization") || r.header.has("cookie")) {
        try {
            op = require_operator(r).is_operator;
        } catch (const std::exception&) {
            op = false;  // a caller who is not an operator gets the public answer, not a 401
        }
    }
    std::string body = R"({"ok":true,"ts":")" + core::now_iso8601_utc() + R"(","realtime":)";
    if (op) {
        body += realtime_->health_json() + R"(,"rate_limit_buckets":)" +
                std::to_string(rates_->buckets()) + R"(,"storage":)" + storage_->health_json();
    } else {
        body += realtime_->public_health_json();
    }
    co_return response::json(200, body + "}");
}

std::string own_workspace_id(const gateway_config& c) {
    if (!c.workspace_id.empty()) return c.workspace_id;
    // HKDF of the secret: stable across restarts and hosts of one install, tells nothing of it.
    const auto b = core::crypto::hkdf_sha256(c.jwt_secret, "awp-own-workspace-v1", "id", 16);
    std::array<std::uint8_t, 16> bytes{};
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(b[i]);
    bytes[6] = static_cast<std::uint8_t>((bytes[6] & 0x0fU) | 0x40U);  // version 4 (random-like)
    bytes[8] = static_cast<std::uint8_t>((bytes[8] & 0x3fU) | 0x80U);  // RFC 4122 variant
    return core::uuid(bytes).to_string();
}

std::string gateway::public_base_url(const request& r) const {
    if (!cfg_.public_url.empty()) return cfg_.public_url;
    auto host = r.header.get("host").value_or("");
    const bool plain = !host.empty() && host.size() <= 255 &&
                       host.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                           "0123456789.-:[]") == std::string_view::npos;
    if (plain) return "http://" + std::string(host);
    return "http://" + cfg_.bind + ":" + std::to_string(port());
}

net::awaitable<response> gateway::public_config(request r) {
    // Public: what a sign-in page and the client library need (the workspace a login would be
    // for, its label, the data API's URL and anon key) and nothing of a database's connection
    // details. Without a registered workspace that applies, the gateway's own database: it is a
    // workspace too (issue 34), served at this origin (/rest/v1, /auth/v1).
    std::optional<workspace> ws;
    try {
        ws = login_workspace(r, std::nullopt);
    } catch (const registry_error&) {
        ws.reset();  // the registry's trouble is for operators (their routes say it)
    }
    json_out o;
    o.w.StartObject();
    o.key("workspace");
    o.w.StartObject();
    if (!ws) {
        o.kv("workspaceId", own_workspace_id(cfg_));
        o.kv("label", cfg_.workspace_label);
        o.kv("emoji", cfg_.workspace_emoji);
        o.kv("url", public_base_url(r));
        o.kv("anonKey", core::crypto::anon_key(cfg_.jwt_secret));
    } else {
        o.kv("workspaceId", ws->id);
        o.kv("label", ws->label);
        o.kv("emoji", ws->emoji);
        o.key("url");
        if (is_postgres_url(ws->url)) {
            o.w.Null();
        } else {
            o.str(ws->url);
        }
        o.kv("anonKey", ws->anon_key);
    }
    o.w.EndObject();
    o.w.EndObject();
    co_return response::json(200, o.str());
}

// ---- embed ----------------------------------------------------------------------------------

net::awaitable<response> gateway::embed(request r) {
    require_session(r);
    if (r.media_type() != "application/json") {
        throw http_error(415, "unsupported_media_type", "send application/json");
    }
    auto body = parse_object_body(r.body);
    auto it = body.FindMember("input");
    if (it == body.MemberEnd() || !it->value.IsString()) {
        throw http_error(422, "invalid_field", "input must be a string");
    }
    std::string input(it->value.GetString(), it->value.GetStringLength());
    if (input.find_first_not_of(" \t\r\n") == std::string::npos) {
        throw http_error(422, "invalid_field", "input must not be blank");
    }
    http::client_request up;
    up.method = "POST";
    auto base = cfg_.embedder_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    up.url = base + "/embed";
    up.header.add("Content-Type", "application/json");
    json_out j;
    j.w.StartObject();
    j.kv("input", input);
    j.w.EndObject();
    up.body = j.str();
    up.timeout = std::chrono::milliseconds(static_cast<long>(cfg_.embed_timeout_s * 1000));
    std::optional<response> answer;
    std::optional<http::upstream_error::kind> failure;
    try {
        answer = co_await http::fetch(std::move(up));
    } catch (const http::upstream_error& e) {
        failure = e.what_kind();
        core::log::warn("embedder call failed", {{"error", e.what()}});
    }
    if (failure) {
        if (*failure == http::upstream_error::kind::timeout) {
            throw http_error(504, "embedder_timeout", "the embedder did not answer in time");
        }
        throw http_error(502, "embedder_unavailable", "the embedder is unreachable");
    }
    if (answer->status < 200 || answer->status >= 300) {
        throw http_error(502, "embedder_error",
                         "the embedder answered " + std::to_string(answer->status));
    }
    auto d = core::json::try_parse(answer->body, core::json::kDocument);
    if (!d || !d->IsObject() || !d->HasMember("embedding")) {
        throw http_error(502, "embedder_error", "the embedder's answer is not an embedding");
    }
    co_return response::json(200, std::move(answer->body));
}

// ---- templates ------------------------------------------------------------------------------

void gateway::load_templates() {
    std::error_code ec;
    if (!fs::is_directory(cfg_.templates_dir, ec)) {
        core::log::warn("no agent templates directory", {{"dir", cfg_.templates_dir}});
        return;
    }
    struct tmpl {
        std::string name;
        std::string json;
    };
    std::vector<tmpl> all;
    for (const auto& e : fs::directory_iterator(cfg_.templates_dir, ec)) {
        if (!e.is_directory()) continue;
        const auto dir = e.path().filename().string();
        if (dir.empty() || dir.front() == '_' || dir.front() == '.') continue;
        std::ifstream in(e.path() / "agent.json");
        if (!in) continue;
        std::stringstream ss;
        ss << in.rdbuf();
        rapidjson::Document d;
        try {
            d = core::json::parse_object(ss.str(), core::json::kSmall);
        } catch (const core::json::parse_error& bad) {
            core::log::warn("bad template manifest", {{"template", dir}, {"error", bad.what()}});
            continue;
        }
        if (!d.HasMember("name") || !d["name"].IsString()) {
            core::log::warn("bad template manifest", {{"template", dir}, {"error", "no name"}});
            continue;
        }
        json_out o;
        o.w.StartObject();
        o.kv("id", dir);
        o.kv("branch", "template/" + dir);
        for (auto m = d.MemberBegin(); m != d.MemberEnd(); ++m) {
            const std::string k(m->name.GetString(), m->name.GetStringLength());
            if (k == "id" || k == "branch") continue;
            o.key(k);
            m->value.Accept(o.w);
        }
        o.w.EndObject();
        all.push_back({d["name"].GetString(), o.str()});
    }
    std::sort(all.begin(), all.end(), [](const tmpl& a, const tmpl& b) { return a.name < b.name; });
    std::string out = "[";
    for (std::size_t i = 0; i < all.size(); ++i) out += (i ? "," : "") + all[i].json;
    templates_json_ = out + "]";
    core::log::info("agent templates loaded", {{"count", all.size()}});
}

net::awaitable<response> gateway::templates(request r) {
    require_session(r);
    co_return response::json(200, templates_json_);
}

}  // namespace awp::api
