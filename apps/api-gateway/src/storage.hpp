// /storage/v1 (docs/storage.md): the storage API of @supabase/storage-js on awp-api-gateway.
// Metadata in Postgres (schema storage, sql/0040) read and written as the caller's role and
// claims under row-level security, in the data API's transaction setup; bytes in the object
// store (libs/storage) on the gateway's storage thread pool. Files:
//   storage.cpp          settings, the service (store, pool, upload slots, sweeper, reaper),
//                        errors in the platform's shape, transactions as the caller, routes
//   storage_buckets.cpp  /bucket
//   storage_objects.cpp  uploads (admission, body, staging, the row), downloads, info, lists,
//                        removals
//   storage_urls.cpp     move, copy, signed URLs and signed uploads
//   storage_sql.hpp      the statements
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/pg.hpp"
#include "awp/http/message.hpp"
#include "awp/http/server.hpp"
#include "awp/storage/names.hpp"
#include "awp/storage/store.hpp"

#include <rapidjson/document.h>

namespace awp::api {

namespace net = boost::asio;
namespace pg = awp::core::pg;

class gateway;
struct data_principal;

struct storage_config {
    bool enabled = true;  // STORAGE
    /// STORAGE_DIR: the local store's folder; default $STATE_DIRECTORY/storage (systemd), else
    /// $HOME/.local/share/awp/storage; without either, storage is off (and says why).
    std::string dir;
    std::uint64_t file_size_limit = 50ULL * 1000 * 1000;      // STORAGE_FILE_SIZE_LIMIT (bytes)
    std::uint64_t tenant_quota = 10ULL * 1000 * 1000 * 1000;  // STORAGE_TENANT_QUOTA (0: none)
    std::uint64_t min_free = 1ULL << 30;                      // STORAGE_MIN_FREE (bytes)
    std::size_t max_uploads = 32;                             // STORAGE_MAX_UPLOADS
    std::size_t max_uploads_per_client = 8;                   // STORAGE_MAX_UPLOADS_PER_CLIENT
    double upload_min_rate = 64 * 1024;                       // STORAGE_UPLOAD_MIN_RATE (bytes/s)
    double upload_timeout_s = 3600;     // STORAGE_UPLOAD_TIMEOUT (the longest deadline)
    double signed_upload_ttl_s = 7200;  // STORAGE_SIGNED_UPLOAD_TTL
    double delete_grace_s = 60;         // STORAGE_DELETE_GRACE
    double reaper_interval_s = 30;      // STORAGE_REAPER_INTERVAL
    int threads = 2;                    // STORAGE_THREADS
    bool fsync = true;                  // STORAGE_FSYNC
    /// Why storage is off though STORAGE did not say so ("" otherwise): set by validate_storage.
    std::string off_reason;
};

/// Adds the STORAGE_* options (docs/storage.md, "Settings").
void add_storage_options(core::daemon::cli& cli, storage_config& c);
/// Defaults and checks after parsing; throws core::config_error.
void validate_storage(storage_config& c);

/// An answer in the platform's error shape: {"statusCode":"404","error":..,"code":..,
/// "message":..}, with the status itself on the wire (docs/storage.md, "Errors").
class storage_error : public std::exception {
public:
    storage_error(unsigned status, std::string code, std::string error, std::string message)
        : status_(status),
          code_(std::move(code)),
          error_(std::move(error)),
          message_(std::move(message)) {}
    [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }
    [[nodiscard]] unsigned status() const noexcept { return status_; }
    [[nodiscard]] const std::string& code() const noexcept { return code_; }
    [[nodiscard]] const std::string& error() const noexcept { return error_; }
    [[nodiscard]] http::response to_response() const;
    http::headers extra;

private:
    unsigned status_;
    std::string code_, error_, message_;
};

/// Who a storage request runs as: the data API's caller, or the service role acting for a
/// signed URL's signer.
struct storage_caller {
    std::string role = "anon";
    std::string claims_json = R"({"role":"anon"})";
    std::string sub;
    [[nodiscard]] bool is_service() const noexcept { return role == "service_role"; }
};

/// A JSON object body (an empty body is {}); 400 otherwise.
[[nodiscard]] rapidjson::Document storage_body(const http::request& r);
/// The bucket and name of a route's "*path" tail; 400 InvalidKey / InvalidBucketName naming the
/// problem. `name_required`: a tail of the bucket alone is a 400 too.
[[nodiscard]] storage::object_path storage_target(const http::request& r,
                                                  bool name_required = true);
/// An optional non-negative integer member; 400 naming it otherwise.
[[nodiscard]] std::optional<std::int64_t> storage_int(const rapidjson::Value& o, const char* name);
/// A required string member; 400 naming it otherwise.
[[nodiscard]] std::string storage_string(const rapidjson::Value& o, const char* name);
/// {"message": text}.
[[nodiscard]] http::response storage_message(std::string_view text);

class storage_service {
public:
    storage_service(gateway& gw, net::io_context& ioc, storage_config cfg);
    ~storage_service();
    storage_service(const storage_service&) = delete;
    storage_service& operator=(const storage_service&) = delete;

    /// Every /storage/v1 route.
    void add_routes(http::router& r);
    /// Settles what a gone process left staged, then removes deleted versions' bytes every
    /// STORAGE_REAPER_INTERVAL.
    void start();
    void stop();
    /// Waits (at most `limit`) for the housekeeping to end after stop().
    net::awaitable<void> wait_stopped(std::chrono::milliseconds limit);
    /// {"enabled":..,"dir":..,"free_bytes":..,"uploads":..} for /api/health.
    [[nodiscard]] std::string health_json() const;

