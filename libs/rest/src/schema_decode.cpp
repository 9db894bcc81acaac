// decode(): the catalog statement's JSON (catalog_sql.hpp) → schema_cache, with PostgREST's
// relationship inference (SchemaCache.hs of v14): many-to-one and one-to-one from foreign keys,
// the same through views (keys a view inherits from its base tables, found from each view's
// query tree), many-to-many through junctions, the inverse of each, computed relationships,
// and objects outside the exposed schemas left out.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "awp/core/json.hpp"
#include "awp/rest/schema.hpp"
#include "node_tree.hpp"

namespace awp::rest {

namespace {

using rapidjson::Value;

// ---- reading the JSON: every shape checked, a wrong one a core::error ----------------------

[[noreturn]] void bad(const char* where, const char* what) {
    throw core::error(std::string("schema cache: ") + where + " is not " + what);
}

const Value& member(const Value& o, const char* name) {
    if (!o.IsObject()) bad(name, "in an object");
    auto it = o.FindMember(name);
    if (it == o.MemberEnd()) bad(name, "present");
    return it->value;
}

std::string str(const Value& o, const char* name) {
    const auto& v = member(o, name);
    if (!v.IsString()) bad(name, "a string");
    return {v.GetString(), v.GetStringLength()};
}

// A string or null ("" for null).
std::string str_or_empty(const Value& o, const char* name) {
    const auto& v = member(o, name);
    if (v.IsNull()) return {};
    if (!v.IsString()) bad(name, "a string or null");
    return {v.GetString(), v.GetStringLength()};
}

std::string as_str(const Value& v, const char* where) {
    if (!v.IsString()) bad(where, "a string");
    return {v.GetString(), v.GetStringLength()};
}

char one_char(const Value& o, const char* name) {
    const auto s = str(o, name);
    if (s.size() > 1) bad(name, "one character");
    return s.empty() ? '\0' : s[0];
}

bool boolean(const Value& o, const char* name) {
    const auto& v = member(o, name);
    if (!v.IsBool()) bad(name, "a boolean");
    return v.GetBool();
}

std::int64_t as_int(const Value& v, const char* where) {
    if (!v.IsInt64()) bad(where, "an integer");
    return v.GetInt64();
}

std::int64_t integer(const Value& o, const char* name) { return as_int(member(o, name), name); }

const Value::ConstArray array(const Value& o, const char* name) {
    const auto& v = member(o, name);
    if (!v.IsArray()) bad(name, "an array");
    return v.GetArray();
}

qualified_name qname(const Value& o, const char* schema_key, const char* name_key) {
    return {str(o, schema_key), str(o, name_key)};
}

std::vector<std::pair<std::string, std::string>> pairs(const Value& o, const char* name) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& p : array(o, name)) {
        if (!p.IsArray() || p.Size() != 2) bad(name, "a list of pairs");
        out.emplace_back(as_str(p[0], name), as_str(p[1], name));
    }
    return out;
}

// ---- PostgREST's order of relationships (its derived Ord): the order of PGRST201's details --

int card_rank(cardinality c) {
    switch (c) {
        case cardinality::one_to_many:
            return 0;
        case cardinality::many_to_one:
            return 1;
        case cardinality::one_to_one:
            return 2;
        case cardinality::many_to_many:
            return 3;
        case cardinality::computed:
            return 4;
    }
    return 4;
}

using column_pairs = std::vector<std::pair<std::string, std::string>>;

column_pairs swapped(const column_pairs& cols) {
    column_pairs out;
    for (const auto& [a, b] : cols) out.emplace_back(b, a);
    return out;
}

