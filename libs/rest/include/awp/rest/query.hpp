// The data API's plan and its SQL: an api_request checked against the schema cache (every name
// found, quoted; every value a bound parameter) and rendered as ONE statement whose one row
// carries the response (body built by Postgres as JSON or CSV, counts, headers the SQL set),
// then shaped into the HTTP answer. docs/data-api.md, "How a request runs".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "awp/rest/error.hpp"
#include "awp/rest/request.hpp"
#include "awp/rest/schema.hpp"

namespace awp::rest {

/// The operator's settings of the dialect (API_REST_* options, docs/data-api.md).
struct options {
    std::optional<std::int64_t> max_rows = 1000;  ///< db-max-rows: no response holds more
    bool tx_override = false;                     ///< honour Prefer: tx=commit|rollback
    bool aggregates = true;                       ///< db-aggregates-enabled
    bool plan = false;                            ///< db-plan-enabled: the EXPLAIN media types
    /// Joins the embeds of one request may make (a many-to-many counts two): PGRST100 past it,
    /// before any statement is made.
    std::size_t max_joins = 30;
    /// The request's role sees every row of a table (BYPASSRLS or a superuser: the service
    /// role). Only then, or when every relation a read counts is a table without row-level
    /// security, are count=planned|estimated answered from the planner's estimate; otherwise
    /// they are answered as count=exact (the estimate counts rows the role may not see).
    bool role_bypasses_rls = false;
};

/// One statement with its parameters in text format (nullopt = NULL).
struct statement {
    std::string sql;
    std::vector<std::optional<std::string>> params;
};

/// A request ready to run. `main` returns one row with the columns of main_row.
struct prepared {
    api_request req;
    statement main;
    /// count=planned|estimated: EXPLAIN (FORMAT JSON) of the count, run before main.
    std::optional<statement> planned_count;
    /// The transaction's end depends on the answer (.single() on a mutation, max-affected,
    /// tx=rollback): run main inside BEGIN and decide afterwards (respond's `commit`).
    bool decide_after = false;
    media_type out;            ///< the response's media type
    std::string content_type;  ///< its Content-Type header value
    // what respond() needs to shape the answer
    bool single_object = false;  ///< vnd.pgrst.object: exactly one row or 406
    bool returns_body = true;    ///< a body is wanted (not return=minimal/headers-only, not HEAD)
    bool is_call = false;
    bool call_scalar = false;
    bool call_void = false;
    bool call_single = false;  ///< a function returning one value or row (not SETOF)
    bool mutation = false;
    bool location = false;                   ///< answer Location (insert with return=headers-only)
    std::string location_base;               ///< "/<table>"
    std::vector<std::string> location_keys;  ///< the primary key, in order
    /// OPTIONS: the methods the resource takes (no statement runs).
    std::string allow;
};

/// The main statement's row.
struct main_row {
    std::optional<std::string> total;  ///< total_result_set (count=exact), else null
    std::int64_t page_total = 0;       ///< rows in this response (before the single check)
    std::string body;                  ///< the JSON (or CSV) body
    std::optional<std::string> response_headers;  ///< response.headers GUC (JSON array)
    std::optional<std::string> response_status;   ///< response.status GUC
    std::optional<std::string> location;          ///< {pk column: value} of the first inserted row
    std::optional<std::string> inserted;          ///< rows an upsert inserted (not updated)
};

/// Checks `req` against the schema and renders its statement. Throws api_error (PGRST200-205,
/// PGRST100 for what only the catalog can tell, 405 for a non-updatable view, ...).
[[nodiscard]] prepared prepare(api_request req, const schema_cache& sc, const options& o);

/// The HTTP answer to a request whose statement ran.
struct outcome {
    unsigned status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    /// Whether the transaction is committed (false: rolled back — tx=rollback).
    bool commit = true;
};

/// Shapes the answer. Throws api_error when the result breaks the request's contract (406
/// PGRST116 for .single() on 0 or 2+ rows, PGRST124 past max-affected): the caller then
/// rolls back. `planned` is the planner's row estimate (count=planned|estimated).
[[nodiscard]] outcome respond(const prepared& p, main_row row, std::optional<std::int64_t> planned,
                              const options& o);

/// What a request's transaction is set up with before its statement, as PostgREST does: the
/// role, the verified claims (request.jwt.claims, and .claim.sub/.claim.role for older
/// policies), request.method/path/headers, search_path, the role's own settings (ALTER ROLE ...
/// SET), a statement_timeout unless the role has one, READ ONLY for GET and HEAD.
struct session_facts {
    std::string role;
    std::string claims_json;
    std::string sub;
    std::string method;
    std::string path;
    std::string headers_json;
    std::string search_path;
    std::vector<std::pair<std::string, std::string>> role_settings;
    std::string default_statement_timeout;
    bool read_only = true;
};

/// `"schema", "extra1", ...` (the request's schema first, then the extra search path).
[[nodiscard]] std::string search_path(const std::string& schema,
                                      const std::vector<std::string>& extra);

/// The one statement that sets those (transaction-local set_config, every value bound).
[[nodiscard]] statement setup_statement(const session_facts& f);

/// The EXPLAIN (FORMAT JSON) output's top "Plan Rows".
[[nodiscard]] std::optional<std::int64_t> planned_rows(std::string_view explain_json);

}  // namespace awp::rest