    // ---- shared by the storage*.cpp handlers ----
    [[nodiscard]] const storage_config& config() const noexcept { return cfg_; }
    storage::object_store& store() { return *store_; }
    [[nodiscard]] const std::string& url_key() const noexcept { return url_key_; }
    /// The caller of a request: data_api_principal's decision as a storage_caller; a bad token
    /// is 401 unless `lenient` (then the request is anon's, as the platform's public reads).
    [[nodiscard]] storage_caller caller(const http::request& r, bool lenient = false) const;
    /// A service-role caller acting for a signed URL's signer (its user and tenant as claims).
    [[nodiscard]] static storage_caller signer(const std::string& owner, const std::string& tenant);
    /// A transaction as `who` on the gateway's own database, with the data API's setup (role,
    /// claims, search_path, statement timeout; read only when `read_only`) and the tenant quota
    /// in awp.storage_tenant_quota. Statements go with its first round trip; it commits, or
    /// with `rollback` (a probe: would the caller be allowed?) it is rolled back.
    net::awaitable<std::vector<pg::result>> run(const storage_caller& who, const http::request& r,
                                                std::vector<pg::connection::pipelined> stmts,
                                                bool read_only, bool rollback = false);
    /// A blocking store call on the storage pool; a failure becomes a storage_error (507 when
    /// the disk is full, 500 otherwise, logged).
    template <class Fn>
    auto blocking(Fn fn) -> net::awaitable<decltype(fn())>;
    /// Versions whose transaction's outcome is unknown (the connection broke at COMMIT): kept
    /// staged and settled by the reaper once the database answers.
    void uncertain(const std::string& version);
    net::thread_pool& pool() noexcept { return pool_; }
    gateway& gw() noexcept { return gw_; }

    /// An upload slot (STORAGE_MAX_UPLOADS, and per client address): released when the last
    /// copy goes. nullopt when the server or this client has no free slot.
    struct slot;
    std::shared_ptr<slot> take_slot(const std::string& client);

    // handlers (storage_buckets.cpp, storage_objects.cpp, storage_urls.cpp)
    net::awaitable<http::response> bucket_list(http::request r);
    net::awaitable<http::response> bucket_get(http::request r);
    net::awaitable<http::response> bucket_create(http::request r);
    net::awaitable<http::response> bucket_update(http::request r);
    net::awaitable<http::response> bucket_empty(http::request r);
    net::awaitable<http::response> bucket_delete(http::request r);
    net::awaitable<http::admission> upload_admit(http::request& r);
    net::awaitable<http::admission> signed_upload_admit(http::request& r);
    net::awaitable<http::response> upload(http::request r);
    net::awaitable<http::response> download(http::request r);
    net::awaitable<http::response> download_public(http::request r);
    net::awaitable<http::response> download_signed(http::request r);
    net::awaitable<http::response> info(http::request r);
    net::awaitable<http::response> info_public(http::request r);
    net::awaitable<http::response> list(http::request r);
    net::awaitable<http::response> remove(http::request r);
    net::awaitable<http::response> move(http::request r);
    net::awaitable<http::response> copy(http::request r);
    net::awaitable<http::response> sign(http::request r);
    net::awaitable<http::response> sign_upload(http::request r);

private:
    net::awaitable<void> housekeeping();
    net::awaitable<void> settle_abandoned();
    net::awaitable<void> reap_deleted();
    net::awaitable<void> settle_uncertain();
    net::awaitable<http::response> guarded(
        net::awaitable<http::response> (storage_service::*fn)(http::request), http::request r);

    gateway& gw_;
    net::io_context& ioc_;
    storage_config cfg_;
    std::unique_ptr<storage::object_store> store_;
    std::string url_key_;
    net::thread_pool pool_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> housekeeping_done_{true};
    std::unique_ptr<net::steady_timer> timer_;
    mutable std::mutex mu_;
    std::size_t uploads_ = 0;
    std::map<std::string, std::size_t> per_client_;
    std::set<std::string> uncertain_;
};

namespace storage_detail {

/// What a job on the storage pool gave: its value, or the exception it threw (carried back as a
/// value and thrown on the caller's side: docs/coroutines.md).
template <class R>
struct job_outcome {
    std::optional<R> value;
    std::exception_ptr error;
};

template <class Fn>
net::awaitable<job_outcome<std::invoke_result_t<Fn&>>> run_job(Fn fn) {
    job_outcome<std::invoke_result_t<Fn&>> out;
    try {
        out.value.emplace(fn());
    } catch (...) {
        out.error = std::current_exception();
    }
    co_return out;
}

/// Rethrows a job's failure: a store_error as a storage_error (507 when the disk is full, else
/// 500, logged), anything else as it is.
[[noreturn]] void rethrow_job(const std::exception_ptr& e);

}  // namespace storage_detail

template <class Fn>
auto storage_service::blocking(Fn fn) -> net::awaitable<decltype(fn())> {
    // The job runs on the pool without the caller's cancellation slot: it cannot be interrupted,
    // and Boost 1.81's co_spawn would throw from the pool thread if it were (docs/coroutines.md).
    auto out = co_await net::co_spawn(
        pool_, storage_detail::run_job(std::move(fn)),
        net::bind_cancellation_slot(net::cancellation_slot(), net::use_awaitable));
    if (out.error) storage_detail::rethrow_job(out.error);
    co_return std::move(*out.value);
}

}  // namespace awp::api