bool rel_less(const relationship& a, const relationship& b) {
    const bool ac = a.card == cardinality::computed, bc = b.card == cardinality::computed;
    if (ac != bc) return bc;  // every key relationship before every computed one
    if (ac) {
        return std::tie(a.function, a.table, a.foreign_table, a.to_one, a.is_self) <
               std::tie(b.function, b.table, b.foreign_table, b.to_one, b.is_self);
    }
    auto head = [](const relationship& r) {
        return std::make_tuple(std::cref(r.table), std::cref(r.foreign_table), r.is_self,
                               card_rank(r.card));
    };
    if (head(a) != head(b)) return head(a) < head(b);
    if (a.card == cardinality::many_to_many) {
        // PostgREST keeps the target pairs as (foreign table's column, junction's column).
        const auto at = swapped(a.junction_target_columns);
        const auto bt = swapped(b.junction_target_columns);
        auto ja = std::tie(a.junction, a.junction_constraint_source, a.junction_constraint_target,
                           a.junction_source_columns, at);
        auto jb = std::tie(b.junction, b.junction_constraint_source, b.junction_constraint_target,
                           b.junction_source_columns, bt);
        if (ja != jb) return ja < jb;
    } else {
        auto ka = std::tie(a.constraint, a.columns, a.o2o_parent);
        auto kb = std::tie(b.constraint, b.columns, b.o2o_parent);
        if (ka != kb) return ka < kb;
    }
    return std::tie(a.table_is_view, a.foreign_table_is_view) <
           std::tie(b.table_is_view, b.foreign_table_is_view);
}

// PostgREST's order of overloads: fewer parameters first, then field by field.
bool function_less(const function& a, const function& b) {
    if (a.params.size() != b.params.size()) return a.params.size() < b.params.size();
    if (a.description != b.description) return a.description < b.description;
    for (std::size_t i = 0; i < a.params.size(); ++i) {
        const auto& p = a.params[i];
        const auto& q = b.params[i];
        auto kp = std::make_tuple(std::cref(p.name), std::cref(p.type), std::cref(p.cast_type),
                                  !p.has_default, p.variadic);
        auto kq = std::make_tuple(std::cref(q.name), std::cref(q.type), std::cref(q.cast_type),
                                  !q.has_default, q.variadic);
        if (kp != kq) return kp < kq;
    }
    return a.oid < b.oid;
}

// ---- views: the keys they inherit (PostgREST's view key dependencies) ----------------------

enum class key_kind { pk, fk, fk_ref };

struct view_rel {
    qualified_name id;
    char kind = 'r';
    std::map<int, std::string> columns;  // attnum → name
    struct key {
        std::string name;
        key_kind kind = key_kind::pk;
        std::vector<int> cols;  // attnums in key order
    };
    std::vector<key> keys;
    std::vector<detail::target_origin> targets;  // views: their output columns' origins
};

// A key of `table` whose every column a view shows: per key column (in key order), the table's
// column and every view column showing it.
struct key_dependency {
    qualified_name table;
    qualified_name view;
    std::string constraint;
    key_kind kind = key_kind::pk;
    std::vector<std::pair<std::string, std::vector<std::string>>> cols;
};

std::vector<key_dependency> view_key_dependencies(const std::map<std::uint32_t, view_rel>& rels,
                                                  const std::set<std::string>& exposed) {
    std::vector<key_dependency> out;
    for (const auto& [view_oid, view] : rels) {
        if ((view.kind != 'v' && view.kind != 'm') || !exposed.contains(view.id.schema)) continue;
        // (base relation, its column) → the view's columns showing it, through views of views
        std::map<std::pair<std::uint32_t, int>, std::vector<std::string>> shown;
        for (const auto& t : view.targets) {
            auto name = view.columns.find(t.resno);
            if (name == view.columns.end()) continue;
            std::uint32_t table = t.origin_table;
            int column = t.origin_column;
            std::set<std::uint32_t> seen{view_oid};
            while (table != 0) {
                shown[{table, column}].push_back(name->second);
                auto inner = rels.find(table);
                if (inner == rels.end() || inner->second.targets.empty() ||
                    !seen.insert(table).second) {
                    break;
                }
                const auto& tl = inner->second.targets;
                auto next = std::find_if(tl.begin(), tl.end(),
                                         [&](const auto& e) { return e.resno == column; });
                if (next == tl.end()) break;
                table = next->origin_table;
                column = next->origin_column;
            }
        }
        std::set<std::uint32_t> bases;
        for (const auto& [origin, cols] : shown) bases.insert(origin.first);
        for (std::uint32_t base_oid : bases) {
            auto base = rels.find(base_oid);
            if (base == rels.end()) continue;
            for (const auto& k : base->second.keys) {
                key_dependency dep{base->second.id, view.id, k.name, k.kind, {}};
                bool complete = !k.cols.empty();
                for (int attnum : k.cols) {
                    auto vcols = shown.find({base_oid, attnum});
                    auto tcol = base->second.columns.find(attnum);
                    if (vcols == shown.end() || tcol == base->second.columns.end()) {
                        complete = false;
                        break;
                    }
                    dep.cols.emplace_back(tcol->second, vcols->second);
                }
                if (complete) out.push_back(std::move(dep));
            }
        }
    }
    return out;
}

