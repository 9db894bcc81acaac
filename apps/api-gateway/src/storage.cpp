// /storage/v1's service (storage.hpp): settings, the store and its thread pool, upload slots,
// the transaction every request runs in as its caller, errors in the platform's shape, the
// route table, and the housekeeping that keeps the store and the rows in step (settling what a
// gone process left staged, removing deleted versions' bytes after their grace period).
#include "storage.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"
#include "awp/http/multipart.hpp"
#include "awp/rest/error.hpp"
#include "awp/rest/query.hpp"
#include "awp/storage/url_token.hpp"
#include "gateway.hpp"
#include "json.hpp"
#include "storage_sql.hpp"

namespace awp::api {

namespace fs = std::filesystem;

// ---- settings -------------------------------------------------------------------------------

void add_storage_options(core::daemon::cli& cli, storage_config& c) {
    auto& app = cli.app();
    app.add_option("--storage", c.enabled, "Serve /storage/v1 (files of the client library)")
        ->envname("STORAGE")
        ->capture_default_str();
    app.add_option("--storage-dir", c.dir,
                   "Folder of the object store (default $STATE_DIRECTORY/storage, else "
                   "~/.local/share/awp/storage)")
        ->envname("STORAGE_DIR");
    app.add_option("--storage-file-size-limit", c.file_size_limit,
                   "Largest object in bytes (a bucket's file_size_limit may be lower)")
        ->envname("STORAGE_FILE_SIZE_LIMIT")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 42))
        ->capture_default_str();
    app.add_option("--storage-tenant-quota", c.tenant_quota,
                   "Bytes one tenant may store in all (0: no quota); "
                   "storage.tenant_usage.max_bytes overrides it per tenant")
        ->envname("STORAGE_TENANT_QUOTA")
        ->capture_default_str();
    app.add_option("--storage-min-free", c.min_free,
                   "Bytes the store's disk keeps free: an upload that would go below is refused "
                   "(507)")
        ->envname("STORAGE_MIN_FREE")
        ->capture_default_str();
    app.add_option("--storage-max-uploads", c.max_uploads, "Uploads in progress at once")
        ->envname("STORAGE_MAX_UPLOADS")
        ->check(CLI::Range(std::size_t{1}, std::size_t{100'000}))
        ->capture_default_str();
    app.add_option("--storage-max-uploads-per-client", c.max_uploads_per_client,
                   "Uploads in progress at once from one client address")
        ->envname("STORAGE_MAX_UPLOADS_PER_CLIENT")
        ->check(CLI::Range(std::size_t{1}, std::size_t{100'000}))
        ->capture_default_str();
    app.add_option("--storage-upload-min-rate", c.upload_min_rate,
                   "Slowest upload accepted, bytes/s: a body's deadline is 30 s plus its length "
                   "at this rate")
        ->envname("STORAGE_UPLOAD_MIN_RATE")
        ->check(CLI::Range(1.0, 1e12))
        ->capture_default_str();
    app.add_option("--storage-upload-timeout", c.upload_timeout_s,
                   "Longest an upload's body may take, seconds (and the deadline of one sent "
                   "without a length)")
        ->envname("STORAGE_UPLOAD_TIMEOUT")
        ->check(CLI::Range(1.0, 86400.0))
        ->capture_default_str();
    app.add_option("--storage-signed-upload-ttl", c.signed_upload_ttl_s,
                   "Seconds a signed upload URL is valid")
        ->envname("STORAGE_SIGNED_UPLOAD_TTL")
        ->check(CLI::Range(1.0, 7.0 * 86400))
        ->capture_default_str();
    app.add_option("--storage-delete-grace", c.delete_grace_s,
                   "Seconds the bytes of a deleted or replaced object stay (a download that read "
                   "its row a moment before still gets them)")
        ->envname("STORAGE_DELETE_GRACE")
        ->check(CLI::Range(0.0, 86400.0))
        ->capture_default_str();
    app.add_option("--storage-reaper-interval", c.reaper_interval_s,
                   "Seconds between removals of deleted objects' bytes")
        ->envname("STORAGE_REAPER_INTERVAL")
        ->check(CLI::Range(0.1, 3600.0))
        ->capture_default_str();
    app.add_option("--storage-threads", c.threads, "Threads for the store's file work")
        ->envname("STORAGE_THREADS")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    app.add_option("--storage-fsync", c.fsync,
                   "fsync an object's bytes before its row names them (off: faster, and a power "
                   "loss may lose recent uploads)")
        ->envname("STORAGE_FSYNC")
        ->capture_default_str();
}

void validate_storage(storage_config& c) {
    if (!c.enabled) return;
    if (c.dir.empty()) {
        const char* state = std::getenv("STATE_DIRECTORY");
        const char* home = std::getenv("HOME");
        if (state && *state) {
            std::string first(state);
            first = first.substr(0, first.find(':'));  // systemd: several, colon-separated
            c.dir = first + "/storage";
        } else if (home && *home) {
            c.dir = std::string(home) + "/.local/share/awp/storage";
        } else {
            // No state folder to default to: files are not kept in a place nobody chose.
            c.enabled = false;
            c.off_reason = "STORAGE_DIR is not set and there is no HOME or STATE_DIRECTORY";
            return;
        }
    }
    if (c.dir.front() != '/') {
        std::error_code ec;
        c.dir = fs::absolute(c.dir, ec).string();
    }
}

// ---- errors ---------------------------------------------------------------------------------

http::response storage_error::to_response() const {
    json_out o;
    o.w.StartObject();
    o.kv("statusCode", std::to_string(status_));
    o.kv("error", error_);
    o.kv("code", code_);
    o.kv("message", message_);
    o.w.EndObject();
    auto res = http::response::json(status_, o.str());
    for (const auto& [n, v] : extra.fields()) res.header.add(n, v);
    return res;
}

storage_error storage_sql_error(const pg::sql_error& e) {
    const auto& state = e.sqlstate();
    if (state == "42501") return {403, "AccessDenied", "Unauthorized", e.primary()};
    if (state == "23505")
        return {409, "KeyAlreadyExists", "Duplicate", "The resource already exists"};
    if (state == "23514") {
        if (e.primary().find("objects_name_nfc") != std::string::npos) {
            return {400, "InvalidKey", "Invalid Input",
                    "the object name is not in Unicode normalization form NFC (compose it)"};
        }
        if (e.primary().find("buckets_") != std::string::npos) {
            return {400, "InvalidBucketName", "Invalid Input", "Bucket name invalid"};
        }
        return {400, "InvalidRequest", "Invalid Input", e.primary()};
    }
    if (state == "AW009") {
        return {403, "AccessDenied", "Unauthorized",
                "the session has no tenant (app_metadata.tenant_id)"};
    }
    if (state == "AW011") return {413, "EntityTooLarge", "quota_exceeded", e.primary()};
    if (state == "57014") {
        return {504, "DatabaseTimeout", "DatabaseTimeout", "The database did not answer in time"};
    }
    if (state == "25006") return {403, "AccessDenied", "Unauthorized", e.primary()};
    if (state.starts_with("22")) return {400, "InvalidRequest", "Invalid Input", e.primary()};
    core::log::error("storage: database error", {{"sqlstate", state}, {"error", e.primary()}});
    return {500, "DatabaseError", "internal", "Internal server error"};
}

namespace {

/// CORS of every /storage/v1 answer: bearer tokens only (never a cookie), so any origin may
/// read them, with the headers a download's reader needs exposed.
void add_cors(bool cross_origin, http::response& res) {
    if (!cross_origin) return;
    res.header.set("Access-Control-Allow-Origin", "*");
    res.header.set("Access-Control-Expose-Headers",
                   "Content-Length, Content-Range, Content-Type, Content-Disposition, ETag, "
                   "Last-Modified, Accept-Ranges, Cache-Control, X-Robots-Tag");
}

net::awaitable<http::response> preflight(http::request) {
    http::response res;
    res.status = 200;
    res.header.set("Access-Control-Allow-Origin", "*");
    res.header.set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, DELETE, OPTIONS");
    res.header.set("Access-Control-Allow-Headers",
                   "Authorization, apikey, Content-Type, Cache-Control, x-client-info, x-upsert, "
                   "x-metadata, Range, If-None-Match, Content-MD5");
    res.header.set("Access-Control-Max-Age", "86400");
    co_return res;
}

net::awaitable<http::response> not_supported(http::request) {
    throw storage_error(400, "NotSupported", "not_supported",
                        "this operation is not supported by awp (docs/storage.md, coverage)");
    co_return http::response{};
}

}  // namespace

namespace storage_detail {

[[noreturn]] void rethrow_job(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const storage::store_error& se) {
        core::log::error("storage: store failed", {{"error", se.what()}});
        if (se.disk_full()) {
            throw storage_error(507, "InsufficientStorage", "insufficient_storage",
                                "the store's disk is full");
        }
        throw storage_error(500, "InternalError", "internal", "Internal server error");
    }
}

}  // namespace storage_detail

// ---- request helpers ------------------------------------------------------------------------

rapidjson::Document storage_body(const http::request& r) {
    std::string_view body = r.body;
    while (!body.empty() && std::isspace(static_cast<unsigned char>(body.front())))
        body.remove_prefix(1);
    if (body.empty()) {
        rapidjson::Document d;
        d.SetObject();
        return d;
    }
    try {
        return core::json::parse_object(body, core::json::kRequestBody);
    } catch (const core::json::parse_error& e) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            std::string("the body must be a JSON object: ") + e.what());
    }
}

storage::object_path storage_target(const http::request& r, bool name_required) {
    auto t = storage::split_object_path(r.param("path"));
    if (!t.problem.empty()) {
        if (t.bad_bucket) throw storage_error(400, "InvalidBucketName", "Invalid Input", t.problem);
        if (name_required || !t.name.empty() || t.problem != "the object name is empty") {
            throw storage_error(400, "InvalidKey", "Invalid Input", t.problem);
        }
        t.problem.clear();
    }
    return t;
}

std::optional<std::int64_t> storage_int(const rapidjson::Value& o, const char* name) {
    const auto it = o.FindMember(name);
    if (it == o.MemberEnd() || it->value.IsNull()) return std::nullopt;
    if (!it->value.IsInt64() || it->value.GetInt64() < 0) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            std::string(name) + " must be a non-negative integer");
    }
    return it->value.GetInt64();
}

