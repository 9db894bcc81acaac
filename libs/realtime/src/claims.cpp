// The claims a table's row-level security can read (claims.hpp): a walk over the catalog's
// parse trees that follows the claims from where they enter (current_setting of
// request.jwt.claims and request.jwt.claim.*) through the expressions that keep them exact
// (casts between text, json and jsonb, NULLIF(x, ''), COALESCE with one claims argument, a
// subquery's column, a SQL function's result) to where they are used: `->`, `#>` and jsonb
// subscripts by constant keys narrow the path, and any other use reads what was reached. CASE
// branches are chosen where the condition is a question about the role alone (pg_has_role on
// current_user), as the role is fixed for the whole analysis. Every node, function and table it
// cannot account for makes the answer `whole`.
#include "awp/realtime/claims.hpp"

#include <algorithm>
#include <charconv>
#include <functional>

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

namespace awp::realtime::claims {

namespace {

using node_tree::value;

/// Internal functions that read settings by a name they are given, change them, or run SQL text
/// (whose own reads cannot be seen here): their results may depend on anything.
bool unprovable_symbol(std::string_view s) {
    static const std::set<std::string_view> k = {
        "set_config_by_name",
        "show_all_settings",
        "show_all_file_settings",
        "query_to_xml",
        "query_to_xmlschema",
        "query_to_xml_and_xmlschema",
        "cursor_to_xml",
        "cursor_to_xmlschema",
        "table_to_xml",
        "table_to_xmlschema",
        "table_to_xml_and_xmlschema",
        "schema_to_xml",
        "schema_to_xmlschema",
        "schema_to_xml_and_xmlschema",
        "database_to_xml",
        "database_to_xmlschema",
        "database_to_xml_and_xmlschema",
        "ts_stat1",
        "ts_stat2",
        "tsquery_rewrite_query",
    };
    return k.contains(s);
}

constexpr std::int64_t kFirstNormalOid = 16384;  // below: objects of initdb (built in)
constexpr std::size_t kBudget = 200'000;         // nodes visited before giving up (whole)

/// An expression's value as far as the claims go.
struct cv {
    bool claims = false;  ///< exactly the claims JSON (as text, json or jsonb) at one of `paths`
    std::set<path> paths;
};

cv narrowed(const cv& v, const std::vector<step>& steps) {
    cv out;
    out.claims = true;
    for (auto p : v.paths) {
        p.insert(p.end(), steps.begin(), steps.end());
        out.paths.insert(std::move(p));
    }
    return out;
}

class walker {
public:
    walker(const catalog& c, analysis& out) : c_(c), out_(out) {}

    void table(std::uint32_t rel, std::uint32_t role) {
        roles_.push_back(role);
        if (!c_.roles.contains(role)) out_.missing.roles.insert(role);
        relation(rel);
        roles_.pop_back();
    }

private:
    struct scope_query {
        const value* q = nullptr;
        std::map<std::int64_t, std::vector<cv>> targets;  // subquery RTE -> its columns
        std::map<std::int64_t, cv> function_columns;      // function RTE -> its one column
    };

    void whole(std::string why) {
        out_.r.whole = true;
        if (out_.r.why.empty()) out_.r.why = std::move(why);
    }

    void read(const cv& v) {
        if (!v.claims) return;
        for (const auto& p : v.paths) out_.r.paths.insert(p);
    }

    void use(const value& e) { read(expr(e)); }

    void use_list(const value* l) {
        if (!l || l->is_null()) return;
        if (l->is_list()) {
            for (const auto& i : l->items) {
                if (i.is_node() || i.is_list()) use_any(i);
            }
        } else {
            use_any(*l);
        }
    }

    /// A child that may be an expression, a list of them, or a clause node.
    void use_any(const value& v) {
        if (v.is_list()) {
            use_list(&v);
        } else if (v.is_node()) {
            use(v);
        }
    }

    std::uint32_t role() const { return roles_.empty() ? 0 : roles_.back(); }

    const function_info* function(std::int64_t oid) {
        auto it = c_.functions.find(static_cast<std::uint32_t>(oid));
        if (it == c_.functions.end()) {
            out_.missing.functions.insert(static_cast<std::uint32_t>(oid));
            return nullptr;
        }
        return &it->second;
    }

    static bool builtin(const function_info& f) {
        return f.schema == "pg_catalog" && f.language == 'i';
    }

