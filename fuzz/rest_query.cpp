// The data API's request grammar (awp::rest::parse and its pieces) on arbitrary bytes. The
// input reads like a request: the first line is the query string; the lines after it, up to a
// blank line, are headers the dialect reads (Method, Path, Prefer, Accept, Range,
// Content-Type, Accept-Profile, Content-Profile); the rest is the body. A request the grammar
// takes is then planned (awp::rest::prepare: names against a small schema cache, the SQL
// rendered) and its answer shaped. Only api_error is an expected outcome, and it must be a
// 4xx whose body is valid JSON (a plan may also answer 300 for an ambiguous embed or call);
// anything else (another exception, a crash, a sanitizer report, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "awp/core/json.hpp"
#include "awp/rest/query.hpp"
#include "awp/rest/request.hpp"
#include "support/rest_catalog.hpp"

namespace {

namespace rest = awp::rest;

/// A refusal must be a 4xx (300 for an ambiguous name) with PostgREST's body as valid JSON (no
/// raw bytes leaked into it).
void check(const rest::api_error& e) {
    if ((e.status() < 400 || e.status() > 499) && e.status() != 300) std::abort();
    try {
        const auto body = e.body();
        (void)awp::core::json::parse_object(body, {body.size() + 1, 8});
    } catch (const awp::core::json::parse_error&) {
        std::abort();
    }
}

template <class F>
void refused_or_ok(F&& f) {
    try {
        f();
    } catch (const rest::api_error& e) {
        check(e);
    }
}

/// The schema the planner resolves names in: items with an owner (to-one), tags through a
/// junction (many-to-many), a computed relationship, functions of each result kind.
const rest::schema_cache& schema() {
    using awp::test::rest_catalog::catalog;
    using awp::test::rest_catalog::param_spec;
    static const auto sc = [] {
        const rest::qualified_name items{"public", "items"}, owners{"public", "owners"},
            tags{"public", "tags"}, item_tags{"public", "item_tags"};
        catalog c;
        c.table("public", "items",
                {{"id", "integer", false},
                 {"owner_id", "integer"},
                 {"name", "text"},
                 {"data", "jsonb"},
                 {"tags", "text[]"},
                 {"doc", "tsvector"}},
                {"id"});
        c.table("public", "owners", {{"id", "integer", false}, {"name", "text"}}, {"id"});
        c.table("public", "tags", {{"id", "integer", false}, {"label", "text"}}, {"id"});
        c.table("public", "item_tags",
                {{"item_id", "integer", false}, {"tag_id", "integer", false}},
                {"item_id", "tag_id"});
        c.fk("items_owner_id_fkey", items, {{"owner_id", "id"}}, owners);
        c.fk("item_tags_item_id_fkey", item_tags, {{"item_id", "id"}}, items);
        c.fk("item_tags_tag_id_fkey", item_tags, {{"tag_id", "id"}}, tags);
        c.function({"public", "count_items"}, 50, {param_spec{"n", "integer"}});
        c.function({"public", "items_of"}, 51, {param_spec{"owner", "integer"}}, "integer", true,
                   items, 's');
        c.function({"public", "echo"}, 52, {param_spec{"", "json"}}, "json");
        c.computed({"public", "owner_items"}, owners, items, false);
        return rest::decode(c.json(), {"public", "personal"});
    }();
    return *sc;
}

/// Plans a parsed request and shapes an answer to it from a made-up result row.
void plan_and_answer(rest::api_request req) {
    rest::options o;
    o.plan = true;
    o.tx_override = true;
    const auto p = rest::prepare(std::move(req), schema(), o);
    for (const auto& v : p.main.params) {
        if (v && v->find('\0') != std::string::npos) std::abort();  // NULs never reach libpq
    }
    rest::main_row row;
    row.page_total = 1;
    row.total = "1";
    row.body = "[]";
    refused_or_ok([&] { (void)rest::respond(p, row, std::nullopt, o); });
}

bool starts(std::string_view line, std::string_view name) {
    return line.size() > name.size() && line.substr(0, name.size()) == name &&
           line[name.size()] == ':';
}

std::string_view value_of(std::string_view line, std::string_view name) {
    auto v = line.substr(name.size() + 1);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string input(reinterpret_cast<const char*>(data), size);
    std::string_view rest_of(input);
    auto next_line = [&]() -> std::string_view {
        const auto nl = rest_of.find('\n');
        const auto line = rest_of.substr(0, nl);
        rest_of = nl == std::string_view::npos ? std::string_view() : rest_of.substr(nl + 1);
        return line;
    };

    rest::raw_request r;
    r.method = "GET";
    r.path = "/items";  // the schema() above has items, owners, tags and functions
    r.query = next_line();
    while (!rest_of.empty()) {
        const auto line = next_line();
        if (line.empty()) break;
        if (starts(line, "Method")) r.method = value_of(line, "Method");
        if (starts(line, "Path")) r.path = value_of(line, "Path");
        if (starts(line, "Prefer")) r.prefer.push_back(value_of(line, "Prefer"));
        if (starts(line, "Accept")) r.accept = value_of(line, "Accept");
        if (starts(line, "Range")) r.range = value_of(line, "Range");
        if (starts(line, "Content-Type")) r.content_type = value_of(line, "Content-Type");
        if (starts(line, "Accept-Profile")) r.accept_profile = value_of(line, "Accept-Profile");
        if (starts(line, "Content-Profile")) r.content_profile = value_of(line, "Content-Profile");
    }
    r.body = rest_of;

    // The whole request, with the defaults and with a query limit past the fuzzer's inputs (so
    // deep nesting reaches the grammar).
    static const std::vector<std::string> schemas{"public", "personal"};
    static const rest::limits wide = [] {
        rest::limits l;
        l.max_query_bytes = std::size_t{1} << 21;
        return l;
    }();
    for (const rest::limits* lim : {static_cast<const rest::limits*>(nullptr), &wide}) {
        refused_or_ok([&] {
            const auto req = lim ? rest::parse(r, schemas, *lim) : rest::parse(r, schemas);
            // a CSV or form body read for the statement must have become JSON
            const bool reads_body = req.action == rest::action::insert ||
                                    req.action == rest::action::upsert_one ||
                                    req.action == rest::action::update ||
                                    (req.action == rest::action::call && req.method == "POST");
            if (reads_body && (req.content_type == rest::media::csv || req.urlencoded)) {
                (void)awp::core::json::parse(req.body, {req.body.size() + 1, 1024});
            }
            (void)req.prefer.applied_header(true);
            refused_or_ok([&] { req.prefer.check_strict(); });
            if (!lim) refused_or_ok([&] { plan_and_answer(req); });
        });
    }

    // The pieces on the raw first line (no query decoding in front of them).
    const std::string_view text = r.query;
    refused_or_ok([&] { (void)rest::parse_select(text, wide); });
    refused_or_ok([&] { (void)rest::parse_op_expr(text, false); });
    refused_or_ok([&] { (void)rest::parse_op_expr(text, true); });
    refused_or_ok([&] { (void)rest::parse_logic("or", text, wide); });
    refused_or_ok([&] { (void)rest::parse_logic("not.and", text, wide); });
    refused_or_ok([&] { (void)rest::parse_order(text); });
    refused_or_ok([&] { (void)rest::parse_query_string(text); });
    (void)rest::parse_prefer({text});
    (void)rest::parse_accept(text);
    return 0;
}
