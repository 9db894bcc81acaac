// Realtime's view of the catalog (realtime_policy.hpp): for each (table, role) the claims its
// row-level security can read (the analysis is libs/realtime's claims.hpp; this file reads the
// catalog rows it asks for, SQL function bodies parsed by Postgres itself), the columns the role
// may select, the policies over an old row; and the fingerprint of every catalog row read, made
// of the rows' own xmin as they were read, so the check after each delivery compares like with
// like.
#include "realtime_policy.hpp"

#include <algorithm>
#include <charconv>
#include <functional>

#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/rest/query.hpp"
#include "sql_text.hpp"

namespace awp::api {

namespace claims = realtime::claims;
namespace nt = realtime::node_tree;

namespace {

constexpr int kMaxRounds = 16;  // catalog reads per analysis before it settles for `whole`

// One row, one column: the catalog's fingerprint as the rows are now. $1 the tables, $2 the
// functions the answers rest on.
constexpr const char* kFingerprintSql = R"SQL(
SELECT concat_ws('|',
  (SELECT count(*) || '.' || coalesce(sum(xmin::text::int8), 0) FROM pg_catalog.pg_policy
    WHERE polrelid = ANY ($1::oid[])),
  (SELECT count(*) || '.' || coalesce(sum(xmin::text::int8), 0) FROM pg_catalog.pg_class
    WHERE oid = ANY ($1::oid[])),
  (SELECT count(*) || '.' || coalesce(sum(xmin::text::int8), 0) FROM pg_catalog.pg_attribute
    WHERE attrelid = ANY ($1::oid[])),
  (SELECT count(*) || '.' || coalesce(sum(xmin::text::int8), 0) FROM pg_catalog.pg_proc
    WHERE oid = ANY ($2::oid[])),
  (SELECT max(oid)::int8 FROM pg_catalog.pg_proc),
  (SELECT count(*) || '.' || coalesce(sum(xmin::text::int8), 0) FROM pg_catalog.pg_auth_members))
)SQL";

constexpr const char* kHeadSql = R"SQL(
SELECT current_setting('server_version_num')::int,
       (SELECT max(oid)::int8 FROM pg_catalog.pg_proc),
       (SELECT count(*) FROM pg_catalog.pg_auth_members),
       (SELECT coalesce(sum(xmin::text::int8), 0) FROM pg_catalog.pg_auth_members),
       (SELECT coalesce(json_agg(json_build_array(oid::int8, rolname)), '[]')::text
          FROM pg_catalog.pg_roles)
)SQL";

constexpr const char* kTablesSql = R"SQL(
SELECT t.i, c.oid::int8
  FROM unnest($1::text[]) WITH ORDINALITY AS t(name, i)
  JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(t.name)
)SQL";

constexpr const char* kFunctionsSql = R"SQL(
SELECT p.oid::int8, n.nspname, p.proname, l.lanname, p.prosrc, p.prokind::text, p.proretset,
       p.prosecdef, p.proowner::int8, p.prosqlbody::text,
       (SELECT s FROM unnest(p.proconfig) s WHERE s LIKE 'search\_path=%'),
       pg_catalog.pg_get_function_arguments(p.oid), pg_catalog.pg_get_function_result(p.oid),
       pg_catalog.pg_get_function_identity_arguments(p.oid), p.xmin::text::int8
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
  JOIN pg_catalog.pg_language l ON l.oid = p.prolang
 WHERE p.oid = ANY ($1::oid[])
)SQL";

constexpr const char* kRelationsSql = R"SQL(
SELECT c.oid::int8, c.relkind::text, c.xmin::text::int8,
       (SELECT count(*) FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid),
       (SELECT coalesce(sum(a.xmin::text::int8), 0) FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = c.oid)
  FROM pg_catalog.pg_class c WHERE c.oid = ANY ($1::oid[])
)SQL";

