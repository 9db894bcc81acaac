// The schema cache's lookups with PostgREST's rules and texts (v14): tables (PGRST205),
// embedded resources (findRel in Plan.hs: PGRST200/201) and functions (findProc: PGRST202/203),
// each error's hint chosen as PostgREST's fuzzy matching would (fuzzy.hpp).
#include <algorithm>
#include <set>

#include "awp/core/json.hpp"
#include "awp/rest/schema.hpp"
#include "catalog_sql.hpp"
#include "fuzzy.hpp"

namespace awp::rest {

namespace {

// PostgREST builds no fuzzy index for a schema this large (memory); no hint then.
constexpr std::size_t kMaxTablesForFuzzyHint = 500;
// Table and function name hints need a close match; parameter-list hints take any.
constexpr double kNameHintScore = 0.75;

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0) out += sep;
        out += parts[i];
    }
    return out;
}

std::string columns_text(const std::vector<std::string>& cols) {
    return "(" + join(cols, ", ") + ")";
}

bool is_key_rel(const relationship& r) {
    return r.card == cardinality::many_to_one || r.card == cardinality::one_to_many ||
           r.card == cardinality::one_to_one;
}

// The one column pair a column hint or target can name: a single-column key's, or, in awp's
// schema, where every reference is a composite tenant key (tenant_id, x) -> (tenant_id, id) so
// that no row points into another tenant, the key's pair beside tenant_id. A UI written for
// single-column keys (`knowledge_items:knowledge_item_id(...)`) names the key so; PostgREST
// itself matches a column only on a single-column key.
const std::pair<std::string, std::string>* named_pair(const relationship& r) {
    if (!is_key_rel(r)) return nullptr;
    if (r.columns.size() == 1) return &r.columns[0];
    if (r.columns.size() != 2) return nullptr;
    const auto tenant = [](const std::pair<std::string, std::string>& c) {
        return c.first == "tenant_id" && c.second == "tenant_id";
    };
    if (tenant(r.columns[0]) && !tenant(r.columns[1])) return &r.columns[1];
    if (tenant(r.columns[1]) && !tenant(r.columns[0])) return &r.columns[0];
    return nullptr;
}

// A key whose named column (named_pair) on this side ("FK column") or on the other side is
// `name`.
bool single_column_is(const relationship& r, std::string_view name) {
    const auto* c = named_pair(r);
    return c != nullptr && c->first == name;
}
bool single_ref_column_is(const relationship& r, std::string_view name) {
    const auto* c = named_pair(r);
    return c != nullptr && c->second == name;
}
bool constraint_is(const relationship& r, std::string_view name) {
    return is_key_rel(r) && r.constraint == name;
}

// findRel's filter: does `r` answer the embed `target` with `hint` ("" = none)?
bool rel_matches(const relationship& r, std::string_view target, std::string_view hint) {
    if (r.card == cardinality::computed) return r.function.name == target;
    const bool o2m = r.card == cardinality::one_to_many;
    const bool m2o = r.card == cardinality::many_to_one;
    if (r.is_self) {
        // One key, two relationships: the table's name means its children (one-to-many), the
        // key's column its parent (many-to-one); with a hint, the children through the
        // referenced column the hint names. PostgREST resolves no other self relationship.
        if (hint.empty()) {
            return (r.foreign_table.name == target && o2m) || (single_column_is(r, target) && m2o);
        }
        return r.foreign_table.name == target && o2m && single_ref_column_is(r, hint);
    }
    if (hint.empty()) {
        return r.foreign_table.name == target ||
               (constraint_is(r, target) && !r.foreign_table_is_view) ||
               (single_column_is(r, target) && !r.foreign_table_is_view);
    }
    return r.foreign_table.name == target &&
           (constraint_is(r, hint) || single_column_is(r, hint) || single_ref_column_is(r, hint) ||
            (r.card == cardinality::many_to_many && r.junction.name == hint));
}

// The relationships findRel searches: from `from` to the same schema (computed ones: by a
// function of that schema).
std::vector<const relationship*> candidates(const schema_cache& sc, const qualified_name& from) {
    std::vector<const relationship*> out;
    auto it = sc.relationships_of.find(from);
    if (it == sc.relationships_of.end()) return out;
    for (const auto& r : it->second) {
        const auto& schema =
            r.card == cardinality::computed ? r.function.schema : r.foreign_table.schema;
        if (schema == from.schema) out.push_back(&r);
    }
    return out;
}

std::string cardinality_text(cardinality c) {
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
            break;
    }
    return "";
}

