// The data API's request, typed: what a PostgREST-dialect HTTP request (method, path, query
// string, headers, body) asks for, parsed and checked for form only (no catalog yet). parse()
// is the one reader of the query-string grammar (select, filters, logic trees, order, ranges,
// on_conflict, columns) and of the Prefer, Range, Accept and profile headers; schema.hpp checks
// names against the catalog, query.hpp renders SQL. docs/data-api.md describes the dialect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "awp/rest/error.hpp"

namespace awp::rest {

/// Bounds on what one request may ask for; a request beyond one is refused with a 4xx that says
/// which (never parsed further, never sent to Postgres).
struct limits {
    /// The raw query string (414 past it). Below the HTTP server's 16 KiB of request line and
    /// headers (431 past those), so a long query gets PostgREST's body rather than the server's.
    std::size_t max_query_bytes = 12 * 1024;
    std::size_t max_params = 200;        ///< query parameters
    std::size_t max_conditions = 200;    ///< filters + logic-tree leaves, all levels
    std::size_t max_select_items = 500;  ///< fields and embeds, all levels
    /// Embedded resources (and spreads), all levels: each is a join the planner weighs before
    /// privileges are checked, so a few hundred of them cost seconds of database CPU even for
    /// a caller who may read nothing (issue 37, finding 4).
    std::size_t max_embeds = 20;
    unsigned max_embed_depth = 8;               ///< nested embeds (and filter paths)
    unsigned max_logic_depth = 16;              ///< nested and()/or()
    std::size_t max_list_values = 1000;         ///< values of one in.(...)
    std::size_t max_identifier_bytes = 63 * 4;  ///< a name (Postgres truncates at 63 bytes)
    std::size_t max_value_bytes = 64 * 1024;    ///< one filter value
};

// ---- the query-string grammar ---------------------------------------------------------------

/// `->key` / `->>key` / `->0` / `->>-1` in a select, filter or order field.
struct json_step {
    bool as_text = false;   ///< ->> (text) rather than -> (json)
    bool is_index = false;  ///< an array index ("+1", "-2": sign kept, as PostgREST does)
    std::string operand;    ///< the key, or the signed index
    bool operator==(const json_step&) const = default;
};
using json_path = std::vector<json_step>;

/// A column (or "*"), optionally followed by a JSON path.
struct field {
    std::string name;
    json_path path;
    bool operator==(const field&) const = default;
};

enum class aggregate { none, count, sum, avg, max, min };
enum class join_type { unspecified, inner, left };

/// One item of `select=`: a field (`alias:col->a::cast.sum()::cast`), an embedded resource
/// (`alias:rel!hint!inner(...)`) or a spread (`...rel!hint(...)`). `count()` alone is a field
/// named "*" with aggregate count.
struct select_item {
    enum class kind { field, relation, spread };
    kind what = kind::field;
    // kind::field
    rest::field fld;
    std::string cast;  ///< `::type` after the field ("" = none)
    aggregate agg = aggregate::none;
    std::string agg_cast;  ///< `::type` after the aggregate
    std::string alias;     ///< "" = none (spreads have none)
    // kind::relation / kind::spread
    std::string relation;  ///< the table, view or function named in the embed
    std::string hint;      ///< `!hint`: a foreign key, a column or a junction ("" = none)
    join_type join = join_type::unspecified;
    std::vector<select_item> children;  ///< the embed's own select list
    bool operator==(const select_item&) const = default;
};

/// Filter operators (PostgREST's names).
enum class op {
    eq,
    neq,
    gt,
    gte,
    lt,
    lte,
    like,
    ilike,
    match,
    imatch,  // quantifiable (eq(any), ...)
    in,
    is,
    isdistinct,
    cs,
    cd,
    ov,
    sl,
    sr,
    nxr,
    nxl,
    adj,
    fts,
    plfts,
    phfts,
    wfts
};
enum class quantifier { none, any, all };
enum class is_value { null, not_null, true_, false_, unknown };

/// `[not.]op[(any|all)|(lang)].value`.
struct op_expr {
    bool negated = false;
    rest::op op = op::eq;
    quantifier quant = quantifier::none;  ///< eq(any).{a,b} ...
    std::string language;                 ///< fts(english). ...
    std::string value;                    ///< the single value (raw text after the dot)
    std::vector<std::string> list;        ///< in.(a,"b,c") — unquoted elements (in.() is {""})
    is_value is = is_value::null;         ///< is.null ...
    /// A GET/HEAD call's parameter without an operator: a function argument, `value` the whole
    /// text (PostgREST's NoOpExpr; only with parse_op_expr(text, rpc_read = true)).
    bool no_op = false;
    bool operator==(const op_expr&) const = default;
};

struct filter {
    rest::field fld;
    op_expr expr;
    bool operator==(const filter&) const = default;
};

/// and(...)/or(...) trees, possibly negated (`not.or(...)`), with filters as leaves.
struct logic_tree {
    bool is_leaf = false;
    rest::filter leaf;             ///< when is_leaf
    bool negated = false;          ///< not.and / not.or
    bool is_or = false;            ///< or rather than and
    std::vector<logic_tree> kids;  ///< when not a leaf
    bool operator==(const logic_tree&) const = default;
};

enum class order_dir { unspecified, asc, desc };
enum class order_nulls { unspecified, first, last };

/// One term of `order=`: a field, or `rel(field)` (a to-one embed's column).
struct order_term {
    std::string relation;  ///< "" for a plain field
    rest::field fld;
    order_dir dir = order_dir::unspecified;
    order_nulls nulls = order_nulls::unspecified;
    bool operator==(const order_term&) const = default;
};

/// Embed path: the embeds (by name or alias) a parameter applies to, outermost first; empty
/// for the top level. `clients.projects.name=eq.x` has path {"clients", "projects"}.
using embed_path = std::vector<std::string>;

/// Rows [offset, offset + limit) of one level; limit nullopt = no limit.
struct row_range {
    std::int64_t offset = 0;
    std::optional<std::int64_t> limit;
    bool operator==(const row_range&) const = default;
};

// ---- headers --------------------------------------------------------------------------------

enum class prefer_return { unspecified, minimal, headers_only, representation };
enum class prefer_count { none, exact, planned, estimated };
enum class prefer_resolution { none, merge_duplicates, ignore_duplicates };
enum class prefer_missing { unspecified, apply_defaults, apply_nulls };
enum class prefer_tx { unspecified, commit, rollback };
enum class prefer_handling { unspecified, lenient, strict };

/// Every Prefer header, comma lists joined (first occurrence of each kind wins).
struct preferences {
    prefer_return ret = prefer_return::unspecified;
    prefer_count count = prefer_count::none;
    prefer_resolution resolution = prefer_resolution::none;
    prefer_missing missing = prefer_missing::unspecified;
    prefer_tx tx = prefer_tx::unspecified;
    prefer_handling handling = prefer_handling::unspecified;
    /// The first timezone=... value ("" = none), not checked here: the caller checks it against
    /// pg_timezone_names and, when unknown, clears it and adds every timezone= token to
    /// `invalid` (PostgREST's rule).
    std::string timezone;
    std::optional<std::int64_t> max_affected;  ///< the first max-affected=N
    /// params=single-object was sent. PostgREST 14 removed it: the token is also in `invalid`
    /// (so handling=strict refuses it) and never applied.
    bool params_single_object = false;
    std::vector<std::string> invalid;  ///< tokens not understood (strict handling: 400)
    /// The Preference-Applied header value for the preferences honoured ("" = none), in
    /// PostgREST's order; tx only when `tx_allowed`, max-affected only with handling=strict.
    /// The caller first clears what the action does not honour (PostgREST's
    /// responsePreferences: resolution on inserts, return on mutations, ...).
    [[nodiscard]] std::string applied_header(bool tx_allowed) const;
    /// PGRST122 (400) when handling=strict and a token was not understood. PostgREST checks it
    /// once the plan resolved the names (after PGRST2xx), so the planner calls this.
    void check_strict() const;
};

/// Response media types the client accepts, in preference order.
enum class media {
    json,          ///< application/json (and */*)
    object,        ///< application/vnd.pgrst.object+json (single object)
    object_nulls,  ///< application/vnd.pgrst.object+json;nulls=stripped
    array_nulls,   ///< application/vnd.pgrst.array+json;nulls=stripped
    csv,           ///< text/csv
    text,          ///< text/plain (scalar function results)
    xml,           ///< text/xml (scalar function results)
    octet,         ///< application/octet-stream (bytea function results)
    geojson,       ///< application/geo+json
    plan,          ///< application/vnd.pgrst.plan(+json|+text) (EXPLAIN; off unless enabled)
    openapi,       ///< application/openapi+json (root)
    any,           ///< */*
    other          ///< anything else (kept as text in `raw`)
};
struct media_type {
    rest::media kind = media::json;
    /// The type as PostgREST prints it in a 406 ("None of these media types are available:
    /// ..."): canonical for the types it knows, as sent for the others.
    std::string raw;
    // plan options: for=..., format=text|json, options=analyze|verbose|settings|buffers|wal
    bool plan_text = false;
    std::string plan_for;                   ///< the for= type as printed ("application/json")
    std::vector<std::string> plan_options;  ///< in PostgREST's order
    bool operator==(const media_type&) const = default;
};

// ---- the whole request ----------------------------------------------------------------------

enum class action {
    read,        ///< GET/HEAD on a table or view
    insert,      ///< POST on a table or view
    upsert_one,  ///< PUT on a table or view (single row by primary key)
    update,      ///< PATCH
    remove,      ///< DELETE
    call,        ///< /rpc/<fn> (GET/HEAD: read-only; POST)
    info,        ///< OPTIONS on a table, view or function
    root         ///< GET / (the schema's description) — answered as not supported
};

/// What the caller passed to parse(): the parts of the HTTP request the dialect reads.
struct raw_request {
    std::string_view method;  ///< GET HEAD POST PUT PATCH DELETE OPTIONS
    /// The path below the prefix (`/rest/v1`), still percent-encoded: "/", "/agents",
    /// "/rpc/fn".
    std::string_view path;
    std::string_view query;  ///< raw query string without '?'
    std::optional<std::string_view> accept;
    std::optional<std::string_view> content_type;
    std::vector<std::string_view> prefer;   ///< every Prefer header, in order
    std::optional<std::string_view> range;  ///< Range (read on GET only)
    std::optional<std::string_view> range_unit;
    std::optional<std::string_view> accept_profile;
    std::optional<std::string_view> content_profile;
    std::string_view body;
};

/// The request as the dialect understands it: names are not yet checked against the catalog.
struct api_request {
    rest::action action = action::read;
    bool head = false;               ///< HEAD: headers only
    bool read_only = true;           ///< GET/HEAD (a call too): the transaction is READ ONLY
    std::string method;              ///< as sent
    std::string schema;              ///< from the profile headers, else the first exposed schema
    bool schema_negotiated = false;  ///< a profile header chose it (Content-Profile in reply)
    std::string target;              ///< the table, view or function (decoded)

