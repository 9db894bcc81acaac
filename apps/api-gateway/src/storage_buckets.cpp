// /storage/v1/bucket: list, get, create, update, empty, delete — each one statement (or two in
// one transaction) as the caller; row-level security decides (the service role manages buckets,
// a user sees the shared ones and its tenant's).
#include "awp/storage/content.hpp"
#include "json.hpp"
#include "storage.hpp"
#include "storage_sql.hpp"

namespace awp::api {

namespace {

std::string bucket_id_of(const http::request& r) {
    auto id = r.param("id");
    if (auto why = storage::bucket_name_problem(id); !why.empty()) {
        throw storage_error(400, "InvalidBucketName", "Invalid Input", why);
    }
    return id;
}

storage_error bucket_not_found() {
    return {404, "NoSuchBucket", "Bucket not found", "Bucket not found"};
}

/// file_size_limit as the platform takes it: an integer of bytes, a string with a unit ("100MB"),
/// or null (no limit of the bucket's own). nullopt: absent.
struct size_limit {
    bool given = false;
    std::optional<std::uint64_t> bytes;  // unset with given: null
};
size_limit size_limit_of(const rapidjson::Value& body) {
    size_limit out;
    const auto it = body.FindMember("file_size_limit");
    if (it == body.MemberEnd()) return out;
    out.given = true;
    const auto& v = it->value;
    if (v.IsNull()) return out;
    if (v.IsUint64()) {
        out.bytes = v.GetUint64();
    } else if (v.IsString()) {
        out.bytes = storage::parse_size(std::string_view(v.GetString(), v.GetStringLength()));
        if (!out.bytes) {
            throw storage_error(400, "InvalidRequest", "Invalid Input",
                                "Invalid file size format, hint: use 20GB / 20MB / 30KB / 3B");
        }
    } else {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            "file_size_limit must be a number of bytes or a size like \"20MB\"");
    }
    return out;
}

/// allowed_mime_types: an array of MIME types (or type/*), or null; the JSON to store.
struct mime_list {
    bool given = false;
    std::optional<std::string> json;  // unset with given: null (no restriction)
};
mime_list mime_list_of(const rapidjson::Value& body) {
    mime_list out;
    const auto it = body.FindMember("allowed_mime_types");
    if (it == body.MemberEnd()) return out;
    out.given = true;
    if (it->value.IsNull()) return out;
    if (!it->value.IsArray() || it->value.Size() > 1000) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            "allowed_mime_types must be an array of at most 1,000 MIME types");
    }
    json_out o;
    o.w.StartArray();
    for (const auto& m : it->value.GetArray()) {
        if (!m.IsString()) {
            throw storage_error(400, "InvalidRequest", "Invalid Input",
                                "allowed_mime_types must hold strings");
        }
        const std::string_view t(m.GetString(), m.GetStringLength());
        if (t.empty()) continue;  // the platform drops empty entries
        if (auto why = storage::mime_pattern_problem(t); !why.empty()) {
            throw storage_error(400, "InvalidMimeType", "invalid_mime_type", why);
        }
        o.str(t);
    }
    o.w.EndArray();
    out.json = o.str();
    return out;
}

/// Text of an optional query parameter that must be one of `allowed` (its default otherwise).
std::string choice(const http::request& r, const char* name,
                   std::initializer_list<const char*> allowed) {
    const auto v = r.query_param(name);
    if (!v) return *allowed.begin();
    for (const char* a : allowed) {
        if (*v == a) return a;
    }
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    throw storage_error(400, "InvalidRequest", "Invalid Input",
                        std::string(name) + " must be one of " + list);
}

std::optional<std::string> count_param(const http::request& r, const char* name, bool positive) {
    const auto v = r.query_param(name);
    if (!v) return std::nullopt;
    const bool digits =
        !v->empty() && v->size() <= 12 && v->find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (positive && std::stoll(*v) < 1)) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            std::string(name) + " must be " +
                                (positive ? "a positive integer" : "a non-negative integer"));
    }
    return v;
}

}  // namespace

net::awaitable<http::response> storage_service::bucket_list(http::request r) {
    const auto who = caller(r);
    const auto column = choice(r, "sortColumn", {"name", "id", "created_at", "updated_at"});
    const auto order = choice(r, "sortOrder", {"asc", "desc"});
    std::optional<std::string> search;
    if (auto s = r.query_param("search"); s && !s->empty()) {
        if (auto why = storage::prefix_problem(*s); !why.empty()) {
            throw storage_error(400, "InvalidRequest", "Invalid Input", why);
        }
        search = "%" + storage::like_escape(*s) + "%";
    }
    const auto limit = count_param(r, "limit", true);
    const auto offset = count_param(r, "offset", false).value_or("0");
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({sql::bucket_list_sql(column, order), pg::params{search, limit, offset}});
    auto res = co_await run(who, r, std::move(stmts), true);
    co_return http::response::json(200, res[0].get<std::string>(0, 0));
}

