// /storage/v1/object: uploads (admitted before their body: caller, slot, size, type, bucket;
// the body spooled to the store's disk, staged, then its row written as the caller, then
// published), downloads (public, authenticated, signed; Range, ETag, the serving rules of
// libs/storage content.hpp), info, lists and removals.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "awp/core/crypto.hpp"
#include "awp/core/log.hpp"
#include "awp/storage/content.hpp"
#include "awp/storage/range.hpp"
#include "awp/storage/upload_form.hpp"
#include "awp/storage/url_token.hpp"
#include "json.hpp"
#include "storage.hpp"
#include "storage_sql.hpp"

namespace awp::api {

namespace {

/// What an upload's admission decided, handed to its handler in request::context.
struct upload_plan {
    std::shared_ptr<storage_service::slot> slot;  // held until the request goes
    storage_caller who;
    std::string bucket;
    std::string name;
    bool upsert = false;
    bool multipart = false;
    std::uint64_t limit = 0;           // the largest object this upload may make
    std::vector<std::string> allowed;  // the bucket's allowed types (empty: any)
};

storage_error too_large(std::uint64_t limit) {
    return {413, "EntityTooLarge", "Payload too large",
            "The object exceeded the maximum allowed size (" + std::to_string(limit) + " bytes)"};
}

storage_error not_found() { return {404, "NoSuchKey", "not_found", "Object not found"}; }

std::optional<std::uint64_t> content_length(const http::request& r) {
    const auto h = r.header.get("content-length");
    if (!h || h->empty() || h->size() > 19 ||
        h->find_first_not_of("0123456789") != std::string_view::npos) {
        return std::nullopt;
    }
    return std::stoull(std::string(*h));
}

std::string key_of(const std::string& bucket, const std::string& name) {
    return bucket + "/" + name;
}

/// Characters (code points) of UTF-8 text: substr() in SQL counts them.
std::size_t code_points(std::string_view s) {
    return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
    }));
}

/// A Cache-Control value of the uploader's, or the platform's default.
std::string cache_control_of(std::optional<std::string> v) {
    if (!v || v->empty()) return "max-age=3600";
    if (v->size() > 256 || !std::all_of(v->begin(), v->end(), [](char c) {
            return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F;
        })) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            "cache-control must be printable ASCII of at most 256 characters");
    }
    // The form's cacheControl field is a number of seconds ("3600"), as storage-js sends it.
    if (v->find_first_not_of("0123456789") == std::string::npos) return "max-age=" + *v;
    return *v;
}

/// User metadata (a JSON object of at most 64 KiB) as JSON text, or nullopt.
std::optional<std::string> user_metadata_of(const std::optional<std::string>& json) {
    if (!json || json->empty()) return std::nullopt;
    try {
        const auto d = core::json::parse_object(*json, core::json::kSmall);
        return core::json::to_string(d);
    } catch (const core::json::parse_error& e) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            std::string("metadata must be a JSON object: ") + e.what());
    }
}

/// What arrived: the staged bytes and what the uploader said about them.
struct received {
    storage::staged_object staged;
    std::string content_type;
    std::optional<std::string> cache_control;
    std::optional<std::string> metadata;
};

/// Reads a multipart upload from the spooled body into a new object, on the storage pool.
received receive_form(storage::object_store& store, std::shared_ptr<http::file_body> body,
                      std::string content_type, std::uint64_t limit) {
    auto writer = store.create();
    storage::upload_form form(content_type);
    std::uint64_t written = 0;
    form.on_file_data = [&](std::string_view bytes) {
        written += bytes.size();
        if (written > limit) throw too_large(limit);
        writer->write(bytes);
    };
    std::string buf(128 * 1024, '\0');
    std::uint64_t at = 0;
    while (at < body->size()) {
        const auto want =
            static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), body->size() - at));
        const auto n = ::pread(body->fd(), buf.data(), want, static_cast<off_t>(at));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw storage::store_error("cannot read the upload", n < 0 ? errno : EIO);
        form.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)));
        at += static_cast<std::uint64_t>(n);
    }
    form.finish();
    received out;
    out.staged = writer->stage();
    const auto& f = form.form();
    out.content_type = f.content_type.value_or("application/octet-stream");
    out.cache_control = f.cache_control;
    out.metadata = f.metadata;
    return out;
}

