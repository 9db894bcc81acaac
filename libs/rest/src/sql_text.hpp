// SQL text for the data API's statements: identifiers quoted, catalog text as literals, every
// value from a request a bound parameter ($n), and the request's type casts mapped to type names
// that cannot carry anything else. Internal to awp::rest.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "awp/rest/schema.hpp"

namespace awp::rest::detail {

/// "name" with embedded quotes doubled. NUL bytes never get here (the grammar refuses them).
[[nodiscard]] std::string ident(std::string_view s);
/// "schema"."name" ("name" alone when the schema is empty).
[[nodiscard]] std::string qname(const qualified_name& q);
/// A string literal for text that comes from the catalog, never from a request.
[[nodiscard]] std::string literal(std::string_view s);

/// The parameters of one statement.
class binder {
public:
    /// Adds a text parameter; returns its placeholder ("$3").
    std::string bind(std::string value);
    std::string bind_null();
    [[nodiscard]] const std::vector<std::optional<std::string>>& params() const noexcept {
        return params_;
    }
    std::vector<std::optional<std::string>> take() { return std::move(params_); }

private:
    std::vector<std::optional<std::string>> params_;
};

/// The SQL of a request's cast (`::text`, `::int4`, `::character varying`, `::my_enum`): a
/// built-in spelling from a fixed list, else the name as a quoted identifier (lower case, as
/// Postgres folds it). PGRST100 for anything that is not a type name.
[[nodiscard]] std::string sql_type(std::string_view cast);

/// A JSON string literal ("..." with escapes).
[[nodiscard]] std::string json_string(std::string_view s);

/// A Postgres array literal of `values` ({"a","b\"c"}), for `= ANY($n)`.
[[nodiscard]] std::string array_literal(const std::vector<std::string>& values);

}  // namespace awp::rest::detail