net::awaitable<http::response> storage_service::bucket_get(http::request r) {
    const auto who = caller(r);
    const auto id = bucket_id_of(r);
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kBucketGet), pg::params{id}});
    auto res = co_await run(who, r, std::move(stmts), true);
    if (res[0].empty()) throw bucket_not_found();
    co_return http::response::json(200, res[0].get<std::string>(0, 0));
}

net::awaitable<http::response> storage_service::bucket_create(http::request r) {
    const auto who = caller(r);
    const auto body = storage_body(r);
    std::string id;
    if (auto it = body.FindMember("id");
        it != body.MemberEnd() && it->value.IsString() && it->value.GetStringLength() > 0) {
        id.assign(it->value.GetString(), it->value.GetStringLength());
    } else {
        id = storage_string(body, "name");
    }
    if (auto it = body.FindMember("name");
        it != body.MemberEnd() && it->value.IsString() &&
        std::string_view(it->value.GetString(), it->value.GetStringLength()) != id) {
        throw storage_error(400, "InvalidBucketName", "Invalid Input",
                            "a bucket's name is its id: give the same (or only one)");
    }
    if (auto why = storage::bucket_name_problem(id); !why.empty()) {
        throw storage_error(400, "InvalidBucketName", "Invalid Input", why);
    }
    if (auto it = body.FindMember("type"); it != body.MemberEnd() && !it->value.IsNull()) {
        if (!it->value.IsString() || std::string_view(it->value.GetString()) != "STANDARD") {
            throw storage_error(400, "NotSupported", "not_supported",
                                "only STANDARD buckets are supported (docs/storage.md)");
        }
    }
    bool is_public = false;
    if (auto it = body.FindMember("public"); it != body.MemberEnd() && !it->value.IsNull()) {
        if (!it->value.IsBool()) {
            throw storage_error(400, "InvalidRequest", "Invalid Input", "public must be a boolean");
        }
        is_public = it->value.GetBool();
    }
    const auto limit = size_limit_of(body);
    const auto mimes = mime_list_of(body);
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back(
        {std::string(sql::kBucketCreate), pg::params{id, is_public, limit.bytes, mimes.json}});
    std::optional<storage_error> refusal;
    try {
        co_await run(who, r, std::move(stmts), false);
    } catch (const pg::sql_error& e) {
        if (e.sqlstate() != "23505") throw;
        refusal =
            storage_error(409, "BucketAlreadyExists", "Duplicate", "The resource already exists");
    }
    if (refusal) throw *refusal;
    json_out o;
    o.w.StartObject();
    o.kv("name", id);
    o.w.EndObject();
    co_return http::response::json(200, o.str());
}

net::awaitable<http::response> storage_service::bucket_update(http::request r) {
    const auto who = caller(r);
    const auto id = bucket_id_of(r);
    const auto body = storage_body(r);
    std::optional<bool> is_public;
    if (auto it = body.FindMember("public"); it != body.MemberEnd() && !it->value.IsNull()) {
        if (!it->value.IsBool()) {
            throw storage_error(400, "InvalidRequest", "Invalid Input", "public must be a boolean");
        }
        is_public = it->value.GetBool();
    }
    const auto limit = size_limit_of(body);
    const auto mimes = mime_list_of(body);
    if (!is_public && !limit.given && !mimes.given) {
        throw storage_error(400, "InvalidRequest", "Invalid Input",
                            "give public, file_size_limit or allowed_mime_types");
    }
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kBucketUpdate),
                     pg::params{id, is_public, limit.given, limit.bytes, mimes.given, mimes.json}});
    auto res = co_await run(who, r, std::move(stmts), false);
    if (res[0].empty()) throw bucket_not_found();
    co_return storage_message("Successfully updated");
}

net::awaitable<http::response> storage_service::bucket_empty(http::request r) {
    const auto who = caller(r);
    const auto id = bucket_id_of(r);
    // One transaction: the bucket must be one the caller sees, and the objects it may delete go.
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kBucketVisible), pg::params{id}});
    stmts.push_back({std::string(sql::kBucketEmpty), pg::params{id}});
    auto res = co_await run(who, r, std::move(stmts), false);
    if (res[0].empty()) throw bucket_not_found();
    co_return storage_message("Successfully emptied");
}

net::awaitable<http::response> storage_service::bucket_delete(http::request r) {
    const auto who = caller(r);
    const auto id = bucket_id_of(r);
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({std::string(sql::kBucketDelete), pg::params{id}});
    std::optional<storage_error> refusal;
    std::vector<pg::result> res;
    try {
        res = co_await run(who, r, std::move(stmts), false);
    } catch (const pg::sql_error& e) {
        if (e.sqlstate() != "23503") throw;
        refusal = storage_error(409, "ResourceNotEmpty", "ResourceNotEmpty",
                                "The bucket you tried to delete is not empty");
    }
    if (refusal) throw *refusal;
    if (res[0].empty()) throw bucket_not_found();
    co_return storage_message("Successfully deleted");
}

}  // namespace awp::api