// Every choice of one view column per key column (a column shown twice gives two choices).
std::vector<column_pairs> expand(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& cols) {
    std::vector<column_pairs> out{{}};
    for (const auto& [tcol, vcols] : cols) {
        std::vector<column_pairs> next;
        for (const auto& prefix : out) {
            for (const auto& v : vcols) {
                auto p = prefix;
                p.emplace_back(tcol, v);
                next.push_back(std::move(p));
            }
        }
        out = std::move(next);
    }
    return out;
}

// ---- relationships ---------------------------------------------------------------------------

relationship key_rel(cardinality card, qualified_name table, qualified_name ftable,
                     std::string constraint, column_pairs cols) {
    relationship r;
    r.card = card;
    r.table = std::move(table);
    r.foreign_table = std::move(ftable);
    r.constraint = std::move(constraint);
    r.columns = std::move(cols);
    return r;
}

// addViewM2OAndO2ORels: each many-to-one / one-to-one from a table, again from every view that
// shows its key columns, to every view showing the referenced columns, and view to view.
void add_view_relationships(std::vector<relationship>& rels,
                            const std::vector<key_dependency>& deps) {
    std::map<std::tuple<qualified_name, std::string, key_kind>, std::vector<const key_dependency*>>
        index;
    for (const auto& d : deps) index[{d.table, d.constraint, d.kind}].push_back(&d);
    auto lookup = [&](const qualified_name& t, const std::string& c, key_kind k) {
        auto it = index.find({t, c, k});
        return it == index.end() ? std::vector<const key_dependency*>{} : it->second;
    };
    const std::size_t n = rels.size();
    for (std::size_t i = 0; i < n; ++i) {
        const relationship base = rels[i];
        const bool o2o = base.card == cardinality::one_to_one;
        if (base.card != cardinality::many_to_one && !(o2o && !base.o2o_parent)) continue;
        auto make = [&](qualified_name t, qualified_name ft, column_pairs cols, bool tv, bool fv) {
            auto r =
                key_rel(base.card, std::move(t), std::move(ft), base.constraint, std::move(cols));
            r.table_is_view = tv;
            r.foreign_table_is_view = fv;
            return r;
        };
        const auto view_side = lookup(base.table, base.constraint, key_kind::fk);
        const auto ref_side = lookup(base.foreign_table, base.constraint, key_kind::fk_ref);
        for (const auto* vt : view_side) {
            for (const auto& kc : expand(vt->cols)) {
                column_pairs cols;
                for (std::size_t k = 0; k < kc.size() && k < base.columns.size(); ++k) {
                    cols.emplace_back(kc[k].second, base.columns[k].second);
                }
                rels.push_back(make(vt->view, base.foreign_table, std::move(cols), true, false));
            }
        }
        for (const auto* tv : ref_side) {
            for (const auto& kc : expand(tv->cols)) {
                column_pairs cols;
                for (std::size_t k = 0; k < kc.size() && k < base.columns.size(); ++k) {
                    cols.emplace_back(base.columns[k].first, kc[k].second);
                }
                rels.push_back(make(base.table, tv->view, std::move(cols), false, true));
            }
        }
        for (const auto* vt : view_side) {
            for (const auto& kc1 : expand(vt->cols)) {
                for (const auto* tv : ref_side) {
                    for (const auto& kc2 : expand(tv->cols)) {
                        column_pairs cols;
                        for (std::size_t k = 0; k < kc1.size() && k < kc2.size(); ++k) {
                            cols.emplace_back(kc1[k].second, kc2[k].second);
                        }
                        auto r = make(vt->view, tv->view, std::move(cols), true, true);
                        r.is_self = vt->view == tv->view;
                        rels.push_back(std::move(r));
                    }
                }
            }
        }
    }
}

