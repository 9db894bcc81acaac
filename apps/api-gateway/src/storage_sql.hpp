// The statements of /storage/v1 (storage*.cpp), in one place: each runs as the caller's role and
// claims (row-level security decides what it sees and changes), or as the service role where
// the platform reads "as superuser" (public and signed URLs). JSON answers are built by Postgres
// with the platform's field names. Parameters are always $n; the only text spliced in is a sort
// column and direction from a fixed list (list_sql, bucket_list_sql).
#pragma once

#include <string>
#include <string_view>

#include "awp/core/pg.hpp"

namespace awp::api {
class storage_error;
/// A Postgres error as the platform's storage server words it (storage.cpp): 42501 → 403,
/// 23505 → 409, the name's CHECKs → 400, AW009 → 403, AW011 → 413, 57014 → 504, others 500.
storage_error storage_sql_error(const core::pg::sql_error& e);
}  // namespace awp::api

namespace awp::api::sql {

// A bucket as the platform answers it.
#define AWP_STORAGE_BUCKET_JSON(b)                                                       \
    "json_build_object('id', " b ".id, 'name', " b ".name, 'owner', coalesce(" b         \
    ".owner_id, ''), 'public', " b ".public, 'type', " b ".type, 'file_size_limit', " b  \
    ".file_size_limit, 'allowed_mime_types', " b ".allowed_mime_types, 'created_at', " b \
    ".created_at, 'updated_at', " b ".updated_at)"

// An object row as the platform answers it (list, remove).
#define AWP_STORAGE_OBJECT_JSON(o)                                                                \
    "json_build_object('name', " o ".name, 'bucket_id', " o ".bucket_id, 'owner', coalesce(" o    \
    ".owner::text, ''), 'owner_id', " o ".owner_id, 'version', " o ".version, 'id', " o           \
    ".id, 'updated_at', " o ".updated_at, 'created_at', " o ".created_at, 'last_accessed_at', " o \
    ".last_accessed_at, 'metadata', " o ".metadata, 'user_metadata', " o ".user_metadata)"

inline constexpr std::string_view kBucketGet =
    "SELECT " AWP_STORAGE_BUCKET_JSON("b") "::text FROM storage.buckets b WHERE b.id = $1";

/// $1 search (a LIKE pattern: '%text%', escaped; NULL: all), $2 limit (NULL: all), $3 offset.
/// `column` and `direction` come from the fixed lists of storage_buckets.cpp.
inline std::string bucket_list_sql(std::string_view column, std::string_view direction) {
    const std::string order = "b." + std::string(column) + " " + std::string(direction) +
                              ", b.id " + std::string(direction);
    return "SELECT coalesce(json_agg(" AWP_STORAGE_BUCKET_JSON("b") " ORDER BY " + order +
           "), '[]')::text FROM (SELECT * FROM storage.buckets b WHERE $1::text IS NULL OR "
           "b.name ILIKE $1 ESCAPE '\\' ORDER BY " +
           order + " LIMIT $2::bigint OFFSET $3::bigint) b";
}

/// $1 id, $2 public, $3 file_size_limit, $4 allowed_mime_types (a JSON array or NULL).
inline constexpr std::string_view kBucketCreate =
    "INSERT INTO storage.buckets (id, name, public, file_size_limit, allowed_mime_types) "
    "VALUES ($1, $1, $2::boolean, $3::bigint, "
    "(SELECT array_agg(x) FROM json_array_elements_text($4::json) x)) RETURNING id";

/// $1 id, $2 public (NULL: kept), $3 set the limit?, $4 limit, $5 set the types?, $6 types.
inline constexpr std::string_view kBucketUpdate =
    "UPDATE storage.buckets SET public = coalesce($2::boolean, public), "
    "file_size_limit = CASE WHEN $3::boolean THEN $4::bigint ELSE file_size_limit END, "
    "allowed_mime_types = CASE WHEN $5::boolean THEN "
    "(SELECT array_agg(x) FROM json_array_elements_text($6::json) x) "
    "ELSE allowed_mime_types END WHERE id = $1 RETURNING id";

inline constexpr std::string_view kBucketVisible = "SELECT 1 FROM storage.buckets WHERE id = $1";
inline constexpr std::string_view kBucketEmpty = "DELETE FROM storage.objects WHERE bucket_id = $1";
inline constexpr std::string_view kBucketDelete =
    "DELETE FROM storage.buckets WHERE id = $1 RETURNING id";

/// An upload's admission: $1 bucket, $2 name → the bucket's public flag, size limit, allowed
/// types (JSON), whether the name is NFC, and whether the caller sees an object of that name.
inline constexpr std::string_view kUploadBucket =
    "SELECT b.public, b.file_size_limit, "
    "coalesce(array_to_json(b.allowed_mime_types), '[]'::json)::text, "
    "$2::text IS NFC NORMALIZED, "
    "EXISTS (SELECT 1 FROM storage.objects o WHERE o.bucket_id = b.id AND o.name = $2::text) "
    "FROM storage.buckets b WHERE b.id = $1";

// A new object's row: $1 bucket, $2 name, $3 version, $4 size, $5 mimetype, $6 etag (MD5 hex),
// $7 cache control, $8 user metadata (JSON or NULL). The bucket must be one the caller sees.
#define AWP_STORAGE_INSERT                                                                         \
    "INSERT INTO storage.objects (bucket_id, name, version, size, mimetype, etag, cache_control, " \
    "metadata, user_metadata) "                                                                    \
    "SELECT $1::text, $2::text, $3::text, $4::bigint, $5::text, $6::text, $7::text, "              \
    "jsonb_build_object('eTag', '\"' || $6::text || '\"', 'size', $4::bigint, 'mimetype', "        \
    "$5::text, 'cacheControl', $7::text, 'lastModified', "                                         \
    "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'contentLength', "    \
    "$4::bigint, 'httpStatusCode', 200), $8::jsonb "                                               \
    "WHERE EXISTS (SELECT 1 FROM storage.buckets b WHERE b.id = $1::text) "

inline constexpr std::string_view kObjectInsert = AWP_STORAGE_INSERT "RETURNING id::text";
inline constexpr std::string_view kObjectUpsert = AWP_STORAGE_INSERT
    "ON CONFLICT (bucket_id, name) DO UPDATE SET version = EXCLUDED.version, "
    "size = EXCLUDED.size, mimetype = EXCLUDED.mimetype, etag = EXCLUDED.etag, "
    "cache_control = EXCLUDED.cache_control, metadata = EXCLUDED.metadata, "
    "user_metadata = EXCLUDED.user_metadata RETURNING id::text";

// An object to send or describe: $1 bucket, $2 name → version, size, mimetype, etag, cache
// control, Last-Modified (an HTTP date), the info JSON.
#define AWP_STORAGE_OBJECT_GET                                                                    \
    "SELECT o.version, o.size, o.mimetype, o.etag, o.cache_control, "                             \
    "to_char(o.updated_at AT TIME ZONE 'UTC', 'Dy, DD Mon YYYY HH24:MI:SS \"GMT\"'), "            \
    "json_build_object('id', o.id, 'name', o.name, 'version', o.version, 'bucket_id', "           \
    "o.bucket_id, 'size', o.size, 'content_type', o.mimetype, 'cache_control', o.cache_control, " \
    "'etag', '\"' || o.etag || '\"', 'metadata', o.user_metadata, 'last_modified', "              \
    "o.updated_at, 'created_at', o.created_at)::text "                                            \
    "FROM storage.objects o WHERE o.bucket_id = $1 AND o.name = $2::text"

/// As the caller (RLS), or as the service role for a signed URL.
inline constexpr std::string_view kObjectGet = AWP_STORAGE_OBJECT_GET;
/// A download's: the same without the info JSON (nobody reads it there).
inline constexpr std::string_view kObjectGetBytes =
    "SELECT o.version, o.size, o.mimetype, o.etag, o.cache_control, "
    "to_char(o.updated_at AT TIME ZONE 'UTC', 'Dy, DD Mon YYYY HH24:MI:SS \"GMT\"'), NULL::text "
    "FROM storage.objects o WHERE o.bucket_id = $1 AND o.name = $2::text";
/// As the service role: only when the bucket is public.
inline constexpr std::string_view kObjectGetPublic = AWP_STORAGE_OBJECT_GET
    " AND EXISTS (SELECT 1 FROM storage.buckets b WHERE b.id = o.bucket_id AND b.public)";

/// $1 bucket, $2 LIKE pattern of the prefix ('folder/%', escaped), $3 the prefix's length in
/// characters, $4 LIKE pattern of the search ('text%', escaped; NULL: none), $5 limit, $6 offset.
/// Folders first (the next segment of names below the prefix), then the objects at that level.
inline std::string list_sql(std::string_view column, std::string_view direction) {
    const std::string dir(direction);
    const std::string order = "r.k, CASE WHEN r.k = 0 THEN r.name END " + dir + ", r." +
                              std::string(column) + " " + dir + ", r.name " + dir;
    return "WITH m AS (SELECT o.id, o.updated_at, o.created_at, o.last_accessed_at, o.metadata, "
           "substr(o.name, $3::int + 1) AS rest FROM storage.objects o "
           "WHERE o.bucket_id = $1 AND o.name LIKE $2::text ESCAPE '\\'), "
           "s AS (SELECT * FROM m WHERE $4::text IS NULL OR m.rest ILIKE $4::text ESCAPE '\\'), "
           "r AS (SELECT DISTINCT 0 AS k, split_part(s.rest, '/', 1) AS name, NULL::uuid AS id, "
           "NULL::timestamptz AS updated_at, NULL::timestamptz AS created_at, "
           "NULL::timestamptz AS last_accessed_at, NULL::jsonb AS metadata "
           "FROM s WHERE strpos(s.rest, '/') > 0 "
           "UNION ALL SELECT 1, s.rest, s.id, s.updated_at, s.created_at, s.last_accessed_at, "
           "s.metadata FROM s WHERE strpos(s.rest, '/') = 0), "
           "p AS (SELECT r.*, row_number() OVER (ORDER BY " +
           order + ") AS n FROM r ORDER BY " + order +
           " LIMIT $5::bigint OFFSET $6::bigint) "
           "SELECT coalesce(json_agg(json_build_object('name', p.name, 'id', p.id, 'updated_at', "
           "p.updated_at, 'created_at', p.created_at, 'last_accessed_at', p.last_accessed_at, "
           "'metadata', p.metadata) ORDER BY p.n), '[]')::text FROM p";
}

/// $1 bucket, $2 names (a JSON array) → the deleted rows as JSON (those the caller may delete).
inline constexpr std::string_view kRemoveMany =
    "WITH d AS (DELETE FROM storage.objects o WHERE o.bucket_id = $1 "
    "AND o.name IN (SELECT json_array_elements_text($2::json)) RETURNING o.*) "
    "SELECT coalesce(json_agg(" AWP_STORAGE_OBJECT_JSON("d") "), '[]')::text FROM d";

inline constexpr std::string_view kRemoveOne =
    "DELETE FROM storage.objects o WHERE o.bucket_id = $1 AND o.name = $2::text "
    "RETURNING o.id::text";

/// $1 bucket, $2 name, $3 destination bucket (one the caller sees), $4 destination name.
inline constexpr std::string_view kMove =
    "UPDATE storage.objects o SET bucket_id = $3, name = $4::text "
    "WHERE o.bucket_id = $1 AND o.name = $2::text "
    "AND EXISTS (SELECT 1 FROM storage.buckets b WHERE b.id = $3) RETURNING o.id::text";

/// A copy's source: $1 bucket, $2 name.
inline constexpr std::string_view kCopySource =
    "SELECT o.version, o.size, o.mimetype, o.etag, o.cache_control, o.user_metadata::text "
    "FROM storage.objects o WHERE o.bucket_id = $1 AND o.name = $2::text";

/// The names among $2 (a JSON array) the caller sees in bucket $1.
inline constexpr std::string_view kVisibleNames =
    "SELECT o.name FROM storage.objects o WHERE o.bucket_id = $1 "
    "AND o.name IN (SELECT json_array_elements_text($2::json))";

/// Which of the versions $1 (a JSON array) a row names (housekeeping, as the service role).
inline constexpr std::string_view kVersionsWithRows =
    "SELECT o.version FROM storage.objects o "
    "WHERE o.version IN (SELECT json_array_elements_text($1::json))";

/// Deleted versions older than $1 seconds, at most $2, taken (deleted, locked by the open
/// transaction) for the reaper to remove their bytes before it commits.
inline constexpr std::string_view kTakeDeletedVersions =
    "DELETE FROM storage.deleted_versions d WHERE d.version IN ("
    "SELECT x.version FROM storage.deleted_versions x "
    "WHERE x.deleted_at < now() - make_interval(secs => $1::float8) "
    "ORDER BY x.deleted_at LIMIT $2::int FOR UPDATE SKIP LOCKED) RETURNING d.version";

}  // namespace awp::api::sql