    /// A function named by an oid field (an operator's, an aggregate's, a sort's): acceptable
    /// when built in and harmless, or a SQL function (analysed for what it reads).
    void function_used(std::int64_t oid) {
        if (oid == 0) return;
        const auto* f = function(oid);
        if (!f) return;
        if (builtin(*f)) {
            if (unprovable_symbol(f->symbol) || f->symbol == "show_config_by_name" ||
                f->symbol == "show_config_by_name_missing_ok") {
                whole("function " + f->name + " reads settings by a computed name");
            }
            return;
        }
        if (f->language == 's' && f->kind == 'f') {
            (void)sql_function(static_cast<std::uint32_t>(oid), *f);
            return;
        }
        whole("function " + f->schema + "." + f->name + " is not SQL or built in");
    }

    std::int64_t operator_function(std::int64_t opno, std::int64_t opfuncid) {
        if (opfuncid != 0) return opfuncid;
        auto it = c_.operators.find(static_cast<std::uint32_t>(opno));
        if (it == c_.operators.end()) {
            out_.missing.operators.insert(static_cast<std::uint32_t>(opno));
            return 0;
        }
        return it->second;
    }

    void operator_used(std::int64_t opno) {
        if (opno != 0) function_used(operator_function(opno, 0));
    }

    static const value* arg(const value* args, std::size_t i) {
        if (!args || !args->is_list() || i >= args->items.size()) return nullptr;
        const value* a = &args->items[i];
        if (a->is_node("NAMEDARGEXPR")) a = a->field("arg");
        return a;
    }

    /// A constant key of a JSON step: text, or an integer (as its decimal text).
    static std::optional<step> key_of(const value* a, bool index) {
        if (!a) return std::nullopt;
        while (a->is_node("RELABELTYPE") || a->is_node("COLLATEEXPR")) a = a->field("arg");
        if (!a || !a->is_node("CONST")) return std::nullopt;
        if (auto t = node_tree::const_text(*a)) return step{false, *t};
        if (auto n = node_tree::const_integer(*a)) return step{index, std::to_string(*n)};
        return std::nullopt;
    }

    /// The constant path of #> / #>> / json(b)_extract_path: a text[] constant, or (a variadic
    /// call with separate arguments, which Postgres folds into one) an ARRAY[...] of constants.
    static std::optional<std::vector<step>> path_of(const value* a) {
        std::vector<step> out;
        if (!a) return std::nullopt;
        if (a->is_node("CONST")) {
            auto els = node_tree::const_text_array(*a);
            if (!els) return std::nullopt;
            for (auto& e : *els) out.push_back(step{false, std::move(e)});
            return out;
        }
        if (a->is_node("ARRAYEXPR")) {
            const auto* els = a->field("elements");
            if (!els || !els->is_list()) return std::nullopt;
            for (const auto& e : els->items) {
                auto k = key_of(&e, false);
                if (!k) return std::nullopt;
                out.push_back(*k);
            }
            return out;
        }
        return std::nullopt;
    }

    /// current_setting(name): what the realtime check's transaction sets from the claims.
    cv setting(const std::string& name) {
        if (name == "request.jwt.claims") {
            cv v;
            v.claims = true;
            v.paths.insert(path{});
            return v;
        }
        constexpr std::string_view claim = "request.jwt.claim.";
        if (name.starts_with(claim)) {
            // request.jwt.claim.sub (and .role): one claim's text.
            out_.r.paths.insert(path{step{false, name.substr(claim.size())}});
        }
        // Everything else is the same for every group of a role: the method, path and headers
        // the check sets, the role's own settings, the server's.
        return {};
    }

