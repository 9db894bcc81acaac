// A whole data-API request read as PostgREST v14's userApiRequest reads one (ApiRequest.hs,
// QueryParams.parse): the resource from the path, the schema from the profile headers, the
// action from the method, the query parameters by kind, the ranges and the body, in that order
// (so the first refusal is PostgREST's), with awp's limits checked on the way.
#include <algorithm>
#include <map>

#include "grammar.hpp"
#include "internal.hpp"
#include "parsec.hpp"

namespace awp::rest {
namespace {

using detail::row_span;

// ---- limits ---------------------------------------------------------------------------------

[[noreturn]] void over(std::string message, std::string details, std::string hint = {}) {
    throw api_error(400, "PGRST100", std::move(message), std::move(details), std::move(hint));
}

std::string at_most(std::size_t n, std::size_t max, std::string_view unit) {
    return std::to_string(n) + " " + std::string(unit) + "; at most " + std::to_string(max) +
           " are accepted.";
}

/// Walks what the grammar produced and holds it to the limits that are not about nesting (the
/// grammar refuses deep nesting itself, before recursing).
class checker {
public:
    explicit checker(const limits& lim) : lim_(lim) {}

    void name(std::string_view what, const std::string& n) const {
        if (n.size() > lim_.max_identifier_bytes) {
            over("A name in the query string is too long",
                 "A " + std::string(what) + " has " +
                     at_most(n.size(), lim_.max_identifier_bytes, "bytes"));
        }
    }
    void value(const std::string& v) const {
        if (v.size() > lim_.max_value_bytes) {
            over("A value in the query string is too long",
                 "A value has " + at_most(v.size(), lim_.max_value_bytes, "bytes"));
        }
    }
    void path(const embed_path& p) const {
        if (p.size() > lim_.max_embed_depth) {
            over("Embedded resources are nested too deeply",
                 "A parameter's embed path has " +
                     at_most(p.size(), lim_.max_embed_depth, "levels"));
        }
        for (const auto& n : p) name("embedded resource name", n);
    }
    void fld(const field& f) const {
        name("column name", f.name);
        for (const auto& st : f.path) value(st.operand);
    }
    void expr(const op_expr& e) const {
        value(e.value);
        name("text search language", e.language);
        if (e.list.size() > lim_.max_list_values) {
            over("Too many values in an in list",
                 "The list has " + at_most(e.list.size(), lim_.max_list_values, "values"));
        }
        for (const auto& v : e.list) value(v);
    }
    void select(const std::vector<select_item>& items) {
        for (const auto& it : items) {
            if (++select_items_ > lim_.max_select_items) {
                over("Too many items in the select parameter",
                     "It has more than " + std::to_string(lim_.max_select_items) +
                         " fields and embedded resources (at every level), the most accepted.");
            }
            if (it.what != select_item::kind::field && ++embeds_ > lim_.max_embeds) {
                over("Too many embedded resources",
                     "The select parameter embeds more than " + std::to_string(lim_.max_embeds) +
                         " resources (at every level, spreads included), the most accepted.",
                     "Ask for fewer related resources in one request, or join them in a view.");
            }
            fld(it.fld);
            name("alias", it.alias);
            name("cast", it.cast);
            name("cast", it.agg_cast);
            name("embedded resource name", it.relation);
            name("embed hint", it.hint);
            select(it.children);
        }
    }
    void condition() {
        if (++conditions_ > lim_.max_conditions) {
            over("Too many conditions", "The query has more than " +
                                            std::to_string(lim_.max_conditions) +
                                            " filters and and/or conditions, the most accepted.");
        }
    }
    void logic(const logic_tree& t) {
        if (t.is_leaf) {
            condition();
            fld(t.leaf.fld);
            expr(t.leaf.expr);
            return;
        }
        for (const auto& k : t.kids) logic(k);
    }

private:
    const limits& lim_;
    std::size_t select_items_ = 0;
    std::size_t embeds_ = 0;
    std::size_t conditions_ = 0;
};

// ---- resource, schema, action ---------------------------------------------------------------

/// WAI's decodePathSegments: split on '/', each segment percent-decoded (leniently), UTF-8
/// decoded leniently (U+FFFD for what is not).
std::vector<std::string> path_segments(std::string_view path) {
    std::vector<std::string> out;
    if (path.empty() || path == "/") return out;
    if (path.front() == '/') path.remove_prefix(1);
    auto decode = [](std::string_view s) {
        auto hex = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        };
        std::string bytes;
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
                bytes += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
                i += 2;
            } else {
                bytes += s[i];
            }
        }
        if (bytes.find('\0') != std::string::npos) {
            throw api_error(404, "PGRST125", "Invalid path specified in request URL");
        }
        return detail::lenient_utf8(bytes);
    };
    for (;;) {
        const auto slash = path.find('/');
        out.push_back(decode(path.substr(0, slash)));
        if (slash == std::string_view::npos) break;
        path.remove_prefix(slash + 1);
    }
    return out;
}

