// postgres_changes bindings (binding.hpp): the join's entries parsed and checked, the filter
// grammar realtime-js writes (PostgREST's quoting), and the test of a change against them with
// SQL's three-valued logic (a NULL column matches no comparison, negated or not).
#include "awp/realtime/binding.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "awp/core/json.hpp"

namespace awp::realtime {

namespace {

constexpr std::size_t kMaxName = 63;  // NAMEDATALEN - 1

struct op_name {
    std::string_view name;
    filter::op o;
};
constexpr op_name kOps[] = {{"eq", filter::op::eq},   {"neq", filter::op::neq},
                            {"lte", filter::op::lte}, {"lt", filter::op::lt},
                            {"gte", filter::op::gte}, {"gt", filter::op::gt},
                            {"in", filter::op::in},   {"is", filter::op::is}};
constexpr std::string_view kUnsupported[] = {
    "like", "ilike", "match", "imatch", "isdistinct", "fts", "plfts", "phfts", "wfts",
    "cs",   "cd",    "ov",    "sl",     "sr",         "nxr", "nxl",   "adj"};

/// `rest` starts with "op." (after an optional "not."): the operator, else nullopt.
std::optional<filter::op> op_at(std::string_view rest, std::size_t& len) {
    for (const auto& [name, o] : kOps) {
        if (rest.size() > name.size() && rest.substr(0, name.size()) == name &&
            rest[name.size()] == '.') {
            len = name.size() + 1;
            return o;
        }
    }
    return std::nullopt;
}

/// A comma at `i` starts another filter when a `column=op.` (or `column=not.op.`) follows.
bool starts_filter(std::string_view s) {
    const auto eq = s.find('=');
    if (eq == 0 || eq == std::string_view::npos) return false;
    if (s.substr(0, eq).find_first_of(",()\"") != std::string_view::npos) return false;
    auto rest = s.substr(eq + 1);
    if (rest.substr(0, 4) == "not.") rest.remove_prefix(4);
    std::size_t len = 0;
    return op_at(rest, len).has_value();
}

/// One value: quoted ("a \"b\"", backslash escapes) or plain.
std::string unquote(std::string_view v) {
    if (v.size() < 2 || v.front() != '"' || v.back() != '"') return std::string(v);
    std::string out;
    out.reserve(v.size());
    for (std::size_t i = 1; i + 1 < v.size(); ++i) {
        if (v[i] == '\\' && i + 2 < v.size()) ++i;
        out.push_back(v[i]);
    }
    return out;
}

/// Splits at commas outside quotes; `top` also only where another filter starts.
std::vector<std::string_view> split(std::string_view s, bool top) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    bool quoted = false;
    int depth = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (quoted) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                quoted = false;
            }
            continue;
        }
        if (c == '"') {
            quoted = true;
        } else if (c == '(') {
            ++depth;
        } else if (c == ')') {
            --depth;
        } else if (c == ',' && depth <= 0 && (!top || starts_filter(s.substr(i + 1)))) {
            parts.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    }
    if (quoted) throw binding_error("filter: a quoted value is not closed");
    parts.push_back(s.substr(start));
    return parts;
}

filter parse_one(std::string_view text) {
    const auto eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0) {
        throw binding_error("filter must be column=operator.value");
    }
    filter f;
    f.column = std::string(text.substr(0, eq));
    if (f.column.size() > kMaxName) throw binding_error("filter: column name too long");
    auto rest = text.substr(eq + 1);
    if (rest.substr(0, 4) == "not.") {
        f.negate = true;
        rest.remove_prefix(4);
    }
    std::size_t len = 0;
    auto o = op_at(rest, len);
    if (!o) {
        const auto dot = rest.find('.');
        const auto name = rest.substr(0, dot);
        for (auto u : kUnsupported) {
            if (name == u) {
                throw binding_error("filter operator " + std::string(name) +
                                    " is not supported: use eq, neq, lt, lte, gt, gte, in or is");
            }
        }
        throw binding_error(
            "filter must be column=operator.value with operator eq, neq, lt, "
            "lte, gt, gte, in or is");
    }
    f.o = *o;
    const auto value = rest.substr(len);
    if (f.o == filter::op::in) {
        if (value.size() < 2 || value.front() != '(' || value.back() != ')') {
            throw binding_error("filter: in takes a list in parentheses: in.(a,b)");
        }
        for (auto v : split(value.substr(1, value.size() - 2), false)) {
            f.values.push_back(unquote(v));
        }
        if (f.values.size() > kMaxFilterValues) throw binding_error("filter: too many values");
    } else if (f.o == filter::op::is) {
        std::string v(value);
        std::transform(v.begin(), v.end(), v.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (v != "null" && v != "true" && v != "false" && v != "unknown") {
            throw binding_error("filter: is takes null, true, false or unknown");
        }
        f.values.push_back(v);
    } else {
        f.values.push_back(unquote(value));
    }
    return f;
}

bool is_numeric_type(std::string_view t) {
    return t == "int2" || t == "int4" || t == "int8" || t == "float4" || t == "float8" ||
           t == "numeric" || t == "oid";
}

std::optional<long double> number(const std::string& s) {
    if (s.empty()) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const long double v = std::strtold(s.c_str(), &end);
    if (errno != 0 || end != s.c_str() + s.size()) return std::nullopt;
    return v;
}