    cv call(std::int64_t fid, const value* args) {
        const auto* f = function(fid);
        std::vector<cv> a;
        if (args && args->is_list()) {
            for (std::size_t i = 0; i < args->items.size(); ++i) {
                const auto* x = arg(args, i);
                a.push_back(x ? expr(*x) : cv{});
            }
        }
        auto read_all = [&] {
            for (const auto& x : a) read(x);
        };
        if (!f) {
            read_all();
            return {};
        }
        if (builtin(*f)) {
            const auto& s = f->symbol;
            if (s == "show_config_by_name" || s == "show_config_by_name_missing_ok") {
                const auto* name = arg(args, 0);
                std::optional<std::string> n;
                if (name) {
                    const value* k = name;
                    while (k && (k->is_node("RELABELTYPE") || k->is_node("COLLATEEXPR"))) {
                        k = k->field("arg");
                    }
                    if (k && k->is_node("CONST")) n = node_tree::const_text(*k);
                }
                for (std::size_t i = 1; i < a.size(); ++i) read(a[i]);
                if (!n) {
                    whole("current_setting of a computed name");
                    return {};
                }
                return setting(*n);
            }
            if (unprovable_symbol(s)) {
                whole("function " + f->name + " (reads settings or runs SQL text)");
                read_all();
                return {};
            }
            const bool field = s == "jsonb_object_field" || s == "json_object_field";
            const bool field_text = s == "jsonb_object_field_text" || s == "json_object_field_text";
            const bool element = s == "jsonb_array_element" || s == "json_array_element";
            const bool element_text =
                s == "jsonb_array_element_text" || s == "json_array_element_text";
            const bool extract = s == "jsonb_extract_path" || s == "json_extract_path";
            const bool extract_text =
                s == "jsonb_extract_path_text" || s == "json_extract_path_text";
            if (!a.empty() && a[0].claims && (field || field_text || element || element_text)) {
                for (std::size_t i = 1; i < a.size(); ++i) read(a[i]);
                auto k = key_of(arg(args, 1), element || element_text);
                if (!k) {
                    read(a[0]);
                    return {};
                }
                auto v = narrowed(a[0], {*k});
                if (field || element) return v;
                read(v);
                return {};
            }
            if (!a.empty() && a[0].claims && (extract || extract_text)) {
                for (std::size_t i = 1; i < a.size(); ++i) read(a[i]);
                auto p = path_of(arg(args, 1));
                if (!p) {
                    read(a[0]);
                    return {};
                }
                auto v = narrowed(a[0], *p);
                if (extract) return v;
                read(v);
                return {};
            }
            read_all();
            return {};
        }
        if (f->language == 's' && f->kind == 'f') {
            read_all();
            return sql_function(static_cast<std::uint32_t>(fid), *f);
        }
        if (f->kind == 'a' || f->kind == 'w') {
            whole("aggregate " + f->schema + "." + f->name + " is not built in");
        } else {
            whole("function " + f->schema + "." + f->name + " is not SQL or built in");
        }
        read_all();
        return {};
    }

    cv sql_function(std::uint32_t fid, const function_info& f) {
        const std::uint32_t ctx = f.security_definer ? f.owner : role();
        const auto key = std::make_pair(fid, ctx);
        if (in_progress_.contains(key)) {
            whole("function " + f.name + " calls itself");
            return {};
        }
        if (auto it = memo_.find(key); it != memo_.end()) return it->second;
        out_.functions_used.insert(fid);
        if (!f.body) {
            whole("function " + f.schema + "." + f.name + ": " +
                  (f.body_error.empty() ? "its body is not known" : f.body_error));
            return {};
        }
        if (!c_.roles.contains(ctx)) out_.missing.roles.insert(ctx);
        in_progress_.insert(key);
        roles_.push_back(ctx);
        auto saved = std::move(queries_);
        queries_.clear();
        std::vector<const value*> qs;
        std::function<void(const value&)> collect = [&](const value& v) {
            if (v.is_node("QUERY")) {
                qs.push_back(&v);
            } else if (v.is_list()) {
                for (const auto& i : v.items) collect(i);
            } else if (!v.is_null()) {
                whole("function " + f.name + ": a body that is not a list of queries");
            }
        };
        collect(*f.body);
        cv result;
        for (std::size_t i = 0; i < qs.size(); ++i) {
            auto targets = query(*qs[i]);
            if (i + 1 == qs.size() && !targets.empty()) {
                if (f.returns_set) {
                    for (const auto& t : targets) read(t);
                } else {
                    result = targets.front();
                    for (std::size_t k = 1; k < targets.size(); ++k) read(targets[k]);
                }
            }
        }
        queries_ = std::move(saved);
        roles_.pop_back();
        in_progress_.erase(key);
        memo_[key] = result;
        return result;
    }

    /// A table a query (or a policy's subquery) reads: its policies for the current role.
    void relation(std::int64_t oid) {
        const auto rel = static_cast<std::uint32_t>(oid);
        auto it = c_.relations.find(rel);
        if (it == c_.relations.end()) {
            out_.missing.relations.insert(rel);
            return;
        }
        out_.relations_used.insert(rel);
        const auto key = std::make_pair(rel, role());
        if (relations_done_.contains(key)) return;
        relations_done_.insert(key);
        const auto& r = it->second;
        switch (r.kind) {
            case 'r':
            case 'p':
                break;
            case 'm':  // a materialized view, a sequence: no row-level security
            case 'S':
                return;
            case 'v':
                whole("a view read by a policy");
                return;
            default:
                whole(std::string("a relation of kind ") + r.kind + " read by a policy");
                return;
        }
        const auto ri = c_.roles.find(role());
        for (const auto& p : r.policies) {
            bool applies = ri == c_.roles.end();  // not known yet: assumed (the answer waits)
            for (auto pr : p.roles) {
                if (pr == 0 || (ri != c_.roles.end() && ri->second.member_of.contains(pr))) {
                    applies = true;
                }
            }
            if (!applies || !p.qual) continue;
            auto saved = std::move(queries_);
            queries_.clear();
            use(*p.qual);
            queries_ = std::move(saved);
        }
    }

