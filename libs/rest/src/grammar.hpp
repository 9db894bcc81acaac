// The query-string grammar's entry points inside awp::rest (grammar.cpp; the rules in
// grammar_rules.hpp), one per parameter kind, each named and failing as PostgREST's (PGRST100
// with Parsec's position and wording).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "awp/rest/request.hpp"

namespace awp::rest::detail {

/// select= (pFieldForest; nesting refused past lim.max_embed_depth before recursing).
[[nodiscard]] std::vector<select_item> select_param(std::string_view text, const limits& lim);
/// A filter's, order's or range's key: the embed path and the field (pTreePath).
[[nodiscard]] std::pair<embed_path, field> tree_path(std::string_view key);
/// A filter's value (pOpExpr pSingleVal; with rpc_read a value without an operator is an
/// argument: no_op).
[[nodiscard]] op_expr filter_value(std::string_view text, bool rpc_read);
/// order= (pOrder).
[[nodiscard]] std::vector<order_term> order_param(std::string_view text);
/// An and=/or= key: its embed path and "or", "and", "not.or" or "not.and" (pLogicPath).
[[nodiscard]] std::pair<embed_path, std::string> logic_path(std::string_view key);
/// An and=/or= value after its operator (pLogicTree over op + text).
[[nodiscard]] logic_tree logic_param(std::string_view op, std::string_view text, const limits& lim);
/// columns= and on_conflict= (pColumns); `what` names the parameter in the message.
[[nodiscard]] std::vector<std::string> columns_param(std::string_view text, std::string_view what);

}  // namespace awp::rest::detail
