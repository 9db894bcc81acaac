// The data API's schema cache (schema.hpp): decoded from the catalog statement's JSON, with
// PostgREST's relationship inference (foreign keys both ways, one-to-one, through views, many-to-
// many through junctions, computed relationships) and its resolution rules and error texts for
// embeds (findRel), functions (findProc) and tables.
#include "awp/rest/schema.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "awp/core/json.hpp"
#include "catalog_sql.hpp"
#include "fuzzy.hpp"

namespace awp::rest {

namespace {

using json_value = rapidjson::Value;

std::string str(const json_value& o, const char* k) {
    auto it = o.FindMember(k);
    if (it == o.MemberEnd() || !it->value.IsString()) return {};
    return {it->value.GetString(), it->value.GetStringLength()};
}

bool flag(const json_value& o, const char* k) {
    auto it = o.FindMember(k);
    return it != o.MemberEnd() && it->value.IsBool() && it->value.GetBool();
}

std::int64_t num(const json_value& o, const char* k) {
    auto it = o.FindMember(k);
    if (it == o.MemberEnd()) return 0;
    if (it->value.IsInt64()) return it->value.GetInt64();
    if (it->value.IsNumber()) return static_cast<std::int64_t>(it->value.GetDouble());
    if (it->value.IsString()) {
        try {
            return std::stoll(it->value.GetString());
        } catch (const std::exception&) {
            return 0;
        }
    }
    return 0;
}

std::vector<std::string> strings(const json_value& o, const char* k) {
    std::vector<std::string> out;
    auto it = o.FindMember(k);
    if (it == o.MemberEnd() || !it->value.IsArray()) return out;
    for (const auto& v : it->value.GetArray()) {
        if (v.IsString()) out.emplace_back(v.GetString(), v.GetStringLength());
    }
    return out;
}

const json_value& array_of(const json_value& o, const char* k) {
    auto it = o.FindMember(k);
    if (it == o.MemberEnd() || !it->value.IsArray()) {
        throw core::error(std::string("schema cache: '") + k + "' is not an array");
    }
    return it->value;
}

// ---- views: which base column each view column shows -----------------------------------------

/// (resno → (resorigtbl, resorigcol)) of the top-level target list of a view's rule, read from
/// its pg_node_tree text. Entries without an origin (expressions) are left out.
std::map<int, std::pair<std::uint32_t, int>> view_columns(std::string_view t) {
    std::map<int, std::pair<std::uint32_t, int>> out;
    int depth = 0;         // braces
    bool in_list = false;  // inside the top query's :targetList ( ... )
    int list_parens = 0;   // parentheses depth at depth 1 while in the list
    bool seen_query = false;
    int resno = 0;
    std::int64_t tbl = 0, col = 0;
    auto read_int = [&](std::size_t& i) -> std::int64_t {
        while (i < t.size() && t[i] == ' ') ++i;
        std::int64_t v = 0;
        bool neg = false;
        if (i < t.size() && t[i] == '-') {
            neg = true;
            ++i;
        }
        while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
            v = v * 10 + (t[i] - '0');
            ++i;
        }
        return neg ? -v : v;
    };
    for (std::size_t i = 0; i < t.size(); ++i) {
        const char c = t[i];
        if (c == '\\') {
            ++i;  // an escaped character of a token
            continue;
        }
        if (c == '{') {
            ++depth;
            if (depth == 1) {
                if (seen_query) break;  // only the first query of the rule
                seen_query = true;
            }
            if (in_list && depth == 2) {
                resno = 0;
                tbl = col = 0;
            }
            continue;
        }
        if (c == '}') {
            if (in_list && depth == 2 && resno > 0 && tbl > 0 && col > 0) {
                out[resno] = {static_cast<std::uint32_t>(tbl), static_cast<int>(col)};
            }
            --depth;
            continue;
        }
        if (depth == 1) {
            if (in_list) {
                if (c == '(') ++list_parens;
                if (c == ')' && --list_parens == 0) break;  // the list ended
            } else if (c == ':' && t.substr(i, 12) == ":targetList ") {
                in_list = true;
                i += 11;
            }
            continue;
        }
        if (in_list && depth == 2 && c == ':') {
            if (t.substr(i, 7) == ":resno ") {
                i += 7;
                resno = static_cast<int>(read_int(i));
                --i;
            } else if (t.substr(i, 12) == ":resorigtbl ") {
                i += 12;
                tbl = read_int(i);
                --i;
            } else if (t.substr(i, 12) == ":resorigcol ") {
                i += 12;
                col = read_int(i);
                --i;
            }
        }
    }
    return out;
}

struct column_ref {
    qualified_name table;
    std::string column;
};

// ---- relationships --------------------------------------------------------------------------

std::string fmt_cols(const std::vector<std::string>& cols) {
    std::string out = "(";
    for (std::size_t i = 0; i < cols.size(); ++i) out += (i ? ", " : "") + cols[i];
    return out + ")";
}

std::string cardinality_name(cardinality c) {
    switch (c) {
        case cardinality::many_to_one:
            return "many-to-one";
        case cardinality::one_to_many:
            return "one-to-many";
        case cardinality::one_to_one:
            return "one-to-one";
        case cardinality::many_to_many:
            return "many-to-many";
        case cardinality::computed:
            return "computed";
    }
    return {};
}

bool single_col(const relationship& r, std::string_view hint, bool foreign) {
    if (r.card == cardinality::many_to_many || r.card == cardinality::computed) return false;
    if (r.columns.size() != 1) return false;
    return (foreign ? r.columns[0].second : r.columns[0].first) == hint;
}

bool is_view_of(const schema_cache& sc, const qualified_name& q) {
    const auto* t = sc.try_table(q);
    return t && t->is_view();
}

}  // namespace

