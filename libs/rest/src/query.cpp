// The statement of each kind of data-API request (query.hpp): a read, a write (insert, upsert,
// PUT, update, delete) or a function call, each ONE statement whose one row carries the body
// Postgres built, the counts and the response.* settings — so a request is one round trip and
// row-level security is the only thing that decides what a caller sees or changes.
#include "awp/rest/query.hpp"

#include <algorithm>
#include <set>

#include "plan.hpp"
#include "sql_text.hpp"

namespace awp::rest {

using detail::binder;
using detail::ident;
using detail::level;
using detail::literal;
using detail::qname;

namespace {

constexpr const char* kHeaders =
    "nullif(current_setting('response.headers', true), '') AS response_headers, "
    "nullif(current_setting('response.status', true), '') AS response_status";

constexpr const char* kInsertedUp =
    "set_config('pgrst.inserted', (coalesce(nullif(current_setting('pgrst.inserted', true), "
    "'')::int, 0) + 1)::text, true) IS NOT NULL";
constexpr const char* kInsertedDown =
    "set_config('pgrst.inserted', (coalesce(nullif(current_setting('pgrst.inserted', true), "
    "'')::int, 0) - 1)::text, true) IS NOT NULL";

std::string media_name(const media_type& m) {
    if (!m.raw.empty()) return m.raw;
    switch (m.kind) {
        case media::json:
            return "application/json";
        case media::object:
            return "application/vnd.pgrst.object+json";
        case media::csv:
            return "text/csv";
        default:
            return "*/*";
    }
}

/// The response media type: the first acceptable one the client accepts.
media_type negotiate(const prepared& p, const options& o) {
    const auto& accept = p.req.accept;
    if (accept.empty()) return media_type{};
    std::vector<std::string> names;
    for (const auto& m : accept) {
        switch (m.kind) {
            case media::json:
            case media::object:
            case media::object_nulls:
            case media::array_nulls:
            case media::csv:
                return m;
            case media::any: {
                media_type j;
                return j;
            }
            case media::geojson:
                return m;
            case media::plan:
                if (o.plan) return m;
                break;
            case media::text:
            case media::xml:
            case media::octet:
                if (p.is_call && p.call_scalar) return m;
                break;
            default:
                break;
        }
        names.push_back(media_name(m));
    }
    std::string list;
    for (std::size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + names[i];
    throw api_error(406, "PGRST107", "None of these media types are available: " + list);
}

std::string content_type_of(const media_type& m) {
    switch (m.kind) {
        case media::object:
            return "application/vnd.pgrst.object+json; charset=utf-8";
        case media::object_nulls:
            return "application/vnd.pgrst.object+json; nulls=stripped; charset=utf-8";
        case media::array_nulls:
            return "application/vnd.pgrst.array+json; nulls=stripped; charset=utf-8";
        case media::csv:
            return "text/csv; charset=utf-8";
        case media::text:
            return "text/plain; charset=utf-8";
        case media::xml:
            return "text/xml; charset=utf-8";
        case media::octet:
            return "application/octet-stream";
        case media::geojson:
            return "application/geo+json; charset=utf-8";
        case media::plan:
            return m.plan_text ? "application/vnd.pgrst.plan+text; charset=utf-8"
                               : "application/vnd.pgrst.plan+json; charset=utf-8";
        default:
            return "application/json; charset=utf-8";
    }
}

bool strips_nulls(const media_type& m) {
    return m.kind == media::object_nulls || m.kind == media::array_nulls;
}

/// The body expression over _postgrest_t.
std::string body_expr(const prepared& p, bool scalar) {
    if (!p.returns_body) return "''";
    const auto strip = [&](std::string e) {
        return strips_nulls(p.out) ? "json_strip_nulls(" + e + ")" : e;
    };
    const std::string row = scalar ? "_postgrest_t.pgrst_scalar" : "_postgrest_t";
    if (p.out.kind == media::csv) {
        return "(SELECT coalesce(string_agg(a.k, ','), '') FROM (SELECT json_object_keys(r)::text "
               "AS k FROM (SELECT row_to_json(hh) AS r FROM pgrst_source AS hh LIMIT 1) s) a) || "
               "E'\\n' || coalesce(string_agg(substring(_postgrest_t::text, 2, "
               "length(_postgrest_t::text) - 2), E'\\n'), '')";
    }
    if (p.out.kind == media::geojson) {
        // PostGIS' ST_AsGeoJSON of each row (a database without PostGIS answers 42883).
        return "json_build_object('type', 'FeatureCollection', 'features', "
               "coalesce(json_agg(ST_AsGeoJSON(_postgrest_t)::json), '[]'))::text";
    }
    if (p.out.kind == media::text || p.out.kind == media::xml) {
        return "coalesce(string_agg(" + row + "::text, ''), '')";
    }
    if (p.out.kind == media::octet) {
        return "coalesce(string_agg(" + row + "::text, ''), '')";
    }
    if (p.single_object || (p.is_call && p.call_single)) {
        return "coalesce((" + strip("json_agg(" + row + ")->0") + ")::text, 'null')";
    }
    return "coalesce(" + strip("json_agg(" + row + ")") + ", '[]')::text";
}

std::optional<row_range> restricted(row_range r, const std::optional<std::int64_t>& max_rows) {
    if (max_rows && (!r.limit || *r.limit > *max_rows)) r.limit = *max_rows;
    if (r.offset == 0 && !r.limit) return std::nullopt;
    return r;
}

std::string explain(const std::string& sql) { return "EXPLAIN (FORMAT JSON) " + sql; }

// ---- reads ----------------------------------------------------------------------------------

/// Every relation a level reads, its embeds' included, is a table without row-level security:
/// the role's rows are the table's.
bool rows_are_the_tables(const detail::level& l) {
    if (!l.tbl || l.tbl->is_view() || l.tbl->rls) return false;
    if (l.rel && l.rel->card == cardinality::computed) return false;
    return std::all_of(l.kids.begin(), l.kids.end(), rows_are_the_tables);
}

/// count=planned|estimated come from the planner's statistics, which count every row of a
/// table, other tenants' included: `tenant_id=eq.<another tenant>` with count=planned told that
/// tenant's row count (issue 37, finding 5). They are answered only where the role's rows are
/// the table's (a role that bypasses row-level security, or tables without it); anyone else
/// gets the exact count of what it may see (Preference-Applied says count=exact).
void exact_unless_estimate_is_safe(api_request& r, const options& o, bool rows_are_the_tables) {
    if ((r.prefer.count == prefer_count::planned || r.prefer.count == prefer_count::estimated) &&
        !o.role_bypasses_rls && !rows_are_the_tables) {
        r.prefer.count = prefer_count::exact;
    }
}

void prepare_read(prepared& p, const schema_cache& sc, const options& o) {
    auto& r = p.req;
    const qualified_name id{r.schema, r.target};
    const table& t = sc.find_table(id);
    level root = detail::build_level(sc, id, &t, r.target, r.select, o.aggregates, o.max_joins);
    detail::place_conditions(root, r, true);
    exact_unless_estimate_is_safe(r, o, rows_are_the_tables(root));
    binder b;
    std::string select = detail::render_select(root, b);
    const auto range = detail::render_range(restricted(r.top_range, o.max_rows));
    if (!range.empty()) select += " " + range;
    std::string count_cte;
    std::string total = "null::bigint";
    if (r.prefer.count == prefer_count::exact || r.prefer.count == prefer_count::estimated) {
        std::string count = detail::render_count(root, b);
        if (r.prefer.count == prefer_count::estimated && o.max_rows) {
            count += " LIMIT " + std::to_string(*o.max_rows + 1);
        }
        count_cte = ", pgrst_source_count AS (" + count + ")";
        total = "(SELECT pg_catalog.count(*) FROM pgrst_source_count)";
    }
    if (r.prefer.count == prefer_count::planned || r.prefer.count == prefer_count::estimated) {
        binder eb;
        p.planned_count = statement{explain(detail::render_count(root, eb)), eb.take()};
    }
    p.main.sql = "WITH pgrst_source AS ( " + select + " )" + count_cte + " SELECT " + total +
                 " AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, " +
                 body_expr(p, false) + " AS body, " + kHeaders +
                 ", NULL::text AS location, NULL::int AS inserted FROM ( SELECT * FROM "
                 "pgrst_source ) _postgrest_t";
    p.main.params = b.take();
}

// ---- writes ---------------------------------------------------------------------------------

/// The insert's columns: columns= when given, else the body's keys; each must exist (PGRST204).
std::vector<const column*> write_columns(const api_request& r, const table& t) {
    std::vector<const column*> out;
    const auto& names = r.columns ? *r.columns : r.body_keys;
    std::set<std::string> seen;
    for (const auto& n : names) {
        if (!seen.insert(n).second) continue;
        const column* c = t.find(n);
        if (!c) {
            throw api_error(
                400, "PGRST204",
                "Could not find the '" + n + "' column of '" + t.id.name + "' in the schema cache");
        }
        out.push_back(c);
    }
    return out;
}

/// `FROM ... pgrst_body` rows of the body: one per object, typed as the columns.
std::string body_rows(const api_request& r, const std::vector<const column*>& cols,
                      const std::string& payload, bool defaults) {
    const std::string arr = "(CASE WHEN json_typeof(" + payload + "::json) = 'array' THEN " +
                            payload + "::json ELSE json_build_array(" + payload + "::json) END)";
    if (cols.empty()) return "json_array_elements(" + arr + ") AS pgrst_body";
    std::string typed;
    for (std::size_t i = 0; i < cols.size(); ++i) {
        typed += (i ? ", " : "") + ident(cols[i]->name) + " " + cols[i]->type;
    }
    if (defaults) {
        std::string defs;
        for (const auto* c : cols) {
            if (c->default_expr.empty()) continue;
            defs += (defs.empty() ? "" : ", ") + literal(c->name) + ", " + c->default_expr;
        }
        if (!defs.empty()) {
            const std::string filled = "(SELECT jsonb_agg(jsonb_build_object(" + defs +
                                       ") || pgrst_e) FROM jsonb_array_elements(" + arr +
                                       "::jsonb) AS pgrst_e)";
            return "jsonb_to_recordset(" + filled + ") AS pgrst_body(" + typed + ")";
        }
    }
    (void)r;
    return "json_to_recordset(" + arr + ") AS pgrst_body(" + typed + ")";
}

/// The columns the conflict target names: on_conflict= or the primary key.
std::vector<std::string> conflict_target(const api_request& r, const table& t) {
    if (r.on_conflict) {
        for (const auto& c : *r.on_conflict) {
            if (!t.find(c)) {
                throw api_error(400, "PGRST204",
                                "Could not find the '" + c + "' column of '" + t.id.name +
                                    "' in the schema cache");
            }
        }
        return *r.on_conflict;
    }
    return t.primary_key;
}

/// Filters of a PUT: all and only the primary key's columns, each with eq (PGRST105 else).
std::vector<std::pair<std::string, std::string>> put_keys(const api_request& r, const table& t) {
    std::vector<std::pair<std::string, std::string>> keys;
    for (const auto& [path, f] : r.filters) {
        if (!path.empty()) continue;
        if (f.expr.op != op::eq || f.expr.negated || f.expr.quant != quantifier::none ||
            !f.fld.path.empty()) {
            keys.clear();
            break;
        }
        keys.emplace_back(f.fld.name, f.expr.value);
    }
    std::set<std::string> names;
    for (const auto& [k, v] : keys) names.insert(k);
    const std::set<std::string> pk(t.primary_key.begin(), t.primary_key.end());
    if (keys.empty() || names != pk || keys.size() != pk.size() || !r.logic.empty()) {
        throw api_error(405, "PGRST105",
                        "Filters must include all and only primary key columns with 'eq' "
                        "operators");
    }
    return keys;
}

std::string mutation_sql(const api_request& r, const table& t, const level& where_level, binder& b,
                         bool returning_rows) {
    const std::string target = qname(t.id) + " AS " + ident(t.id.name);
    const std::string returning =
        returning_rows ? " RETURNING " + ident(t.id.name) + ".*" : " RETURNING 1";
    std::vector<std::string> conds;
    for (const auto& c : where_level.where)
        conds.push_back(detail::render_logic(where_level, c, b));
    auto where_sql = [&](const std::string& prefix) {
        if (conds.empty()) return std::string();
        std::string s = prefix;
        for (std::size_t i = 0; i < conds.size(); ++i) s += (i ? " AND " : "") + conds[i];
        return s;
    };
    // PATCH and DELETE with limit (and order): the rows a SELECT of the same filters picks
    // first, by ctid (tables only; a view answers Postgres' own error).
    auto limited_where = [&]() {
        if (!r.top_range.limit && r.top_range.offset == 0) return where_sql(" WHERE ");
        const auto me = ident(t.id.name);
        return " WHERE " + me + ".ctid = ANY (ARRAY(SELECT " + me + ".ctid FROM " + target +
               where_sql(" WHERE ") + detail::render_order(where_level, b) + " " +
               detail::render_range(r.top_range) + "))";
    };
    switch (r.action) {
        case action::insert:
        case action::upsert_one: {
            const auto cols = write_columns(r, t);
            const std::string payload = b.bind(r.body);
            const bool defaults =
                r.prefer.missing == prefer_missing::apply_defaults && r.action == action::insert;
            std::string sql = "INSERT INTO " + target;
            if (!cols.empty()) {
                sql += "(";
                for (std::size_t i = 0; i < cols.size(); ++i) {
                    sql += (i ? ", " : "") + ident(cols[i]->name);
                }
                sql += ")";
            }
            sql += " SELECT ";
            for (std::size_t i = 0; i < cols.size(); ++i) {
                sql += (i ? ", " : "") + std::string("pgrst_body.") + ident(cols[i]->name);
            }
            sql += " FROM " + body_rows(r, cols, payload, defaults);
            const bool put = r.action == action::upsert_one;
            const bool merge = put || r.prefer.resolution == prefer_resolution::merge_duplicates;
            std::vector<std::string> wh;
            if (put) {
                for (const auto& [k, v] : put_keys(r, t)) {
                    wh.push_back("pgrst_body." + ident(k) + " = " + b.bind(v));
                }
            }
            const auto target_cols = conflict_target(r, t);
            const bool upsert =
                put || (r.prefer.resolution != prefer_resolution::none && !target_cols.empty());
            if (upsert && merge) wh.emplace_back(kInsertedUp);
            if (!wh.empty()) {
                sql += " WHERE ";
                for (std::size_t i = 0; i < wh.size(); ++i) sql += (i ? " AND " : "") + wh[i];
            }
            if (upsert) {
                sql += " ON CONFLICT(";
                for (std::size_t i = 0; i < target_cols.size(); ++i) {
                    sql += (i ? ", " : "") + ident(target_cols[i]);
                }
                sql += ") ";
                if (!merge || cols.empty()) {
                    sql += "DO NOTHING";
                } else {
                    sql += "DO UPDATE SET ";
                    for (std::size_t i = 0; i < cols.size(); ++i) {
                        sql += (i ? ", " : "") + ident(cols[i]->name) + " = EXCLUDED." +
                               ident(cols[i]->name);
                    }
                    sql += std::string(" WHERE ") + kInsertedDown;
                }
            }
            return sql + returning;
        }
        case action::update: {
            const auto cols = write_columns(r, t);
            if (cols.empty()) {
                return "SELECT " + ident(t.id.name) + ".* FROM " + target + " WHERE false";
            }
            const std::string payload = b.bind(r.body);
            std::string typed;
            std::string set;
            for (std::size_t i = 0; i < cols.size(); ++i) {
                typed += (i ? ", " : "") + ident(cols[i]->name) + " " + cols[i]->type;
                set += (i ? ", " : "") + ident(cols[i]->name) + " = pgrst_body." +
                       ident(cols[i]->name);
            }
            std::string sql = "UPDATE " + target + " SET " + set + " FROM (SELECT * FROM " +
                              (r.body_is_array ? "json_to_recordset(" : "json_to_record(") +
                              payload + "::json) AS _(" + typed + ") LIMIT 1) pgrst_body";
            return sql + limited_where() + returning;
        }
        case action::remove: {
            return "DELETE FROM " + target + limited_where() + returning;
        }
        default:
            break;
    }
    throw api_error(405, "PGRST117", "Unsupported HTTP method: " + r.method);
}

void prepare_write(prepared& p, const schema_cache& sc, const options& o) {
    auto& r = p.req;
    const qualified_name id{r.schema, r.target};
    const table& t = sc.find_table(id);
    p.mutation = true;
    if (r.action == action::upsert_one && r.body_is_array) {
        throw api_error(400, "PGRST102", "PUT payload must contain a single row");
    }
    if ((r.action == action::insert || r.action == action::upsert_one ||
         r.action == action::update) &&
        r.body_empty && !r.columns) {
        // PostgREST reads an empty body as {} (no columns); keep that.
    }
    p.location = r.action == action::insert && r.prefer.ret == prefer_return::headers_only &&
                 !t.primary_key.empty();
    p.location_base = "/" + t.id.name;
    p.location_keys = t.primary_key;
    // Filters on the target go with the write; filters below it shape the answer's embeds.
    level where_level = detail::build_level(sc, id, &t, t.id.name, {}, o.aggregates);
    for (const auto& [path, f] : r.filters) {
        if (!path.empty()) continue;
        logic_tree lt;
        lt.is_leaf = true;
        lt.leaf = f;
        where_level.where.push_back(std::move(lt));
    }
    for (const auto& [path, lt] : r.logic) {
        if (path.empty()) where_level.where.push_back(lt);
    }
    if (r.action == action::upsert_one) where_level.where.clear();
    for (const auto& [path, terms] : r.order) {
        if (path.empty()) where_level.order = terms;
    }
    const bool rows = p.returns_body || p.location;
    binder b;
    std::string mutation = mutation_sql(r, t, where_level, b, rows);
    std::string outer_from = "SELECT * FROM pgrst_source";
    if (p.returns_body) {
        level root =
            detail::build_level(sc, id, &t, t.id.name, r.select, o.aggregates, o.max_joins);
        root.source_sql = "pgrst_source";
        detail::place_conditions(root, r, false);
        root.where.clear();
        root.order.clear();
        outer_from = detail::render_select(root, b);
    }
    std::string location = "NULL::text";
    if (p.location) {
        std::string pks;
        for (std::size_t i = 0; i < t.primary_key.size(); ++i) {
            pks += (i ? ", " : "") + literal(t.primary_key[i]);
        }
        location =
            "(SELECT json_object_agg(kv.k, kv.v)::text FROM (SELECT row_to_json(_) AS r "
            "FROM pgrst_source AS _ LIMIT 1) d, json_each_text(d.r) AS kv(k, v) WHERE "
            "kv.k IN (" +
            pks + "))";
    }
    const bool upsert =
        r.action == action::upsert_one ||
        (r.action == action::insert && r.prefer.resolution == prefer_resolution::merge_duplicates);
    const std::string inserted =
        upsert ? "nullif(current_setting('pgrst.inserted', true), '')::int" : "NULL::int";
    p.main.sql = "WITH pgrst_source AS (" + mutation +
                 ") SELECT '' AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, " +
                 body_expr(p, false) + " AS body, " + kHeaders + ", " + location +
                 " AS location, " + inserted + " AS inserted FROM (" + outer_from +
                 ") _postgrest_t";
    p.main.params = b.take();
}

// ---- calls ----------------------------------------------------------------------------------

void prepare_call(prepared& p, const schema_cache& sc, const options& o) {
    auto& r = p.req;
    const qualified_name id{r.schema, r.target};
    std::vector<std::string> keys;
    const bool post = !r.read_only;
    if (post) {
        keys = r.columns ? *r.columns : r.body_keys;
    } else {
        std::set<std::string> seen;
        for (const auto& [k, v] : r.rpc_args) {
            if (seen.insert(k).second) keys.push_back(k);
        }
    }
    const bool body_is_object = post && !r.body_is_array;
    const auto match =
        sc.find_function(id, keys, body_is_object, r.prefer.params_single_object, r.read_only);
    const function& fn = *match.fn;
    // A function's rows are whatever it decides to return for the caller.
    exact_unless_estimate_is_safe(r, o, false);
    if (r.read_only && fn.volatility == 'v') {
        // GET and HEAD change nothing: a VOLATILE function may (a write, a NOTIFY, a sequence),
        // so it is not called read-only at all. PostgREST answers the same status and code when
        // such a function writes (its read-only transaction refuses: 25006 -> 405); here the
        // function is never started.
        api_error e(
            405, "25006",
            "cannot execute " + fn.id.schema + "." + fn.id.name + "() in a read-only transaction",
            "The function is VOLATILE: GET and HEAD run read-only and do not call it.",
            "Call it with POST, or declare it STABLE if it changes nothing.");
        e.headers.emplace_back("Allow", "OPTIONS,POST");
        throw e;
    }
    p.is_call = true;
    p.call_void = fn.returns_void;
    p.call_scalar = !fn.returns_composite && !fn.returns_void;
    p.call_single = !fn.returns_set;  // SETOF ... ROWS 1 still answers an array
    p.out = negotiate(p, o);
    p.single_object = p.out.kind == media::object || p.out.kind == media::object_nulls;
    binder b;
    std::string args;
    std::string args_from;
    auto param_of = [&](const std::string& name) -> const function_param* {
        for (const auto& fp : fn.params) {
            if (fp.name == name) return &fp;
        }
        return nullptr;
    };
    // One parameter without a name: the whole body is that argument (PostgREST's OnePosParam;
    // a GET call passes its arguments as a JSON object).
    const bool positional =
        match.single_unnamed || (fn.params.size() == 1 && fn.params[0].name.empty());
    if (positional && !post) {
        std::string obj = "{";
        for (std::size_t i = 0; i < r.rpc_args.size(); ++i) {
            obj += (i ? "," : "") + detail::json_string(r.rpc_args[i].first) + ":" +
                   detail::json_string(r.rpc_args[i].second);
        }
        args = b.bind(obj + "}") + "::" + fn.params.front().type;
    } else if (positional) {
        const auto& fp = fn.params.front();
        args = b.bind(r.body_empty ? std::string() : r.body) + "::" + fp.type;
    } else if (post) {
        if (!keys.empty()) {
            const std::string payload = b.bind(r.body);
            std::string typed;
            for (std::size_t i = 0; i < keys.size(); ++i) {
                const auto* fp = param_of(keys[i]);
                typed += (i ? ", " : "") + ident(keys[i]) + " " + (fp ? fp->type : "text");
                args += (i ? ", " : "") + std::string(fp && fp->variadic ? "VARIADIC " : "") +
                        ident(keys[i]) + " := pgrst_args." + ident(keys[i]);
            }
            args_from = "json_to_record(" + payload + "::json) AS pgrst_args(" + typed + "), ";
        }
    } else {
        for (std::size_t i = 0; i < keys.size(); ++i) {
            const auto* fp = param_of(keys[i]);
            std::vector<std::string> values;
            for (const auto& [k, v] : r.rpc_args) {
                if (k == keys[i]) values.push_back(v);
            }
            std::string value;
            if (fp && fp->variadic) {
                value = b.bind(detail::array_literal(values));
            } else {
                value = b.bind(values.back());
            }
            args += (i ? ", " : "") + std::string(fp && fp->variadic ? "VARIADIC " : "") +
                    ident(keys[i]) + " := " + value + "::" + (fp ? fp->type : "text");
        }
    }
    const std::string call = qname(fn.id) + "(" + args + ")";
    std::string source;
    if (fn.returns_void) {
        source = "SELECT " + call + " AS pgrst_scalar" +
                 (args_from.empty() ? "" : " FROM " + args_from.substr(0, args_from.size() - 2));
    } else if (p.call_scalar) {
        source = "SELECT pgrst_call.pgrst_scalar FROM " + args_from + "LATERAL (SELECT " + call +
                 " AS pgrst_scalar) pgrst_call";
    } else {
        source = "SELECT pgrst_call.* FROM " + args_from + (args_from.empty() ? "" : "LATERAL ") +
                 call + " pgrst_call";
    }
    std::string outer = "SELECT * FROM pgrst_source";
    std::string count_sql = "SELECT 1 FROM pgrst_source";
    if (fn.returns_composite) {
        const qualified_name shape = fn.returns_table.value_or(fn.id);
        const table* t = fn.returns_table ? sc.try_table(*fn.returns_table) : nullptr;
        level root =
            detail::build_level(sc, shape, t, fn.id.name, r.select, o.aggregates, o.max_joins);
        root.source_sql = "pgrst_source";
        detail::place_conditions(root, r, true);
        // GET arguments are not filters (the grammar kept them apart).
        outer = detail::render_select(root, b);
        const auto range = detail::render_range(restricted(r.top_range, o.max_rows));
        if (!range.empty()) outer += " " + range;
        if (r.prefer.count == prefer_count::exact || r.prefer.count == prefer_count::estimated) {
            count_sql = detail::render_count(root, b);
        }
    } else if (!fn.returns_void) {
        const auto range = detail::render_range(restricted(r.top_range, o.max_rows));
        if (!range.empty()) outer += " " + range;
    }
    std::string count_cte;
    std::string total = "null::bigint";
    if (r.prefer.count == prefer_count::exact || r.prefer.count == prefer_count::estimated) {
        count_cte = ", pgrst_source_count AS (" + count_sql + ")";
        total = "(SELECT pg_catalog.count(*) FROM pgrst_source_count)";
    }
    const std::string page = p.call_single ? "1" : "pg_catalog.count(_postgrest_t)";
    p.main.sql = "WITH pgrst_source AS (" + source + ")" + count_cte + " SELECT " + total +
                 " AS total_result_set, " + page + " AS page_total, " +
                 (fn.returns_void ? std::string("''") : body_expr(p, p.call_scalar)) +
                 " AS body, " + kHeaders +
                 ", NULL::text AS location, NULL::int AS inserted FROM (" + outer +
                 ") _postgrest_t";
    p.main.params = b.take();
}

}  // namespace

prepared prepare(api_request req, const schema_cache& sc, const options& o) {
    prepared p;
    p.req = std::move(req);
    auto& r = p.req;
    if (r.action == action::root) {
        throw api_error(404, "PGRST126", "Root endpoint metadata is disabled");
    }
    if (r.action == action::info) {
        // No statement: respond() answers Allow from the cache.
        const qualified_name id{r.schema, r.target};
        if (r.target.rfind("rpc/", 0) == 0 || sc.functions.count(id)) {
            const auto it = sc.functions.find(id);
            bool is_volatile = it == sc.functions.end() || it->second.empty();
            if (!is_volatile) {
                for (const auto& f : it->second) is_volatile = is_volatile || f.volatility == 'v';
            }
            p.allow = is_volatile ? "OPTIONS,POST" : "OPTIONS,GET,HEAD,POST";
            return p;
        }
        const table& t = sc.find_table(id);
        p.allow = "OPTIONS,GET,HEAD";
        if (t.insertable) p.allow += ",POST";
        if (t.insertable && t.updatable && !t.primary_key.empty()) p.allow += ",PUT";
        if (t.updatable) p.allow += ",PATCH";
        if (t.deletable) p.allow += ",DELETE";
        return p;
    }
    p.is_call = r.action == action::call;
    const bool mutation = r.action == action::insert || r.action == action::upsert_one ||
                          r.action == action::update || r.action == action::remove;
    if (mutation) {
        p.returns_body = r.prefer.ret == prefer_return::representation;
    } else {
        p.returns_body = !r.head;
    }
    // Media: negotiated before the statement (a call's scalar-ness is known after resolution,
    // so calls negotiate again below).
    if (!p.is_call) {
        p.out = negotiate(p, o);
        p.single_object = p.out.kind == media::object || p.out.kind == media::object_nulls;
    }
    switch (r.action) {
        case action::read:
            prepare_read(p, sc, o);
            break;
        case action::insert:
        case action::upsert_one:
        case action::update:
        case action::remove:
            prepare_write(p, sc, o);
            break;
        case action::call:
            prepare_call(p, sc, o);
            break;
        default:
            break;
    }
    p.content_type = content_type_of(p.out);
    p.decide_after =
        (r.prefer.tx == prefer_tx::rollback && o.tx_override) ||
        (p.single_object && !r.read_only) || r.action == action::upsert_one ||
        (r.prefer.max_affected && r.prefer.handling == prefer_handling::strict && !r.read_only);
    if (p.out.kind == media::plan) {
        std::string opts = "FORMAT " + std::string(p.out.plan_text ? "TEXT" : "JSON");
        for (const auto& opt : p.out.plan_options) {
            if (opt == "analyze" || opt == "verbose" || opt == "settings" || opt == "buffers" ||
                opt == "wal") {
                std::string up = opt;
                for (auto& c : up)
                    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                opts += ", " + up;
            }
        }
        p.main.sql = "EXPLAIN (" + opts + ") " + p.main.sql;
        p.decide_after = true;  // ANALYZE runs the statement: never keep its writes
    }
    return p;
}

std::string search_path(const std::string& schema, const std::vector<std::string>& extra) {
    // As PostgREST: the extra schemas follow even when the request's schema is among them.
    std::string out = ident(schema);
    for (const auto& e : extra) out += ", " + ident(e);
    return out;
}

statement setup_statement(const session_facts& f) {
    statement st;
    st.sql = "SELECT ";
    auto set = [&](std::string name, std::string value) {
        st.params.emplace_back(std::move(name));
        st.params.emplace_back(std::move(value));
        if (st.sql.size() > 7) st.sql += ", ";
        st.sql += "set_config($" + std::to_string(st.params.size() - 1) + ", $" +
                  std::to_string(st.params.size()) + ", true)";
    };
    set("role", f.role);
    set("request.jwt.claims", f.claims_json);
    if (!f.sub.empty()) set("request.jwt.claim.sub", f.sub);
    set("request.jwt.claim.role", f.role);
    set("request.method", f.method);
    set("request.path", f.path);
    set("request.headers", f.headers_json);
    set("search_path", f.search_path);
    bool role_timeout = false;
    for (const auto& [k, v] : f.role_settings) {
        if (k == "statement_timeout") role_timeout = true;
        set(k, v);
    }
    if (!role_timeout && !f.default_statement_timeout.empty()) {
        set("statement_timeout", f.default_statement_timeout);
    }
    if (f.read_only) set("transaction_read_only", "on");
    return st;
}

}  // namespace awp::rest
