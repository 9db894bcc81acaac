// The names of buckets and objects (docs/storage.md, "Names"): what /storage/v1 accepts, decided
// once here. An object's name is only a key in Postgres: the bytes are stored under a version id
// the store makes (store.hpp), so no name ever reaches the file system. The rules are about what
// people see: a name must read as what it is (no control characters, no invisible or
// direction-changing characters, no look-alikes of '/' and '.', no spaces other than U+0020),
// split into segments the way it looks (no empty, "." or ".." segment, no backslash) and fit
// where names go (1024 bytes, 255 per segment). Canonical equivalence (NFC) is checked by the
// database (a CHECK on storage.objects.name), which has the Unicode tables.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace awp::storage {

/// Longest object name in bytes (S3's and the platform's key limit).
inline constexpr std::size_t kMaxNameBytes = 1024;
/// Longest segment of a name (between slashes) in bytes: a file name on every file system a
/// download lands on.
inline constexpr std::size_t kMaxSegmentBytes = 255;
/// Longest bucket id (the platform's).
inline constexpr std::size_t kMaxBucketBytes = 100;

/// Why `name` cannot be an object's name ("" when it can): not UTF-8, empty or too long, an
/// empty / "." / ".." segment (a leading, trailing or doubled '/'), a segment too long or that
/// starts or ends with a space, or a character refused anywhere (controls, backslash, format and
/// invisible characters, bidirectional controls, spaces other than U+0020, look-alikes of '/',
/// '\' and '.', private-use code points, noncharacters).
[[nodiscard]] std::string object_name_problem(std::string_view name);

/// Why `id` cannot be a bucket's id ("" when it can): the platform's rule — 1 to 100 characters
/// of A-Z a-z 0-9 and _ ! . * ' ( ) & $ = @ ; : + , ? - and space — not starting or ending with
/// a space, and not "." or "..".
[[nodiscard]] std::string bucket_name_problem(std::string_view id);

/// Why `prefix` (a list request's folder, or a search text) cannot be used ("" when it can):
/// UTF-8 text of at most kMaxNameBytes without control characters. A prefix may end with '/'.
[[nodiscard]] std::string prefix_problem(std::string_view prefix);

/// A bucket and an object name taken from the encoded tail of a request path
/// ("assets/a%20b/c.png"): the first segment is the bucket, the rest the name. Each segment is
/// percent-decoded on its own (an encoded '/' is a separator, as the platform reads it).
struct object_path {
    std::string bucket;
    std::string name;
    std::string problem;      ///< "" when both are valid; otherwise what is wrong, for a 400
    bool bad_bucket = false;  ///< the problem is the bucket's
};
[[nodiscard]] object_path split_object_path(std::string_view encoded_tail);

/// A bucket id and a name given in a JSON body (move, copy, remove, sign): checked the same way.
[[nodiscard]] std::string key_problem(std::string_view bucket, std::string_view name);

/// `literal` as a LIKE pattern that matches only itself (backslash, '%' and '_' escaped with a
/// backslash; use ESCAPE '\').
[[nodiscard]] std::string like_escape(std::string_view literal);

/// The last segment of a name (what a download is saved as).
[[nodiscard]] std::string_view base_name(std::string_view name) noexcept;

}  // namespace awp::storage