/// Content-MD5 (base64 of the 16 bytes) against the bytes' MD5; "" when it agrees or is absent.
std::string md5_problem(const http::request& r, const std::string& md5_hex) {
    const auto h = r.header.get("content-md5");
    if (!h) return {};
    std::string sent;
    try {
        sent = core::crypto::hex_encode(core::crypto::base64_decode(*h));
    } catch (const std::exception&) {
        return "Content-MD5 is not base64";
    }
    return sent == md5_hex ? std::string() : "the body's MD5 does not match Content-MD5";
}

}  // namespace

// ---- admission --------------------------------------------------------------------------------

namespace {

/// The checks of an admission that throw storage_error; the service turns them into a refusal.
net::awaitable<http::admission> admit(storage_service& svc, http::request& r, storage_caller who,
                                      bool upsert, std::string bucket, std::string name) {
    const auto& cfg = svc.config();
    auto plan = std::make_shared<upload_plan>();
    plan->slot = svc.take_slot(r.remote);
    if (!plan->slot) {
        storage_error busy(503, "SlowDown", "too_many_uploads",
                           "too many uploads in progress: retry in a moment");
        busy.extra.add("Retry-After", "1");
        throw busy;
    }
    plan->multipart = r.media_type() == "multipart/form-data";
    const auto length = content_length(r);
    const std::uint64_t framing = plan->multipart ? 1024 * 1024 : 0;
    if (length && *length > cfg.file_size_limit + framing) throw too_large(cfg.file_size_limit);
    const auto space = svc.store().space();
    const auto need = length.value_or(0) + cfg.min_free;
    if (space.free_bytes < need) {
        throw storage_error(507, "InsufficientStorage", "insufficient_storage",
                            "the store's disk has no room for this upload");
    }
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kUploadBucket), pg::params{bucket, name}});
    auto res = co_await svc.run(who, r, std::move(stmts), true);
    const auto& row = res[0];
    if (row.empty())
        throw storage_error(404, "NoSuchBucket", "Bucket not found", "Bucket not found");
    if (!row.get<bool>(0, 3)) {
        throw storage_error(
            400, "InvalidKey", "Invalid Input",
            "the object name is not in Unicode normalization form NFC (compose it)");
    }
    if (row.get<bool>(0, 4) && !upsert) {
        throw storage_error(409, "KeyAlreadyExists", "Duplicate", "The resource already exists");
    }
    plan->limit = cfg.file_size_limit;
    if (auto bl = row.get_optional<std::int64_t>(0, 1);
        bl && static_cast<std::uint64_t>(*bl) < plan->limit) {
        plan->limit = static_cast<std::uint64_t>(*bl);
    }
    if (length && *length > plan->limit + framing) throw too_large(plan->limit);
    const auto allowed = core::json::parse(row.text(0, 2), core::json::kRequestBody);
    for (const auto& a : allowed.GetArray())
        plan->allowed.emplace_back(a.GetString(), a.GetStringLength());
    if (!plan->multipart) {
        const auto type =
            std::string(r.header.get("content-type").value_or("application/octet-stream"));
        if (!storage::mime_allowed(type, plan->allowed)) {
            throw storage_error(415, "InvalidMimeType", "invalid_mime_type",
                                "mime type " + storage::media_type(type) + " is not supported");
        }
    }
    plan->who = std::move(who);
    plan->bucket = std::move(bucket);
    plan->name = std::move(name);
    plan->upsert = upsert;
    http::admission out;
    // A deadline for the body from its length at the slowest rate accepted: a slow client holds
    // a slot for a bounded time (STORAGE_UPLOAD_MIN_RATE, STORAGE_UPLOAD_TIMEOUT).
    double seconds = cfg.upload_timeout_s;
    if (length) {
        seconds = std::min(seconds, 30.0 + static_cast<double>(*length) / cfg.upload_min_rate);
    }
    out.body_timeout = std::chrono::milliseconds(static_cast<long>(seconds * 1000));
    r.context = std::move(plan);
    co_return out;
}

}  // namespace