// addM2MRels: a junction has many-to-one keys to two tables (two different constraints, the
// same table twice allowed) whose columns together are all part of its primary key.
void add_junctions(std::vector<relationship>& rels, const std::map<qualified_name, table>& tables) {
    std::map<qualified_name, std::vector<std::size_t>> m2o_from;
    for (std::size_t i = 0; i < rels.size(); ++i) {
        if (rels[i].card == cardinality::many_to_one) m2o_from[rels[i].table].push_back(i);
    }
    std::vector<relationship> added;
    for (const auto& [junction, idx] : m2o_from) {
        auto jt = tables.find(junction);
        const std::set<std::string> pk = jt == tables.end()
                                             ? std::set<std::string>{}
                                             : std::set<std::string>(jt->second.primary_key.begin(),
                                                                     jt->second.primary_key.end());
        for (std::size_t a : idx) {
            for (std::size_t b : idx) {
                const auto& src = rels[a];
                const auto& dst = rels[b];
                if (src.constraint == dst.constraint) continue;
                bool in_pk = true;
                for (const auto& c : src.columns) in_pk = in_pk && pk.contains(c.first);
                for (const auto& c : dst.columns) in_pk = in_pk && pk.contains(c.first);
                if (!in_pk) continue;
                relationship r;
                r.card = cardinality::many_to_many;
                r.table = src.foreign_table;
                r.foreign_table = dst.foreign_table;
                r.is_self = r.table == r.foreign_table;
                r.table_is_view = src.foreign_table_is_view;
                r.foreign_table_is_view = dst.foreign_table_is_view;
                r.junction = junction;
                r.junction_constraint_source = src.constraint;
                r.junction_constraint_target = dst.constraint;
                r.junction_source_columns = swapped(src.columns);  // (table's, junction's)
                r.junction_target_columns = dst.columns;           // (junction's, foreign's)
                added.push_back(std::move(r));
            }
        }
    }
    rels.insert(rels.end(), added.begin(), added.end());
}

// addInverseRels: one-to-many for each many-to-one, the other side of each one-to-one.
void add_inverses(std::vector<relationship>& rels) {
    const std::size_t n = rels.size();
    for (std::size_t i = 0; i < n; ++i) {
        const auto& r = rels[i];
        if (r.card != cardinality::many_to_one && r.card != cardinality::one_to_one) continue;
        relationship inv = r;
        std::swap(inv.table, inv.foreign_table);
        std::swap(inv.table_is_view, inv.foreign_table_is_view);
        inv.columns = swapped(r.columns);
        if (r.card == cardinality::many_to_one) {
            inv.card = cardinality::one_to_many;
        } else {
            inv.o2o_parent = !r.o2o_parent;
        }
        rels.push_back(std::move(inv));
    }
}

// ---- the pieces of the JSON ------------------------------------------------------------------

table decode_table(const Value& t) {
    table out;
    out.id = qname(t, "schema", "name");
    out.kind = one_char(t, "kind");
    // Without the flag (an older catalog document), row-level security is assumed.
    out.rls = !t.HasMember("rls") || boolean(t, "rls");
    out.description = str_or_empty(t, "description");
    out.insertable = boolean(t, "insertable");
    out.updatable = boolean(t, "updatable");
    out.deletable = boolean(t, "deletable");
    for (const auto& c : array(t, "pk")) out.primary_key.push_back(as_str(c, "pk"));
    for (const auto& c : array(t, "columns")) {
        column col;
        col.name = str(c, "name");
        col.type = str(c, "type");
        col.base_type = str(c, "base_type");
        col.category = one_char(c, "category");
        col.is_array = boolean(c, "is_array");
        col.nullable = boolean(c, "nullable");
        col.default_expr = str_or_empty(c, "default");
        const char identity = one_char(c, "identity");
        const char generated = one_char(c, "generated");
        col.has_default = !member(c, "default").IsNull() || identity != '\0' || generated != '\0';
        col.generated = generated == 's' || identity == 'a';
        col.position = static_cast<int>(integer(c, "position"));
        col.description = str_or_empty(c, "description");
        out.columns.push_back(std::move(col));
    }
    return out;
}