// PGRST201's details: one {cardinality, embedding, relationship} object per candidate.
std::string ambiguous_details(const std::vector<const relationship*>& rels) {
    core::json::writer j;
    j.w.StartArray();
    for (const auto* r : rels) {
        j.w.StartObject();
        if (r->card != cardinality::computed) {
            std::string text;
            if (r->card == cardinality::many_to_many) {
                std::vector<std::string> src, dst;
                for (const auto& p : r->junction_source_columns) src.push_back(p.second);
                for (const auto& p : r->junction_target_columns) dst.push_back(p.first);
                text = r->junction.name + " using " + r->junction_constraint_source +
                       columns_text(src) + " and " + r->junction_constraint_target +
                       columns_text(dst);
            } else {
                std::vector<std::string> mine, theirs;
                for (const auto& p : r->columns) {
                    mine.push_back(p.first);
                    theirs.push_back(p.second);
                }
                text = r->constraint + " using " + r->table.name + columns_text(mine) + " and " +
                       r->foreign_table.name + columns_text(theirs);
            }
            j.kv("cardinality", cardinality_text(r->card));
            j.kv("embedding", r->table.name + " with " + r->foreign_table.name);
            j.kv("relationship", text);
        }
        j.w.EndObject();
    }
    j.w.EndArray();
    return j.str();
}

// PostgREST's noRelBetweenHint: a closer origin when `from` has no relationships in the
// schema, else a closer target among those it has.
std::string no_relationship_hint(const schema_cache& sc, const qualified_name& from,
                                 std::string_view target,
                                 const std::vector<const relationship*>& from_rels) {
    if (!from_rels.empty()) {
        detail::fuzzy_set children;
        for (const auto* r : from_rels) children.add(r->foreign_table.name);
        for (const auto& [score, name] : children.get(target)) {
            if (score < 1.0) {
                return "Perhaps you meant '" + name + "' instead of '" + std::string(target) + "'.";
            }
        }
        return {};
    }
    detail::fuzzy_set parents;
    for (const auto& [tbl, rels] : sc.relationships_of) {
        if (std::any_of(rels.begin(), rels.end(), [&](const relationship& r) {
                return (r.card == cardinality::computed ? r.function.schema
                                                        : r.foreign_table.schema) == from.schema;
            })) {
            parents.add(tbl.name);
        }
    }
    if (auto p = parents.get_one(from.name)) {
        return "Perhaps you meant '" + *p + "' instead of '" + from.name + "'.";
    }
    return {};
}

bool single_body_type(media content, const std::string& type) {
    switch (content) {
        case media::json:
            return type == "json" || type == "jsonb";
        case media::text:
            return type == "text";
        case media::xml:
            return type == "xml";
        case media::octet:
            return type == "bytea";
        default:
            return false;
    }
}

bool only_single_param(bool post, media content) {
    return post && (content == media::text || content == media::xml || content == media::octet);
}

// PostgREST's matchesParams: every parameter without a default named, nothing unknown.
bool params_match(const function& fn, const std::set<std::string>& keys, bool post, media content) {
    if (fn.params.empty()) return keys.empty() && !only_single_param(post, content);
    std::set<std::string> required, optional;
    for (const auto& p : fn.params) (p.has_default ? optional : required).insert(p.name);
    if (optional.empty()) return keys == required;
    std::set<std::string> rest;
    for (const auto& k : keys) {
        if (!optional.contains(k)) rest.insert(k);
    }
    return rest == required;
}

std::string signature(const function& fn) {
    std::vector<std::string> params;
    for (const auto& p : fn.params) params.push_back(p.name + " => " + p.type);
    return fn.id.schema + "." + fn.id.name + "(" + join(params, ", ") + ")";
}

[[noreturn]] void ambiguous_function(const std::vector<const function*>& fns) {
    std::vector<std::string> sigs;
    for (const auto* f : fns) sigs.push_back(signature(*f));
    throw api_error(300, "PGRST203",
                    "Could not choose the best candidate function between: " + join(sigs, ", "), {},
                    "Try renaming the parameters or the function itself in the database so "
                    "function overloading can be resolved");
}

[[noreturn]] void no_function(const schema_cache& sc, const qualified_name& id,
                              const std::vector<std::string>& keys, bool post, media content,
                              const std::vector<function>* overloads) {
    const std::string fn = id.schema + "." + id.name;
    const bool single = only_single_param(post, content);
    std::string message = "Could not find the function " + fn;
    if (!single) message += keys.empty() ? " without parameters" : columns_text(keys);
    message += " in the schema cache";
    const std::string with_params =
        keys.empty()
            ? " without parameters"
            : std::string(" with parameter") + (keys.size() > 1 ? "s " : " ") + join(keys, ", ");
    std::string details = "Searched for the function " + fn;
    if (post && content == media::text) {
        details += " with a single unnamed text parameter";
    } else if (post && content == media::xml) {
        details += " with a single unnamed xml parameter";
    } else if (post && content == media::octet) {
        details += " with a single unnamed bytea parameter";
    } else if (post && content == media::json) {
        details += with_params + " or with a single unnamed json/jsonb parameter";
    } else {
        details += with_params;
    }
    details += ", but no matches were found in the schema cache.";
    std::string hint;
    if (!single) {
        std::optional<std::string> guess;
        if (overloads == nullptr || overloads->empty()) {
            detail::fuzzy_set names;
            for (const auto& [fid, fns] : sc.functions) {
                if (fid.schema == id.schema) names.add(fid.name);
            }
            guess = names.get_one(id.name, kNameHintScore);
        } else {
            // Each overload's parameter names, sorted, as "(a, b)", against the arguments'.
            auto list_text = [](std::vector<std::string> names) {
                std::sort(names.begin(), names.end());
                return columns_text(names);
            };
            detail::fuzzy_set lists;
            for (const auto& f : *overloads) {
                std::vector<std::string> names;
                for (const auto& p : f.params) names.push_back(p.name);
                lists.add(list_text(names));
            }
            if (auto l = lists.get_one(list_text(keys))) guess = id.name + *l;
        }
        if (guess) hint = "Perhaps you meant to call the function " + id.schema + "." + *guess;
    }
    throw api_error(404, "PGRST202", message, details, hint);
}

}  // namespace

