// Reads a view's query tree (pg_rewrite.ev_action, Postgres's pg_node_tree text) for what the
// schema cache needs of it: where each output column of the view comes from (the target
// list's resorigtbl/resorigcol, which Postgres resolves through subqueries for us). That is
// how PostgREST finds the keys a view inherits from its base tables.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace awp::rest::detail {

/// One output column of a view and the table column it shows unchanged (origin_table 0 when
/// it is computed).
struct target_origin {
    int resno = 0;
    std::uint32_t origin_table = 0;
    int origin_column = 0;
};

/// The top-level target list of the first query in `ev_action`, junk entries left out.
/// Throws core::error when the text is not a node tree this reader understands.
[[nodiscard]] std::vector<target_origin> view_target_origins(std::string_view ev_action);

}  // namespace awp::rest::detail
