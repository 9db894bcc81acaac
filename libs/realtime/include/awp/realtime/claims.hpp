// What a table's row-level security can read of a subscriber's JWT claims (issue 40): learnt from
// the catalog's own parse trees — the SELECT policies that apply to a role (pg_policy.polqual),
// the SQL functions they call (their bodies as Postgres parses them), the tables their subqueries
// read (those tables' policies in turn) — so that realtime decides a change's visibility once per
// distinct *answer* rather than once per session. Two subscribers of one role whose claims agree
// on every path found here see exactly the same rows of the table; anything the analysis cannot
// prove narrower (another language, a setting read by a computed name, an unknown node) makes it
// `whole`: the claims as a whole decide, as before. Pure code over a catalog snapshot the caller
// fills (apps/api-gateway/src/realtime_policy.cpp); unit-tested and fuzzed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "awp/realtime/node_tree.hpp"

namespace awp::realtime::claims {

/// One step into the claims JSON, as `->` / `#>` / jsonb subscripts take it: a key of an object
/// (`index` false), or a position (`->` with an integer). An array on the way is taken whole.
struct step {
    bool index = false;
    std::string key;  ///< the key; for `index`, the position's decimal text
    friend auto operator<=>(const step&, const step&) = default;
};
using path = std::vector<step>;  ///< empty: the claims as a whole

/// `app_metadata.tenant_id`, `[0]`: for logs and tests.
[[nodiscard]] std::string to_string(const path& p);

/// What the visibility of a table's rows can depend on, for one role, besides the role itself.
struct reads {
    bool whole = false;  ///< the claims as a whole (nothing narrower proven)
    std::string why;     ///< when whole: the first reason
    std::set<path> paths;
};

/// A function as the catalog has it.
struct function_info {
    std::string schema;
    std::string name;
    char language = 'i';  ///< 'i' internal, 's' sql, 'o' anything else (C, plpgsql, ...)
    std::string symbol;   ///< prosrc of an internal function
    char kind = 'f';      ///< pg_proc.prokind: f, a (aggregate), w (window), p (procedure)
    bool returns_set = false;
    bool security_definer = false;
    std::uint32_t owner = 0;
    /// A SQL function's body as Postgres parsed it (a list of queries), when it could be.
    std::shared_ptr<const node_tree::value> body;
    std::string body_error;  ///< why there is no body
};

/// A SELECT (or ALL) policy of a table.
struct policy {
    std::string name;
    bool permissive = true;
    std::vector<std::uint32_t> roles;              ///< 0 = PUBLIC
    std::shared_ptr<const node_tree::value> qual;  ///< nullptr: USING (true)
};

struct relation_info {
    char kind = 'r';  ///< pg_class.relkind
    std::vector<policy> policies;
};

/// A role and the roles it is a member of (pg_has_role MEMBER) and has the privileges of (USAGE).
struct role_info {
    std::string name;
    std::set<std::uint32_t> member_of;
    std::set<std::uint32_t> usage_of;
};

/// The catalog as far as the caller has read it. The analysis says what more it needs.
struct catalog {
    std::map<std::uint32_t, function_info> functions;
    std::map<std::uint32_t, std::uint32_t> operators;  ///< operator -> its function (oprcode)
    std::map<std::uint32_t, relation_info> relations;
    std::map<std::uint32_t, role_info> roles;
    std::map<std::string, std::uint32_t, std::less<>> role_oids;  ///< every role, by name
};

/// Catalog entries the analysis met and the catalog does not hold yet.
struct wanted {
    std::set<std::uint32_t> functions, operators, relations, roles;
    [[nodiscard]] bool empty() const noexcept {
        return functions.empty() && operators.empty() && relations.empty() && roles.empty();
    }
};

struct analysis {
    reads r;
    wanted missing;  ///< not empty: read these and analyse again (r is not an answer yet)
    std::set<std::uint32_t> functions_used;  ///< what the answer rests on (the fingerprint's)
    std::set<std::uint32_t> relations_used;
};

/// What `role`'s visibility of `table`'s rows can read of the claims: the table's SELECT policies
/// that may apply to the role, followed into the functions they call and the tables their
/// subqueries read.
[[nodiscard]] analysis analyze(const catalog& c, std::uint32_t table, std::uint32_t role);

/// The claims reduced to what `r` reads, as a key: two claims with equal keys give a table's
/// rows the same visibility (for one role). `r.whole`, claims that do not parse, or duplicate
/// keys: the claims' text itself.
[[nodiscard]] std::string projection(const reads& r, std::string_view claims_json);

}  // namespace awp::realtime::claims
