// /storage/v1/object: move and copy (a copy shares the bytes of its source: versions never
// change), signed URLs (POST /object/sign: the caller must see the object; the URL is a token
// bound to it) and signed upload URLs (POST /object/upload/sign: the caller must be allowed to
// write it, tried in a transaction that is rolled back; the upload itself is storage_objects.cpp).
#include "awp/core/crypto.hpp"
#include "awp/core/time.hpp"
#include "awp/storage/url_token.hpp"
#include "json.hpp"
#include "storage.hpp"
#include "storage_sql.hpp"

namespace awp::api {

namespace {

/// The longest a signed download URL may live (a year).
constexpr std::int64_t kMaxExpiresIn = 365LL * 24 * 3600;

struct move_request {
    std::string bucket, source, destination_bucket, destination;
};

move_request move_request_of(const rapidjson::Value& body) {
    move_request m;
    m.bucket = storage_string(body, "bucketId");
    m.source = storage_string(body, "sourceKey");
    m.destination = storage_string(body, "destinationKey");
    m.destination_bucket = m.bucket;
    if (auto it = body.FindMember("destinationBucket");
        it != body.MemberEnd() && it->value.IsString() && it->value.GetStringLength() > 0) {
        m.destination_bucket.assign(it->value.GetString(), it->value.GetStringLength());
    }
    for (const auto& [b, n] :
         {std::pair{&m.bucket, &m.source}, std::pair{&m.destination_bucket, &m.destination}}) {
        if (auto why = storage::bucket_name_problem(*b); !why.empty()) {
            throw storage_error(400, "InvalidBucketName", "Invalid Input", why);
        }
        if (auto why = storage::object_name_problem(*n); !why.empty()) {
            throw storage_error(400, "InvalidKey", "Invalid Input", why);
        }
    }
    return m;
}

std::int64_t expires_in_of(const rapidjson::Value& body) {
    const auto it = body.FindMember("expiresIn");
    if (it == body.MemberEnd() || !it->value.IsNumber() || it->value.GetDouble() < 1 ||
        it->value.GetDouble() > static_cast<double>(kMaxExpiresIn)) {
        throw storage_error(
            400, "InvalidRequest", "Invalid Input",
            "expiresIn must be a number of seconds from 1 to " + std::to_string(kMaxExpiresIn));
    }
    return static_cast<std::int64_t>(it->value.GetDouble());
}

/// The tenant of a caller's claims (app_metadata.tenant_id, else tenant_id), "" without one.
std::string tenant_of(const std::string& claims_json) {
    const auto d = core::json::try_parse(claims_json, core::json::kSmall);
    if (!d || !d->IsObject()) return {};
    if (auto am = d->FindMember("app_metadata"); am != d->MemberEnd() && am->value.IsObject()) {
        auto t = core::json::string_or(am->value, "tenant_id");
        if (!t.empty()) return t;
    }
    return core::json::string_or(*d, "tenant_id");
}

std::string json_names(const std::vector<std::string>& names) {
    json_out o;
    o.w.StartArray();
    for (const auto& n : names) o.str(n);
    o.w.EndArray();
    return o.str();
}

}  // namespace

net::awaitable<http::response> storage_service::move(http::request r) {
    const auto who = caller(r);
    const auto body = storage_body(r);
    const auto m = move_request_of(body);
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kMove),
                     pg::params{m.bucket, m.source, m.destination_bucket, m.destination}});
    auto res = co_await run(who, r, std::move(stmts), false);
    if (res[0].empty()) throw storage_error(404, "NoSuchKey", "not_found", "Object not found");
    json_out o;
    o.w.StartObject();
    o.kv("message", "Successfully moved");
    o.kv("Id", res[0].get<std::string>(0, 0));
    o.kv("Key", m.destination_bucket + "/" + m.destination);
    o.w.EndObject();
    co_return http::response::json(200, o.str());
}

net::awaitable<http::response> storage_service::copy(http::request r) {
    const auto who = caller(r);
    const auto body = storage_body(r);
    const auto m = move_request_of(body);
    const bool upsert = r.header.get("x-upsert") == std::optional<std::string_view>("true");
    std::vector<pg::connection::pipelined> source_stmts;
    source_stmts.push_back({std::string(sql::kCopySource), pg::params{m.bucket, m.source}});
    auto src = co_await run(who, r, std::move(source_stmts), true);
    if (src[0].empty()) throw storage_error(404, "NoSuchKey", "not_found", "Object not found");
    const auto& s = src[0];
    const auto from = s.get<std::string>(0, 0);
    const auto size = s.get<std::int64_t>(0, 1);
    const auto mimetype = s.get<std::string>(0, 2);
    const auto etag = s.get<std::string>(0, 3);
    const auto cache_control = s.get_optional<std::string>(0, 4);
    const auto user_metadata = s.get_optional<std::string>(0, 5);
    // Jobs are named before they are awaited (docs/coroutines.md).
    auto share = [this, from] { return store_->copy(from); };
    const auto version = co_await blocking(std::move(share));
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(upsert ? sql::kObjectUpsert : sql::kObjectInsert),
                     pg::params{m.destination_bucket, m.destination, version, size, mimetype, etag,
                                cache_control, user_metadata}});
    std::exception_ptr failure;
    bool uncertain_outcome = false;
    std::vector<pg::result> res;
    try {
        res = co_await run(who, r, std::move(stmts), false);
    } catch (const pg::connection_error&) {
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
    o.kv("Key", m.destination_bucket + "/" + m.destination);
    o.w.EndObject();
    co_return http::response::json(200, o.str());
}