const column* table::find(std::string_view name) const noexcept {
    for (const auto& c : columns) {
        if (c.name == name) return &c;
    }
    return nullptr;
}

bool relationship::is_to_one() const noexcept {
    switch (card) {
        case cardinality::many_to_one:
        case cardinality::one_to_one:
            return true;
        case cardinality::computed:
            return to_one;
        default:
            return false;
    }
}

const table* schema_cache::try_table(const qualified_name& id) const noexcept {
    auto it = tables.find(id);
    return it == tables.end() ? nullptr : &it->second;
}

const table& schema_cache::find_table(const qualified_name& id) const {
    if (const auto* t = try_table(id)) return *t;
    std::vector<std::string> names;
    for (const auto& [k, v] : tables) {
        if (k.schema == id.schema) names.push_back(k.name);
    }
    std::string hint;
    if (auto best = detail::fuzzy_best(names, id.name, 0.75)) {
        hint = "Perhaps you meant the table '" + id.schema + "." + *best + "'";
    }
    throw api_error(
        404, "PGRST205",
        "Could not find the table '" + id.schema + "." + id.name + "' in the schema cache", {},
        hint);
}

std::vector<relationship> schema_cache::relationships(const qualified_name& from) const {
    auto it = relationships_of.find(from);
    if (it == relationships_of.end()) return {};
    return it->second;
}