constexpr const char* kPoliciesSql = R"SQL(
SELECT p.polrelid::int8, p.polname, p.polcmd::text, p.polpermissive,
       array_to_string(p.polroles, ','), p.polqual::text, p.xmin::text::int8
  FROM pg_catalog.pg_policy p WHERE p.polrelid = ANY ($1::oid[])
 ORDER BY p.polrelid, p.polname
)SQL";

constexpr const char* kRolesSql = R"SQL(
SELECT r.oid::int8,
       array_to_string(ARRAY(SELECT m.oid FROM pg_catalog.pg_roles m
                              WHERE pg_catalog.pg_has_role(r.oid, m.oid, 'MEMBER')), ','),
       array_to_string(ARRAY(SELECT m.oid FROM pg_catalog.pg_roles m
                              WHERE pg_catalog.pg_has_role(r.oid, m.oid, 'USAGE')), ',')
  FROM pg_catalog.pg_roles r WHERE r.oid = ANY ($1::oid[])
)SQL";

constexpr const char* kOperatorsSql =
    "SELECT oid::int8, oprcode::oid::int8 FROM pg_catalog.pg_operator WHERE oid = ANY ($1::oid[])";

// The columns each (table, role) may select: $1 the tables, $2 the roles, pairwise.
constexpr const char* kColumnsSql = R"SQL(
SELECT t.i, a.attname
  FROM unnest($1::oid[], $2::text[]) WITH ORDINALITY AS t(rel, role, i)
  JOIN pg_catalog.pg_attribute a ON a.attrelid = t.rel AND a.attnum > 0 AND NOT a.attisdropped
 WHERE pg_catalog.has_column_privilege(t.role, t.rel, a.attnum, 'SELECT')
)SQL";

// The SELECT policies that apply to a role (has_privs_of_role, as Postgres decides it), as SQL
// under the check's search_path. A policy without USING grants nothing.
constexpr const char* kOldRowPoliciesSql = R"SQL(
SELECT t.i, p.polpermissive, pg_catalog.pg_get_expr(p.polqual, p.polrelid)
  FROM unnest($1::oid[], $2::text[]) WITH ORDINALITY AS t(rel, role, i)
  JOIN pg_catalog.pg_policy p ON p.polrelid = t.rel
 WHERE p.polcmd IN ('r', '*') AND p.polqual IS NOT NULL
   AND (0::oid = ANY (p.polroles)
        OR EXISTS (SELECT 1 FROM unnest(p.polroles) AS r(o)
                    WHERE r.o <> 0 AND pg_catalog.pg_has_role(t.role, r.o, 'USAGE')))
 ORDER BY t.i, p.polname
)SQL";

std::string oid_array(const std::set<std::uint32_t>& oids) {
    std::string out = "{";
    for (auto o : oids) {
        if (out.size() > 1) out += ',';
        out += std::to_string(o);
    }
    return out + "}";
}

std::vector<std::uint32_t> oid_list(std::string_view csv) {
    std::vector<std::uint32_t> out;
    while (!csv.empty()) {
        const auto comma = csv.find(',');
        const auto part = csv.substr(0, comma);
        std::uint32_t v = 0;
        if (std::from_chars(part.data(), part.data() + part.size(), v).ec == std::errc()) {
            out.push_back(v);
        }
        if (comma == std::string_view::npos) break;
        csv.remove_prefix(comma + 1);
    }
    return out;
}

std::shared_ptr<const nt::value> tree_or_null(const std::optional<std::string>& text,
                                              std::string& error) {
    if (!text) return nullptr;
    try {
        return std::make_shared<const nt::value>(nt::parse(*text));
    } catch (const nt::parse_error& e) {
        error = e.what();
        return nullptr;
    }
}

