// A channel's postgres_changes bindings as realtime-js sends them in phx_join's
// config.postgres_changes ({event, schema, table, filter}) and the test of one change against
// one binding: the event, the table, and the filter (`col=op.value`, comma-separated filters all
// hold; eq neq lt lte gt gte in is, `not.` before any of them) compared as the column's type
// compares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

#include "awp/core/error.hpp"
#include "awp/realtime/change.hpp"

namespace awp::realtime {

/// A binding the server cannot serve; what() is the message the join's error reply carries.
class binding_error : public core::error {
public:
    using core::error::error;
};

struct filter {
    enum class op { eq, neq, lt, lte, gt, gte, in, is };
    std::string column;
    op o = op::eq;
    bool negate = false;
    /// One value; several for `in`; for `is`: "null", "true", "false" or "unknown".
    std::vector<std::string> values;
};

/// Limits on what a client may ask for in one binding.
inline constexpr std::size_t kMaxFilterBytes = 1024;
inline constexpr std::size_t kMaxFilterValues = 100;  ///< in.(...) and comma-separated filters

/// Parses a filter string ("agent_id=eq.42", "id=in.(1,2,3)", "a=gt.1,b=not.is.null").
/// Throws binding_error with what is wrong.
[[nodiscard]] std::vector<filter> parse_filter(std::string_view text);

namespace event_bit {
inline constexpr unsigned insert = 1;
inline constexpr unsigned update = 2;
inline constexpr unsigned remove = 4;
inline constexpr unsigned all = insert | update | remove;
}  // namespace event_bit

struct binding {
    std::uint64_t id = 0;  ///< the server id realtime-js matches its callbacks by
    unsigned events = 0;   ///< event_bit
    // As the client sent them: the reply echoes them and realtime-js compares them.
    std::string event;                  ///< "*", "INSERT", "UPDATE", "DELETE"
    std::string schema;                 ///< "*" = every exposed schema
    std::optional<std::string> table;   ///< absent (or "*") = every table of the schema
    std::optional<std::string> filter;  ///< the filter text, absent = none
    std::vector<struct filter> filters;

    [[nodiscard]] bool any_table() const { return !table || *table == "*"; }
    /// The event, schema and table match (not the filter).
    [[nodiscard]] bool covers(change_kind k, std::string_view schema_name,
                              std::string_view table_name) const;
    /// The reply's entry: {"id", "event", "schema", "table"?, "filter"?}.
    [[nodiscard]] std::string reply_json() const;
};

/// One entry of config.postgres_changes (an object). Throws binding_error. The id is left 0.
[[nodiscard]] binding parse_binding(const rapidjson::Value& v);

/// The columns a filter is tested on: the new row for INSERT and UPDATE, the old row's
/// identity columns for DELETE (a filter on a column the old row does not carry does not hold:
/// a DELETE is only filterable on its replica identity, as on the platform).
[[nodiscard]] const std::vector<column_value>& filter_row(const change& c);

/// Every filter of `b` holds on the change.
[[nodiscard]] bool filters_hold(const binding& b, const change& c);

/// One comparison, `value` the column's text as Postgres prints it and `type` its type name:
/// numbers compare as numbers, booleans as booleans, everything else as text (byte order).
/// Exposed for the tests.
[[nodiscard]] bool compare(const filter& f, const std::optional<std::string>& value,
                           std::string_view type);

}  // namespace awp::realtime
