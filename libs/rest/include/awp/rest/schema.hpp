// The data API's schema cache: the tables, views, columns, keys, relationships and functions of
// the exposed schemas, read from the catalog in one statement (catalog_query) and decoded from
// its one JSON value (decode). Immutable once built: the gateway swaps a whole new cache in on
// a schema change (NOTIFY pgrst, 'reload schema'). Relationship and overload resolution follow
// PostgREST's rules and error texts (PGRST200/201 for embeds, PGRST202/203 for functions,
// PGRST204/205 for names).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "awp/rest/error.hpp"
#include "awp/rest/request.hpp"

namespace awp::rest {

struct qualified_name {
    std::string schema;
    std::string name;
    auto operator<=>(const qualified_name&) const = default;
    bool operator==(const qualified_name&) const = default;
};

struct column {
    std::string name;
    /// The type as SQL spells it for a cast: format_type() with its schema when it is not in
    /// pg_catalog ("text", "integer", "timestamp with time zone", "public.user_status",
    /// "extensions.vector(384)", "text[]"); a built-in type without its modifier ("numeric",
    /// "character varying"), as PostgREST, so a record definition cuts or rounds nothing.
    std::string type;
    /// The type's base name without modifiers or array brackets, a domain's base type, as
    /// format_type() spells it (schema-qualified outside pg_catalog), for operator choice
    /// ("text", "jsonb", "tsvector", "int4range", "character varying"...), and its category
    /// (pg_type.typcategory of the domain's base type: 'A' array, 'R' range, 'S' string,
    /// 'N' numeric, 'U' user/json..., 'E' enum, ...).
    std::string base_type;
    char category = 'U';
    bool is_array = false;
    bool nullable = true;
    bool has_default = false;  ///< a default, an identity or a generated column
    bool generated = false;    ///< GENERATED ALWAYS ... STORED / identity ALWAYS: never written
    std::string default_expr;  ///< pg_get_expr of the default ("" = none)
    int position = 0;
    std::string description;  ///< the column's comment
};

struct table {
    qualified_name id;
    char kind = 'r';  ///< pg_class.relkind: r table, p partitioned, v view, m matview, f foreign
    [[nodiscard]] bool is_view() const noexcept { return kind == 'v' || kind == 'm'; }
    bool insertable = false;  ///< tables always; views when auto-updatable or with triggers/rules
    bool updatable = false;
    bool deletable = false;
    /// Row-level security is enabled (pg_class.relrowsecurity): it applies to the API roles,
    /// which own no table. A view's rows depend on its definition: see query.cpp's counts.
    bool rls = true;
    std::vector<std::string> primary_key;  ///< for a view: the base table's, when it shows them
    std::vector<column> columns;           ///< in position order
    std::string description;
    [[nodiscard]] const column* find(std::string_view name) const noexcept;
};

/// A foreign key as the catalog has it (views' keys are derived from their base tables).
struct foreign_key {
    std::string constraint;
    qualified_name table;  ///< the referencing side
    std::vector<std::string> columns;
    qualified_name foreign_table;  ///< the referenced side
    std::vector<std::string> foreign_columns;
};

enum class cardinality {
    many_to_one,   ///< table.columns → foreign_table (table holds the key): embed is an object
    one_to_many,   ///< the reverse: embed is an array
    one_to_one,    ///< a key whose columns are unique: an object either way
    many_to_many,  ///< through a junction table with keys to both: an array
    computed       ///< a function taking the table's row type (to-one when it returns one row)
};

/// An edge PostgREST can embed along, from `table` to `foreign_table`.
struct relationship {
    rest::cardinality card = cardinality::many_to_one;
    qualified_name table;
    qualified_name foreign_table;
    bool is_self = false;
    /// Whether each side is a view (or materialized view): a constraint name or a column as the
    /// embed's target (rather than as its hint) only finds relationships to tables.
    bool table_is_view = false;
    bool foreign_table_is_view = false;
    /// one_to_one: whether `table` is the referenced side ("parent").
    bool o2o_parent = false;
    /// The constraint (every kind but many_to_many and computed) and its column pairs, each
    /// (column of `table`, column of `foreign_table`).
    std::string constraint;
    std::vector<std::pair<std::string, std::string>> columns;
    // many_to_many: the junction and its two constraints with their column pairs
    // (table's column, junction's column) and (junction's column, foreign table's column).
    qualified_name junction;
    std::string junction_constraint_source;
    std::string junction_constraint_target;
    std::vector<std::pair<std::string, std::string>> junction_source_columns;
    std::vector<std::pair<std::string, std::string>> junction_target_columns;
    // computed: the function called with the row.
    qualified_name function;
    bool to_one = false;  ///< computed: returns one row (not SETOF, or SETOF with ROWS 1)
    /// An embed of this relationship returns one object (else an array).
    [[nodiscard]] bool is_to_one() const noexcept;
};

struct function_param {
    std::string name;  ///< "" when unnamed
    std::string type;  ///< as for a cast (format_type, schema-qualified when not pg_catalog)
    std::string base_type;
    /// The type to cast an argument to: `type`, but "character varying" for "character" and
    /// "bit varying" for "bit" (parameters have no length: a cast to character cuts to one).
    std::string cast_type;
    bool has_default = false;
    bool variadic = false;
};

struct function {
    qualified_name id;
    std::uint32_t oid = 0;
    std::vector<function_param> params;  ///< IN, INOUT and VARIADIC, in order
    char volatility = 'v';               ///< i, s, v
    bool returns_set = false;
    bool returns_void = false;
    /// The result is a row: a table's row type, a composite type, RETURNS TABLE or OUT params.
    bool returns_composite = false;
    /// When the row type is a table's or view's: it (so embeds and filters resolve on it).
    std::optional<qualified_name> returns_table;
    /// The result type as PostgREST names it (the relation for a row type, else the base type's
    /// pg_type name: {"pg_catalog","record"} for RETURNS TABLE / OUT parameters): the origin of
    /// embeds from the result when it is no table.
    qualified_name return_type_name;
    std::string return_type;  ///< for a scalar result: its type (as for a cast)
    std::string return_base_type;
    char return_category = 'U';
    bool single_row = false;  ///< SETOF ... ROWS 1
    std::string description;
};

/// Per-role settings PostgREST applies to a request's transaction (pg_db_role_setting of the
/// role, e.g. ALTER ROLE anon SET statement_timeout = '3s').
struct role_settings {
    std::vector<std::pair<std::string, std::string>> settings;
    /// The role sees every row whatever the policies (BYPASSRLS or superuser).
    bool bypass_rls = false;
};

class schema_cache {
public:
    /// The exposed schemas, the first the default.
    std::vector<std::string> schemas;
    std::map<qualified_name, table> tables;
    std::vector<foreign_key> foreign_keys;
    /// Overloads by name, in PostgREST's order (fewest parameters first).
    std::map<qualified_name, std::vector<function>> functions;
    std::map<std::string, role_settings> roles;  ///< by role name
    std::string server_version;                  ///< server_version_num as text
    std::uint64_t loaded_at_ms = 0;
    /// Every relationship by the table it starts from, in PostgREST's order (decode fills it;
    /// computed relationships replace the key-based ones to a table named like the function).
    std::map<qualified_name, std::vector<relationship>> relationships_of;