/// Outside the coroutines: GCC 12 miscompiles a log's initializer list in a coroutine frame.
void log_unproven(const std::string& table, const std::string& role, const std::string& why) {
    core::log::info(
        "realtime: subscribers of a table are grouped by their whole claims (the policies "
        "were not proven to read less)",
        {{"table", table}, {"role", role}, {"why", why}});
}
void log_grouping(const std::string& table, const std::string& role, const std::string& paths) {
    core::log::debug("realtime: subscribers of a table are grouped by claims",
                     {{"table", table}, {"role", role}, {"claims", paths}});
}
void log_load_failed(const std::string& what) {
    core::log::warn(
        "realtime: the catalog could not be read; the tables concerned are "
        "delivered to nobody until it can",
        {{"error", what}});
}

/// What a load keeps of each catalog row besides its meaning: its xmin, for the fingerprint.
struct rel_rows {
    std::int64_t class_xmin = 0;
    std::int64_t attributes = 0, attribute_xmins = 0;
    std::int64_t policies = 0, policy_xmins = 0;
};

}  // namespace

/// The catalog as read so far, with each row's xmin (shared by the snapshots built on it).
struct catalog_state {
    claims::catalog cat;
    std::map<std::uint32_t, rel_rows> relations;
    std::map<std::uint32_t, std::int64_t> function_xmins;
    std::int64_t max_function_oid = 0;
    std::int64_t members = 0, member_xmins = 0;
    int server_version = 0;
    bool head_read = false;
};

namespace {

std::string fingerprint_of(const catalog_state& st, const std::set<std::uint32_t>& rels,
                           const std::set<std::uint32_t>& fns) {
    std::int64_t pc = 0, ps = 0, cc = 0, cs = 0, ac = 0, as = 0, fc = 0, fs = 0;
    for (auto r : rels) {
        auto it = st.relations.find(r);
        if (it == st.relations.end()) continue;
        pc += it->second.policies;
        ps += it->second.policy_xmins;
        ++cc;
        cs += it->second.class_xmin;
        ac += it->second.attributes;
        as += it->second.attribute_xmins;
    }
    for (auto f : fns) {
        auto it = st.function_xmins.find(f);
        if (it == st.function_xmins.end()) continue;
        ++fc;
        fs += it->second;
    }
    auto pair = [](std::int64_t c, std::int64_t s) {
        return std::to_string(c) + "." + std::to_string(s);
    };
    return pair(pc, ps) + "|" + pair(cc, cs) + "|" + pair(ac, as) + "|" + pair(fc, fs) + "|" +
           std::to_string(st.max_function_oid) + "|" + pair(st.members, st.member_xmins);
}

}  // namespace