    std::vector<cv> query(const value& q) {
        if (!q.is_node("QUERY")) {
            whole("a subquery that is not a query");
            return {};
        }
        if (q.number("commandType").value_or(0) != 1) {
            whole("a statement other than SELECT");
            return {};
        }
        if (const auto* u = q.field("utilityStmt"); u && !u->is_null()) {
            whole("a utility statement");
            return {};
        }
        queries_.push_back(scope_query{&q, {}, {}});
        const std::size_t me = queries_.size() - 1;
        if (const auto* ctes = q.field("cteList"); ctes && ctes->is_list()) {
            for (const auto& cte : ctes->items) {
                if (!cte.is_node("COMMONTABLEEXPR")) {
                    whole("a WITH entry of an unknown shape");
                    continue;
                }
                if (const auto* cq = cte.field("ctequery")) {
                    for (const auto& t : query(*cq)) read(t);
                }
            }
        }
        if (const auto* rtable = q.field("rtable"); rtable && rtable->is_list()) {
            for (std::size_t i = 0; i < rtable->items.size(); ++i) {
                range_entry(rtable->items[i], static_cast<std::int64_t>(i + 1), me);
            }
        }
        if (const auto* j = q.field("jointree")) use_any(*j);
        std::vector<cv> targets;
        if (const auto* tl = q.field("targetList"); tl && tl->is_list()) {
            for (const auto& te : tl->items) {
                if (!te.is_node("TARGETENTRY")) {
                    whole("a target of an unknown shape");
                    continue;
                }
                const auto* e = te.field("expr");
                cv v = e ? expr(*e) : cv{};
                if (te.boolean("resjunk").value_or(false) ||
                    te.number("ressortgroupref").value_or(0) != 0) {
                    read(v);  // sorted, grouped or distinct on: the whole value decides rows
                }
                if (!te.boolean("resjunk").value_or(false)) targets.push_back(std::move(v));
            }
        }
        for (const char* k :
             {"havingQual", "limitOffset", "limitCount", "groupClause", "groupingSets",
              "distinctClause", "sortClause", "windowClause", "setOperations"}) {
            if (const auto* f = q.field(k)) use_any(*f);
        }
        if (const auto* so = q.field("setOperations"); so && !so->is_null()) {
            // UNION and friends compare whole rows of every branch.
            for (const auto& [rte, cols] : queries_[me].targets) {
                for (const auto& c : cols) read(c);
            }
            for (const auto& t : targets) read(t);
        }
        queries_.pop_back();
        return targets;
    }

    void range_entry(const value& rte, std::int64_t index, std::size_t me) {
        if (!rte.is_node("RANGETBLENTRY")) {
            whole("a range table entry of an unknown shape");
            return;
        }
        if (const auto* sq = rte.field("securityQuals"); sq && !sq->is_null()) use_any(*sq);
        switch (rte.number("rtekind").value_or(-1)) {
            case 0:  // a table
                if (const auto* ts = rte.field("tablesample"); ts && !ts->is_null()) {
                    whole("TABLESAMPLE in a policy");
                }
                relation(rte.number("relid").value_or(0));
                return;
            case 1:  // a subquery: its columns, for the Vars that name them
                if (const auto* sq = rte.field("subquery")) {
                    auto cols = query(*sq);
                    queries_[me].targets[index] = std::move(cols);
                }
                return;
            case 2:  // a join: its columns are Vars of the joined entries
                return;
            case 3: {  // functions in FROM
                const auto* fs = rte.field("functions");
                if (!fs || !fs->is_list()) return;
                std::vector<cv> cols;
                for (const auto& rf : fs->items) {
                    if (!rf.is_node("RANGETBLFUNCTION")) {
                        whole("a function in FROM of an unknown shape");
                        continue;
                    }
                    if (const auto* fe = rf.field("funcexpr")) cols.push_back(expr(*fe));
                }
                if (cols.size() == 1 && !rte.boolean("funcordinality").value_or(false)) {
                    queries_[me].function_columns[index] = cols.front();
                } else {
                    for (const auto& c : cols) read(c);
                }
                return;
            }
            case 5:  // VALUES
                use_any(rte.field("values_lists") ? *rte.field("values_lists") : value{});
                return;
            case 6:  // a WITH query (analysed with cteList)
            case 8:  // an empty FROM
                return;
            default:
                whole("a range table entry of kind " +
                      std::to_string(rte.number("rtekind").value_or(-1)));
        }
    }

    cv var(const value& v) {
        const auto up = static_cast<std::size_t>(v.number("varlevelsup").value_or(0));
        if (up >= queries_.size()) return {};  // the policy's own row, a function's argument
        return var_in(queries_.size() - 1 - up, v.number("varno").value_or(0),
                      v.number("varattno").value_or(0), 0);
    }

