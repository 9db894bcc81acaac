// What each role may see of each table realtime delivers from (issue 40 and issue 37's realtime
// findings), read from the catalog once and kept until it changes: which claims the table's
// row-level security can read for the role (libs/realtime claims.hpp: the subscribers are grouped
// by exactly that), the columns the role may select (events carry only those; filters on others
// never hold), and, for a DELETE of a REPLICA IDENTITY FULL row, the role's SELECT policies as
// one expression over the old row. A fingerprint of every catalog row the answers rest on is read
// after each delivery's checks, in the same round trip: when it moved, the answers are read again
// and the checks run again, so a policy changed meanwhile never decides with a stale grouping.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "awp/core/pg.hpp"
#include "awp/realtime/claims.hpp"
#include "awp/rest/schema.hpp"

namespace awp::api {

namespace net = boost::asio;
namespace pg = core::pg;

/// The catalog rows read so far, each with its xmin (realtime_policy.cpp).
struct catalog_state;

/// One role's view of one table.
struct realtime_table_facts {
    std::uint32_t oid = 0;
    realtime::claims::reads reads;  ///< what of the claims its visibility can depend on
    std::set<std::string, std::less<>> columns;  ///< the columns the role may select
    bool primary_key_selectable = false;         ///< every key column among them
    /// The role's SELECT policies over a row given as columns of the table's name (a DELETE's
    /// old row under REPLICA IDENTITY FULL): SQL, with row_security_active deciding whether
    /// they apply at all. Never empty: "false" when no permissive policy applies.
    std::string old_row_policy;
    std::string error;  ///< the facts could not be read: the role sees nothing of the table
};

class realtime_policies {
public:
    using key = std::pair<rest::qualified_name, std::string>;  ///< (table, role)

    /// Facts read at one moment, and the fingerprint of the catalog rows they rest on.
    struct snapshot {
        std::map<key, realtime_table_facts> facts;
        std::vector<std::uint32_t> relations;  ///< the fingerprint covers these tables...
        std::vector<std::uint32_t> functions;  ///< ...and these functions
        std::string fingerprint;
        [[nodiscard]] const realtime_table_facts* find(const rest::qualified_name& t,
                                                       const std::string& role) const;
    };

    /// Statements run in one implicit transaction whose search_path is the first argument (the
    /// gateway's pool as its own login, awp_api); their results. Throws what the pg layer throws.
    using query_fn = std::function<net::awaitable<std::vector<pg::result>>(
        std::string, std::vector<pg::connection::pipelined>)>;

    explicit realtime_policies(query_fn q) : q_(std::move(q)) {}

    /// A snapshot holding facts for every (table, role) in `needs` (a table the schema cache
    /// does not expose is left out): the current one when it has them, else one that reads
    /// what is missing from the catalog.
    net::awaitable<std::shared_ptr<const snapshot>> prepare(std::set<key> needs,
                                                            const rest::schema_cache& cache);

    /// The statement that reads the catalog's fingerprint now (one row, one text column).
    [[nodiscard]] static pg::connection::pipelined fingerprint_statement(const snapshot& s);
    /// Whether `r` (fingerprint_statement's result) says the catalog is as `s` read it.
    [[nodiscard]] static bool unchanged(const snapshot& s, const pg::result& r);
    /// `s` is stale: the next prepare reads everything again.
    void invalidate(const std::shared_ptr<const snapshot>& s);

    /// The search_path the checks and the policy expressions are resolved under.
    [[nodiscard]] static std::string search_path(const rest::schema_cache& cache);

private:
    net::awaitable<std::pair<std::shared_ptr<const snapshot>, std::shared_ptr<const catalog_state>>>
    load(std::set<key> needs, std::shared_ptr<const snapshot> base,
         std::shared_ptr<const catalog_state> base_state, const rest::schema_cache& cache);

    query_fn q_;
    std::mutex mu_;
    std::shared_ptr<const snapshot> current_;
    std::shared_ptr<const catalog_state> state_;  ///< what current_ was read from
};

}  // namespace awp::api