namespace {

using one_fn = std::function<net::awaitable<pg::result>(std::string, pg::params)>;
using run_fn = realtime_policies::query_fn;

/// A SQL function's body as Postgres parses it: a temporary function of the same signature with
/// the body as BEGIN ATOMIC (whose parse tree pg_proc keeps), read back and dropped, under the
/// search_path the function runs with. Nothing of it remains; a body that does not parse that way
/// (a utility statement, an object the login cannot see) is an error, and the function unproven.
net::awaitable<void> parse_sql_body(claims::function_info& f, std::string body,
                                    const std::string& args, const std::string& result,
                                    const std::string& identity, const std::string& search_path,
                                    const run_fn& run) {
    while (!body.empty() && (body.back() == ';' || body.back() == ' ' || body.back() == '\n' ||
                             body.back() == '\t' || body.back() == '\r')) {
        body.pop_back();
    }
    std::vector<pg::connection::pipelined> stmts;
    stmts.push_back({"CREATE FUNCTION pg_temp.awp_realtime_probe(" + args + ") RETURNS " + result +
                         " LANGUAGE sql BEGIN ATOMIC\n" + body + "\n;\nEND",
                     {}});
    stmts.push_back(
        {"SELECT p.prosqlbody::text FROM pg_catalog.pg_proc p "
         "WHERE p.proname = 'awp_realtime_probe' "
         "AND p.pronamespace = pg_catalog.pg_my_temp_schema()",
         {}});
    stmts.push_back({"DROP FUNCTION pg_temp.awp_realtime_probe(" + identity + ")", {}});
    std::string error;
    try {
        auto r = co_await run(search_path, std::move(stmts));
        if (r.size() >= 2 && r[1].size() == 1 && !r[1].is_null(0, 0)) {
            f.body = tree_or_null(r[1].get<std::string>(0, 0), error);
        } else {
            error = "its body did not parse as BEGIN ATOMIC";
        }
    } catch (const pg::sql_error& e) {
        error = std::string("its body did not parse as BEGIN ATOMIC: ") + e.what();
    }
    if (!f.body) f.body_error = error;
}

net::awaitable<void> fetch_relations(catalog_state& st, const std::set<std::uint32_t>& rels,
                                     const one_fn& query) {
    pg::params p;
    p.emplace_back(oid_array(rels));
    pg::params p2 = p;
    auto r = co_await query(kRelationsSql, std::move(p));
    for (int i = 0; i < r.size(); ++i) {
        const auto oid = static_cast<std::uint32_t>(r.get<long long>(i, 0));
        auto& info = st.cat.relations[oid];
        const auto kind = r.get<std::string>(i, 1);
        info.kind = kind.empty() ? '?' : kind[0];
        info.policies.clear();
        auto& rows = st.relations[oid];
        rows = rel_rows{};
        rows.class_xmin = r.get<long long>(i, 2);
        rows.attributes = r.get<long long>(i, 3);
        rows.attribute_xmins = r.get<long long>(i, 4);
    }
    auto pols = co_await query(kPoliciesSql, std::move(p2));
    for (int i = 0; i < pols.size(); ++i) {
        const auto oid = static_cast<std::uint32_t>(pols.get<long long>(i, 0));
        auto rows = st.relations.find(oid);
        if (rows == st.relations.end()) continue;
        ++rows->second.policies;
        rows->second.policy_xmins += pols.get<long long>(i, 6);
        const auto cmd = pols.get<std::string>(i, 2);
        if (cmd != "r" && cmd != "*") continue;
        claims::policy pol;
        pol.name = pols.get<std::string>(i, 1);
        pol.permissive = pols.get<bool>(i, 3);
        pol.roles = oid_list(pols.get<std::string>(i, 4));
        std::string error;
        pol.qual = tree_or_null(pols.get_optional<std::string>(i, 5), error);
        if (!error.empty()) {
            // A policy the reader cannot follow: an unknown node decides nothing narrower.
            auto bad = std::make_shared<nt::value>();
            bad->what = nt::value::kind::node;
            bad->text = "UNREADABLE";
            pol.qual = bad;
        }
        st.cat.relations[oid].policies.push_back(std::move(pol));
    }
}

net::awaitable<void> fetch(catalog_state& st, const claims::wanted& w, const std::string& sp,
                           const one_fn& query, const run_fn& run) {
    if (!w.functions.empty()) {
        pg::params p;
        p.emplace_back(oid_array(w.functions));
        auto r = co_await query(kFunctionsSql, std::move(p));
        for (int i = 0; i < r.size(); ++i) {
            const auto oid = static_cast<std::uint32_t>(r.get<long long>(i, 0));
            claims::function_info f;
            f.schema = r.get<std::string>(i, 1);
            f.name = r.get<std::string>(i, 2);
            const auto lang = r.get<std::string>(i, 3);
            f.language = lang == "internal" ? 'i' : lang == "sql" ? 's' : 'o';
            f.symbol = r.get_optional<std::string>(i, 4).value_or("");
            const auto kind = r.get<std::string>(i, 5);
            f.kind = kind.empty() ? 'f' : kind[0];
            f.returns_set = r.get<bool>(i, 6);
            f.security_definer = r.get<bool>(i, 7);
            f.owner = static_cast<std::uint32_t>(r.get<long long>(i, 8));
            st.function_xmins[oid] = r.get<long long>(i, 14);
            if (f.language == 's' && f.kind == 'f') {
                if (auto body = r.get_optional<std::string>(i, 9)) {
                    f.body = tree_or_null(body, f.body_error);
                } else {
                    // proconfig's "search_path=<value>", else the caller's (the check's).
                    auto own = r.get_optional<std::string>(i, 10);
                    const std::string path =
                        own ? own->substr(std::string_view("search_path=").size()) : sp;
                    co_await parse_sql_body(f, f.symbol, r.get<std::string>(i, 11),
                                            r.get<std::string>(i, 12), r.get<std::string>(i, 13),
                                            path, run);
                }
            }
            st.cat.functions[oid] = std::move(f);
        }
        for (auto oid : w.functions) {
            if (!st.cat.functions.contains(oid)) {  // dropped meanwhile: nothing to prove
                claims::function_info gone;
                gone.language = 'o';
                gone.name = "(dropped " + std::to_string(oid) + ")";
                st.cat.functions[oid] = gone;
            }
        }
    }
    if (!w.operators.empty()) {
        pg::params p;
        p.emplace_back(oid_array(w.operators));
        auto r = co_await query(kOperatorsSql, std::move(p));
        for (int i = 0; i < r.size(); ++i) {
            st.cat.operators[static_cast<std::uint32_t>(r.get<long long>(i, 0))] =
                static_cast<std::uint32_t>(r.get<long long>(i, 1));
        }
        for (auto oid : w.operators) st.cat.operators.try_emplace(oid, 0);
    }
    if (!w.relations.empty()) co_await fetch_relations(st, w.relations, query);
    for (auto oid : w.relations) st.cat.relations.try_emplace(oid, claims::relation_info{'?', {}});
    if (!w.roles.empty()) {
        pg::params p;
        p.emplace_back(oid_array(w.roles));
        auto r = co_await query(kRolesSql, std::move(p));
        for (int i = 0; i < r.size(); ++i) {
            auto& info = st.cat.roles[static_cast<std::uint32_t>(r.get<long long>(i, 0))];
            for (auto o : oid_list(r.get<std::string>(i, 1))) info.member_of.insert(o);
            for (auto o : oid_list(r.get<std::string>(i, 2))) info.usage_of.insert(o);
        }
        for (auto oid : w.roles) st.cat.roles.try_emplace(oid);
    }
}

}  // namespace