net::awaitable<http::admission> storage_service::upload_admit(http::request& r) {
    std::optional<storage_error> refusal;
    http::admission out;
    try {
        const auto target = storage_target(r);
        auto who = caller(r);
        const bool upsert = r.method == "PUT" ||
                            r.header.get("x-upsert") == std::optional<std::string_view>("true");
        out = co_await admit(*this, r, std::move(who), upsert, target.bucket, target.name);
    } catch (const storage_error& e) {
        refusal = e;
    } catch (const pg::sql_error& e) {
        refusal = storage_sql_error(e);  // the same words as every handler's
    } catch (const pg::connection_error&) {
        refusal = storage_error(503, "DatabaseError", "unavailable", "the database is unreachable");
    }
    if (refusal) {
        r.context.reset();  // the slot goes at once
        out.refuse = refusal->to_response();
        if (r.header.has("origin")) out.refuse->header.set("Access-Control-Allow-Origin", "*");
    }
    co_return out;
}

net::awaitable<http::admission> storage_service::signed_upload_admit(http::request& r) {
    std::optional<storage_error> refusal;
    http::admission out;
    try {
        const auto target = storage_target(r);
        const auto token = r.query_param("token");
        if (!token || token->empty()) {
            throw storage_error(400, "InvalidRequest", "Invalid Input", "token is required");
        }
        storage::url_claims claims;
        try {
            claims = storage::verify_url_token(*token, url_key(), storage::kScopeUpload,
                                               key_of(target.bucket, target.name));
        } catch (const storage::url_token_error& e) {
            throw storage_error(400,
                                e.what_kind() == storage::url_token_error::kind::expired
                                    ? "ExpiredToken"
                                    : "InvalidSignature",
                                "Invalid Input", e.what());
        }
        out = co_await admit(*this, r, signer(claims.owner, claims.tenant), claims.upsert,
                             target.bucket, target.name);
    } catch (const storage_error& e) {
        refusal = e;
    } catch (const pg::sql_error& e) {
        refusal = storage_sql_error(e);
    } catch (const pg::connection_error&) {
        refusal = storage_error(503, "DatabaseError", "unavailable", "the database is unreachable");
    }
    if (refusal) {
        r.context.reset();
        out.refuse = refusal->to_response();
        if (r.header.has("origin")) out.refuse->header.set("Access-Control-Allow-Origin", "*");
    }
    co_return out;
}

// ---- upload -----------------------------------------------------------------------------------