std::string_view catalog_query() noexcept { return detail::kCatalogQuery; }

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
    std::string hint;
    detail::fuzzy_set names;
    for (const auto& [tid, t] : tables) {
        if (tid.schema == id.schema) names.add(tid.name);
    }
    if (names.size() < kMaxTablesForFuzzyHint) {
        if (auto guess = names.get_one(id.name, kNameHintScore)) {
            hint = "Perhaps you meant the table '" + id.schema + "." + *guess + "'";
        }
    }
    throw api_error(
        404, "PGRST205",
        "Could not find the table '" + id.schema + "." + id.name + "' in the schema cache", {},
        hint);
}

std::vector<relationship> schema_cache::relationships(const qualified_name& from) const {
    auto it = relationships_of.find(from);
    return it == relationships_of.end() ? std::vector<relationship>{} : it->second;
}

relationship schema_cache::find_relationship(const qualified_name& from, std::string_view target,
                                             std::string_view hint) const {
    const auto from_rels = candidates(*this, from);
    std::vector<const relationship*> found;
    for (const auto* r : from_rels) {
        if (rel_matches(*r, target, hint)) found.push_back(r);
    }
    if (found.size() == 1) return *found.front();
    const std::string t(target);
    if (found.empty()) {
        std::string details =
            "Searched for a foreign key relationship between '" + from.name + "' and '" + t;
        if (!hint.empty()) details += "' using the hint '" + std::string(hint);
        details += "' in the schema '" + from.schema + "', but no matches were found.";
        throw api_error(400, "PGRST200",
                        "Could not find a relationship between '" + from.name + "' and '" + t +
                            "' in the schema cache",
                        details, no_relationship_hint(*this, from, target, from_rels));
    }
    std::vector<std::string> choices;
    for (const auto* r : found) {
        if (r->card == cardinality::computed) continue;
        const auto& name = r->card == cardinality::many_to_many ? r->junction.name : r->constraint;
        choices.push_back("'" + r->foreign_table.name + "!" + name + "'");
    }
    api_error e(300, "PGRST201",
                "Could not embed because more than one relationship was found for '" + from.name +
                    "' and '" + t + "'",
                {},
                "Try changing '" + t + "' to one of the following: " + join(choices, ", ") +
                    ". Find the desired relationship in the 'details' key.");
    e.details_json = ambiguous_details(found);
    throw e;
}

schema_cache::call_match schema_cache::find_function(const qualified_name& id,
                                                     const std::vector<std::string>& args,
                                                     bool /*body_is_object*/,
                                                     bool prefer_single_object, bool read_only,
                                                     media content_type) const {
    const bool post = !read_only;
    const std::set<std::string> key_set(args.begin(), args.end());
    const std::vector<std::string> keys(key_set.begin(), key_set.end());  // sorted, unique
    auto it = functions.find(id);
    const std::vector<function>* overloads = it == functions.end() ? nullptr : &it->second;
    if (overloads == nullptr) no_function(*this, id, keys, post, content_type, nullptr);

    if (prefer_single_object && post && content_type == media::json) {
        // The older Prefer: params=single-object: the whole body for a lone json parameter.
        std::vector<const function*> single;
        for (const auto& f : *overloads) {
            if (f.params.size() == 1 &&
                (f.params[0].type == "json" || f.params[0].type == "jsonb")) {
                single.push_back(&f);
            }
        }
        if (single.size() == 1) return {single.front(), true};
        if (single.size() > 1) ambiguous_function(single);
    }

    // Named matches first; a single unnamed parameter taking the whole body is the fallback.
    std::vector<const function*> named, fallback;
    for (const auto& f : *overloads) {
        if (params_match(f, key_set, post, content_type)) {
            named.push_back(&f);
        } else if (post && f.params.size() == 1 && f.params[0].name.empty() &&
                   single_body_type(content_type, f.params[0].type)) {
            fallback.push_back(&f);
        }
    }
    const auto& chosen = !named.empty() ? named : fallback;
    if (chosen.empty()) no_function(*this, id, keys, post, content_type, overloads);
    if (chosen.size() > 1) ambiguous_function(chosen);
    const function* fn = chosen.front();
    return {fn, fn->params.size() == 1 && fn->params[0].name.empty()};
}

}  // namespace awp::rest