std::optional<bool> boolean(std::string_view s) {
    std::string v(s);
    std::transform(v.begin(), v.end(), v.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (v == "t" || v == "true" || v == "1" || v == "y" || v == "yes" || v == "on") return true;
    if (v == "f" || v == "false" || v == "0" || v == "n" || v == "no" || v == "off") return false;
    return std::nullopt;
}

/// <0, 0, >0 as Postgres would order the column value against the filter value.
int order(const std::string& column, const std::string& wanted, std::string_view type) {
    if (is_numeric_type(type)) {
        auto a = number(column);
        auto b = number(wanted);
        if (a && b) return *a < *b ? -1 : (*a > *b ? 1 : 0);
    } else if (type == "bool") {
        auto a = boolean(column);
        auto b = boolean(wanted);
        if (a && b) return static_cast<int>(*a) - static_cast<int>(*b);
    } else if (type == "uuid") {
        std::string w = wanted;
        std::transform(w.begin(), w.end(), w.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return column.compare(w);
    }
    return column.compare(wanted);
}

/// SQL's answer: nullopt = NULL (unknown).
std::optional<bool> evaluate(const filter& f, const std::optional<std::string>& value,
                             std::string_view type) {
    if (f.o == filter::op::is) {
        const auto& w = f.values.front();
        if (w == "null" || w == "unknown") return !value.has_value();
        if (!value) return false;
        auto b = boolean(*value);
        if (!b) return false;
        return *b == (w == "true");
    }
    if (!value) return std::nullopt;
    if (f.o == filter::op::in) {
        for (const auto& w : f.values) {
            if (w == "null") continue;  // x IN (NULL) never holds
            if (order(*value, w, type) == 0) return true;
        }
        return false;
    }
    const int c = order(*value, f.values.front(), type);
    switch (f.o) {
        case filter::op::eq:
            return c == 0;
        case filter::op::neq:
            return c != 0;
        case filter::op::lt:
            return c < 0;
        case filter::op::lte:
            return c <= 0;
        case filter::op::gt:
            return c > 0;
        case filter::op::gte:
            return c >= 0;
        default:
            return false;
    }
}

std::string upper(std::string_view s) {
    std::string v(s);
    std::transform(v.begin(), v.end(), v.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return v;
}

const rapidjson::Value* member(const rapidjson::Value& o, const char* k) {
    auto it = o.FindMember(k);
    return it == o.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

std::string name_field(const rapidjson::Value& o, const char* k) {
    const auto* v = member(o, k);
    if (!v) return {};
    if (!v->IsString()) throw binding_error(std::string(k) + " must be a string");
    std::string s(v->GetString(), v->GetStringLength());
    if (s.size() > kMaxName) throw binding_error(std::string(k) + " is too long");
    return s;
}

}  // namespace

std::vector<filter> parse_filter(std::string_view text) {
    if (text.size() > kMaxFilterBytes) throw binding_error("filter too long");
    std::vector<filter> out;
    for (auto part : split(text, true)) out.push_back(parse_one(part));
    if (out.size() > kMaxFilterValues) throw binding_error("filter: too many conditions");
    return out;
}

bool binding::covers(change_kind k, std::string_view schema_name,
                     std::string_view table_name) const {
    const unsigned bit = k == change_kind::insert   ? event_bit::insert
                         : k == change_kind::update ? event_bit::update
                                                    : event_bit::remove;
    if ((events & bit) == 0) return false;
    if (schema != "*" && schema != schema_name) return false;
    return any_table() || *table == table_name;
}

std::string binding::reply_json() const {
    core::json::writer j;
    j.w.StartObject();
    j.key("id");
    j.w.Uint64(id);
    j.kv("event", event);
    j.kv("schema", schema);
    if (table) j.kv("table", *table);
    if (filter) j.kv("filter", *filter);
    j.w.EndObject();
    return j.str();
}

binding parse_binding(const rapidjson::Value& v) {
    if (!v.IsObject()) throw binding_error("a postgres_changes binding must be an object");
    binding b;
    b.event = name_field(v, "event");
    const auto ev = upper(b.event);
    if (ev == "*") {
        b.events = event_bit::all;
    } else if (ev == "INSERT") {
        b.events = event_bit::insert;
    } else if (ev == "UPDATE") {
        b.events = event_bit::update;
    } else if (ev == "DELETE") {
        b.events = event_bit::remove;
    } else {
        throw binding_error("event must be INSERT, UPDATE, DELETE or *");
    }
    b.schema = name_field(v, "schema");
    if (b.schema.empty()) throw binding_error("schema is required");
    if (member(v, "table")) b.table = name_field(v, "table");
    if (const auto* f = member(v, "filter")) {
        if (!f->IsString()) throw binding_error("filter must be a string");
        b.filter = std::string(f->GetString(), f->GetStringLength());
        if (!b.filter->empty()) {
            if (b.any_table()) throw binding_error("a filter needs a table");
            b.filters = parse_filter(*b.filter);
        }
    }
    if (const auto* s = member(v, "select")) {
        if (!s->IsArray() || s->Size() != 0) {
            throw binding_error("select (a column list) is not supported: leave it out");
        }
    }
    return b;
}

const std::vector<column_value>& filter_row(const change& c) {
    return c.kind == change_kind::remove ? c.old_keys : c.new_row;
}

bool filters_hold(const binding& b, const change& c) {
    if (b.filters.empty()) return true;
    const auto& row = filter_row(c);
    for (const auto& f : b.filters) {
        auto it = std::find_if(row.begin(), row.end(),
                               [&](const column_value& col) { return col.name == f.column; });
        if (it == row.end()) return false;
        if (!compare(f, it->text, it->type)) return false;
    }
    return true;
}

bool compare(const filter& f, const std::optional<std::string>& value, std::string_view type) {
    auto r = evaluate(f, value, type);
    if (!r) return false;
    return f.negate ? !*r : *r;
}

}  // namespace awp::realtime