    cv var_in(std::size_t level, std::int64_t varno, std::int64_t attno, int hops) {
        auto& s = queries_[level];
        const auto* rtable = s.q->field("rtable");
        if (!rtable || !rtable->is_list() || varno < 1 ||
            static_cast<std::size_t>(varno) > rtable->items.size() || hops > 32) {
            return {};
        }
        const auto& rte = rtable->items[static_cast<std::size_t>(varno - 1)];
        switch (rte.number("rtekind").value_or(-1)) {
            case 1: {
                auto it = s.targets.find(varno);
                if (it == s.targets.end()) return {};
                if (attno == 0) {  // the whole row
                    for (const auto& c : it->second) read(c);
                    return {};
                }
                if (attno < 1 || static_cast<std::size_t>(attno) > it->second.size()) return {};
                return it->second[static_cast<std::size_t>(attno - 1)];
            }
            case 2: {
                const auto* jv = rte.field("joinaliasvars");
                if (!jv || !jv->is_list() || attno < 1 ||
                    static_cast<std::size_t>(attno) > jv->items.size()) {
                    return {};
                }
                const auto& alias = jv->items[static_cast<std::size_t>(attno - 1)];
                if (alias.is_node("VAR") && alias.number("varlevelsup").value_or(0) == 0) {
                    return var_in(level, alias.number("varno").value_or(0),
                                  alias.number("varattno").value_or(0), hops + 1);
                }
                return {};
            }
            case 3: {
                auto it = s.function_columns.find(varno);
                if (it != s.function_columns.end() && attno == 1) return it->second;
                return {};
            }
            default:
                return {};
        }
    }

    /// A CASE's WHEN when it asks only about the role: pg_has_role(current_user, <role>, mode).
    std::optional<bool> decide(const value& e) {
        if (e.is_node("CONST")) return node_tree::const_bool(e);
        if (e.is_node("BOOLEXPR")) {
            const auto* op = e.field("boolop");
            const auto* args = e.field("args");
            if (!op || !args || !args->is_list()) return std::nullopt;
            std::vector<std::optional<bool>> v;
            for (const auto& a : args->items) v.push_back(decide(a));
            if (op->text == "not") {
                if (v.size() != 1 || !v[0]) return std::nullopt;
                return !*v[0];
            }
            const bool is_and = op->text == "and";
            bool unknown = false;
            for (const auto& x : v) {
                if (!x) {
                    unknown = true;
                } else if (*x != is_and) {
                    return *x;  // a false in AND, a true in OR
                }
            }
            if (unknown) return std::nullopt;
            return is_and;
        }
        if (!e.is_node("FUNCEXPR")) return std::nullopt;
        const auto* f = function(e.number("funcid").value_or(0));
        if (!f || !builtin(*f) || !f->symbol.starts_with("pg_has_role")) return std::nullopt;
        const auto* args = e.field("args");
        if (!args || !args->is_list()) return std::nullopt;
        const bool two = f->symbol == "pg_has_role_name" || f->symbol == "pg_has_role_id";
        if (args->items.size() != (two ? 2U : 3U)) return std::nullopt;
        if (!two) {
            const auto& who = args->items[0];
            // SQLValueFunctionOp: 9 CURRENT_ROLE, 10 CURRENT_USER, 11 USER.
            const auto op = who.is_node("SQLVALUEFUNCTION") ? who.number("op").value_or(-1) : -1;
            if (op != 9 && op != 10 && op != 11) return std::nullopt;
        }
        const auto& target = args->items[two ? 0 : 1];
        const auto& mode = args->items[two ? 1 : 2];
        std::optional<std::uint32_t> target_oid;
        if (auto n = node_tree::const_text(target)) {
            auto it = c_.role_oids.find(*n);
            if (it == c_.role_oids.end()) return std::nullopt;  // pg_has_role would raise
            target_oid = it->second;
        } else if (auto o = node_tree::const_integer(target)) {
            target_oid = static_cast<std::uint32_t>(*o);
        }
        auto m = node_tree::const_text(mode);
        if (!target_oid || !m) return std::nullopt;
        std::string upper;
        for (char ch : *m) upper += static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
        const auto ri = c_.roles.find(role());
        if (ri == c_.roles.end()) {
            out_.missing.roles.insert(role());
            return std::nullopt;
        }
        if (upper == "MEMBER") return ri->second.member_of.contains(*target_oid);
        if (upper == "USAGE") return ri->second.usage_of.contains(*target_oid);
        return std::nullopt;
    }

