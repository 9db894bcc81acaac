// The read plan (plan.hpp): levels built from the select tree and the schema cache, conditions
// placed by embed path, and the SELECT with LATERAL joins each level renders to. The shape of
// the SQL follows PostgREST's (aliases `<table>_<depth>`, json_agg per to-many embed,
// row_to_json per to-one), so errors Postgres raises name the same things.
#include "plan.hpp"

#include <algorithm>
#include <cctype>

namespace awp::rest::detail {

namespace {

std::string agg_name(aggregate a) {
    switch (a) {
        case aggregate::count:
            return "count";
        case aggregate::sum:
            return "sum";
        case aggregate::avg:
            return "avg";
        case aggregate::max:
            return "max";
        case aggregate::min:
            return "min";
        case aggregate::none:
            break;
    }
    return {};
}

/// The output name PostgREST gives a field that has no alias of its own.
std::string derived_alias(const select_item& it, bool spread) {
    if (!it.alias.empty()) return it.alias;
    if (it.agg != aggregate::none) return spread ? agg_name(it.agg) : std::string();
    if (it.fld.path.empty()) return {};
    const auto& last = it.fld.path.back();
    if (!last.is_index) return last.operand;
    for (auto s = it.fld.path.rbegin(); s != it.fld.path.rend(); ++s) {
        if (!s->is_index) return s->operand;
    }
    return it.fld.name;
}

field_plan to_field(const select_item& it, bool spread) {
    field_plan f;
    f.star = it.fld.name == "*" && it.agg == aggregate::none;
    f.count_star = it.fld.name == "*" && it.agg == aggregate::count;
    if (it.fld.name == "*" && !f.star && !f.count_star) {
        throw api_error(400, "PGRST100", "\"failed to parse select parameter\"",
                        "an aggregate of '*' other than count() is not supported");
    }
    if (!f.star && !f.count_star) f.column = it.fld.name;
    f.path = it.fld.path;
    if (!it.cast.empty()) f.cast_sql = sql_type(it.cast);
    f.agg = it.agg;
    if (!it.agg_cast.empty()) f.agg_cast_sql = sql_type(it.agg_cast);
    f.alias = derived_alias(it, spread);
    if (f.count_star && f.alias.empty()) f.alias = "count";
    return f;
}

/// The table a relationship's embed reads.
const table* target_table(const schema_cache& sc, const relationship& r) {
    return sc.try_table(r.foreign_table);
}

/// Expands `*` of a level into its columns (spreads name each field in the parent).
void expand_star(level& l) {
    if (!l.tbl) return;
    std::vector<field_plan> out;
    for (auto& f : l.fields) {
        if (!f.star) {
            out.push_back(std::move(f));
            continue;
        }
        for (const auto& c : l.tbl->columns) {
            field_plan g;
            g.column = c.name;
            out.push_back(std::move(g));
        }
    }
    l.fields = std::move(out);
}

level build(const schema_cache& sc, const qualified_name& from, const table* tbl, std::string alias,
            const std::vector<select_item>& items, bool aggregates, unsigned depth, bool spread) {
    level l;
    l.from = from;
    l.tbl = tbl;
    l.alias = std::move(alias);
    l.depth = depth;
    l.spread = spread;
    for (const auto& it : items) {
        if (it.what == select_item::kind::field) {
            if (it.agg != aggregate::none && !aggregates) {
                throw api_error(400, "PGRST123", "Use of aggregate functions is not allowed");
            }
            l.fields.push_back(to_field(it, spread));
            continue;
        }
        auto rel = sc.find_relationship(from, it.relation, it.hint);
        const auto kid_depth = depth + 1;
        const table* kt = target_table(sc, rel);
        level k = build(sc, rel.foreign_table, kt,
                        rel.foreign_table.name + "_" + std::to_string(kid_depth), it.children,
                        aggregates, kid_depth, it.what == select_item::kind::spread);
        k.name = it.relation;
        k.label = it.alias;
        k.out = it.alias.empty() ? it.relation : it.alias;
        k.agg_alias = from.name + "_" + k.out + "_" + std::to_string(kid_depth);
        k.join = it.join;
        k.rel = std::move(rel);
        k.empty = it.children.empty();
        if (k.spread) {
            expand_star(k);
            if (k.to_one()) {
                // Aggregates of a to-one spread are the parent's: the child hands the raw value.
                for (auto& f : k.fields) f.hoisted = f.agg != aggregate::none;
            } else {
                for (const auto& f : k.fields) {
                    if (f.agg != aggregate::none) {
                        throw api_error(400, "PGRST127", "Feature not implemented",
                                        "Aggregates are not implemented for one-to-many or "
                                        "many-to-many spreads.");
                    }
                }
            }
        }
        l.kids.push_back(std::move(k));
    }
    if (l.fields.empty() && l.kids.empty()) {
        field_plan star;
        star.star = true;
        l.fields.push_back(star);
    }
    return l;
}

level* find_level(level& root, const embed_path& path) {
    level* at = &root;
    for (const auto& step : path) {
        level* next = nullptr;
        for (auto& k : at->kids) {
            if ((!k.label.empty() && k.label == step) || (k.label.empty() && k.name == step)) {
                next = &k;
                break;
            }
        }
        if (!next) {
            for (auto& k : at->kids) {
                if (k.name == step) {
                    next = &k;
                    break;
                }
            }
        }
        if (!next) {
            throw api_error(
                400, "PGRST108", "'" + step + "' is not an embedded resource in this request", {},
                "Verify that '" + step + "' is included in the 'select' query parameter.");
        }
        at = next;
    }
    return at;
}

/// The joins a level's embeds make: one each, two through a many-to-many's junction.
std::size_t joins_of(const level& l) {
    std::size_t n = 0;
    for (const auto& k : l.kids) {
        n += (k.rel && k.rel->card == cardinality::many_to_many ? 2 : 1) + joins_of(k);
    }
    return n;
}

}  // namespace

level build_level(const schema_cache& sc, const qualified_name& from, const table* tbl,
                  std::string alias, const std::vector<select_item>& items, bool aggregates,
                  std::size_t max_joins) {
    level root = build(sc, from, tbl, std::move(alias), items, aggregates, 0, false);
    if (const auto n = joins_of(root); n > max_joins) {
        throw api_error(400, "PGRST100", "Too many joins",
                        "The embedded resources make " + std::to_string(n) +
                            " joins (a many-to-many counts two); at most " +
                            std::to_string(max_joins) + " are accepted.",
                        "Ask for fewer related resources in one request, or join them in a view.");
    }
    return root;
}

void place_conditions(level& root, const api_request& req, bool root_filters) {
    for (const auto& [path, f] : req.filters) {
        if (path.empty() && !root_filters) continue;
        logic_tree t;
        t.is_leaf = true;
        t.leaf = f;
        find_level(root, path)->where.push_back(std::move(t));
    }
    for (const auto& [path, t] : req.logic) {
        if (path.empty() && !root_filters) continue;
        find_level(root, path)->where.push_back(t);
    }
    for (const auto& [path, terms] : req.order) {
        auto* l = find_level(root, path);
        for (const auto& t : terms) {
            if (!t.relation.empty()) {
                const level* target = nullptr;
                for (const auto& k : l->kids) {
                    if (k.out == t.relation || k.name == t.relation) target = &k;
                }
                if (!target) {
                    throw api_error(
                        400, "PGRST108",
                        "'" + t.relation + "' is not an embedded resource in this request", {},
                        "Verify that '" + t.relation +
                            "' is included in the 'select' query parameter.");
                }
                if (!target->to_one()) {
                    throw api_error(400, "PGRST118",
                                    "A related order on '" + t.relation + "' is not possible",
                                    "'" + l->from.name + "' and '" + t.relation +
                                        "' do not form a many-to-one or one-to-one relationship");
                }
            }
            l->order.push_back(t);
        }
    }
    for (const auto& [path, r] : req.ranges) {
        if (path.empty()) continue;  // the top level's comes with req.top_range
        find_level(root, path)->range = r;
    }
}

// ---- rendering ------------------------------------------------------------------------------

namespace {

std::string json_steps(const json_path& p, binder& b) {
    std::string out;
    for (const auto& s : p) {
        out += s.as_text ? "->>" : "->";
        out += s.is_index ? b.bind(s.operand) + "::int" : b.bind(s.operand) + "::text";
    }
    return out;
}

std::string column_expr(const level& l, const std::string& column, const json_path& path,
                        binder& b) {
    return l.ref() + "." + ident(column) + json_steps(path, b);
}

std::string field_expr(const level& l, const field_plan& f, binder& b) {
    std::string e;
    if (f.star) {
        e = l.ref() + ".*";
    } else if (f.count_star) {
        e = "*";
    } else {
        e = column_expr(l, f.column, f.path, b);
    }
    if (!f.cast_sql.empty() && !f.count_star) e = "CAST(" + e + " AS " + f.cast_sql + ")";
    if (f.hoisted) return f.count_star ? std::string("1") : e;
    if (f.agg != aggregate::none) {
        std::string fn = agg_name(f.agg);
        for (auto& c : fn) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        e = fn + "(" + e + ")";
        if (!f.agg_cast_sql.empty()) e = "CAST(" + e + " AS " + f.agg_cast_sql + ")";
    }
    return e;
}

/// The name a field gets in the level's output (for spreads and GROUP BY).
std::string field_out(const field_plan& f) {
    if (!f.alias.empty()) return f.alias;
    if (f.count_star) return "count";
    if (f.agg != aggregate::none) return agg_name(f.agg);
    return f.column;
}

const level* kid_named(const level& l, std::string_view name) {
    for (const auto& k : l.kids) {
        if (k.out == name || (k.label.empty() && k.name == name)) return &k;
    }
    return nullptr;
}

const column* column_of(const level& l, std::string_view name) {
    return l.tbl ? l.tbl->find(name) : nullptr;
}

std::string replace_stars(std::string v) {
    for (auto& c : v) {
        if (c == '*') c = '%';
    }
    return v;
}

std::string quantified(quantifier q, const std::string& placeholder) {
    switch (q) {
        case quantifier::any:
            return "ANY(" + placeholder + ")";
        case quantifier::all:
            return "ALL(" + placeholder + ")";
        case quantifier::none:
            break;
    }
    return placeholder;
}

std::string render_filter(const level& l, const filter& f, binder& b) {
    const auto& e = f.expr;
    // A filter on an embed's name: `embed=is.null` / `embed=not.is.null` (PostgREST's null
    // embed filter) tests whether the embed found rows.
    if (f.fld.path.empty() && !column_of(l, f.fld.name)) {
        if (const level* k = kid_named(l, f.fld.name)) {
            if (e.op != op::is || (e.is != is_value::null && e.is != is_value::not_null)) {
                throw api_error(400, "PGRST120",
                                "Bad operator on the '" + f.fld.name + "' embedded resource",
                                "Only is null or not is null filters are allowed on embedded "
                                "resources");
            }
            const bool is_null = (e.is == is_value::null) != e.negated;
            return ident(k->agg_alias) +
                   (is_null ? " IS NOT DISTINCT FROM NULL" : " IS DISTINCT FROM NULL");
        }
    }
    std::string lhs = column_expr(l, f.fld.name, f.fld.path, b);
    std::string cond;
    auto val = [&](std::string v) { return b.bind(std::move(v)); };
    switch (e.op) {
        case op::eq:
            cond = lhs + " = " + quantified(e.quant, val(e.value));
            break;
        case op::gt:
            cond = lhs + " > " + quantified(e.quant, val(e.value));
            break;
        case op::gte:
            cond = lhs + " >= " + quantified(e.quant, val(e.value));
            break;
        case op::lt:
            cond = lhs + " < " + quantified(e.quant, val(e.value));
            break;
        case op::lte:
            cond = lhs + " <= " + quantified(e.quant, val(e.value));
            break;
        case op::like:
            cond = lhs + " LIKE " + quantified(e.quant, val(replace_stars(e.value)));
            break;
        case op::ilike:
            cond = lhs + " ILIKE " + quantified(e.quant, val(replace_stars(e.value)));
            break;
        case op::match:
            cond = lhs + " ~ " + quantified(e.quant, val(e.value));
            break;
        case op::imatch:
            cond = lhs + " ~* " + quantified(e.quant, val(e.value));
            break;
        case op::neq:
            cond = lhs + " <> " + val(e.value);
            break;
        case op::cs:
            cond = lhs + " @> " + val(e.value);
            break;
        case op::cd:
            cond = lhs + " <@ " + val(e.value);
            break;
        case op::ov:
            cond = lhs + " && " + val(e.value);
            break;
        case op::sl:
            cond = lhs + " << " + val(e.value);
            break;
        case op::sr:
            cond = lhs + " >> " + val(e.value);
            break;
        case op::nxr:
            cond = lhs + " &< " + val(e.value);
            break;
        case op::nxl:
            cond = lhs + " &> " + val(e.value);
            break;
        case op::adj:
            cond = lhs + " -|- " + val(e.value);
            break;
        case op::isdistinct:
            cond = lhs + " IS DISTINCT FROM " + val(e.value);
            break;
        case op::in:
            if (e.list.size() == 1 && e.list.front().empty()) {
                cond = lhs + " = ANY('{}')";
            } else {
                cond = lhs + " = ANY (" + val(array_literal(e.list)) + ")";
            }
            break;
        case op::is:
            switch (e.is) {
                case is_value::null:
                    cond = lhs + " IS NULL";
                    break;
                case is_value::not_null:
                    cond = lhs + " IS NOT NULL";
                    break;
                case is_value::true_:
                    cond = lhs + " IS TRUE";
                    break;
                case is_value::false_:
                    cond = lhs + " IS FALSE";
                    break;
                case is_value::unknown:
                    cond = lhs + " IS UNKNOWN";
                    break;
            }
            break;
        case op::fts:
        case op::plfts:
        case op::phfts:
        case op::wfts: {
            const char* fn = e.op == op::fts     ? "to_tsquery"
                             : e.op == op::plfts ? "plainto_tsquery"
                             : e.op == op::phfts ? "phraseto_tsquery"
                                                 : "websearch_to_tsquery";
            const std::string lang = e.language.empty() ? "" : val(e.language) + "::regconfig, ";
            // A text or json column is searched through to_tsvector (PostgREST does the same).
            const column* c = f.fld.path.empty() ? column_of(l, f.fld.name) : nullptr;
            const bool as_vector =
                !f.fld.path.empty() ||
                (c && c->base_type != "tsvector" &&
                 (c->category == 'S' || c->base_type == "json" || c->base_type == "jsonb"));
            if (as_vector) lhs = "to_tsvector(" + lang + lhs + ")";
            cond = lhs + " @@ " + fn + "(" + lang + val(e.value) + ")";
            break;
        }
    }
    return e.negated ? "NOT " + cond : cond;
}

}  // namespace

std::string render_order(const level& l, binder& b) {
    if (l.order.empty()) return {};
    std::string out = " ORDER BY ";
    bool first = true;
    for (const auto& t : l.order) {
        if (!first) out += ", ";
        first = false;
        if (t.relation.empty()) {
            out += column_expr(l, t.fld.name, t.fld.path, b);
        } else {
            const level* k = nullptr;
            for (const auto& kid : l.kids) {
                if (kid.out == t.relation || kid.name == t.relation) k = &kid;
            }
            out += ident(k ? k->agg_alias : t.relation) + "." + ident(t.fld.name) +
                   json_steps(t.fld.path, b);
        }
        if (t.dir == order_dir::asc) out += " ASC";
        if (t.dir == order_dir::desc) out += " DESC";
        if (t.nulls == order_nulls::first) out += " NULLS FIRST";
        if (t.nulls == order_nulls::last) out += " NULLS LAST";
    }
    return out;
}

namespace {

/// The join conditions of an embed with its parent `p`.
std::vector<std::string> join_conditions(const level& p, const level& k) {
    std::vector<std::string> out;
    const auto& r = *k.rel;
    switch (r.card) {
        case cardinality::many_to_one:
        case cardinality::one_to_many:
        case cardinality::one_to_one:
            for (const auto& [pc, kc] : r.columns) {
                out.push_back(k.ref() + "." + ident(kc) + " = " + p.ref() + "." + ident(pc));
            }
            break;
        case cardinality::many_to_many:
            for (const auto& [pc, jc] : r.junction_source_columns) {
                out.push_back(qname(r.junction) + "." + ident(jc) + " = " + p.ref() + "." +
                              ident(pc));
            }
            for (const auto& [jc, kc] : r.junction_target_columns) {
                out.push_back(k.ref() + "." + ident(kc) + " = " + qname(r.junction) + "." +
                              ident(jc));
            }
            break;
        case cardinality::computed:
            break;
    }
    return out;
}

std::string from_clause(const level& l, const level* parent) {
    std::string out = " FROM ";
    if (l.rel && l.rel->card == cardinality::computed && parent) {
        out += qname(l.rel->function) + "(" + parent->ref() + "::" + qname(l.rel->table) + ")";
    } else if (!l.source_sql.empty()) {
        out += l.source_sql;
    } else {
        out += qname(l.from);
    }
    out += " AS " + l.ref();
    if (l.rel && l.rel->card == cardinality::many_to_many) out += ", " + qname(l.rel->junction);
    return out;
}

std::string select_of(const level& l, const level* parent, binder& b);

/// The parent's select item(s) for an embed and the LATERAL join that feeds them.
void embed_parts(const level& k, const level& parent, binder& b, std::vector<std::string>& items,
                 std::string& joins) {
    const auto agg = ident(k.agg_alias);
    const auto sub = select_of(k, &parent, b);
    const bool inner = k.join == join_type::inner;
    if (k.to_one()) {
        joins += std::string(inner ? " INNER" : " LEFT") + " JOIN LATERAL ( " + sub + " ) AS " +
                 agg + " ON TRUE";
        if (k.empty) return;
        if (k.spread) {
            for (const auto& f : k.fields) {
                const auto out = ident(field_out(f));
                if (!f.hoisted) {
                    items.push_back(agg + "." + out);
                    continue;
                }
                std::string fn = agg_name(f.agg);
                for (auto& c : fn)
                    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                std::string e = fn + "(" + agg + "." + out + ")";
                if (!f.agg_cast_sql.empty()) e = "CAST(" + e + " AS " + f.agg_cast_sql + ")";
                items.push_back(e + " AS " + out);
            }
            for (const auto& kk : k.kids) {
                if (!kk.empty) items.push_back(agg + "." + ident(kk.out));
            }
        } else {
            items.push_back("row_to_json(" + agg + ".*)::jsonb AS " + ident(k.out));
        }
        return;
    }
    std::string spread_cols;
    if (k.spread) {
        // A to-many spread: each of its fields becomes an array in the parent's object.
        for (const auto& f : k.fields) {
            const auto out = ident(field_out(f));
            spread_cols += ", COALESCE(json_agg(" + agg + "." + out + "), '[]')::jsonb AS " + out;
        }
        for (const auto& kk : k.kids) {
            if (kk.empty) continue;
            const auto out = ident(kk.out);
            spread_cols += ", COALESCE(json_agg(" + agg + "." + out + "), '[]')::jsonb AS " + out;
        }
    }
    joins += std::string(inner ? " INNER" : " LEFT") + " JOIN LATERAL ( SELECT json_agg(" + agg +
             ")::jsonb AS " + agg + spread_cols + " FROM (" + sub + " ) AS " + agg + " ) AS " +
             agg + " ON " + (inner ? agg + "." + agg + " IS NOT NULL" : std::string("TRUE"));
    if (k.empty) return;
    if (k.spread) {
        for (const auto& f : k.fields) items.push_back(agg + "." + ident(field_out(f)));
        for (const auto& kk : k.kids) {
            if (!kk.empty) items.push_back(agg + "." + ident(kk.out));
        }
        return;
    }
    items.push_back("COALESCE( " + agg + "." + agg + ", '[]') AS " + ident(k.out));
}

std::string select_of(const level& l, const level* parent, binder& b) {
    std::vector<std::string> items;
    std::vector<std::string> groups;
    bool aggregated = false;
    for (const auto& f : l.fields) {
        auto e = field_expr(l, f, b);
        if (f.agg != aggregate::none && !f.hoisted) {
            aggregated = true;
        } else if (!f.alias.empty()) {
            groups.push_back(ident(f.alias));
        } else {
            groups.push_back(e);
        }
        if (!f.alias.empty()) e += " AS " + ident(f.alias);
        items.push_back(std::move(e));
    }
    std::string joins;
    for (const auto& k : l.kids) {
        embed_parts(k, l, b, items, joins);
        if (k.empty) continue;
        if (k.spread) {
            for (const auto& f : k.fields) {
                if (f.hoisted) {
                    aggregated = true;
                } else {
                    groups.push_back(ident(k.agg_alias) + "." + ident(field_out(f)));
                }
            }
            for (const auto& kk : k.kids) {
                if (!kk.empty) groups.push_back(ident(k.agg_alias) + "." + ident(kk.out));
            }
        } else {
            groups.push_back(ident(k.out));
        }
    }
    std::string sql = "SELECT ";
    for (std::size_t i = 0; i < items.size(); ++i) sql += (i ? ", " : "") + items[i];
    sql += from_clause(l, parent);
    sql += joins;
    std::vector<std::string> conds;
    if (parent && l.rel) conds = join_conditions(*parent, l);
    for (const auto& t : l.where) conds.push_back(render_logic(l, t, b));
    if (!conds.empty()) {
        sql += " WHERE ";
        for (std::size_t i = 0; i < conds.size(); ++i) sql += (i ? " AND " : "") + conds[i];
    }
    if (aggregated && !groups.empty()) {
        sql += " GROUP BY ";
        for (std::size_t i = 0; i < groups.size(); ++i) sql += (i ? ", " : "") + groups[i];
    }
    sql += render_order(l, b);
    if (parent) {
        const auto r = render_range(l.range);
        if (!r.empty()) sql += " " + r;
    }
    return sql;
}

std::string count_of(const level& l, const level* parent, binder& b) {
    std::string sql = "SELECT 1" + from_clause(l, parent);
    std::vector<std::string> conds;
    if (parent && l.rel) conds = join_conditions(*parent, l);
    for (const auto& t : l.where) {
        // A null-embed filter counts through EXISTS over the embed (there is no LATERAL here).
        if (t.is_leaf && t.leaf.fld.path.empty() && !column_of(l, t.leaf.fld.name)) {
            if (const level* k = kid_named(l, t.leaf.fld.name)) {
                const bool is_null = (t.leaf.expr.is == is_value::null) != t.leaf.expr.negated;
                conds.push_back(std::string(is_null ? "NOT " : "") + "EXISTS (" +
                                count_of(*k, &l, b) + ")");
                continue;
            }
        }
        conds.push_back(render_logic(l, t, b));
    }
    for (const auto& k : l.kids) {
        if (k.join == join_type::inner) conds.push_back("EXISTS (" + count_of(k, &l, b) + ")");
    }
    if (!conds.empty()) {
        sql += " WHERE ";
        for (std::size_t i = 0; i < conds.size(); ++i) sql += (i ? " AND " : "") + conds[i];
    }
    return sql;
}

}  // namespace

std::string render_logic(const level& l, const logic_tree& t, binder& b) {
    if (t.is_leaf) return render_filter(l, t.leaf, b);
    std::string out = t.negated ? "NOT (" : "(";
    for (std::size_t i = 0; i < t.kids.size(); ++i) {
        if (i) out += t.is_or ? " OR " : " AND ";
        out += render_logic(l, t.kids[i], b);
    }
    return out + ")";
}

std::string render_range(const std::optional<row_range>& r) {
    if (!r || (r->offset == 0 && !r->limit)) return {};
    std::string out;
    out += "LIMIT " + (r->limit ? std::to_string(*r->limit) : std::string("ALL"));
    out += " OFFSET " + std::to_string(r->offset);
    return out;
}

std::string render_select(const level& l, binder& b) { return select_of(l, nullptr, b); }

std::string render_count(const level& l, binder& b) { return count_of(l, nullptr, b); }

}  // namespace awp::rest::detail