std::string storage_string(const rapidjson::Value& o, const char* name) {
    const auto it = o.FindMember(name);
    if (it == o.MemberEnd() || !it->value.IsString()) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            std::string(name) + " is required and must be a string");
    }
    return {it->value.GetString(), it->value.GetStringLength()};
}

http::response storage_message(std::string_view text) {
    json_out o;
    o.w.StartObject();
    o.kv("message", text);
    o.w.EndObject();
    return http::response::json(200, o.str());
}

// ---- the service ----------------------------------------------------------------------------

struct storage_service::slot {
    storage_service* owner;
    std::string client;
    ~slot() {
        std::lock_guard lock(owner->mu_);
        --owner->uploads_;
        if (auto it = owner->per_client_.find(client); it != owner->per_client_.end()) {
            if (--it->second == 0) owner->per_client_.erase(it);
        }
    }
};

storage_service::storage_service(gateway& gw, net::io_context& ioc, storage_config cfg)
    : gw_(gw),
      ioc_(ioc),
      cfg_(std::move(cfg)),
      url_key_(storage::url_signing_key(gw.config().jwt_secret)),
      pool_(static_cast<std::size_t>(cfg_.threads)) {
    if (cfg_.enabled && cfg_.dir.empty()) {
        // A configuration that did not go through validate_storage (which sets the default).
        cfg_.enabled = false;
        cfg_.off_reason = "no STORAGE_DIR";
    }
    if (!cfg_.off_reason.empty()) {
        core::log::warn("storage: /storage/v1 is off", {{"reason", cfg_.off_reason}});
    }
    if (cfg_.enabled) {
        storage::local_store_options o;
        o.dir = cfg_.dir;
        o.fsync = cfg_.fsync;
        store_ = storage::open_local_store(o);  // config_error: exit 78
    }
}