    cv case_expr(const value& e) {
        const auto* arg_expr = e.field("arg");
        const bool simple = arg_expr && !arg_expr->is_null();
        if (simple) use(*arg_expr);
        const auto* whens = e.field("args");
        std::vector<cv> results;
        bool decided = false;
        if (whens && whens->is_list()) {
            for (const auto& w : whens->items) {
                if (!w.is_node("CASEWHEN")) {
                    whole("a CASE branch of an unknown shape");
                    continue;
                }
                const auto* cond = w.field("expr");
                const auto* res = w.field("result");
                std::optional<bool> d;
                if (!simple && cond) d = decide(*cond);
                if (d && !*d) continue;  // never taken for this role
                if (!d && cond) use(*cond);
                if (res) results.push_back(expr(*res));
                if (d && *d) {
                    decided = true;  // taken: later branches and the default are not reached
                    break;
                }
            }
        }
        if (!decided) {
            if (const auto* def = e.field("defresult"); def && !def->is_null()) {
                results.push_back(expr(*def));
            }
        }
        if (results.size() == 1) return results.front();
        for (const auto& r : results) read(r);
        return {};
    }

    void generic(const value& e) {
        for (const auto& f : e.items) {
            if (f.is_node() || f.is_list()) use_any(f);
        }
    }

