// The capture's sink (realtime.hpp): a committed transaction's changes matched against every
// channel's bindings; each subscriber's (table, role) facts from the catalog (realtime_policy.hpp:
// the claims the table's policies can read, the columns the role may select); the subscribers
// grouped per table by their role and exactly those claims, so a change is checked once per
// distinct answer, not once per session; then ONE round trip for all groups: per group its
// settings (as the data API runs a request: role, claims, read only) and one statement per kind
// of check — INSERT and UPDATE go to groups that can select the new row now (its primary key
// among the rows RLS lets the group see), a DELETE of a REPLICA IDENTITY FULL row to groups whose
// policies pass the old row, any other DELETE (its key only) to groups that may select from the
// table — and last the catalog's fingerprint, which must not have moved. Each event carries only
// the columns the subscriber's role may select, and a filter on any other column never holds.
#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/realtime/record.hpp"
#include "awp/rest/query.hpp"
#include "realtime.hpp"
#include "realtime_socket.hpp"
#include "sql_text.hpp"

namespace awp::api {

namespace {

constexpr int kCatalogRetries = 3;  // fingerprint moved: read again and check again, this often
/// A commit reaches the slot a moment before the committing session leaves Postgres' list of
/// running transactions (the walsender reads the flushed commit record; the session then ends
/// its transaction), so a check run in that moment would not see the row and drop its event.
/// Each check's transaction first asks whether its snapshot sees the transaction committed; until
/// one does, the checks are run again after a short wait, for this long at most.
constexpr auto kCommitSeenWait = std::chrono::seconds(5);

/// One channel that wants one change: the binding ids that matched, and who it acts as.
struct target {
    std::shared_ptr<realtime_socket> s;
    std::string topic;
    std::string join_ref;
    std::vector<std::uint64_t> ids;
    /// Per id, the columns its filter reads (empty: no filter).
    std::vector<std::vector<std::string>> filter_columns;
    std::shared_ptr<const data_principal> who;
    const realtime_table_facts* facts = nullptr;
    std::size_t group = SIZE_MAX;  ///< SIZE_MAX: decided without a statement
    bool visible = false;
};

/// Subscribers of one table whose role and policy-relevant claims agree.
struct group {
    rest::qualified_name table;
    const realtime_table_facts* facts = nullptr;
    std::shared_ptr<const data_principal> who;  ///< one of them: its claims decide for all
    std::vector<std::size_t> rows;              ///< INSERT/UPDATE changes to look up
    std::vector<std::size_t> old_rows;          ///< REPLICA IDENTITY FULL DELETEs to test
    std::vector<bool> visible;                  ///< per change of the transaction
};

/// A text[] literal of the values ("{\"a\",\"b\"}"), NULL as NULL.
std::string array_literal(const std::vector<std::optional<std::string>>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        if (!values[i]) {
            out += "NULL";
            continue;
        }
        out += '"';
        for (char c : *values[i]) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    return out + "}";
}

const std::optional<std::string>* value_in(const std::vector<realtime::column_value>& row,
                                           const std::string& name) {
    for (const auto& col : row) {
        if (col.name == name) return &col.text;
    }
    return nullptr;
}

/// INSERT/UPDATE: the ordinals of the rows (by primary key) the group can select now.
std::optional<pg::connection::pipelined> rows_statement(const group& g, const rest::table& t,
                                                        const realtime::transaction& tx) {
    if (g.rows.empty() || t.primary_key.empty()) return std::nullopt;
    std::string unnest, cols, match;
    pg::params p;
    for (std::size_t k = 0; k < t.primary_key.size(); ++k) {
        const auto& key = t.primary_key[k];
        const auto* col = t.find(key);
        if (!col) return std::nullopt;
        std::vector<std::optional<std::string>> values;
        for (auto row : g.rows) {
            const auto* v = value_in(tx.changes[row].new_row, key);
            values.push_back(v ? *v : std::nullopt);
        }
        p.emplace_back(array_literal(values));
        if (k) {
            unnest += ", ";
            cols += ", ";
            match += " AND ";
        }
        unnest += "$" + std::to_string(p.size()) + "::" + col->type + "[]";
        cols += "k" + std::to_string(k);
        match += "r." + sql_text::quote_ident(key) + " = u.k" + std::to_string(k);
    }
    return pg::connection::pipelined{
        "SELECT u.ord FROM unnest(" + unnest + ") WITH ORDINALITY AS u(" + cols +
            ", ord) WHERE EXISTS (SELECT 1 FROM " + sql_text::quote_ident(g.table.schema) + "." +
            sql_text::quote_ident(g.table.name) + " AS r WHERE " + match + ")",
        std::move(p)};
}

/// REPLICA IDENTITY FULL DELETEs: the ordinals of the old rows the group's policies pass, the
/// row rebuilt from its columns' text under the table's name.
std::optional<pg::connection::pipelined> old_rows_statement(const group& g, const rest::table& t,
                                                            const realtime::transaction& tx) {
    if (g.old_rows.empty()) return std::nullopt;
    std::string cols;
    std::vector<std::optional<std::string>> names;
    for (const auto& c : t.columns) {
        names.emplace_back(c.name);
        if (!cols.empty()) cols += ", ";
        cols += "(awp_rt_row.awp_rt_json ->> ($2::pg_catalog.text[])[" +
                std::to_string(names.size()) + "])::" + c.type + " AS " +
                sql_text::quote_ident(c.name);
    }
    std::string rows = "{";
    for (std::size_t i = 0; i < g.old_rows.size(); ++i) {
        core::json::writer j;
        j.w.StartObject();
        for (const auto& col : tx.changes[g.old_rows[i]].old_keys) {
            j.key(col.name);
            if (col.text) {
                j.w.String(col.text->data(), static_cast<rapidjson::SizeType>(col.text->size()));
            } else {
                j.w.Null();
            }
        }
        j.w.EndObject();
        if (i) rows += ',';
        rows += '"';
        for (char c : j.str()) {
            if (c == '"' || c == '\\') rows += '\\';
            rows += c;
        }
        rows += '"';
    }
    rows += "}";
    pg::params p;
    p.emplace_back(std::move(rows));
    p.emplace_back(array_literal(names));
    return pg::connection::pipelined{
        "SELECT awp_rt_row.awp_rt_ord FROM unnest($1::pg_catalog.jsonb[]) WITH ORDINALITY AS "
        "awp_rt_row(awp_rt_json, awp_rt_ord) CROSS JOIN LATERAL (SELECT " +
            cols + ") AS " + sql_text::quote_ident(g.table.name) + " WHERE " +
            g.facts->old_row_policy,
        std::move(p)};
}

/// Whether this statement's snapshot sees transaction `xid` (Begin's 32 bits, placed in the
/// snapshot's epoch) as ended: below its xmax and not among its running ones.
pg::connection::pipelined commit_seen_statement(std::uint32_t xid) {
    pg::params p;
    p.emplace_back(std::to_string(xid));
    return pg::connection::pipelined{
        "SELECT d > 0 AND d < 2147483648 AND NOT EXISTS (SELECT 1 FROM "
        "pg_catalog.pg_snapshot_xip(s) AS x WHERE x::text::bigint = m - d) FROM (SELECT s, m, "
        "((m - $1::bigint) % 4294967296 + 4294967296) % 4294967296 AS d FROM (SELECT s, "
        "pg_catalog.pg_snapshot_xmax(s)::text::bigint AS m FROM (SELECT "
        "pg_catalog.pg_current_snapshot() AS s) AS a) AS b) AS c",
        std::move(p)};
}

/// Every column of the table is in the old row (an unchanged TOASTed value is not sent: its
/// policies would see NULL, so such a row is shown to nobody).
bool whole_old_row(const realtime::change& c, const rest::table& t) {
    if (!c.old_full) return false;
    for (const auto& col : t.columns) {
        if (!value_in(c.old_keys, col.name)) return false;
    }
    return true;
}

/// Outside the coroutine: GCC 12 miscompiles the log's initializer list in a coroutine frame.
void warn_check_failed(const std::string& table, const std::string& role,
                       const std::string& sqlstate) {
    core::log::warn(
        "realtime: a visibility check failed; its changes are not delivered to the "
        "group",
        {{"table", table}, {"role", role}, {"sqlstate", sqlstate}});
}
void warn_commit_unseen(std::uint32_t xid) {
    core::log::warn(
        "realtime: a committed transaction stayed invisible to new snapshots; its changes are "
        "checked as they are seen now",
        {{"xid", std::to_string(xid)}});
}
void warn_catalog_moving() {
    core::log::warn(
        "realtime: the catalog kept changing under the visibility checks; this "
        "transaction's changes are not delivered",
        {});
}

}  // namespace

net::awaitable<void> realtime_hub::deliver(realtime::transaction tx) {
    if (tx.changes.empty()) co_return;
    std::vector<std::shared_ptr<realtime_socket>> sockets;
    {
        std::lock_guard lock(mu_);
        sockets.assign(sockets_.begin(), sockets_.end());
    }
    if (sockets.empty()) co_return;

    // 1. Who wants what: per change, the channels with a matching binding.
    std::vector<std::vector<target>> wants(tx.changes.size());
    std::set<realtime_policies::key> needs;
    for (const auto& s : sockets) {
        if (!s->ws || !s->ws->is_open()) continue;
        std::lock_guard lock(s->mu);
        for (const auto& [topic, ch] : s->channels) {
            if (ch.bindings.empty()) continue;
            for (std::size_t i = 0; i < tx.changes.size(); ++i) {
                const auto& c = tx.changes[i];
                target t;
                for (const auto& b : ch.bindings) {
                    if (b.covers(c.kind, c.schema, c.table) && realtime::filters_hold(b, c)) {
                        t.ids.push_back(b.id);
                        std::vector<std::string> fc;
                        for (const auto& f : b.filters) fc.push_back(f.column);
                        t.filter_columns.push_back(std::move(fc));
                    }
                }
                if (t.ids.empty()) continue;
                t.s = s;
                t.topic = topic;
                t.join_ref = ch.join_ref;
                t.who = std::shared_ptr<const data_principal>(ch.as, &ch.as->who);
                needs.insert({rest::qualified_name{c.schema, c.table}, ch.as->who.role});
                wants[i].push_back(std::move(t));
            }
        }
    }
    if (needs.empty()) co_return;
    auto cache = co_await g_.schema_cache();

    // Transaction ids below 3 are Postgres' own (never a user's transaction): nothing to wait for.
    const bool await_commit = tx.xid >= 3;
    const auto commit_deadline = std::chrono::steady_clock::now() + kCommitSeenWait;
    std::chrono::milliseconds commit_pause{1};
    for (int attempt = 0;; ++attempt) {
        auto snap = co_await policies_.prepare(needs, *cache);

        // 2. The subscribers of each table grouped by role and the claims its policies read;
        // what needs no statement is decided here.
        std::vector<group> groups;
        std::map<std::string, std::size_t> group_of;
        for (std::size_t i = 0; i < tx.changes.size(); ++i) {
            const auto& c = tx.changes[i];
            const rest::qualified_name name{c.schema, c.table};
            auto tit = cache->tables.find(name);
            for (auto& t : wants[i]) {
                t.visible = false;
                t.group = SIZE_MAX;
                t.facts = tit == cache->tables.end() ? nullptr : snap->find(name, t.who->role);
                if (!t.facts || !t.facts->error.empty() || t.facts->columns.empty()) continue;
                // A filter on a column the role may not select never holds (no oracle).
                std::vector<std::uint64_t> ids;
                for (std::size_t k = 0; k < t.ids.size(); ++k) {
                    const auto& fc = t.filter_columns[k];
                    if (std::all_of(fc.begin(), fc.end(), [&](const std::string& col) {
                            return t.facts->columns.contains(col);
                        })) {
                        ids.push_back(t.ids[k]);
                    }
                }
                if (ids.empty()) continue;
                const auto& table = tit->second;
                const bool remove = c.kind == realtime::change_kind::remove;
                const bool full = remove && c.old_full;
                if (remove && !full) {
                    t.visible = true;  // its key only, to whoever may select from the table
                    continue;
                }
                if (full && !whole_old_row(c, table)) continue;
                if (!full && !t.facts->primary_key_selectable) continue;
                const auto key = c.schema + '\x1f' + c.table + '\x1f' + t.who->role + '\x1f' +
                                 realtime::claims::projection(t.facts->reads, t.who->claims_json);
                auto [it, fresh] = group_of.try_emplace(key, groups.size());
                if (fresh) {
                    group g;
                    g.table = name;
                    g.facts = t.facts;
                    g.who = t.who;
                    g.visible.assign(tx.changes.size(), false);
                    groups.push_back(std::move(g));
                }
                auto& g = groups[it->second];
                auto& list = full ? g.old_rows : g.rows;
                if (list.empty() || list.back() != i) list.push_back(i);
                t.group = it->second;
            }
        }

        // 3. One round trip: per group its settings and its statements, the fingerprint last.
        struct stmt_of {
            std::size_t group;
            bool old_rows;
        };
        std::vector<std::vector<pg::connection::pipelined>> per_group(groups.size());
        std::vector<std::vector<stmt_of>> kinds(groups.size());
        std::vector<rest::statement> setups(groups.size());
        for (std::size_t gi = 0; gi < groups.size(); ++gi) {
            const auto& g = groups[gi];
            const auto& table = cache->tables.at(g.table);
            if (auto st = rows_statement(g, table, tx)) {
                per_group[gi].push_back(std::move(*st));
                kinds[gi].push_back({gi, false});
            }
            if (auto st = old_rows_statement(g, table, tx)) {
                per_group[gi].push_back(std::move(*st));
                kinds[gi].push_back({gi, true});
            }
            rest::session_facts facts;
            facts.role = g.who->role;
            facts.claims_json = g.who->claims_json;
            facts.sub = g.who->sub;
            facts.method = "GET";
            facts.path = "/realtime/v1/websocket";
            facts.headers_json = "{}";
            facts.search_path = realtime_policies::search_path(*cache);
            if (auto it = cache->roles.find(g.who->role); it != cache->roles.end()) {
                facts.role_settings = it->second.settings;
            }
            facts.default_statement_timeout = "10s";
            facts.read_only = true;
            setups[gi] = rest::setup_statement(facts);
        }
        std::size_t statements = 0;
        for (const auto& v : per_group) statements += v.size();
        auto as_pipelined = [](const rest::statement& s) {
            pg::params p;
            for (const auto& v : s.params) p.emplace_back(v);
            return pg::connection::pipelined{s.sql, std::move(p)};
        };
        auto apply = [&](std::size_t gi, const stmt_of& k, const pg::result& r) {
            auto& g = groups[gi];
            const auto& list = k.old_rows ? g.old_rows : g.rows;
            for (int row = 0; row < r.size(); ++row) {
                const auto ord = r.get<std::int64_t>(row, 0);
                if (ord > 0 && static_cast<std::size_t>(ord) <= list.size()) {
                    g.visible[list[static_cast<std::size_t>(ord - 1)]] = true;
                }
            }
        };
        // The database away for a moment (a restart, a failover): tried again three times over
        // about a second and a half. Each try is a new transaction: nothing of a failed one
        // remains.
        auto run = [&](pg::connection::pipelined setup, std::vector<pg::connection::pipelined> b)
            -> net::awaitable<std::vector<pg::result>> {
            for (int tries = 0;; ++tries) {
                bool lost = false;
                try {
                    auto t = co_await g_.db().begin_own(setup);
                    co_return co_await t.run(b, false);
                } catch (const pg::connection_error&) {
                    if (tries >= 3) throw;
                    lost = true;
                }
                if (lost) {
                    net::steady_timer wait(co_await net::this_coro::executor);
                    wait.expires_after(std::chrono::milliseconds(100 << (2 * tries)));
                    co_await wait.async_wait(net::use_awaitable);
                }
            }
        };
        bool fresh = true;
        bool batch_failed = false;
        bool seen = true;  // every check's snapshot saw the transaction committed
        // Past the deadline the checks stand as they are (logged): never wait without bound.
        const bool ask_seen = await_commit && std::chrono::steady_clock::now() < commit_deadline;
        {
            // The first group's settings open the transaction; the others' follow in it, after
            // the question whether it sees the change's transaction (a snapshot that does is
            // taken before every check's: each check sees it too).
            std::vector<pg::connection::pipelined> batch;
            std::vector<std::pair<std::size_t, stmt_of>> order;  // result index -> statement
            if (ask_seen) batch.push_back(commit_seen_statement(tx.xid));
            pg::connection::pipelined first{"SELECT 1", {}};
            bool have_first = false;
            for (std::size_t gi = 0; gi < groups.size(); ++gi) {
                if (per_group[gi].empty()) continue;
                if (!have_first) {
                    first = as_pipelined(setups[gi]);
                    have_first = true;
                } else {
                    batch.push_back(as_pipelined(setups[gi]));
                    order.emplace_back(SIZE_MAX, stmt_of{gi, false});
                }
                for (std::size_t k = 0; k < per_group[gi].size(); ++k) {
                    batch.push_back(per_group[gi][k]);
                    order.emplace_back(batch.size() - 1, kinds[gi][k]);
                }
            }
            batch.push_back(realtime_policies::fingerprint_statement(*snap));
            try {
                auto results = co_await run(std::move(first), std::move(batch));
                fresh = realtime_policies::unchanged(*snap, results.back());
                if (ask_seen) seen = results.front().get<bool>(0, 0);
                if (fresh && seen) {
                    for (const auto& [idx, k] : order) {
                        if (idx != SIZE_MAX) apply(k.group, k, results[idx]);
                    }
                }
            } catch (const pg::sql_error&) {
                batch_failed = true;  // one group's check failed: each group alone, below
            }
        }
        for (std::size_t gi = 0; batch_failed && fresh && seen && gi < groups.size(); ++gi) {
            if (per_group[gi].empty()) continue;
            std::vector<pg::connection::pipelined> b;
            if (ask_seen) b.push_back(commit_seen_statement(tx.xid));
            const std::size_t first_check = b.size();
            b.insert(b.end(), per_group[gi].begin(), per_group[gi].end());
            b.push_back(realtime_policies::fingerprint_statement(*snap));
            try {
                auto results = co_await run(as_pipelined(setups[gi]), std::move(b));
                if (!realtime_policies::unchanged(*snap, results.back())) {
                    fresh = false;
                    break;
                }
                if (ask_seen && !results.front().get<bool>(0, 0)) {
                    seen = false;
                    break;
                }
                for (std::size_t k = 0; k < kinds[gi].size(); ++k) {
                    apply(gi, kinds[gi][k], results[first_check + k]);
                }
            } catch (const pg::sql_error& e) {
                // Its policy failed for these claims (a claim that is not a uuid, ...): the
                // group sees none of this table's changes, as a select would answer an error.
                warn_check_failed(groups[gi].table.schema + "." + groups[gi].table.name,
                                  groups[gi].who->role, e.sqlstate());
            }
        }
        if (fresh && !seen) {
            // Not yet seen by new snapshots: every check again in a moment.
            ++commit_waits;
            if (std::chrono::steady_clock::now() + commit_pause >= commit_deadline) {
                warn_commit_unseen(tx.xid);
            }
            net::steady_timer pause(co_await net::this_coro::executor);
            pause.expires_after(commit_pause);
            co_await pause.async_wait(net::use_awaitable);
            commit_pause = std::min(commit_pause * 2, std::chrono::milliseconds(50));
            --attempt;  // not the catalog's retry
            continue;
        }
        if (!fresh) {
            policies_.invalidate(snap);
            if (attempt + 1 >= kCatalogRetries) {
                warn_catalog_moving();
                co_return;
            }
            continue;
        }
        for (std::size_t i = 0; i < tx.changes.size(); ++i) {
            for (auto& t : wants[i]) {
                if (t.group != SIZE_MAX) t.visible = groups[t.group].visible[i];
            }
        }
        checks += statements;
        break;
    }

    // 4. Queue each visible change to its channels, in order, with the columns each may see.
    bool queued = false;
    for (std::size_t i = 0; i < tx.changes.size(); ++i) {
        if (wants[i].empty()) continue;
        const auto& c = tx.changes[i];
        std::vector<std::string> pk;
        if (auto it = cache->tables.find(rest::qualified_name{c.schema, c.table});
            it != cache->tables.end()) {
            pk = it->second.primary_key;
        }
        std::map<const realtime_table_facts*, std::string> data;
        for (const auto& t : wants[i]) {
            if (!t.visible || !t.facts) continue;
            auto [it, fresh] = data.try_emplace(t.facts);
            if (fresh) it->second = realtime::change_data(c, pk, &t.facts->columns);
            std::vector<std::uint64_t> ids;
            for (std::size_t k = 0; k < t.ids.size(); ++k) {
                const auto& fc = t.filter_columns[k];
                if (std::all_of(fc.begin(), fc.end(), [&](const std::string& col) {
                        return t.facts->columns.contains(col);
                    })) {
                    ids.push_back(t.ids[k]);
                }
            }
            if (t.s->push(t.join_ref, "", t.topic, "postgres_changes",
                          realtime::change_payload(ids, it->second), true, false)) {
                ++delivered;
                queued = true;
            }
        }
    }
    if (queued) record_lag(tx.commit_time);
}

}  // namespace awp::api