storage_service::~storage_service() {
    stop();
    pool_.join();
}

std::shared_ptr<storage_service::slot> storage_service::take_slot(const std::string& client) {
    std::lock_guard lock(mu_);
    if (uploads_ >= cfg_.max_uploads) return nullptr;
    auto& mine = per_client_[client];
    if (mine >= cfg_.max_uploads_per_client) {
        if (mine == 0) per_client_.erase(client);
        return nullptr;
    }
    ++mine;
    ++uploads_;
    return std::shared_ptr<slot>(new slot{this, client});
}

void storage_service::uncertain(const std::string& version) {
    std::lock_guard lock(mu_);
    uncertain_.insert(version);
}

storage_caller storage_service::caller(const http::request& r, bool lenient) const {
    storage_caller c;
    try {
        const auto who = gw_.data_api_principal(r);
        c.role = who.role;
        c.claims_json = who.claims_json;
        c.sub = who.sub;
    } catch (const rest::api_error& e) {
        if (e.status() != 401) {
            // Not a refused token: its database's signed-out sessions are not read yet (503,
            // Retry-After). Refused, whatever the route, with what the data API says.
            storage_error busy(e.status(), "DatabaseError", "unavailable", e.message());
            for (const auto& [k, v] : e.headers) busy.extra.add(k, v);
            throw busy;
        }
        if (lenient) return storage_caller{};
        storage_error refused(401, "InvalidJWT", "Unauthorized", e.message());
        refused.extra.add("WWW-Authenticate", "Bearer error=\"invalid_token\"");
        throw refused;
    }
    return c;
}