net::awaitable<http::response> storage_service::upload(http::request r) {
    const auto plan = std::static_pointer_cast<upload_plan>(r.context);
    if (!plan || !r.body_file) {
        throw storage_error(500, "InternalError", "internal", "the upload was not admitted");
    }
    // What the uploader says, checked before any byte is kept.
    std::optional<std::string> header_metadata;
    if (!plan->multipart) {
        if (auto h = r.header.get("x-metadata")) {
            try {
                header_metadata = core::crypto::base64_decode(*h);
            } catch (const std::exception&) {
                throw storage_error(400, "InvalidRequest", "Invalid Input",
                                    "x-metadata must be base64 of a JSON object");
            }
        }
    }
    received got;
    if (plan->multipart) {
        // Named before it is awaited (docs/coroutines.md: GCC 12 and temporaries in co_await).
        auto read_form = [this, body = r.body_file,
                          type = std::string(r.header.get("content-type").value_or("")),
                          limit = plan->limit] { return receive_form(*store_, body, type, limit); };
        got = co_await blocking(std::move(read_form));
    } else {
        if (r.body_file->size() > plan->limit) throw too_large(plan->limit);
        auto adopt = [this, body = r.body_file] { return store_->adopt(body->fd(), body->size()); };
        got.staged = co_await blocking(std::move(adopt));
        got.content_type =
            std::string(r.header.get("content-type").value_or("application/octet-stream"));
        if (auto cc = r.header.get("cache-control")) got.cache_control = std::string(*cc);
        got.metadata = header_metadata;
    }
    const auto version = got.staged.version;
    // From here the staged bytes go unless a row names them.
    std::optional<storage_error> refusal;
    std::optional<std::string> user_metadata;
    std::string cache_control;
    try {
        if (got.staged.size > plan->limit) throw too_large(plan->limit);
        if (!storage::mime_allowed(got.content_type, plan->allowed)) {
            throw storage_error(
                415, "InvalidMimeType", "invalid_mime_type",
                "mime type " + storage::media_type(got.content_type) + " is not supported");
        }
        if (auto bad = md5_problem(r, got.staged.md5_hex); !bad.empty()) {
            throw storage_error(400, "InvalidChecksum", "Invalid Input", bad);
        }
        if (storage::media_type(got.content_type).empty()) {
            got.content_type = "application/octet-stream";
        }
        user_metadata = user_metadata_of(got.metadata);
        cache_control = cache_control_of(got.cache_control);
    } catch (const storage_error& e) {
        refusal = e;
    }
    if (refusal) {
        store_->discard(version);
        throw *refusal;
    }
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back(
        {std::string(plan->upsert ? sql::kObjectUpsert : sql::kObjectInsert),
         pg::params{plan->bucket, plan->name, version, static_cast<std::int64_t>(got.staged.size),
                    got.content_type, got.staged.md5_hex, cache_control, user_metadata}});
    std::exception_ptr failure;
    bool uncertain_outcome = false;
    std::vector<pg::result> res;
    try {
        res = co_await run(plan->who, r, std::move(stmts), false);
    } catch (const pg::connection_error&) {
        // The commit may or may not have happened: the bytes stay staged until the database
        // says whether a row names them (housekeeping).
        uncertain_outcome = true;
        failure = std::current_exception();
    } catch (...) {
        failure = std::current_exception();
    }
    if (uncertain_outcome) {
        uncertain(version);
        std::rethrow_exception(failure);
    }
    if (failure || res[0].empty()) {
        auto discard = [this, version] {
            store_->discard(version);
            return true;
        };
        co_await blocking(std::move(discard));
        if (failure) std::rethrow_exception(failure);
        throw storage_error(404, "NoSuchBucket", "Bucket not found", "Bucket not found");
    }
    const auto id = res[0].get<std::string>(0, 0);
    auto publish = [this, version] {
        store_->publish(version);
        return true;
    };
    co_await blocking(std::move(publish));
    json_out o;
    o.w.StartObject();
    o.kv("Id", id);
    o.kv("Key", key_of(plan->bucket, plan->name));
    o.w.EndObject();
    co_return http::response::json(200, o.str());
}

// ---- downloads --------------------------------------------------------------------------------

namespace {

struct object_row {
    std::string version;
    std::uint64_t size = 0;
    std::string mimetype;
    std::string etag;
    std::string cache_control;
    std::string last_modified;
    std::string info_json;
};

std::optional<object_row> row_of(const pg::result& res) {
    if (res.empty()) return std::nullopt;
    object_row o;
    o.version = res.get<std::string>(0, 0);
    o.size = static_cast<std::uint64_t>(res.get<std::int64_t>(0, 1));
    o.mimetype = res.get<std::string>(0, 2);
    o.etag = res.get<std::string>(0, 3);
    o.cache_control = res.get_optional<std::string>(0, 4).value_or("");
    o.last_modified = res.get<std::string>(0, 5);
    o.info_json = res.get_optional<std::string>(0, 6).value_or("");
    return o;
}

class fd_owner {
public:
    explicit fd_owner(int fd) : fd_(fd) {}
    ~fd_owner() {
        if (fd_ >= 0) ::close(fd_);
    }
    fd_owner(const fd_owner&) = delete;
    fd_owner& operator=(const fd_owner&) = delete;
    [[nodiscard]] int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }

private:
    int fd_;
};