net::awaitable<http::response> storage_service::sign(http::request r) {
    const auto who = caller(r);
    const auto target = storage_target(r, false);
    const auto body = storage_body(r);
    const auto expires_in = expires_in_of(body);
    const auto exp = core::now_unix_s() + expires_in;
    std::vector<std::string> paths;
    const bool many = target.name.empty();
    if (many) {
        const auto it = body.FindMember("paths");
        if (it == body.MemberEnd() || !it->value.IsArray() || it->value.Empty() ||
            it->value.Size() > 1000) {
            throw storage_error(400, "InvalidRequest", "Invalid Input",
                                "paths must be an array of 1 to 1,000 object names");
        }
        for (const auto& p : it->value.GetArray()) {
            if (!p.IsString()) {
                throw storage_error(400, "InvalidRequest", "Invalid Input",
                                    "paths must hold strings");
            }
            paths.emplace_back(p.GetString(), p.GetStringLength());
        }
    } else {
        paths.push_back(target.name);
    }
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back(
        {std::string(sql::kVisibleNames), pg::params{target.bucket, json_names(paths)}});
    auto res = co_await run(who, r, std::move(stmts), true);
    std::set<std::string> visible;
    for (int i = 0; i < res[0].size(); ++i) visible.insert(res[0].get<std::string>(i, 0));
    auto url_for = [&](const std::string& name) {
        storage::url_claims c;
        c.scope = std::string(storage::kScopeDownload);
        c.url = target.bucket + "/" + name;
        c.exp = exp;
        // The platform's form: the path as it is (the client encodes it with encodeURI).
        return "/object/sign/" + c.url + "?token=" + storage::sign_url_token(c, url_key_);
    };
    json_out o;
    if (!many) {
        if (visible.empty()) throw storage_error(404, "NoSuchKey", "not_found", "Object not found");
        o.w.StartObject();
        o.kv("signedURL", url_for(target.name));
        o.w.EndObject();
        co_return http::response::json(200, o.str());
    }
    o.w.StartArray();
    for (const auto& p : paths) {
        o.w.StartObject();
        if (visible.count(p) > 0) {
            o.key("error");
            o.w.Null();
            o.kv("signedURL", url_for(p));
        } else {
            o.kv("error", "Either the object does not exist or you do not have access to it");
            o.key("signedURL");
            o.w.Null();
        }
        o.kv("path", p);
        o.w.EndObject();
    }
    o.w.EndArray();
    co_return http::response::json(200, o.str());
}

net::awaitable<http::response> storage_service::sign_upload(http::request r) {
    const auto who = caller(r);
    const auto target = storage_target(r);
    const bool upsert = r.header.get("x-upsert") == std::optional<std::string_view>("true");
    // Would the caller be allowed to write this object now? The insert is tried as the caller
    // and rolled back (row-level security, the bucket, an existing object without upsert).
    const auto probe_version = core::crypto::hex_encode(core::crypto::random_bytes(16));
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(upsert ? sql::kObjectUpsert : sql::kObjectInsert),
                     pg::params{target.bucket, target.name, probe_version, std::int64_t{0},
                                std::string("application/octet-stream"), std::string(),
                                std::optional<std::string>(), std::optional<std::string>()}});
    auto res = co_await run(who, r, std::move(stmts), false, true);
    if (res[0].empty())
        throw storage_error(404, "NoSuchBucket", "Bucket not found", "Bucket not found");
    storage::url_claims c;
    c.scope = std::string(storage::kScopeUpload);
    c.url = target.bucket + "/" + target.name;
    c.exp = core::now_unix_s() + static_cast<long long>(cfg_.signed_upload_ttl_s);
    c.upsert = upsert;
    c.owner = who.sub;
    c.tenant = tenant_of(who.claims_json);
    const auto token = storage::sign_url_token(c, url_key_);
    json_out o;
    o.w.StartObject();
    o.kv("url", "/object/upload/sign/" + c.url + "?token=" + token);
    o.kv("token", token);
    o.w.EndObject();
    co_return http::response::json(200, o.str());
}

}  // namespace awp::api
