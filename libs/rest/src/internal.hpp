// What request.cpp takes from the other readers of a request inside awp::rest: media types,
// the Range header, PostgREST's range algebra, the raw query items and the body readers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "awp/rest/request.hpp"

namespace awp::rest::detail {

/// decodeMediaType: a media type header value as PostgREST reads it (never fails: what it
/// does not know is media::other, printed as sent).
struct decoded_media {
    media_type type;
    bool urlencoded = false;  ///< application/x-www-form-urlencoded (media::other)
};
[[nodiscard]] decoded_media decode_media_type(std::string_view value);

/// a + b, saturated short of row_span's unbounded markers (so a sum never reads as "all").
[[nodiscard]] inline std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) r = b > 0 ? INT64_MAX : INT64_MIN;
    if (r == INT64_MAX) --r;
    if (r == INT64_MIN) ++r;
    return r;
}

/// A range of row numbers as Data.Ranged keeps PostgREST's: [lower, upper], either side
/// unbounded; empty when upper < lower.
struct row_span {
    static constexpr std::int64_t kBelowAll = INT64_MIN;
    static constexpr std::int64_t kAboveAll = INT64_MAX;
    std::int64_t lower = 0;
    std::int64_t upper = kAboveAll;
    [[nodiscard]] bool empty() const noexcept { return upper < lower; }
    [[nodiscard]] bool operator==(const row_span& o) const noexcept {
        return (empty() && o.empty()) || (lower == o.lower && upper == o.upper);
    }
    [[nodiscard]] static row_span all() noexcept { return {0, kAboveAll}; }
    [[nodiscard]] static row_span none() noexcept { return {kAboveAll, kBelowAll}; }
    [[nodiscard]] static row_span geq(std::int64_t n) noexcept { return {n, kAboveAll}; }
    [[nodiscard]] static row_span leq(std::int64_t n) noexcept { return {kBelowAll, n}; }
    [[nodiscard]] row_span intersect(const row_span& o) const noexcept;
    /// limit=N applied to this range (restrictRange).
    [[nodiscard]] row_span restrict(std::int64_t limit) const noexcept;
    [[nodiscard]] std::optional<std::int64_t> limit() const noexcept;  ///< rangeLimit
    [[nodiscard]] bool limit_zero() const noexcept { return upper == -1; }
    [[nodiscard]] row_range to_row_range() const noexcept;
};

/// The Range header ("0-9", "10-"): anything else is every row (rangeRequested).
[[nodiscard]] row_span range_header(std::string_view value);

/// Haskell's `readMaybe :: Maybe Integer` (whitespace, parentheses, '-', 0x/0o literals),
/// saturated to 64 bits.
[[nodiscard]] std::optional<std::int64_t> read_integer(std::string_view text);

/// One query item: the key and, unless there was no '=', the value; both decoded.
struct query_item {
    std::string key;
    std::optional<std::string> value;
};
/// parseQueryReplacePlus + UTF-8, strict: PGRST100 on a bad %-escape, invalid UTF-8 or NUL.
[[nodiscard]] std::vector<query_item> query_items(std::string_view q);

/// getPayload's readers: fill the request's body, body_keys and body_is_array.
void read_json_body(std::string_view body, bool is_call, api_request& out);
void read_csv_body(std::string_view body, api_request& out);
void read_form_body(std::string_view body, api_request& out);

}  // namespace awp::rest::detail