/// A header's text for a message: invalid UTF-8 replaced, so the JSON body stays valid.
std::string printable(std::string_view v) { return detail::lenient_utf8(v); }

enum class resource_kind { schema, relation, routine };

bool is_mutation(action a) {
    return a == action::insert || a == action::upsert_one || a == action::update ||
           a == action::remove;
}

std::string last_word(std::string_view key) {
    const auto dot = key.rfind('.');
    return std::string(dot == std::string_view::npos ? key : key.substr(dot + 1));
}

// ---- ranges ---------------------------------------------------------------------------------

struct range_param {
    std::string key;  ///< the key, ".offset" read as ".limit" (one entry per level)
    row_span span;
};

/// QueryParams' ranges: limit=/offset= per key (the last of a key wins), limit and offset of
/// one level combined into [offset, offset + limit - 1].
std::vector<range_param> range_params(const std::vector<detail::query_item>& items) {
    std::vector<std::string> order;
    std::map<std::string, row_span> limit_of, offset_of;
    for (const auto& it : items) {
        if (!it.value) continue;
        const auto w = last_word(it.key);
        if (w != "limit" && w != "offset") continue;
        const auto n = detail::read_integer(*it.value);
        if (!n) {
            // PostgREST reads a non-integer as no limit at all: a caller who asked for a page
            // would get every row. Refused instead.
            const std::string shown =
                it.value->size() > 64 ? it.value->substr(0, 64) + "..." : *it.value;
            throw api_error(400, "PGRST100",
                            "\"failed to parse " + it.key + " parameter (" + shown + ")\"",
                            std::string(w) + " takes a whole number of rows, such as 10");
        }
        std::string key = it.key;
        if (w == "offset") key.replace(key.size() - 6, 6, "limit");
        if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
        if (w == "limit") {
            limit_of[key] = row_span::all().restrict(*n);
        } else {
            offset_of[key] = row_span::geq(*n);
        }
    }
    std::vector<range_param> out;
    for (const auto& key : order) {
        const auto l = limit_of.find(key);
        const auto o = offset_of.find(key);
        if (l != limit_of.end() && o != offset_of.end()) {
            const std::int64_t lim = l->second.limit().value_or(0);
            const std::int64_t off = o->second.lower;
            out.push_back({key, row_span{off, detail::sat_add(detail::sat_add(off, lim), -1)}});
        } else {
            out.push_back({key, l != limit_of.end() ? l->second : o->second});
        }
    }
    return out;
}

[[noreturn]] void bad_range(bool lower_gt_upper) {
    throw api_error(416, "PGRST103", "Requested range not satisfiable",
                    lower_gt_upper ? "The lower boundary must be lower than or equal to the upper "
                                     "boundary in the Range header."
                                   : "Limit should be greater than or equal to zero.");
}

}  // namespace