const realtime_table_facts* realtime_policies::snapshot::find(const rest::qualified_name& t,
                                                              const std::string& role) const {
    auto it = facts.find(key{t, role});
    return it == facts.end() ? nullptr : &it->second;
}

std::string realtime_policies::search_path(const rest::schema_cache& cache) {
    return rest::search_path(cache.schemas.empty() ? "public" : cache.schemas.front(),
                             {"public", "extensions"});
}

pg::connection::pipelined realtime_policies::fingerprint_statement(const snapshot& s) {
    pg::params p;
    p.emplace_back(oid_array({s.relations.begin(), s.relations.end()}));
    p.emplace_back(oid_array({s.functions.begin(), s.functions.end()}));
    return {kFingerprintSql, std::move(p)};
}

bool realtime_policies::unchanged(const snapshot& s, const pg::result& r) {
    return r.size() == 1 && r.text(0, 0) == s.fingerprint;
}

void realtime_policies::invalidate(const std::shared_ptr<const snapshot>& s) {
    std::lock_guard lock(mu_);
    if (current_ == s) {
        current_.reset();
        state_.reset();
    }
}

net::awaitable<std::shared_ptr<const realtime_policies::snapshot>> realtime_policies::prepare(
    std::set<key> needs, const rest::schema_cache& cache) {
    std::shared_ptr<const snapshot> cur;
    std::shared_ptr<const catalog_state> st;
    {
        std::lock_guard lock(mu_);
        cur = current_;
        st = state_;
    }
    std::set<key> missing;
    for (const auto& k : needs) {
        if (!cache.tables.contains(k.first)) continue;
        if (!cur || !cur->facts.contains(k)) missing.insert(k);
    }
    if (missing.empty() && cur) co_return cur;
    auto [next, next_state] = co_await load(std::move(missing), cur, st, cache);
    {
        std::lock_guard lock(mu_);
        // Another load may have finished meanwhile: the one that holds more facts stays (both
        // are correct for what they hold; the fingerprint check settles staleness).
        if (!current_ || current_ == cur || current_->facts.size() <= next->facts.size()) {
            current_ = next;
            state_ = next_state;
        }
    }
    co_return next;
}