    cv expr(const value& e) {
        if (++visited_ > kBudget) {
            whole("a policy too large to follow");
            return {};
        }
        if (e.is_null()) return {};
        if (e.is_list()) {
            use_list(&e);
            return {};
        }
        if (!e.is_node()) return {};
        const auto& tag = e.text;
        if (tag == "CONST" || tag == "PARAM" || tag == "SQLVALUEFUNCTION" ||
            tag == "CASETESTEXPR" || tag == "COERCETODOMAINVALUE" || tag == "SETTODEFAULT" ||
            tag == "CURRENTOFEXPR" || tag == "RANGETBLREF" || tag == "ALIAS") {
            return {};
        }
        if (tag == "VAR") return var(e);
        if (tag == "FUNCEXPR") return call(e.number("funcid").value_or(0), e.field("args"));
        if (tag == "OPEXPR" || tag == "DISTINCTEXPR") {
            const auto fid =
                operator_function(e.number("opno").value_or(0), e.number("opfuncid").value_or(0));
            auto v = call(fid, e.field("args"));
            if (tag == "DISTINCTEXPR") {
                read(v);
                return {};
            }
            return v;
        }
        if (tag == "NULLIFEXPR") {
            const auto fid =
                operator_function(e.number("opno").value_or(0), e.number("opfuncid").value_or(0));
            function_used(fid);
            const auto* args = e.field("args");
            if (!args || !args->is_list() || args->items.size() != 2) {
                use_list(args);
                return {};
            }
            auto a = expr(args->items[0]);
            auto b = expr(args->items[1]);
            read(b);
            const auto& k = args->items[1];
            if (a.claims && k.is_node("CONST") && node_tree::const_text(k) == std::string()) {
                return a;  // NULLIF(claims, ''): the claims, never '' (a JSON object)
            }
            read(a);
            return {};
        }
        if (tag == "SCALARARRAYOPEXPR") {
            const auto fid =
                operator_function(e.number("opno").value_or(0), e.number("opfuncid").value_or(0));
            read(call(fid, e.field("args")));
            function_used(e.number("hashfuncid").value_or(0));
            function_used(e.number("negfuncid").value_or(0));
            return {};
        }
        if (tag == "ROWCOMPAREEXPR") {
            if (const auto* ops = e.field("opnos"); ops && ops->is_list()) {
                for (const auto& o : ops->items) {
                    std::int64_t opno = 0;
                    const auto& t = o.text;
                    if (o.what == value::kind::token &&
                        std::from_chars(t.data(), t.data() + t.size(), opno).ec == std::errc()) {
                        operator_used(opno);
                    }
                }
            }
            use_list(e.field("largs"));
            use_list(e.field("rargs"));
            return {};
        }
        if (tag == "MINMAXEXPR") {
            if (e.number("minmaxtype").value_or(kFirstNormalOid) >= kFirstNormalOid) {
                whole("GREATEST/LEAST over a type of the database's own");
            }
            use_list(e.field("args"));
            return {};
        }
        if (tag == "RELABELTYPE" || tag == "COLLATEEXPR") {
            const auto* a = e.field("arg");
            return a ? expr(*a) : cv{};
        }
        if (tag == "COERCEVIAIO") {
            const auto* a = e.field("arg");
            auto v = a ? expr(*a) : cv{};
            const auto to = e.number("resulttype").value_or(0);
            if (v.claims && (to == 25 || to == 114 || to == 3802 || to == 1043)) return v;
            read(v);
            return {};
        }
        if (tag == "COALESCEEXPR") {
            std::vector<cv> vs;
            if (const auto* args = e.field("args"); args && args->is_list()) {
                for (const auto& a : args->items) vs.push_back(expr(a));
            }
            const auto n =
                std::count_if(vs.begin(), vs.end(), [](const cv& v) { return v.claims; });
            if (n == 1) {
                for (auto& v : vs) {
                    if (v.claims) return v;  // COALESCE(x, claims) or COALESCE(claims, x)
                }
            }
            for (const auto& v : vs) read(v);
            return {};
        }
        if (tag == "CASEEXPR") return case_expr(e);
        if (tag == "SUBLINK") {
            if (const auto* t = e.field("testexpr")) use_any(*t);
            const auto* sq = e.field("subselect");
            if (!sq) return {};
            auto targets = query(*sq);
            if (e.number("subLinkType").value_or(-1) == 4 && !targets.empty()) {  // EXPR_SUBLINK
                for (std::size_t i = 1; i < targets.size(); ++i) read(targets[i]);
                return targets.front();
            }
            for (const auto& t : targets) read(t);
            return {};
        }
        if (tag == "SUBSCRIPTINGREF") {
            const auto container = e.number("refcontainertype").value_or(0);
            const auto* base = e.field("refexpr");
            auto b = base ? expr(*base) : cv{};
            const auto* upper = e.field("refupperindexpr");
            const auto* lower = e.field("reflowerindexpr");
            const auto* assign = e.field("refassgnexpr");
            const bool plain = (!lower || lower->is_null()) && (!assign || assign->is_null());
            if (container == 3802 && b.claims && plain && upper && upper->is_list()) {
                std::vector<step> steps;
                bool ok = true;
                for (const auto& s : upper->items) {
                    auto k = key_of(&s, false);
                    if (!k) {
                        ok = false;
                        break;
                    }
                    steps.push_back(*k);
                }
                if (ok) return narrowed(b, steps);
            }
            read(b);
            if (container >= kFirstNormalOid) whole("a subscript of a type of the database's own");
            use_list(upper);
            use_list(lower);
            if (assign) use_any(*assign);
            return {};
        }
        if (tag == "AGGREF" || tag == "WINDOWFUNC") {
            const auto fid = e.number(tag == "AGGREF" ? "aggfnoid" : "winfnoid").value_or(0);
            const auto* f = function(fid);
            if (f && !(f->schema == "pg_catalog" && f->language == 'i')) {
                whole("aggregate " + f->schema + "." + f->name + " is not built in");
            }
            generic(e);
            return {};
        }
        if (tag == "SORTGROUPCLAUSE") {
            operator_used(e.number("eqop").value_or(0));
            operator_used(e.number("sortop").value_or(0));
            return {};
        }
        if (tag == "WINDOWCLAUSE") {
            function_used(e.number("startInRangeFunc").value_or(0));
            function_used(e.number("endInRangeFunc").value_or(0));
            generic(e);
            return {};
        }
        if (tag == "COERCETODOMAIN") {
            whole("a domain's constraints");
            generic(e);
            return {};
        }
        if (tag == "BOOLEXPR" || tag == "NULLTEST" || tag == "BOOLEANTEST" || tag == "ROWEXPR" ||
            tag == "ARRAYEXPR" || tag == "FIELDSELECT" || tag == "FIELDSTORE" ||
            tag == "ARRAYCOERCEEXPR" || tag == "CONVERTROWTYPEEXPR" || tag == "XMLEXPR" ||
            tag == "GROUPINGFUNC" || tag == "NAMEDARGEXPR" || tag == "TARGETENTRY" ||
            tag == "FROMEXPR" || tag == "JOINEXPR" || tag == "SETOPERATIONSTMT" ||
            tag == "GROUPINGSET" || tag == "CASEWHEN") {
            generic(e);
            return {};
        }
        whole("a node " + tag + " the analysis does not follow");
        return {};
    }

    const catalog& c_;
    analysis& out_;
    std::vector<std::uint32_t> roles_;
    std::vector<scope_query> queries_;
    std::set<std::pair<std::uint32_t, std::uint32_t>> in_progress_, relations_done_;
    std::map<std::pair<std::uint32_t, std::uint32_t>, cv> memo_;
    std::size_t visited_ = 0;
};

// The claims as a small tree that keeps numbers as written (jsonb keeps 1.0 and 1.00 apart).
struct jmember;
struct jnode {
    char type = 'z';  // z null, t true, f false, n number, s string, o object, a array
    std::string text;
    // Not std::pair<std::string, jnode>: a pair of an incomplete type is refused by clang with
    // libstdc++ (the sanitizer and fuzz builds); a vector of one is allowed (C++17).
    std::vector<jmember> members;
    std::vector<jnode> items;
};
struct jmember {
    std::string key;
    jnode value;
};

struct builder : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, builder> {
    std::vector<jnode*> stack;
    std::vector<std::string> keys;
    jnode root;
    bool started = false;
    bool duplicate = false;