relationship schema_cache::find_relationship(const qualified_name& from, std::string_view target,
                                             std::string_view hint) const {
    std::vector<relationship> found;
    auto it = relationships_of.find(from);
    if (it != relationships_of.end()) {
        for (const auto& r : it->second) {
            if (r.card == cardinality::computed) {
                if (target == r.function.name && r.function.schema == from.schema) {
                    found.push_back(r);
                }
                continue;
            }
            if (r.foreign_table.schema != from.schema) continue;
            const bool names_target = target == r.foreign_table.name;
            bool ok = false;
            if (r.is_self) {
                if (hint.empty()) {
                    ok = (names_target && r.card == cardinality::one_to_many) ||
                         (single_col(r, target, false) && r.card == cardinality::many_to_one);
                } else {
                    ok = names_target && r.card == cardinality::one_to_many &&
                         single_col(r, hint, true);
                }
            } else if (hint.empty()) {
                const bool ftable_view = is_view_of(*this, r.foreign_table);
                ok = names_target ||
                     (r.card != cardinality::many_to_many && r.constraint == target &&
                      !ftable_view) ||
                     (single_col(r, target, false) && !ftable_view);
            } else {
                ok = names_target &&
                     ((r.card != cardinality::many_to_many && r.constraint == hint) ||
                      single_col(r, hint, false) || single_col(r, hint, true) ||
                      (r.card == cardinality::many_to_many && r.junction.name == hint));
            }
            if (ok) found.push_back(r);
        }
    }
    if (found.size() == 1) return found.front();
    const std::string parent = from.name;
    const std::string child(target);
    if (found.empty()) {
        std::string details =
            "Searched for a foreign key relationship between '" + parent + "' and '" + child;
        if (!hint.empty()) details += "' using the hint '" + std::string(hint);
        details += "' in the schema '" + from.schema + "', but no matches were found.";
        std::string h;
        if (it != relationships_of.end()) {
            std::vector<std::string> children;
            for (const auto& r : it->second) {
                if (r.card != cardinality::computed && r.foreign_table.schema == from.schema) {
                    children.push_back(r.foreign_table.name);
                }
            }
            auto best = detail::fuzzy_best(children, child, 0.33);
            if (best && *best != child)
                h = "Perhaps you meant '" + *best + "' instead of '" + child + "'.";
        } else {
            std::vector<std::string> parents;
            for (const auto& [k, v] : relationships_of) {
                if (k.schema == from.schema) parents.push_back(k.name);
            }
            if (auto best = detail::fuzzy_best(parents, parent, 0.33)) {
                h = "Perhaps you meant '" + *best + "' instead of '" + parent + "'.";
            }
        }
        throw api_error(400, "PGRST200",
                        "Could not find a relationship between '" + parent + "' and '" + child +
                            "' in the schema cache",
                        details, h);
    }
    core::json::writer d;
    d.w.StartArray();
    std::string hints;
    for (const auto& r : found) {
        if (r.card == cardinality::computed) {
            d.w.StartObject();
            d.w.EndObject();
            continue;
        }
        d.w.StartObject();
        d.kv("cardinality", cardinality_name(r.card));
        d.kv("embedding", r.table.name + " with " + r.foreign_table.name);
        std::string rel;
        if (r.card == cardinality::many_to_many) {
            std::vector<std::string> src, dst;
            for (const auto& p : r.junction_source_columns) src.push_back(p.second);
            for (const auto& p : r.junction_target_columns) dst.push_back(p.first);
            rel = r.junction.name + " using " + r.junction_constraint_source + fmt_cols(src) +
                  " and " + r.junction_constraint_target + fmt_cols(dst);
        } else {
            std::vector<std::string> a, b;
            for (const auto& p : r.columns) {
                a.push_back(p.first);
                b.push_back(p.second);
            }
            rel = r.constraint + " using " + r.table.name + fmt_cols(a) + " and " +
                  r.foreign_table.name + fmt_cols(b);
        }
        d.kv("relationship", rel);
        d.w.EndObject();
        hints += (hints.empty() ? "" : ", ") + std::string("'") + r.foreign_table.name + "!" +
                 (r.card == cardinality::many_to_many ? r.junction.name : r.constraint) + "'";
    }
    d.w.EndArray();
    api_error e(300, "PGRST201",
                "Could not embed because more than one relationship was found for '" + parent +
                    "' and '" + child + "'",
                {},
                "Try changing '" + child + "' to one of the following: " + hints +
                    ". Find the desired relationship in the 'details' key.");
    e.details_json = d.str();
    throw e;
}