    std::vector<select_item> select;  ///< `select=` ("*" when absent)
    /// Filters by embed path ("" path = top level), in query order.
    std::vector<std::pair<embed_path, filter>> filters;
    /// and=/or= trees by embed path.
    std::vector<std::pair<embed_path, logic_tree>> logic;
    /// order= by embed path.
    std::vector<std::pair<embed_path, std::vector<order_term>>> order;
    /// limit=/offset= by embed path (the top level also from the Range header).
    std::vector<std::pair<embed_path, row_range>> ranges;
    row_range top_range;  ///< the top level's, Range header and limit/offset combined
    /// RPC arguments passed in the query string (GET/HEAD calls): params that are not filters.
    std::vector<std::pair<std::string, std::string>> rpc_args;
    /// columns= (used by inserts, updates, calls): only these keys of the body are used.
    /// Sorted and distinct (PostgREST keeps a set).
    std::optional<std::vector<std::string>> columns;
    std::optional<std::vector<std::string>> on_conflict;  ///< on_conflict=a,b

    preferences prefer;
    std::vector<media_type> accept;    ///< in preference order (q-values honoured)
    media content_type = media::json;  ///< json, csv, text, xml, octet or other
    std::string content_type_raw;      ///< the Content-Type header as sent ("" = none)
    bool urlencoded = false;           ///< application/x-www-form-urlencoded body
    /// The body of a POST/PUT/PATCH on a table or of a POST call (empty otherwise), as the
    /// statement takes it: JSON as sent; a JSON scalar becomes "[]" (PostgREST's rule); text/csv
    /// and form bodies become the JSON PostgREST makes of them (an array of objects of strings,
    /// "NULL" as null; an object of strings); text/plain, text/xml and octet-stream bodies of a
    /// call as sent. Without columns= a JSON body must be an object or an array of objects with
    /// the same keys (PGRST102 "All object keys must match").
    std::string body;
    /// The keys the statement reads: the JSON object's (or the first object's of an array), the
    /// CSV header's, the form's, or columns= when given (then the JSON is not read here).
    /// Sorted and distinct, as PostgREST's set.
    std::vector<std::string> body_keys;
    bool body_is_array = false;
    bool body_empty = true;  ///< no body, or a body of only whitespace
};

/// Parses a request. Throws api_error (status and PGRST code as PostgREST answers: PGRST100
/// for the grammar, PGRST103 for a range, PGRST106 for a schema, PGRST102 for a body, 405 for a
/// method, 414 past max_query_bytes, ...). `schemas` are the exposed schemas, the first the
/// default (none is the caller's bug: core::error).
[[nodiscard]] api_request parse(const raw_request& in, const std::vector<std::string>& schemas,
                                const limits& lim = {});

// The pieces, exposed for unit tests and the fuzz harness.
[[nodiscard]] std::vector<select_item> parse_select(std::string_view text, const limits& lim = {});
[[nodiscard]] op_expr parse_op_expr(std::string_view text, bool rpc_read = false);
[[nodiscard]] logic_tree parse_logic(std::string_view key_op, std::string_view text,
                                     const limits& lim = {});
[[nodiscard]] std::vector<order_term> parse_order(std::string_view text);
[[nodiscard]] preferences parse_prefer(const std::vector<std::string_view>& headers);
[[nodiscard]] std::vector<media_type> parse_accept(std::string_view accept);
/// "a=1&b=2" → decoded pairs ('+' is a space; '&' and ';' separate, as http-types does);
/// items without '=' are left out (PostgREST ignores them). A malformed %-escape, invalid
/// UTF-8 or a NUL byte is PGRST100.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> parse_query_string(
    std::string_view q);

}  // namespace awp::rest
