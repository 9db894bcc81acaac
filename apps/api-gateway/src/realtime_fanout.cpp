// The capture's sink (realtime.hpp): a committed transaction's changes matched against every
// channel's bindings, the subscribers grouped by distinct (role, claims), and per group ONE
// statement per table on the gateway's pool under that role and claims (as the data API runs
// requests): INSERT and UPDATE go to groups that can select the new row now (its primary key
// among the rows RLS lets the group see), DELETE (its primary key only) to groups that may
// select from the table at all. Then each event is queued to its sockets.
#include <algorithm>
#include <map>
#include <utility>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"
#include "awp/realtime/record.hpp"
#include "awp/rest/query.hpp"
#include "realtime.hpp"
#include "realtime_socket.hpp"

namespace awp::api {

namespace {

/// One channel that wants one change: the binding ids that matched.
struct target {
    std::shared_ptr<realtime_socket> s;
    std::string topic;
    std::string join_ref;
    std::vector<std::uint64_t> ids;
    std::size_t group = 0;
};

struct group {
    std::string role;
    std::string claims_json;
    std::string sub;
};

/// The changes of one table that one group must have checked.
struct table_check {
    std::vector<std::size_t> rows;  ///< INSERT/UPDATE change indexes
    bool privilege = false;         ///< a DELETE: may the group select from the table?
};

std::string quote_ident(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

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

const std::optional<std::string>* value_of(const realtime::change& c, const std::string& name) {
    for (const auto& col : c.new_row) {
        if (col.name == name) return &col.text;
    }
    return nullptr;
}

/// Outside the coroutine: GCC 12 miscompiles the log's initializer list in a coroutine frame.
void warn_check_failed(const std::string& table, const std::string& role,
                       const std::string& sqlstate) {
    // No privilege on the table is an answer (the group sees none of it), not a failure.
    if (sqlstate == "42501") return;
    core::log::warn(
        "realtime: a visibility check failed; its changes are not delivered to the "
        "group",
        {{"table", table}, {"role", role}, {"sqlstate", sqlstate}});
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
    std::vector<group> groups;
    std::map<std::pair<std::string, std::string>, std::size_t> group_of;
    std::vector<std::vector<target>> wants(tx.changes.size());
    bool any = false;
    for (const auto& s : sockets) {
        if (!s->ws || !s->ws->is_open()) continue;
        std::lock_guard lock(s->mu);
        for (const auto& [topic, ch] : s->channels) {
            if (ch.bindings.empty()) continue;
            std::optional<std::size_t> gi;
            for (std::size_t i = 0; i < tx.changes.size(); ++i) {
                const auto& c = tx.changes[i];
                std::vector<std::uint64_t> ids;
                for (const auto& b : ch.bindings) {
                    if (b.covers(c.kind, c.schema, c.table) && realtime::filters_hold(b, c)) {
                        ids.push_back(b.id);
                    }
                }
                if (ids.empty()) continue;
                if (!gi) {
                    auto key = std::make_pair(ch.who.role, ch.who.claims_json);
                    auto [it, fresh] = group_of.try_emplace(key, groups.size());
                    if (fresh) groups.push_back({ch.who.role, ch.who.claims_json, ch.who.sub});
                    gi = it->second;
                }
                wants[i].push_back(target{s, topic, ch.join_ref, std::move(ids), *gi});
                any = true;
            }
        }
    }
    if (!any) co_return;

    // 2. What each group must have checked, per table.
    auto cache = co_await g_.schema_cache();
    std::vector<std::map<rest::qualified_name, table_check>> todo(groups.size());
    for (std::size_t i = 0; i < tx.changes.size(); ++i) {
        const auto& c = tx.changes[i];
        for (const auto& t : wants[i]) {
            auto& tc = todo[t.group][rest::qualified_name{c.schema, c.table}];
            if (c.kind == realtime::change_kind::remove) {
                tc.privilege = true;
            } else if (tc.rows.empty() || tc.rows.back() != i) {
                tc.rows.push_back(i);
            }
        }
    }

    // 3. One statement per group and table: the ordinals of the visible rows, and 0 when the
    // group may select from the table.
    std::vector<std::vector<bool>> visible(groups.size(),
                                           std::vector<bool>(tx.changes.size(), false));
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
        std::vector<pg::connection::pipelined> stmts;
        std::vector<std::pair<rest::qualified_name, const table_check*>> order;
        for (const auto& [name, tc] : todo[gi]) {
            auto it = cache->tables.find(name);
            if (it == cache->tables.end()) continue;  // not exposed (any longer): nobody sees it
            const auto& table = it->second;
            const auto qualified = quote_ident(name.schema) + "." + quote_ident(name.name);
            std::string sql;
            pg::params p;
            if (tc.privilege) {
                p.emplace_back(qualified);
                sql =
                    "SELECT 0::int8 WHERE coalesce(has_table_privilege(to_regclass($1), "
                    "'SELECT'), false)";
            }
            if (!tc.rows.empty() && !table.primary_key.empty()) {
                std::string unnest, cols, match;
                for (std::size_t k = 0; k < table.primary_key.size(); ++k) {
                    const auto& key = table.primary_key[k];
                    const auto* col = table.find(key);
                    if (!col) break;
                    std::vector<std::optional<std::string>> values;
                    for (auto row : tc.rows) {
                        const auto* v = value_of(tx.changes[row], key);
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
                    match += "r." + quote_ident(key) + " = u.k" + std::to_string(k);
                }
                if (!sql.empty()) sql += " UNION ALL ";
                sql += "SELECT u.ord FROM unnest(" + unnest + ") WITH ORDINALITY AS u(" + cols +
                       ", ord) WHERE EXISTS (SELECT 1 FROM " + qualified + " AS r WHERE " + match +
                       ")";
            }
            if (sql.empty()) continue;  // a table without a primary key: rows cannot be checked
            stmts.push_back({std::move(sql), std::move(p)});
            order.emplace_back(name, &tc);
        }
        if (stmts.empty()) continue;
        rest::session_facts facts;
        facts.role = groups[gi].role;
        facts.claims_json = groups[gi].claims_json;
        facts.sub = groups[gi].sub;
        facts.method = "GET";
        facts.path = "/realtime/v1/websocket";
        facts.headers_json = "{}";
        facts.search_path = rest::search_path(cache->schemas.front(), {"public", "extensions"});
        if (auto it = cache->roles.find(groups[gi].role); it != cache->roles.end()) {
            facts.role_settings = it->second.settings;
        }
        facts.default_statement_timeout = "10s";
        facts.read_only = true;
        const auto setup = rest::setup_statement(facts);

        auto apply = [&](std::size_t k, const pg::result& r) {
            const auto* tc = order[k].second;
            for (int row = 0; row < r.size(); ++row) {
                const auto ord = r.get<std::int64_t>(row, 0);
                if (ord == 0) {
                    for (std::size_t i = 0; i < tx.changes.size(); ++i) {
                        const auto& c = tx.changes[i];
                        if (c.kind == realtime::change_kind::remove &&
                            c.schema == order[k].first.schema && c.table == order[k].first.name) {
                            visible[gi][i] = true;
                        }
                    }
                } else if (ord > 0 && static_cast<std::size_t>(ord) <= tc->rows.size()) {
                    visible[gi][tc->rows[static_cast<std::size_t>(ord - 1)]] = true;
                }
            }
        };
        // The database away for a moment (a restart, a failover): tried again three times over
        // about a second and a half before the transaction's delivery fails (the capture logs
        // and counts it). Each try is a new transaction: nothing of a failed one remains.
        auto run = [&](std::vector<pg::connection::pipelined> batch)
            -> net::awaitable<std::vector<pg::result>> {
            for (int attempt = 0;; ++attempt) {
                pg::params sp;
                for (const auto& v : setup.params) sp.emplace_back(v);
                pg::connection::pipelined setup_stmt{setup.sql, std::move(sp)};
                bool lost = false;
                try {
                    auto t = co_await g_.db().begin_own(std::move(setup_stmt));
                    checks += batch.size();
                    co_return co_await t.run(batch, false);
                } catch (const pg::connection_error&) {
                    if (attempt >= 3) throw;
                    lost = true;
                }
                if (lost) {
                    net::steady_timer wait(co_await net::this_coro::executor);
                    wait.expires_after(std::chrono::milliseconds(100 << (2 * attempt)));
                    co_await wait.async_wait(net::use_awaitable);
                }
            }
        };
        bool one_by_one = false;
        try {
            auto results = co_await run(stmts);
            for (std::size_t k = 0; k < results.size(); ++k) apply(k, results[k]);
        } catch (const pg::sql_error& e) {
            // One table refused the group (no privilege at all, a policy that fails): the
            // others are checked one by one so that one does not hide the rest.
            if (stmts.size() > 1) {
                one_by_one = true;
            } else {
                warn_check_failed(order[0].first.schema + "." + order[0].first.name,
                                  groups[gi].role, e.sqlstate());
            }
        }
        for (std::size_t k = 0; one_by_one && k < stmts.size(); ++k) {
            std::string sqlstate;
            try {
                std::vector<pg::connection::pipelined> single;
                single.push_back(stmts[k]);
                auto one = co_await run(std::move(single));
                apply(k, one.front());
            } catch (const pg::sql_error& e) {
                sqlstate = e.sqlstate();
            }
            if (!sqlstate.empty()) {
                warn_check_failed(order[k].first.schema + "." + order[k].first.name,
                                  groups[gi].role, sqlstate);
            }
        }
    }

    // 4. Queue each visible change to its channels, in order.
    for (std::size_t i = 0; i < tx.changes.size(); ++i) {
        if (wants[i].empty()) continue;
        std::string data;
        for (const auto& t : wants[i]) {
            if (!visible[t.group][i]) continue;
            if (data.empty()) {
                const auto& c = tx.changes[i];
                std::vector<std::string> pk;
                if (auto it = cache->tables.find(rest::qualified_name{c.schema, c.table});
                    it != cache->tables.end()) {
                    pk = it->second.primary_key;
                }
                data = realtime::change_data(c, pk);
            }
            if (t.s->push(t.join_ref, "", t.topic, "postgres_changes",
                          realtime::change_payload(t.ids, data), true, false)) {
                ++delivered;
            }
        }
    }
}

}  // namespace awp::api