    jnode& place() {
        if (!started) {
            started = true;
            return root;
        }
        auto* parent = stack.back();
        if (parent->type == 'a') {
            parent->items.emplace_back();
            return parent->items.back();
        }
        for (const auto& [k, v] : parent->members) {
            if (k == keys.back()) duplicate = true;
        }
        parent->members.push_back(jmember{std::move(keys.back()), jnode{}});
        keys.pop_back();
        return parent->members.back().value;
    }
    bool scalar(char t, std::string s = {}) {
        auto& n = place();
        n.type = t;
        n.text = std::move(s);
        return true;
    }
    bool Null() { return scalar('z'); }
    bool Bool(bool b) { return scalar(b ? 't' : 'f'); }
    bool RawNumber(const char* s, rapidjson::SizeType n, bool) { return scalar('n', {s, n}); }
    bool String(const char* s, rapidjson::SizeType n, bool) { return scalar('s', {s, n}); }
    bool StartObject() {
        auto& n = place();
        n.type = 'o';
        stack.push_back(&n);
        return true;
    }
    bool Key(const char* s, rapidjson::SizeType n, bool) {
        keys.emplace_back(s, n);
        return true;
    }
    bool EndObject(rapidjson::SizeType) {
        stack.pop_back();
        return true;
    }
    bool StartArray() {
        auto& n = place();
        n.type = 'a';
        stack.push_back(&n);
        return true;
    }
    bool EndArray(rapidjson::SizeType) {
        stack.pop_back();
        return true;
    }
};

/// An unambiguous text of a value: its type, then length-prefixed parts.
void canonical(const jnode& n, std::string& out) {
    out += n.type;
    switch (n.type) {
        case 'n':
        case 's':
            out += std::to_string(n.text.size()) + ':' + n.text;
            break;
        case 'o':
            out += std::to_string(n.members.size()) + '{';
            for (const auto& [k, v] : n.members) {
                out += std::to_string(k.size()) + ':' + k;
                canonical(v, out);
            }
            out += '}';
            break;
        case 'a':
            out += std::to_string(n.items.size()) + '[';
            for (const auto& v : n.items) canonical(v, out);
            out += ']';
            break;
        default:
            break;
    }
}

}  // namespace

std::string to_string(const path& p) {
    if (p.empty()) return "(the claims)";
    std::string out;
    for (const auto& s : p) {
        if (s.index) {
            out += "[" + s.key + "]";
        } else {
            if (!out.empty()) out += '.';
            out += s.key;
        }
    }
    return out;
}

analysis analyze(const catalog& c, std::uint32_t table, std::uint32_t role) {
    analysis out;
    walker w(c, out);
    w.table(table, role);
    if (out.r.whole) out.r.paths.clear();
    return out;
}

std::string projection(const reads& r, std::string_view claims_json) {
    const auto whole_key = [&] { return "w" + std::string(claims_json); };
    if (r.whole) return whole_key();
    builder b;
    rapidjson::Reader reader;
    const std::string text(claims_json);  // NUL-terminated for the stream
    rapidjson::StringStream in(text.c_str());
    constexpr unsigned kFlags = rapidjson::kParseNumbersAsStringsFlag |
                                rapidjson::kParseIterativeFlag |
                                rapidjson::kParseValidateEncodingFlag;
    if (reader.Parse<kFlags>(in, b).IsError() || b.duplicate || b.root.type != 'o') {
        return whole_key();
    }
    std::string key = "p";
    for (const auto& p : r.paths) {
        const jnode* cur = &b.root;
        std::string part;
        std::size_t depth = 0;
        for (; depth < p.size(); ++depth) {
            if (cur->type == 'a') break;  // an array on the way is taken whole
            if (cur->type != 'o') {
                cur = nullptr;
                break;
            }
            const jnode* next = nullptr;
            for (const auto& [k, v] : cur->members) {
                if (k == p[depth].key) next = &v;  // the last one, as json and jsonb read it
            }
            cur = next;
            if (!cur) break;
        }
        if (!cur) {
            part = "m" + std::to_string(depth);
        } else {
            part = (depth < p.size() ? "A" : "v") + std::to_string(depth) + ":";
            canonical(*cur, part);
        }
        key += std::to_string(part.size()) + ':' + part;
    }
    return key;
}

}  // namespace awp::realtime::claims
