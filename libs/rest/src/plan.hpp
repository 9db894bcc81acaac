// The read plan of a data-API request: a tree of levels (the target and its embeds), each with
// its resolved relationship, fields, filters, order and range, built from the request and the
// schema cache and rendered as one SELECT with LATERAL joins. Internal to awp::rest; query.cpp
// wraps it in the statement of a read, a write or a call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "awp/rest/request.hpp"
#include "awp/rest/schema.hpp"
#include "sql_text.hpp"

namespace awp::rest::detail {

/// A field of a level's select list, resolved.
struct field_plan {
    bool star = false;        ///< `*` (every column)
    bool count_star = false;  ///< `count()`
    std::string column;
    json_path path;
    std::string cast_sql;  ///< the type of `::cast` ("" = none)
    aggregate agg = aggregate::none;
    std::string agg_cast_sql;
    std::string alias;  ///< the output name when it is not Postgres' own ("" = none)
    /// In a to-one spread: the aggregate is applied by the parent over this raw value.
    bool hoisted = false;
};

/// One level: the target (depth 0) or an embedded resource.
struct level {
    qualified_name from;         ///< the table or view (for a computed embed: its result table)
    const table* tbl = nullptr;  ///< its shape, when the cache knows it
    std::string alias;           ///< the FROM alias every reference uses
    std::string source_sql;      ///< the FROM item ("" = qname(from))
    std::optional<relationship> rel;  ///< to the parent (embeds)
    std::string name;                 ///< the relation as requested
    std::string label;                ///< its alias in select ("" = none)
    std::string out;                  ///< the key in the parent's object
    std::string agg_alias;            ///< the LATERAL subquery's alias
    join_type join = join_type::unspecified;
    bool spread = false;
    bool empty = false;  ///< `rel()`: joined (for filters) but not in the output
    unsigned depth = 0;
    std::vector<field_plan> fields;
    std::vector<level> kids;
    std::vector<logic_tree> where;
    std::vector<order_term> order;
    std::optional<row_range> range;
    [[nodiscard]] bool to_one() const noexcept { return rel && rel->is_to_one(); }
    [[nodiscard]] std::string ref() const { return ident(alias); }
};

/// Builds the tree of `items` below a level of `from` (its table `tbl`, FROM alias `alias`).
/// Throws api_error for unknown embeds (PGRST200/201), casts (PGRST100), aggregates when not
/// allowed (PGRST123), more than `max_joins` joins (PGRST100; a many-to-many counts two).
[[nodiscard]] level build_level(const schema_cache& sc, const qualified_name& from,
                                const table* tbl, std::string alias,
                                const std::vector<select_item>& items, bool aggregates,
                                std::size_t max_joins = SIZE_MAX);

/// Places the request's filters, logic trees, orders and ranges on the levels their embed
/// paths name (PGRST108 for a path that names no embed). `root_filters`: whether the top
/// level's own filters go on the tree (reads, calls) or stay with the write (mutations).
void place_conditions(level& root, const api_request& req, bool root_filters);

/// The SELECT of a level (its LATERAL embeds included). `limit`: the top level's range.
[[nodiscard]] std::string render_select(const level& l, binder& b);

/// SELECT 1 of the top level with its filters (and EXISTS for inner embeds): for counts.
[[nodiscard]] std::string render_count(const level& l, binder& b);

/// A WHERE condition of a level (filters rendered against `ref`).
[[nodiscard]] std::string render_logic(const level& l, const logic_tree& t, binder& b);

/// ` ORDER BY ...` of a level's order terms ("" when none).
[[nodiscard]] std::string render_order(const level& l, binder& b);

/// `LIMIT n OFFSET m` of a range ("" for the whole set).
[[nodiscard]] std::string render_range(const std::optional<row_range>& r);

}  // namespace awp::rest::detail