schema_cache::call_match schema_cache::find_function(const qualified_name& id,
                                                     const std::vector<std::string>& args,
                                                     bool body_is_object, bool prefer_single_object,
                                                     bool read_only) const {
    (void)prefer_single_object;
    const std::set<std::string> keys(args.begin(), args.end());
    const bool post = !read_only;
    std::vector<const function*> named, single;
    auto it = functions.find(id);
    const std::vector<function> none;
    const auto& overloads = it == functions.end() ? none : it->second;
    for (const auto& f : overloads) {
        bool matches = false;
        if (f.params.empty()) {
            matches = keys.empty();
        } else {
            std::set<std::string> req, opt;
            for (const auto& p : f.params) (p.has_default ? opt : req).insert(p.name);
            if (opt.empty()) {
                matches = keys == req;
            } else if (req.empty()) {
                matches = std::includes(opt.begin(), opt.end(), keys.begin(), keys.end());
            } else {
                std::set<std::string> rest;
                std::set_difference(keys.begin(), keys.end(), opt.begin(), opt.end(),
                                    std::inserter(rest, rest.end()));
                matches = rest == req;
            }
        }
        if (matches) {
            named.push_back(&f);
        } else if (post && body_is_object && f.params.size() == 1 && f.params[0].name.empty() &&
                   (f.params[0].base_type == "json" || f.params[0].base_type == "jsonb") &&
                   f.params[0].type.find('[') == std::string::npos) {
            single.push_back(&f);
        }
    }
    auto ambiguous = [&](const std::vector<const function*>& fs) {
        std::string list;
        for (const auto* f : fs) {
            std::string ps;
            for (const auto& p : f->params) {
                ps += (ps.empty() ? "" : ", ") + p.name + " => " + p.type;
            }
            list += (list.empty() ? "" : ", ") + f->id.schema + "." + f->id.name + "(" + ps + ")";
        }
        return api_error(300, "PGRST203",
                         "Could not choose the best candidate function between: " + list, {},
                         "Try renaming the parameters or the function itself in the database so "
                         "function overloading can be resolved");
    };
    if (named.size() == 1) return {named.front(), false};
    if (named.size() > 1) throw ambiguous(named);
    if (single.size() == 1) return {single.front(), true};
    if (single.size() > 1) throw ambiguous(single);
    // PGRST202, with PostgREST's wording.
    std::vector<std::string> sorted(keys.begin(), keys.end());
    std::string prms;
    for (std::size_t i = 0; i < sorted.size(); ++i) prms += (i ? ", " : "") + sorted[i];
    const std::string func = id.schema + "." + id.name;
    const std::string message = "Could not find the function " + func +
                                (sorted.empty() ? " without parameters" : "(" + prms + ")") +
                                " in the schema cache";
    std::string details =
        "Searched for the function " + func +
        (sorted.empty() ? std::string(" without parameters")
                        : " with parameter" + std::string(sorted.size() > 1 ? "s " : " ") + prms);
    if (post) details += " or with a single unnamed json/jsonb parameter";
    details += ", but no matches were found in the schema cache.";
    std::string hint;
    if (overloads.empty()) {
        std::vector<std::string> names;
        for (const auto& [k, v] : functions) {
            if (k.schema == id.schema) names.push_back(k.name);
        }
        if (auto best = detail::fuzzy_best(names, id.name, 0.75)) {
            hint = "Perhaps you meant to call the function " + id.schema + "." + *best;
        }
    } else {
        auto list_text = [](std::vector<std::string> v) {
            std::sort(v.begin(), v.end());
            std::string s = "(";
            for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
            return s + ")";
        };
        std::vector<std::string> sets;
        for (const auto& f : overloads) {
            std::vector<std::string> names;
            for (const auto& p : f.params) names.push_back(p.name);
            sets.push_back(list_text(names));
        }
        if (auto best = detail::fuzzy_best(sets, list_text(sorted), 0.33)) {
            hint = "Perhaps you meant to call the function " + id.schema + "." + id.name + *best;
        }
    }
    throw api_error(404, "PGRST202", message, details, hint);
}

std::string_view catalog_query() noexcept { return detail::kCatalogQuery; }