/// An HTTP date (RFC 9110, IMF-fixdate) of a Unix time.
std::string http_date(long long unix_seconds) {
    const auto t = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[64];
    const auto n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return {buf, n};
}

bool etag_matches(std::optional<std::string_view> if_none_match, const std::string& etag) {
    if (!if_none_match) return false;
    std::string_view v = *if_none_match;
    if (v.find('*') != std::string_view::npos) return true;
    return v.find(etag) != std::string_view::npos;
}

}  // namespace

/// The object's bytes as a response: its type and disposition by the serving rules, ETag and
/// Last-Modified, a 304 for a matching If-None-Match, one Range.
static http::response serve_object(storage::object_store& store, const http::request& r,
                                   const object_row& o, const std::string& name,
                                   std::optional<std::string> expires) {
    fd_owner fd(store.open(o.version));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 ||
        static_cast<std::uint64_t>(st.st_size) != o.size) {
        // A row whose bytes are missing or of another size: never expected (the store's
        // protocol); said loudly, never served.
        core::log::error("storage: an object's bytes are missing or damaged",
                         {{"version", o.version},
                          {"error", fd.get() < 0 ? std::strerror(errno) : "size differs"}});
        throw storage_error(500, "InternalError", "internal", "the object's bytes are unavailable");
    }
    const auto etag = "\"" + o.etag + "\"";
    http::response res;
    res.header.set("ETag", etag);
    res.header.set("Last-Modified", o.last_modified);
    res.header.set("Cache-Control", o.cache_control.empty() ? "no-cache" : o.cache_control);
    if (expires) res.header.set("Expires", *expires);
    if (etag_matches(r.header.get("if-none-match"), etag)) {
        res.status = 304;
        return res;
    }
    std::string head(storage::kSniffBytes, '\0');
    const auto n = ::pread(fd.get(), head.data(), head.size(), 0);
    head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    const auto as = storage::serve(o.mimetype, storage::sniff(head));
    const auto download = r.query_param("download");
    const std::string filename =
        download && !download->empty() ? *download : std::string(storage::base_name(name));
    if (download || !as.inline_ok) {
        res.header.set("Content-Disposition", storage::disposition("attachment", filename));
    } else {
        res.header.set("Content-Disposition", storage::disposition("inline", filename));
    }
    if (!as.inline_ok) {
        // Active content (HTML, SVG, scripts, a type the bytes contradict) never runs under the
        // API's origin: a download, and a sandbox should a browser render it anyway.
        res.header.set("Content-Security-Policy", "sandbox");
    }
    res.header.set("Accept-Ranges", "bytes");
    res.header.set("X-Robots-Tag", "none");
    const auto range = storage::parse_range(r.header.get("range"), o.size);
    if (range.what == storage::byte_range::kind::unsatisfiable) {
        res.status = 416;
        res.header.set("Content-Range", storage::content_range(range, o.size));
        res.header.set("Content-Type", "application/json");
        res.body =
            R"({"statusCode":"416","error":"invalid_range","code":"InvalidRange","message":"invalid range provided"})";
        return res;
    }
    std::uint64_t offset = 0;
    std::uint64_t length = o.size;
    res.status = 200;
    if (range.what == storage::byte_range::kind::partial) {
        res.status = 206;
        offset = range.first;
        length = range.length();
        res.header.set("Content-Range", storage::content_range(range, o.size));
    }
    res.header.set("Content-Type", as.content_type);
    res.body_file = std::make_shared<http::file_body>(fd.release(), length, offset);
    return res;
}