function decode_function(const Value& f) {
    function out;
    out.id = qname(f, "schema", "name");
    const auto oid = integer(f, "oid");
    if (oid < 0 || oid > 0xffffffffLL) bad("oid", "an oid");
    out.oid = static_cast<std::uint32_t>(oid);
    out.description = str_or_empty(f, "description");
    for (const auto& p : array(f, "params")) {
        function_param param;
        param.name = str(p, "name");
        param.type = str(p, "type");
        param.base_type = str(p, "base_type");
        param.cast_type = str(p, "cast_type");
        param.has_default = boolean(p, "has_default");
        param.variadic = boolean(p, "variadic");
        out.params.push_back(std::move(param));
    }
    out.volatility = one_char(f, "volatility");
    out.returns_set = boolean(f, "returns_set");
    out.returns_void = boolean(f, "returns_void");
    out.returns_composite = boolean(f, "returns_composite");
    out.return_type = str(f, "return_type");
    out.return_base_type = str(f, "return_base_type");
    out.return_category = one_char(f, "return_category");
    out.return_type_name = qname(member(f, "return_type_name"), "schema", "name");
    if (const auto& rt = member(f, "returns_table"); !rt.IsNull()) {
        out.returns_table = qname(rt, "schema", "name");
    }
    // ROWS is a float estimate (0.5, 1e+20 are valid): read as a number, whatever its form
    const auto& rows = member(f, "rows");
    if (!rows.IsNumber()) bad("rows", "a number");
    out.single_row = out.returns_set && rows.GetDouble() == 1.0;
    return out;
}

view_rel decode_view_rel(const Value& v) {
    view_rel out;
    out.id = qname(v, "schema", "name");
    out.kind = one_char(v, "kind");
    for (const auto& c : array(v, "columns")) {
        if (!c.IsArray() || c.Size() != 2) bad("columns", "a list of pairs");
        out.columns[static_cast<int>(as_int(c[0], "attnum"))] = as_str(c[1], "columns");
    }
    for (const auto& k : array(v, "keys")) {
        view_rel::key key;
        key.name = str(k, "name");
        const auto type = str(k, "type");
        key.kind = type == "p" ? key_kind::pk : type == "f" ? key_kind::fk : key_kind::fk_ref;
        if (type != "p" && type != "f" && type != "f_ref") bad("type", "p, f or f_ref");
        for (const auto& c : array(k, "cols")) {
            key.cols.push_back(static_cast<int>(as_int(c, "cols")));
        }
        out.keys.push_back(std::move(key));
    }
    if (const auto& a = member(v, "action"); !a.IsNull()) {
        out.targets = detail::view_target_origins(as_str(a, "action"));
    }
    return out;
}

std::uint64_t now_ms() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

}  // namespace