std::shared_ptr<const schema_cache> decode(std::string_view json,
                                           std::vector<std::string> schemas) {
    core::json::limits lim;
    lim.max_bytes = std::size_t{256} << 20;
    lim.max_depth = 16;
    auto d = core::json::parse_object(json, lim);
    auto sc = std::make_shared<schema_cache>();
    sc->schemas = std::move(schemas);
    sc->server_version = str(d, "version");

    // Relations and their columns, by name and by oid (for the views' column origins).
    std::map<std::uint32_t, qualified_name> by_oid;
    std::map<std::pair<std::uint32_t, int>, std::string> attname;
    for (const auto& t : array_of(d, "tables").GetArray()) {
        table tb;
        tb.id = {str(t, "schema"), str(t, "name")};
        const auto kind = str(t, "kind");
        tb.kind = kind.empty() ? 'r' : kind[0];
        tb.insertable = flag(t, "insertable");
        tb.updatable = flag(t, "updatable");
        tb.deletable = flag(t, "deletable");
        tb.primary_key = strings(t, "pk");
        tb.description = str(t, "description");
        const auto oid = static_cast<std::uint32_t>(num(t, "oid"));
        if (auto cols = t.FindMember("columns"); cols != t.MemberEnd() && cols->value.IsArray()) {
            for (const auto& c : cols->value.GetArray()) {
                column col;
                col.name = str(c, "name");
                col.type = str(c, "type");
                col.base_type = str(c, "base_type");
                const auto cat = str(c, "category");
                col.category = cat.empty() ? 'U' : cat[0];
                col.is_array = flag(c, "array");
                col.nullable = flag(c, "nullable");
                col.default_expr = str(c, "default");
                const auto identity = str(c, "identity");
                const auto generated = str(c, "generated");
                col.generated = identity == "a" || generated == "s";
                col.has_default =
                    !col.default_expr.empty() || !identity.empty() || !generated.empty();
                col.position = static_cast<int>(num(c, "num"));
                col.description = str(c, "description");
                attname[{oid, col.position}] = col.name;
                tb.columns.push_back(std::move(col));
            }
        }
        by_oid[oid] = tb.id;
        sc->tables.emplace(tb.id, std::move(tb));
    }
    for (const auto& s : array_of(d, "view_sources").GetArray()) {
        const auto oid = static_cast<std::uint32_t>(num(s, "oid"));
        by_oid.emplace(oid, qualified_name{str(s, "schema"), str(s, "table")});
        attname.emplace(std::pair{oid, static_cast<int>(num(s, "num"))}, str(s, "name"));
    }

    // Each view column's origin, followed through views of views.
    std::map<std::uint32_t, std::map<int, std::pair<std::uint32_t, int>>> view_cols;
    for (const auto& v : array_of(d, "views").GetArray()) {
        view_cols[static_cast<std::uint32_t>(num(v, "oid"))] = view_columns(str(v, "action"));
    }
    // view → (base table, base column) → view column names
    std::map<qualified_name,
             std::map<std::pair<qualified_name, std::string>, std::vector<std::string>>>
        view_of;
    for (const auto& [voids, cols] : view_cols) {
        const auto vq = by_oid.find(voids);
        if (vq == by_oid.end()) continue;
        for (const auto& [resno, origin] : cols) {
            auto o = origin;
            for (int hop = 0; hop < 16 && view_cols.count(o.first); ++hop) {
                const auto& inner = view_cols[o.first];
                auto n = inner.find(o.second);
                if (n == inner.end()) break;
                o = n->second;
            }
            const auto base = by_oid.find(o.first);
            const auto vname = attname.find({voids, resno});
            const auto bname = attname.find(o);
            if (base == by_oid.end() || vname == attname.end() || bname == attname.end()) continue;
            view_of[vq->second][{base->second, bname->second}].push_back(vname->second);
        }
    }
    // A view's columns for a key of `base`: nullopt unless every key column is shown.
    auto view_key =
        [&](const qualified_name& view, const qualified_name& base,
            const std::vector<std::string>& cols) -> std::optional<std::vector<std::string>> {
        auto v = view_of.find(view);
        if (v == view_of.end()) return std::nullopt;
        std::vector<std::string> out;
        for (const auto& c : cols) {
            auto m = v->second.find({base, c});
            if (m == v->second.end() || m->second.empty()) return std::nullopt;
            out.push_back(m->second.front());
        }
        return out;
    };
    // Views show their base table's primary key.
    for (auto& [id, tb] : sc->tables) {
        if (!tb.is_view()) continue;
        auto v = view_of.find(id);
        if (v == view_of.end()) continue;
        for (const auto& [bc, names] : v->second) {
            const auto* base = sc->try_table(bc.first);
            if (!base || base->is_view() || base->primary_key.empty()) continue;
            if (auto pk = view_key(id, bc.first, base->primary_key)) {
                tb.primary_key = *pk;
                break;
            }
        }
    }

    // Foreign keys: many-to-one (or one-to-one), then through views, then the inverses.
    std::vector<relationship> rels;
    for (const auto& f : array_of(d, "fks").GetArray()) {
        foreign_key fk;
        fk.constraint = str(f, "name");
        fk.table = {str(f, "schema"), str(f, "table")};
        fk.columns = strings(f, "cols");
        fk.foreign_table = {str(f, "fschema"), str(f, "ftable")};
        fk.foreign_columns = strings(f, "fcols");
        if (fk.columns.size() != fk.foreign_columns.size()) continue;
        relationship r;
        r.card = flag(f, "one_to_one") ? cardinality::one_to_one : cardinality::many_to_one;
        r.table = fk.table;
        r.foreign_table = fk.foreign_table;
        r.is_self = fk.table == fk.foreign_table;
        r.constraint = fk.constraint;
        for (std::size_t i = 0; i < fk.columns.size(); ++i) {
            r.columns.emplace_back(fk.columns[i], fk.foreign_columns[i]);
        }
        sc->foreign_keys.push_back(std::move(fk));
        rels.push_back(std::move(r));
    }
    const std::size_t direct = rels.size();
    for (std::size_t i = 0; i < direct; ++i) {
        const auto r = rels[i];
        std::vector<std::string> cols, fcols;
        for (const auto& [a, b] : r.columns) {
            cols.push_back(a);
            fcols.push_back(b);
        }
        std::vector<std::pair<qualified_name, std::vector<std::string>>> left{{r.table, cols}};
        std::vector<std::pair<qualified_name, std::vector<std::string>>> right{
            {r.foreign_table, fcols}};
        for (const auto& [vid, m] : view_of) {
            if (auto k = view_key(vid, r.table, cols)) left.emplace_back(vid, *k);
            if (auto k = view_key(vid, r.foreign_table, fcols)) right.emplace_back(vid, *k);
        }
        for (std::size_t a = 0; a < left.size(); ++a) {
            for (std::size_t b = 0; b < right.size(); ++b) {
                if (a == 0 && b == 0) continue;  // the table's own, already there
                relationship v = r;
                v.table = left[a].first;
                v.foreign_table = right[b].first;
                v.is_self = a > 0 && b > 0 && v.table == v.foreign_table;
                if (a == 0 || b == 0) v.is_self = false;
                v.columns.clear();
                for (std::size_t c = 0; c < cols.size(); ++c) {
                    v.columns.emplace_back(left[a].second[c], right[b].second[c]);
                }
                rels.push_back(std::move(v));
            }
        }
    }
    const std::size_t forward = rels.size();
    for (std::size_t i = 0; i < forward; ++i) {
        relationship inv = rels[i];
        std::swap(inv.table, inv.foreign_table);
        for (auto& [a, b] : inv.columns) std::swap(a, b);
        if (inv.card == cardinality::many_to_one) {
            inv.card = cardinality::one_to_many;
        } else {
            inv.o2o_parent = true;
        }
        rels.push_back(std::move(inv));
    }
    // Many-to-many: a junction with keys to both sides whose columns are part of its primary key.
    std::vector<relationship> m2m;
    for (const auto& a : rels) {
        if (a.card != cardinality::many_to_one) continue;
        const auto* jt = sc->try_table(a.table);
        if (!jt) continue;
        const std::set<std::string> pk(jt->primary_key.begin(), jt->primary_key.end());
        for (const auto& b : rels) {
            if (b.card != cardinality::many_to_one || b.table != a.table ||
                b.constraint == a.constraint) {
                continue;
            }
            bool in_pk = true;
            for (const auto& [jc, c] : a.columns) in_pk = in_pk && pk.count(jc);
            for (const auto& [jc, c] : b.columns) in_pk = in_pk && pk.count(jc);
            if (!in_pk) continue;
            relationship r;
            r.card = cardinality::many_to_many;
            r.table = a.foreign_table;
            r.foreign_table = b.foreign_table;
            r.is_self = r.table == r.foreign_table;
            r.junction = a.table;
            r.junction_constraint_source = a.constraint;
            r.junction_constraint_target = b.constraint;
            for (const auto& [jc, tc] : a.columns) r.junction_source_columns.emplace_back(tc, jc);
            for (const auto& [jc, fc] : b.columns) r.junction_target_columns.emplace_back(jc, fc);
            m2m.push_back(std::move(r));
        }
    }
    for (auto& r : m2m) rels.push_back(std::move(r));

    // Functions (the callable ones, PostgREST's rule) and computed relationships.
    for (const auto& f : array_of(d, "functions").GetArray()) {
        function fn;
        fn.id = {str(f, "schema"), str(f, "name")};
        fn.oid = static_cast<std::uint32_t>(num(f, "oid"));
        const auto vol = str(f, "volatility");
        fn.volatility = vol.empty() ? 'v' : vol[0];
        fn.returns_set = flag(f, "returns_set");
        fn.returns_void = flag(f, "returns_void");
        fn.returns_composite = flag(f, "returns_composite");
        fn.return_type = str(f, "ret_type");
        fn.return_base_type = str(f, "ret_base_type");
        const auto rc = str(f, "ret_category");
        fn.return_category = rc.empty() ? 'U' : rc[0];
        fn.description = str(f, "description");
        fn.single_row = fn.returns_set && num(f, "rows") == 1;
        if (!str(f, "ret_table_name").empty()) {
            fn.returns_table = qualified_name{str(f, "ret_table_schema"), str(f, "ret_table_name")};
        }
        const auto nargs = num(f, "nargs");
        const auto ndefaults = num(f, "ndefaults");
        std::int64_t in_index = 0;
        int unnamed = 0;
        bool out_params = false;
        std::optional<qualified_name> row_param;
        auto args = f.FindMember("args");
        if (args != f.MemberEnd() && args->value.IsArray()) {
            for (const auto& a : args->value.GetArray()) {
                const auto mode = str(a, "mode");
                if (mode == "o" || mode == "t") {
                    out_params = true;
                    continue;
                }
                if (mode == "b") out_params = true;
                function_param p;
                p.name = str(a, "name");
                p.type = str(a, "type");
                p.base_type = str(a, "base_type");
                p.variadic = mode == "v";
                ++in_index;
                p.has_default = in_index > nargs - ndefaults;
                if (p.name.empty()) ++unnamed;
                if (!str(a, "rel_name").empty()) {
                    row_param = qualified_name{str(a, "rel_schema"), str(a, "rel_name")};
                }
                fn.params.push_back(std::move(p));
            }
        }
        if (out_params) fn.returns_composite = true;
        // Computed relationships: one parameter of a table's row type, a table's row type back.
        if (fn.params.size() == 1 && row_param && fn.returns_table) {
            relationship r;
            r.card = cardinality::computed;
            r.table = *row_param;
            r.foreign_table = *fn.returns_table;
            r.function = fn.id;
            r.to_one = !fn.returns_set || fn.single_row;
            r.is_self = r.table == r.foreign_table;
            rels.push_back(std::move(r));
        }
        // Callable through the API: every parameter named, or one unnamed of a type the body
        // can be (bytea, json, jsonb, text, xml).
        bool callable = unnamed == 0;
        if (unnamed == 1 && fn.params.size() == 1) {
            const auto& b = fn.params[0].base_type;
            callable = fn.params[0].type.find('[') == std::string::npos &&
                       (b == "bytea" || b == "json" || b == "jsonb" || b == "text" || b == "xml");
        }
        if (!callable) continue;
        sc->functions[fn.id].push_back(std::move(fn));
    }
    for (auto& [k, v] : sc->functions) {
        // PostgREST's order of overloads: fewer parameters first, then by the parameters
        // (name, type) — the order its PGRST203 message lists them in.
        std::stable_sort(v.begin(), v.end(), [](const function& a, const function& b) {
            if (a.params.size() != b.params.size()) return a.params.size() < b.params.size();
            for (std::size_t i = 0; i < a.params.size(); ++i) {
                const auto& x = a.params[i];
                const auto& y = b.params[i];
                if (x.name != y.name) return x.name < y.name;
                if (x.type != y.type) return x.type < y.type;
            }
            return false;
        });
    }
    for (auto& r : rels) sc->relationships_of[r.table].push_back(std::move(r));

    // Role settings: the database's own first, then the role's everywhere.
    for (const auto& r : array_of(d, "roles").GetArray()) {
        auto& rs = sc->roles[str(r, "role")];
        const bool db = flag(r, "db");
        for (const auto& kv : strings(r, "settings")) {
            const auto eq = kv.find('=');
            if (eq == std::string::npos) continue;
            auto k = kv.substr(0, eq);
            auto v = kv.substr(eq + 1);
            auto it = std::find_if(rs.settings.begin(), rs.settings.end(),
                                   [&](const auto& p) { return p.first == k; });
            if (it == rs.settings.end()) {
                rs.settings.emplace_back(std::move(k), std::move(v));
            } else if (db) {
                it->second = std::move(v);
            }
        }
    }
    return sc;
}

}  // namespace awp::rest