net::awaitable<http::response> storage_service::download(http::request r) {
    const auto target = storage_target(r);
    // The authenticated route needs a good token; the plain one reads as anon without (public
    // buckets), as the platform's.
    const bool strict = r.path.rfind("/storage/v1/object/authenticated/", 0) == 0;
    const auto who = caller(r, !strict);
    std::optional<object_row> row;
    if (who.role != "anon") {
        std::vector<pg::connection::pipelined> stmts;
        stmts.push_back(
            {std::string(sql::kObjectGetBytes), pg::params{target.bucket, target.name}});
        auto res = co_await run(who, r, std::move(stmts), true);
        row = row_of(res[0]);
    }
    if (!row) {
        std::vector<pg::connection::pipelined> stmts;
        stmts.push_back(
            {std::string(sql::kObjectGetPublic), pg::params{target.bucket, target.name}});
        auto res = co_await run(signer("", ""), r, std::move(stmts), true);
        row = row_of(res[0]);
    }
    if (!row) throw not_found();
    co_return serve_object(*store_, r, *row, target.name, std::nullopt);
}

net::awaitable<http::response> storage_service::download_public(http::request r) {
    const auto target = storage_target(r);
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kObjectGetPublic), pg::params{target.bucket, target.name}});
    auto res = co_await run(signer("", ""), r, std::move(stmts), true);
    const auto row = row_of(res[0]);
    if (!row) throw not_found();
    co_return serve_object(*store_, r, *row, target.name, std::nullopt);
}

net::awaitable<http::response> storage_service::download_signed(http::request r) {
    const auto target = storage_target(r);
    const auto token = r.query_param("token");
    if (!token || token->empty()) {
        throw storage_error(400, "InvalidRequest", "Invalid Input", "token is required");
    }
    storage::url_claims claims;
    try {
        claims = storage::verify_url_token(*token, url_key_, storage::kScopeDownload,
                                           key_of(target.bucket, target.name));
    } catch (const storage::url_token_error& e) {
        throw storage_error(400,
                            e.what_kind() == storage::url_token_error::kind::expired
                                ? "ExpiredToken"
                                : "InvalidSignature",
                            "Invalid Input", e.what());
    }
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kObjectGet), pg::params{target.bucket, target.name}});
    auto res = co_await run(signer("", ""), r, std::move(stmts), true);
    const auto row = row_of(res[0]);
    if (!row) throw not_found();
    // The response lives no longer than the URL: caches are told when it expires.
    co_return serve_object(*store_, r, *row, target.name, http_date(claims.exp));
}

// ---- info -------------------------------------------------------------------------------------

net::awaitable<http::response> storage_service::info(http::request r) {
    const auto target = storage_target(r);
    const bool strict = r.path.rfind("/storage/v1/object/info/authenticated/", 0) == 0;
    const auto who = caller(r, !strict);
    std::optional<object_row> row;
    if (who.role != "anon") {
        std::vector<pg::connection::pipelined> stmts;
        stmts.push_back({std::string(sql::kObjectGet), pg::params{target.bucket, target.name}});
        auto res = co_await run(who, r, std::move(stmts), true);
        row = row_of(res[0]);
    }
    if (!row) {
        std::vector<pg::connection::pipelined> stmts;
        stmts.push_back(
            {std::string(sql::kObjectGetPublic), pg::params{target.bucket, target.name}});
        auto res = co_await run(signer("", ""), r, std::move(stmts), true);
        row = row_of(res[0]);
    }
    if (!row) throw not_found();
    auto res = http::response::json(200, row->info_json);
    res.header.set("ETag", "\"" + row->etag + "\"");
    res.header.set("Last-Modified", row->last_modified);
    co_return res;
}

net::awaitable<http::response> storage_service::info_public(http::request r) {
    const auto target = storage_target(r);
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kObjectGetPublic), pg::params{target.bucket, target.name}});
    auto res = co_await run(signer("", ""), r, std::move(stmts), true);
    const auto row = row_of(res[0]);
    if (!row) throw not_found();
    co_return http::response::json(200, row->info_json);
}

// ---- list and remove --------------------------------------------------------------------------