storage_caller storage_service::signer(const std::string& owner, const std::string& tenant) {
    storage_caller c;
    c.role = "service_role";
    json_out o;
    o.w.StartObject();
    o.kv("role", "service_role");
    if (!owner.empty()) o.kv("sub", owner);
    if (!tenant.empty()) {
        o.key("app_metadata");
        o.w.StartObject();
        o.kv("tenant_id", tenant);
        o.w.EndObject();
    }
    o.w.EndObject();
    c.claims_json = o.str();
    c.sub = owner;
    return c;
}

net::awaitable<std::vector<pg::result>> storage_service::run(
    const storage_caller& who, const http::request& r, std::vector<pg::connection::pipelined> stmts,
    bool read_only, bool rollback) {
    rest::session_facts facts;
    facts.role = who.role;
    facts.claims_json = who.claims_json;
    facts.sub = who.sub;
    facts.method = r.method;
    facts.path = r.path;
    facts.headers_json = request_headers_json(r);
    facts.search_path = rest::search_path("storage", gw_.config().rest_extra_search_path);
    facts.default_statement_timeout = gw_.config().rest_statement_timeout;
    facts.read_only = read_only;
    auto setup = rest::setup_statement(facts);
    if (!read_only) {
        // The tenant quota the triggers hold writes to (0: none).
        setup.params.emplace_back("awp.storage_tenant_quota");
        setup.params.emplace_back(std::to_string(cfg_.tenant_quota));
        setup.sql += ", set_config($" + std::to_string(setup.params.size() - 1) + ", $" +
                     std::to_string(setup.params.size()) + ", true)";
    }
    pg::params sp;
    for (auto& v : setup.params) sp.emplace_back(std::move(v));
    pg::connection::pipelined setup_stmt{setup.sql, std::move(sp)};
    auto t = co_await gw_.db().begin_own(std::move(setup_stmt));
    auto results = co_await t.run(std::move(stmts), rollback);
    if (rollback) co_await t.rollback();
    co_return results;
}