std::shared_ptr<const schema_cache> decode(std::string_view json,
                                           std::vector<std::string> schemas) {
    rapidjson::Document doc;
    try {
        doc = core::json::parse_object(json, core::json::kDocument);
    } catch (const core::json::parse_error& e) {
        throw core::error(std::string("schema cache: ") + e.what());
    }
    auto cache = std::make_shared<schema_cache>();
    cache->schemas = std::move(schemas);
    const std::set<std::string> exposed(cache->schemas.begin(), cache->schemas.end());
    cache->server_version = str(doc, "server_version_num");
    cache->loaded_at_ms = now_ms();

    for (const auto& t : array(doc, "tables")) {
        auto tbl = decode_table(t);
        if (!exposed.contains(tbl.id.schema)) continue;
        auto id = tbl.id;
        cache->tables.insert_or_assign(std::move(id), std::move(tbl));
    }

    // Many-to-one, or one-to-one when the referencing columns are unique.
    std::vector<relationship> rels;
    for (const auto& k : array(doc, "fks")) {
        foreign_key fk;
        fk.constraint = str(k, "constraint");
        fk.table = qname(k, "schema", "table");
        fk.foreign_table = qname(k, "fschema", "ftable");
        const auto cols = pairs(k, "columns");
        for (const auto& [c, f] : cols) {
            fk.columns.push_back(c);
            fk.foreign_columns.push_back(f);
        }
        auto r =
            key_rel(boolean(k, "one_to_one") ? cardinality::one_to_one : cardinality::many_to_one,
                    fk.table, fk.foreign_table, fk.constraint, cols);
        r.is_self = fk.table == fk.foreign_table;
        rels.push_back(std::move(r));
        cache->foreign_keys.push_back(std::move(fk));
    }

    std::map<std::uint32_t, view_rel> view_rels;
    for (const auto& v : array(doc, "view_rels")) {
        const auto oid = integer(v, "oid");
        if (oid <= 0 || oid > 0xffffffffLL) bad("oid", "an oid");
        view_rels.emplace(static_cast<std::uint32_t>(oid), decode_view_rel(v));
    }
    const auto deps = view_key_dependencies(view_rels, exposed);
    // A view's primary key: its base table's, when the view shows every column of it (the
    // first view column showing each).
    for (const auto& d : deps) {
        if (d.kind != key_kind::pk) continue;
        auto it = cache->tables.find(d.view);
        if (it == cache->tables.end() || !it->second.is_view()) continue;
        for (const auto& [tcol, vcols] : d.cols) it->second.primary_key.push_back(vcols.front());
    }
    add_view_relationships(rels, deps);
    add_junctions(rels, cache->tables);
    add_inverses(rels);

    // Computed relationships, and the key ones they replace: those from the same table to a
    // table named like the function (PostgREST keys both by that name).
    std::vector<relationship> computed;
    std::set<std::pair<qualified_name, qualified_name>> overridden;
    for (const auto& c : array(doc, "computed")) {
        relationship r;
        r.card = cardinality::computed;
        r.function = qname(c, "schema", "name");
        r.table = qname(member(c, "table"), "schema", "name");
        r.foreign_table = qname(member(c, "ftable"), "schema", "name");
        r.is_self = r.table == r.foreign_table;
        r.to_one = boolean(c, "single_row");
        overridden.emplace(r.table, r.function);
        computed.push_back(std::move(r));
    }
    std::erase_if(rels, [&](const relationship& r) {
        return overridden.contains({r.table, r.foreign_table});
    });
    rels.insert(rels.end(), computed.begin(), computed.end());

    // Only what lies in the exposed schemas: both sides, and a many-to-many's junction.
    for (auto& r : rels) {
        if (!exposed.contains(r.table.schema) || !exposed.contains(r.foreign_table.schema)) {
            continue;
        }
        if (r.card == cardinality::many_to_many && !exposed.contains(r.junction.schema)) continue;
        auto key = r.table;
        cache->relationships_of[std::move(key)].push_back(std::move(r));
    }
    for (auto& [tbl, list] : cache->relationships_of) {
        std::stable_sort(list.begin(), list.end(), rel_less);
    }

    for (const auto& f : array(doc, "functions")) {
        auto fn = decode_function(f);
        if (!exposed.contains(fn.id.schema)) continue;
        auto id = fn.id;
        cache->functions[std::move(id)].push_back(std::move(fn));
    }
    for (auto& [id, overloads] : cache->functions) {
        std::sort(overloads.begin(), overloads.end(), function_less);
    }

    for (const auto& r : array(doc, "roles")) {
        role_settings rs;
        rs.settings = pairs(r, "settings");
        if (r.IsObject() && r.HasMember("bypass_rls")) rs.bypass_rls = boolean(r, "bypass_rls");
        cache->roles[str(r, "role")] = std::move(rs);
    }
    return cache;
}

}  // namespace awp::rest