net::awaitable<http::response> storage_service::list(http::request r) {
    const auto who = caller(r);
    const auto bucket = r.param("bucket");
    if (auto why = storage::bucket_name_problem(bucket); !why.empty()) {
        throw storage_error(400, "InvalidBucketName", "Invalid Input", why);
    }
    const auto body = storage_body(r);
    std::string prefix;
    if (auto it = body.FindMember("prefix"); it != body.MemberEnd() && !it->value.IsNull()) {
        prefix = storage_string(body, "prefix");
    }
    if (auto why = storage::prefix_problem(prefix); !why.empty()) {
        throw storage_error(400, "InvalidRequest", "Invalid Input", why);
    }
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';  // a prefix is a folder
    const auto limit = std::min<std::int64_t>(storage_int(body, "limit").value_or(100), 1000);
    if (limit < 1)
        throw storage_error(400, "InvalidRequest", "Invalid Input", "limit must be at least 1");
    const auto offset = storage_int(body, "offset").value_or(0);
    std::string column = "name";
    std::string order = "asc";
    if (auto it = body.FindMember("sortBy"); it != body.MemberEnd() && it->value.IsObject()) {
        const auto& s = it->value;
        if (auto c = s.FindMember("column"); c != s.MemberEnd() && c->value.IsString()) {
            column = c->value.GetString();
        }
        if (auto d = s.FindMember("order"); d != s.MemberEnd() && d->value.IsString()) {
            order = d->value.GetString();
        }
    }
    static constexpr std::string_view kColumns[] = {"name", "updated_at", "created_at",
                                                    "last_accessed_at"};
    if (std::find(std::begin(kColumns), std::end(kColumns), column) == std::end(kColumns)) {
        throw storage_error(
            400, "InvalidRequest", "Invalid Input",
            "sortBy.column must be name, updated_at, created_at or last_accessed_at");
    }
    if (order != "asc" && order != "desc") {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            "sortBy.order must be asc or desc");
    }
    std::optional<std::string> search;
    if (auto it = body.FindMember("search");
        it != body.MemberEnd() && it->value.IsString() && it->value.GetStringLength() > 0) {
        const std::string s(it->value.GetString(), it->value.GetStringLength());
        if (auto why = storage::prefix_problem(s); !why.empty()) {
            throw storage_error(400, "InvalidRequest", "Invalid Input", why);
        }
        search = storage::like_escape(s) + "%";
    }
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back(
        {sql::list_sql(column, order),
         pg::params{bucket, storage::like_escape(prefix) + "%",
                    static_cast<std::int64_t>(code_points(prefix)), search, limit, offset}});
    auto res = co_await run(who, r, std::move(stmts), true);
    co_return http::response::json(200, res[0].get<std::string>(0, 0));
}

net::awaitable<http::response> storage_service::remove(http::request r) {
    const auto who = caller(r);
    const auto target = storage_target(r, false);
    if (!target.name.empty()) {
        std::vector<pg::connection::pipelined> stmts;
        stmts.push_back({std::string(sql::kRemoveOne), pg::params{target.bucket, target.name}});
        auto res = co_await run(who, r, std::move(stmts), false);
        if (res[0].empty()) throw not_found();
        co_return storage_message("Successfully deleted");
    }
    const auto body = storage_body(r);
    const auto it = body.FindMember("prefixes");
    if (it == body.MemberEnd() || !it->value.IsArray() || it->value.Empty() ||
        it->value.Size() > 1000) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            "prefixes must be an array of 1 to 1,000 object names");
    }
    json_out names;
    names.w.StartArray();
    for (const auto& n : it->value.GetArray()) {
        if (!n.IsString()) {
            throw storage_error(400, "InvalidRequest", "Invalid Input",
                                "prefixes must hold strings");
        }
        const std::string_view name(n.GetString(), n.GetStringLength());
        if (auto why = storage::object_name_problem(name); !why.empty()) {
            throw storage_error(400, "InvalidKey", "Invalid Input", why);
        }
        names.str(name);
    }
    names.w.EndArray();
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kRemoveMany), pg::params{target.bucket, names.str()}});
    auto res = co_await run(who, r, std::move(stmts), false);
    co_return http::response::json(200, res[0].get<std::string>(0, 0));
}

}  // namespace awp::api