net::awaitable<http::response> storage_service::guarded(
    net::awaitable<http::response> (storage_service::*fn)(http::request), http::request r) {
    std::optional<http::response> res;
    std::optional<storage_error> refusal;
    const bool cross_origin = r.header.has("origin");  // the handler takes the request
    const auto path = r.path;
    try {
        res = co_await (this->*fn)(std::move(r));
    } catch (const storage_error& e) {
        refusal = e;
    } catch (const http::http_error& e) {
        // Malformed input found by a parser (a multipart body, a JSON field): the platform
        // answers invalid input with 400.
        const auto status = e.status() == 422 ? 400U : e.status();
        refusal = storage_error(status, status == 413 ? "EntityTooLarge" : "InvalidRequest",
                                e.code(), e.what());
    } catch (const pg::sql_error& e) {
        refusal = storage_sql_error(e);
    } catch (const pg::connection_error& e) {
        core::log::warn("storage: database unreachable", {{"error", e.what()}});
        refusal = storage_error(503, "DatabaseError", "unavailable", "the database is unreachable");
    } catch (const core::json::parse_error& e) {
        refusal = storage_error(400, "InvalidRequest", "Invalid Input",
                                std::string("the body is not valid JSON: ") + e.what());
    } catch (const std::exception& e) {
        core::log::error("storage: request failed", {{"path", path}, {"error", e.what()}});
        refusal = storage_error(500, "InternalError", "internal", "Internal server error");
    }
    if (refusal) res = refusal->to_response();
    add_cors(cross_origin, *res);
    co_return std::move(*res);
}

void storage_service::add_routes(http::router& r) {
    if (!cfg_.enabled) return;
    auto h = [this](net::awaitable<http::response> (storage_service::*fn)(
                 http::request)) -> http::handler {
        return [this, fn](http::request req) { return guarded(fn, std::move(req)); };
    };
    http::route_options none;
    none.body_limit = 0;
    http::route_options json_small;
    json_small.body_limit = 64 * 1024;
    http::route_options json_large;  // remove and sign many: up to 1,000 names of 1 KiB
    json_large.body_limit = 2 * 1024 * 1024;
    http::route_options upload;
    upload.body_limit = cfg_.file_size_limit + 1024 * 1024;  // the form's framing and fields
    upload.spool_body = true;
    upload.spool_dir = store_->spool_dir();  // the store's file system: adopted, not copied
    upload.admit = [this](http::request& q) { return upload_admit(q); };
    http::route_options signed_upload = upload;
    signed_upload.admit = [this](http::request& q) { return signed_upload_admit(q); };

    const std::string b = "/storage/v1";
    r.add("OPTIONS", b + "/*path", preflight, none);
    // Buckets.
    r.add("GET", b + "/bucket", h(&storage_service::bucket_list), none);
    r.add("POST", b + "/bucket", h(&storage_service::bucket_create), json_small);
    r.add("GET", b + "/bucket/:id", h(&storage_service::bucket_get), none);
    r.add("PUT", b + "/bucket/:id", h(&storage_service::bucket_update), json_small);
    r.add("DELETE", b + "/bucket/:id", h(&storage_service::bucket_delete), json_small);
    r.add("POST", b + "/bucket/:id/empty", h(&storage_service::bucket_empty), json_small);
    // Objects: the literal routes before the generic /object/<bucket>/<name> ones (a bucket
    // named "public", "sign", "list" ... is reached only through them, as on the platform).
    r.add("GET", b + "/object/public/*path", h(&storage_service::download_public), none);
    r.add("GET", b + "/object/authenticated/*path", h(&storage_service::download), none);
    r.add("GET", b + "/object/info/public/*path", h(&storage_service::info_public), none);
    r.add("GET", b + "/object/info/authenticated/*path", h(&storage_service::info), none);
    r.add("GET", b + "/object/info/*path", h(&storage_service::info), none);
    r.add("GET", b + "/object/sign/*path", h(&storage_service::download_signed), none);
    r.add("POST", b + "/object/sign/*path", h(&storage_service::sign), json_large);
    r.add("POST", b + "/object/upload/sign/*path", h(&storage_service::sign_upload), json_small);
    r.add("PUT", b + "/object/upload/sign/*path", h(&storage_service::upload), signed_upload);
    r.add("POST", b + "/object/list/:bucket", h(&storage_service::list), json_small);
    r.add("POST", b + "/object/list-v2/:bucket", not_supported, json_small);
    r.add("POST", b + "/object/move", h(&storage_service::move), json_small);
    r.add("POST", b + "/object/copy", h(&storage_service::copy), json_small);
    r.add("GET", b + "/object/*path", h(&storage_service::download), none);
    r.add("POST", b + "/object/*path", h(&storage_service::upload), upload);
    r.add("PUT", b + "/object/*path", h(&storage_service::upload), upload);
    r.add("DELETE", b + "/object/*path", h(&storage_service::remove), json_large);
    // Not served: image transformations and the CDN cache (docs/storage.md, coverage).
    r.add("GET", b + "/render/image/*path", not_supported, none);
    r.add("DELETE", b + "/cdn/*path", not_supported, json_small);
}