api_request parse(const raw_request& in, const std::vector<std::string>& schemas,
                  const limits& lim) {
    if (schemas.empty()) throw core::error("awp::rest::parse: no exposed schema");
    if (in.query.size() > lim.max_query_bytes) {
        api_error e(414, "PGRST100", "The query string is too long",
                    "It has " + at_most(in.query.size(), lim.max_query_bytes, "bytes"),
                    "Pass long lists in the JSON body of a function call (POST /rpc/<function>) or "
                    "move the condition into a view.");
        throw e;
    }
    api_request r;
    r.method = std::string(in.method);
    r.head = in.method == "HEAD";

    // the resource (getResource)
    const auto segments = path_segments(in.path);
    resource_kind res = resource_kind::schema;
    if (segments.size() == 1) {
        res = resource_kind::relation;
        r.target = segments[0];
    } else if (segments.size() == 2 && segments[0] == "rpc") {
        res = resource_kind::routine;
        r.target = segments[1];
    } else if (!segments.empty()) {
        throw api_error(404, "PGRST125", "Invalid path specified in request URL");
    }

    // the schema (getSchema): Content-Profile for writes, Accept-Profile otherwise
    const bool write_method =
        in.method == "DELETE" || in.method == "PATCH" || in.method == "POST" || in.method == "PUT";
    const auto profile = write_method ? in.content_profile : in.accept_profile;
    if (profile) {
        const std::string p(*profile);
        if (std::find(schemas.begin(), schemas.end(), p) == schemas.end()) {
            std::string list;
            for (const auto& s : schemas) list += (list.empty() ? "" : ", ") + s;
            throw api_error(406, "PGRST106", "Invalid schema: " + printable(p), {},
                            "Only the following schemas are exposed: " + list);
        }
        r.schema = p;
        r.schema_negotiated = true;
    } else {
        r.schema = schemas.front();
        r.schema_negotiated = schemas.size() != 1;
    }

    // the action (getAction)
    const std::string_view m = in.method;
    bool rpc_read = false;
    switch (res) {
        case resource_kind::routine:
            if (m == "HEAD" || m == "GET") {
                r.action = action::call;
                rpc_read = true;
            } else if (m == "POST") {
                r.action = action::call;
            } else if (m == "OPTIONS") {
                r.action = action::info;
            } else {
                throw api_error(405, "PGRST101",
                                "Cannot use the " + printable(m) + " method on RPC");
            }
            break;
        case resource_kind::relation:
            if (m == "HEAD" || m == "GET") {
                r.action = action::read;
            } else if (m == "POST") {
                r.action = action::insert;
            } else if (m == "PUT") {
                r.action = action::upsert_one;
            } else if (m == "PATCH") {
                r.action = action::update;
            } else if (m == "DELETE") {
                r.action = action::remove;
            } else if (m == "OPTIONS") {
                r.action = action::info;
            } else {
                throw api_error(405, "PGRST117", "Unsupported HTTP method: " + printable(m));
            }
            break;
        case resource_kind::schema:
            if (m == "HEAD" || m == "GET") {
                r.action = action::root;
            } else if (m == "OPTIONS") {
                r.action = action::info;
            } else {
                throw api_error(405, "PGRST117", "Unsupported HTTP method: " + printable(m));
            }
            break;
    }
    r.read_only = m == "GET" || m == "HEAD" || m == "OPTIONS";

    // the query parameters (QueryParams.parse), in its order: order, logic, columns, select,
    // filters, on_conflict
    const auto items = detail::query_items(in.query);
    if (items.size() > lim.max_params) {
        over("Too many query parameters",
             "The query string has " + at_most(items.size(), lim.max_params, "parameters"));
    }
    checker check(lim);
    auto lookup = [&](std::string_view k) -> std::optional<std::string> {
        for (const auto& it : items) {
            if (it.key == k) return it.value;
        }
        return std::nullopt;
    };
    for (const auto& it : items) {
        if (!it.value || last_word(it.key) != "order") continue;
        auto [path, f] = detail::tree_path(it.key);
        auto terms = detail::order_param(*it.value);
        check.path(path);
        for (const auto& t : terms) {
            check.name("embedded resource name", t.relation);
            check.fld(t.fld);
        }
        r.order.emplace_back(std::move(path), std::move(terms));
    }
    for (const auto& it : items) {
        if (!it.value) continue;
        const auto w = last_word(it.key);
        if (w != "and" && w != "or") continue;
        auto [path, op] = detail::logic_path(it.key);
        auto tree = detail::logic_param(op, *it.value, lim);
        check.path(path);
        check.logic(tree);
        r.logic.emplace_back(std::move(path), std::move(tree));
    }
    if (const auto cols = lookup("columns")) {
        auto names = detail::columns_param(*cols, "columns parameter");
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        for (const auto& n : names) check.name("column name", n);
        r.columns = std::move(names);
    }
    r.select = detail::select_param(lookup("select").value_or("*"), lim);
    check.select(r.select);
    for (const auto& it : items) {
        if (!it.value) continue;
        const auto w = last_word(it.key);
        if (w == "order" || w == "limit" || w == "offset" || w == "and" || w == "or" ||
            it.key == "select" || it.key == "columns" || it.key == "on_conflict") {
            continue;
        }
        auto [path, f] = detail::tree_path(it.key);
        auto e = detail::filter_value(*it.value, rpc_read);
        check.path(path);
        check.fld(f);
        if (e.no_op) {
            check.value(e.value);
            r.rpc_args.emplace_back(f.name, std::move(e.value));
            continue;
        }
        check.condition();
        check.expr(e);
        r.filters.emplace_back(std::move(path), filter{std::move(f), std::move(e)});
    }
    if (const auto oc = lookup("on_conflict")) {
        auto names = detail::columns_param(*oc, "on_conflict parameter");
        for (const auto& n : names) check.name("column name", n);
        r.on_conflict = std::move(names);
    }

    // the ranges (getRanges): the Range header on GET only, limit=0 allowed
    const auto ranges = range_params(items);
    row_span limit_span = row_span::all();
    for (const auto& rp : ranges) {
        if (rp.key == "limit") limit_span = rp.span;
    }
    const row_span header_span =
        in.method == "GET" && in.range ? detail::range_header(*in.range) : row_span::all();
    const row_span top =
        limit_span.limit_zero() ? row_span{0, -1} : header_span.intersect(limit_span);
    if (top.empty() && !limit_span.limit_zero()) bad_range(header_span.empty());
    if (in.method == "PUT" && !(top == row_span::all())) {
        throw api_error(400, "PGRST114",
                        "limit/offset querystring parameters are not allowed for PUT");
    }
    r.top_range = top.to_row_range();

    // the body (getPayload)
    r.content_type_raw = in.content_type ? std::string(*in.content_type) : std::string();
    const auto ct =
        in.content_type ? detail::decode_media_type(*in.content_type) : detail::decoded_media{};
    r.content_type = ct.type.kind;
    r.urlencoded = ct.urlencoded;
    r.body_empty = std::all_of(in.body.begin(), in.body.end(), [](char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
    });
    const bool call_post = r.action == action::call && !rpc_read;
    if (r.action == action::insert || r.action == action::upsert_one ||
        r.action == action::update || call_post) {
        const bool uses_columns = r.action != action::upsert_one && r.columns.has_value();
        if (ct.urlencoded) {
            detail::read_form_body(in.body, r);
        } else if (ct.type.kind == media::json) {
            if (uses_columns) {
                r.body = std::string(in.body);
                r.body_keys = *r.columns;
                const auto first = std::find_if(in.body.begin(), in.body.end(), [](char c) {
                    return c != ' ' && c != '\t' && c != '\n' && c != '\r';
                });
                r.body_is_array = first != in.body.end() && *first == '[';
            } else {
                detail::read_json_body(in.body, call_post, r);
            }
        } else if (ct.type.kind == media::csv) {
            detail::read_csv_body(in.body, r);
        } else if (call_post && (ct.type.kind == media::text || ct.type.kind == media::xml ||
                                 ct.type.kind == media::octet)) {
            r.body = std::string(in.body);
        } else {
            throw api_error(400, "PGRST102", "Content-Type not acceptable: " + ct.type.raw);
        }
    }

    // every level's range (Plan's addRanges: reads only; the top level always, as PostgREST's
    // iRange always holds "limit")
    r.ranges.emplace_back(embed_path{}, r.top_range);
    if (!is_mutation(r.action)) {
        for (const auto& rp : ranges) {
            if (rp.key == "limit") continue;
            auto [path, f] = detail::tree_path(rp.key);
            check.path(path);
            r.ranges.emplace_back(std::move(path), rp.span.to_row_range());
        }
    }

    r.prefer = parse_prefer(in.prefer);
    if (in.accept) {
        r.accept = parse_accept(*in.accept);
    } else {
        media_type any;
        any.kind = media::any;
        any.raw = "*/*";
        r.accept.push_back(std::move(any));
    }
    return r;
}

}  // namespace awp::rest