net::awaitable<std::pair<std::shared_ptr<const realtime_policies::snapshot>,
                         std::shared_ptr<const catalog_state>>>
realtime_policies::load(std::set<key> needs, std::shared_ptr<const snapshot> base,
                        std::shared_ptr<const catalog_state> base_state,
                        const rest::schema_cache& cache) {
    auto snap = base ? std::make_shared<snapshot>(*base) : std::make_shared<snapshot>();
    auto st = base_state ? std::make_shared<catalog_state>(*base_state)
                         : std::make_shared<catalog_state>();
    const std::string sp = search_path(cache);
    one_fn query = [this, sp](std::string sql, pg::params p) -> net::awaitable<pg::result> {
        std::vector<pg::connection::pipelined> one;
        one.push_back({std::move(sql), std::move(p)});
        auto r = co_await q_(sp, std::move(one));
        co_return std::move(r.front());
    };
    std::set<std::uint32_t> rels(snap->relations.begin(), snap->relations.end());
    std::set<std::uint32_t> fns(snap->functions.begin(), snap->functions.end());
    std::vector<key> order(needs.begin(), needs.end());
    std::vector<realtime_table_facts> facts(order.size());
    try {
        if (!st->head_read) {
            auto h = co_await query(kHeadSql, {});
            st->server_version = h.get<int>(0, 0);
            st->max_function_oid = h.get<long long>(0, 1);
            st->members = h.get<long long>(0, 2);
            st->member_xmins = h.get<long long>(0, 3);
            auto roles = core::json::parse(h.text(0, 4));
            for (const auto& r : roles.GetArray()) {
                st->cat.role_oids[r[1].GetString()] = static_cast<std::uint32_t>(r[0].GetInt64());
            }
            st->head_read = true;
        }
        // The tables, by their names as the schema cache has them.
        std::vector<std::string> names;
        for (const auto& k : order) {
            names.push_back(sql_text::quote_ident(k.first.schema) + "." +
                            sql_text::quote_ident(k.first.name));
        }
        {
            pg::params p;
            p.emplace_back(sql_text::text_array(names));
            auto r = co_await query(kTablesSql, std::move(p));
            for (int i = 0; i < r.size(); ++i) {
                const auto idx = static_cast<std::size_t>(r.get<long long>(i, 0) - 1);
                if (idx < facts.size())
                    facts[idx].oid = static_cast<std::uint32_t>(r.get<long long>(i, 1));
            }
        }
        // The claims analysis, reading what it asks for until it has all it needs.
        for (std::size_t i = 0; i < order.size(); ++i) {
            auto& f = facts[i];
            const auto& role = order[i].second;
            auto ro = st->cat.role_oids.find(role);
            if (f.oid == 0 || ro == st->cat.role_oids.end()) {
                f.error = f.oid == 0 ? "the table is not in the catalog" : "no role " + role;
                continue;
            }
            rels.insert(f.oid);
            if (st->server_version / 10000 != 15) {
                f.reads.whole = true;
                f.reads.why = "PostgreSQL " + std::to_string(st->server_version) +
                              ": the analysis follows 15's parse trees";
                continue;
            }
            claims::analysis a;
            for (int round = 0;; ++round) {
                a = claims::analyze(st->cat, f.oid, ro->second);
                if (a.missing.empty() || round >= kMaxRounds) break;
                co_await fetch(*st, a.missing, sp, query, q_);
            }
            if (!a.missing.empty()) {
                a.r.whole = true;
                a.r.paths.clear();
                a.r.why = "the catalog kept naming more to read";
            }
            f.reads = std::move(a.r);
            rels.insert(a.relations_used.begin(), a.relations_used.end());
            fns.insert(a.functions_used.begin(), a.functions_used.end());
        }
        // Every table the answers rest on, with its rows' xmins.
        std::set<std::uint32_t> unread;
        for (auto r : rels) {
            if (!st->relations.contains(r)) unread.insert(r);
        }
        if (!unread.empty()) co_await fetch_relations(*st, unread, query);
        // The columns each role may select, and its policies over an old row.
        std::vector<std::string> rel_oids, role_names;
        for (std::size_t i = 0; i < order.size(); ++i) {
            rel_oids.push_back(std::to_string(facts[i].oid));
            role_names.push_back(order[i].second);
        }
        {
            pg::params p;
            p.emplace_back("{" + [&] {
                std::string s;
                for (const auto& o : rel_oids) s += (s.empty() ? "" : ",") + o;
                return s;
            }() + "}");
            p.emplace_back(sql_text::text_array(role_names));
            pg::params p2 = p;
            auto cols = co_await query(kColumnsSql, std::move(p));
            for (int i = 0; i < cols.size(); ++i) {
                const auto idx = static_cast<std::size_t>(cols.get<long long>(i, 0) - 1);
                if (idx < facts.size()) facts[idx].columns.insert(cols.get<std::string>(i, 1));
            }
            auto pols = co_await query(kOldRowPoliciesSql, std::move(p2));
            std::vector<std::vector<std::string>> perm(facts.size()), restr(facts.size());
            for (int i = 0; i < pols.size(); ++i) {
                const auto idx = static_cast<std::size_t>(pols.get<long long>(i, 0) - 1);
                if (idx >= facts.size()) continue;
                (pols.get<bool>(i, 1) ? perm : restr)[idx].push_back(
                    "(" + pols.get<std::string>(i, 2) + ")");
            }
            for (std::size_t i = 0; i < facts.size(); ++i) {
                std::string any = "false";
                for (std::size_t k = 0; k < perm[i].size(); ++k) {
                    any = k == 0 ? perm[i][k] : any + " OR " + perm[i][k];
                }
                std::string all = "(" + any + ")";
                for (const auto& r : restr[i]) all += " AND " + r;
                facts[i].old_row_policy =
                    "(NOT pg_catalog.row_security_active(" + std::to_string(facts[i].oid) +
                    "::pg_catalog.oid::pg_catalog.regclass) OR (" + all + "))";
            }
        }
    } catch (const std::exception& e) {
        log_load_failed(e.what());
        for (auto& f : facts) {
            if (f.error.empty()) f.error = e.what();
        }
    }
    for (std::size_t i = 0; i < order.size(); ++i) {
        auto& f = facts[i];
        if (const auto* t = [&]() -> const rest::table* {
                auto it = cache.tables.find(order[i].first);
                return it == cache.tables.end() ? nullptr : &it->second;
            }()) {
            f.primary_key_selectable = !t->primary_key.empty();
            for (const auto& k : t->primary_key) {
                if (!f.columns.contains(k)) f.primary_key_selectable = false;
            }
        }
        const auto table = order[i].first.schema + "." + order[i].first.name;
        if (f.error.empty() && f.reads.whole) {
            log_unproven(table, order[i].second, f.reads.why);
        } else if (f.error.empty()) {
            std::string paths;
            for (const auto& p : f.reads.paths) {
                paths += (paths.empty() ? "" : ", ") + claims::to_string(p);
            }
            log_grouping(table, order[i].second, paths.empty() ? "none" : paths);
        }
        snap->facts[order[i]] = std::move(f);
    }
    snap->relations.assign(rels.begin(), rels.end());
    snap->functions.assign(fns.begin(), fns.end());
    snap->fingerprint = fingerprint_of(*st, rels, fns);
    co_return std::make_pair(std::shared_ptr<const snapshot>(snap),
                             std::shared_ptr<const catalog_state>(st));
}

}  // namespace awp::api