// ---- housekeeping ---------------------------------------------------------------------------

void storage_service::start() {
    if (!cfg_.enabled) return;
    housekeeping_done_ = false;
    net::co_spawn(ioc_, housekeeping(), [this](const std::exception_ptr& e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                core::log::error("storage: housekeeping ended", {{"error", ex.what()}});
            }
        }
        housekeeping_done_ = true;
    });
}

void storage_service::stop() {
    if (stopping_.exchange(true)) return;
    net::post(ioc_, [this] {
        if (timer_) timer_->cancel();
    });
}

net::awaitable<void> storage_service::wait_stopped(std::chrono::milliseconds limit) {
    net::steady_timer wait(ioc_);
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!housekeeping_done_ && std::chrono::steady_clock::now() < until) {
        wait.expires_after(std::chrono::milliseconds(10));
        co_await wait.async_wait(net::as_tuple(net::use_awaitable));
    }
}

std::string storage_service::health_json() const {
    json_out o;
    o.w.StartObject();
    o.key("enabled");
    o.w.Bool(cfg_.enabled);
    if (!cfg_.off_reason.empty()) o.kv("reason", cfg_.off_reason);
    if (cfg_.enabled) {
        o.kv("dir", cfg_.dir);
        try {
            const auto s = store_->space();
            o.key("free_bytes");
            o.w.Uint64(s.free_bytes);
            o.key("total_bytes");
            o.w.Uint64(s.total_bytes);
        } catch (const std::exception& e) {
            o.kv("error", e.what());
        }
        std::lock_guard lock(mu_);
        o.key("uploads");
        o.w.Uint64(uploads_);
    }
    o.w.EndObject();
    return o.str();
}

net::awaitable<void> storage_service::housekeeping() {
    timer_ = std::make_unique<net::steady_timer>(ioc_);
    bool first = true;
    while (!stopping_) {
        // At start and then on every tick: another process sharing the folder may have died.
        std::string failure;
        try {
            co_await settle_abandoned();
            co_await settle_uncertain();
            co_await reap_deleted();
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (!failure.empty()) {
            core::log::warn("storage: housekeeping failed, retried next tick",
                            {{"error", failure}});
        } else if (first) {
            core::log::info("storage: store ready", {{"dir", cfg_.dir}});
        }
        first = false;
        if (stopping_) break;
        timer_->expires_after(
            std::chrono::milliseconds(static_cast<long>(cfg_.reaper_interval_s * 1000)));
        co_await timer_->async_wait(net::as_tuple(net::use_awaitable));
    }
}

namespace {

/// A request for the housekeeping's statements (it has no caller of its own).
http::request housekeeping_request() {
    http::request r;
    r.method = "POST";
    r.path = "/storage/v1/housekeeping";
    return r;
}

std::string json_array(const std::vector<std::string>& v) {
    core::json::writer j;
    j.w.StartArray();
    for (const auto& s : v) j.str(s);
    j.w.EndArray();
    return j.str();
}

}  // namespace

net::awaitable<void> storage_service::settle_abandoned() {
    // Jobs are named before they are awaited: GCC 12 destroys a temporary in a co_await
    // expression twice (docs/coroutines.md).
    auto look = [this] { return store_->abandoned(); };
    auto found = co_await blocking(std::move(look));
    if (found.empty()) co_return;
    std::vector<std::string> versions;
    for (const auto& a : found) versions.push_back(a.version);
    storage_caller svc;
    svc.role = "service_role";
    svc.claims_json = R"({"role":"service_role"})";
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kVersionsWithRows), pg::params{json_array(versions)}});
    auto res = co_await run(svc, housekeeping_request(), std::move(stmts), true);
    std::set<std::string> with_rows;
    for (int i = 0; i < res[0].size(); ++i) with_rows.insert(res[0].get<std::string>(i, 0));
    auto settle = [this, found, with_rows] {
        for (const auto& a : found) store_->settle(a, with_rows.count(a.version) > 0);
        return true;
    };
    co_await blocking(std::move(settle));
    core::log::info("storage: settled what a gone process left staged",
                    {{"versions", found.size()}, {"kept", with_rows.size()}});
}