    /// PGRST205 (404) "Could not find the table 's.t' in the schema cache", with PostgREST's
    /// hint naming the closest table.
    [[nodiscard]] const table& find_table(const qualified_name& id) const;
    [[nodiscard]] const table* try_table(const qualified_name& id) const noexcept;

    /// Every relationship from `from` (to tables, views and through junctions; computed ones
    /// from functions of the schema taking `from`'s row type).
    [[nodiscard]] std::vector<relationship> relationships(const qualified_name& from) const;

    /// The embed `target` (a table, view, computed-relationship function, or a column of `from`
    /// holding a foreign key) from `from`, disambiguated by `hint` (a constraint, a column, a
    /// junction; "" = none), as PostgREST's findRel: PGRST200 (400) when nothing matches,
    /// PGRST201 (300) when several do (details list them, hint suggests `!<constraint>`).
    [[nodiscard]] relationship find_relationship(const qualified_name& from,
                                                 std::string_view target,
                                                 std::string_view hint) const;

    /// The function `name` of `schema` callable with exactly the named arguments `args`
    /// (every parameter without a default among them, none unknown); with one unnamed
    /// json/jsonb/text/xml/bytea parameter, the body as that argument (`single_unnamed`
    /// is then set). PGRST202 (404) with PostgREST's message and hint when none fits, PGRST203
    /// (300) when several do.
    ///
    /// `read_only`: a GET/HEAD call (arguments from the query string, no body: the single
    /// unnamed parameter fallback does not apply). `content_type`: the POST body's (json, text,
    /// xml, octet; anything else, such as a form, as `other`): which single unnamed parameter
    /// takes it, and PGRST202's texts. `prefer_single_object` (Prefer: params=single-object,
    /// which PostgREST v14 no longer reads): a function whose one parameter is json or jsonb
    /// takes the whole body when there is exactly one; otherwise resolution is v14's.
    /// `body_is_object` does not change v14's resolution (the body's keys are `args`).
    struct call_match {
        const rest::function* fn = nullptr;
        bool single_unnamed = false;  ///< pass the whole body as the one parameter
    };
    [[nodiscard]] call_match find_function(const qualified_name& id,
                                           const std::vector<std::string>& args,
                                           bool body_is_object, bool prefer_single_object,
                                           bool read_only, media content_type = media::json) const;
};

/// The catalog statement: one row, one column, one JSON value describing the schemas in $1
/// (a text[] of exposed schema names). Reads only catalogs every role can read.
[[nodiscard]] std::string_view catalog_query() noexcept;

/// Builds the cache from catalog_query()'s JSON value. Throws core::error when the JSON is not
/// of the expected shape (a bug or a server this build does not know).
[[nodiscard]] std::shared_ptr<const schema_cache> decode(std::string_view json,
                                                         std::vector<std::string> schemas);

}  // namespace awp::rest