net::awaitable<void> storage_service::settle_uncertain() {
    std::vector<std::string> versions;
    {
        std::lock_guard lock(mu_);
        versions.assign(uncertain_.begin(), uncertain_.end());
    }
    if (versions.empty()) co_return;
    storage_caller svc;
    svc.role = "service_role";
    svc.claims_json = R"({"role":"service_role"})";
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kVersionsWithRows), pg::params{json_array(versions)}});
    auto res = co_await run(svc, housekeeping_request(), std::move(stmts), true);
    std::set<std::string> with_rows;
    for (int i = 0; i < res[0].size(); ++i) with_rows.insert(res[0].get<std::string>(i, 0));
    auto decide = [this, versions, with_rows] {
        for (const auto& v : versions) {
            if (with_rows.count(v) > 0) {
                store_->publish(v);
            } else {
                store_->discard(v);
            }
        }
        return true;
    };
    co_await blocking(std::move(decide));
    std::lock_guard lock(mu_);
    for (const auto& v : versions) uncertain_.erase(v);
}

net::awaitable<void> storage_service::reap_deleted() {
    // A batch at a time: the versions are taken (locked) in one transaction, their bytes removed,
    // then the transaction commits. A crash in between leaves the rows, and the next pass
    // removes the (already missing) bytes again: removing is idempotent.
    for (int batch = 0; batch < 100 && !stopping_; ++batch) {
        rest::session_facts facts;
        facts.role = "service_role";
        facts.claims_json = R"({"role":"service_role"})";
        facts.method = "POST";
        facts.path = "/storage/v1/housekeeping";
        facts.headers_json = "{}";
        facts.search_path = R"("storage")";
        facts.default_statement_timeout = "30s";
        facts.read_only = false;
        auto setup = rest::setup_statement(facts);
        pg::params sp;
        for (auto& v : setup.params) sp.emplace_back(std::move(v));
        pg::connection::pipelined setup_stmt{setup.sql, std::move(sp)};
        auto t = co_await gw_.db().begin_own(std::move(setup_stmt));
        std::vector<pg::connection::pipelined> stmts;
        stmts.push_back({std::string(sql::kTakeDeletedVersions),
                         pg::params{std::to_string(cfg_.delete_grace_s), std::string("500")}});
        auto res = co_await t.run(std::move(stmts), true);
        std::vector<std::string> versions;
        for (int i = 0; i < res[0].size(); ++i) versions.push_back(res[0].get<std::string>(i, 0));
        if (versions.empty()) {
            co_await t.rollback();
            co_return;
        }
        auto remove_bytes = [this, versions] {
            for (const auto& v : versions) {
                if (storage::is_version(v)) store_->remove(v);
            }
            return true;
        };
        co_await blocking(std::move(remove_bytes));
        co_await t.commit();
        core::log::info("storage: removed the bytes of deleted objects",
                        {{"versions", versions.size()}});
        if (versions.size() < 500) co_return;
    }
}

}  // namespace awp::api
