// The data API's plan, its SQL and its answer (awp::rest prepare/respond) on a schema cache
// decoded from a catalog document written here: values only ever as bound parameters, names
// only ever quoted, embeds and filters as PostgREST renders them, and the answer's status and
// headers (Content-Range, 206/416, .single()'s 406, max-affected, Location, response.headers).
#include <catch2/catch.hpp>

#include <string>

#include "awp/rest/query.hpp"
#include "awp/rest/request.hpp"
#include "awp/rest/schema.hpp"
#include "support/rest_catalog.hpp"

namespace rest_query_test {

namespace {

namespace rest = awp::rest;

using awp::test::rest_catalog::catalog;
using awp::test::rest_catalog::col;
using awp::test::rest_catalog::param_spec;

// agents, tasks (a composite key to agents, as awp's tenant keys are), a table with a hostile
// column name, one function, a role with its own statement_timeout.
std::string catalog_json() {
    const rest::qualified_name agents{"public", "agents"}, tasks{"public", "tasks"};
    catalog c;
    c.table("public", "agents",
            {{"id", "uuid", false, "gen_random_uuid()"},
             {"tenant_id", "uuid", false},
             {"name", "text", false},
             {"meta", "jsonb", false}},
            {"id"});
    c.table("public", "tasks",
            {{"id", "uuid", false},
             {"tenant_id", "uuid", false},
             {"title", "text", false},
             {"assignee_agent_id", "uuid"}},
            {"id"});
    c.table("public", "odd", {{"a\"b; drop", "text"}}, {});
    c.fk("tasks_assignee_agent_id_fkey", tasks,
         {{"tenant_id", "tenant_id"}, {"assignee_agent_id", "id"}}, agents);
    c.function({"public", "bump"}, 10, {param_spec{"n", "integer"}});
    c.role("anon", {{"statement_timeout", "3s"}});
    return c.json();
}

const rest::schema_cache& cache() {
    static const auto sc = rest::decode(catalog_json(), {"public"});
    return *sc;
}

rest::prepared plan(std::string_view method, std::string_view path, std::string_view query,
                    std::string_view body = {}, std::vector<std::string_view> prefer = {},
                    std::optional<std::string_view> accept = std::nullopt,
                    const rest::options& o = {}) {
    rest::raw_request in;
    in.method = method;
    in.path = path;
    in.query = query;
    in.body = body;
    in.prefer = std::move(prefer);
    in.accept = accept;
    if (!body.empty()) in.content_type = "application/json";
    return rest::prepare(rest::parse(in, cache().schemas), cache(), o);
}

bool has_param(const rest::statement& s, const std::string& v) {
    for (const auto& p : s.params) {
        if (p && *p == v) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("request values reach Postgres only as bound parameters, names only quoted", "[rest]") {
    const std::string evil = "x'); DROP TABLE agents; --";
    auto p =
        plan("GET", "/agents", "select=id,name&name=eq.x%27%29%3B%20DROP%20TABLE%20agents%3B%20--");
    CHECK(p.main.sql.find("DROP TABLE") == std::string::npos);
    CHECK(has_param(p.main, evil));
    // A hostile column name is one quoted identifier, its quote doubled.
    auto q = plan("GET", "/odd", "select=%22a%5C%22b%3B%20drop%22");
    CHECK(q.main.sql.find(R"("odd"."a""b; drop")") != std::string::npos);
    // JSON path keys and in-lists are parameters too.
    auto j = plan("GET", "/agents", "select=meta->>k%27ey&name=in.(a,%22b%2Cc%22)");
    CHECK(j.main.sql.find("->>'") == std::string::npos);         // never a literal in the text
    CHECK(j.main.sql.find("AS \"k'ey\"") != std::string::npos);  // the output name: quoted
    CHECK(has_param(j.main, "k'ey"));
    CHECK(has_param(j.main, R"({"a","b,c"})"));
    // A cast is a type name from a fixed list or a quoted identifier, never text.
    auto c = plan("GET", "/agents", "select=name::varchar,meta::my_type");
    CHECK(c.main.sql.find("CAST(\"agents\".\"name\" AS character varying)") != std::string::npos);
    CHECK(c.main.sql.find("AS \"my_type\")") != std::string::npos);
    CHECK_THROWS_AS(plan("GET", "/agents", "select=name::text%20from%20x"), rest::api_error);
}

TEST_CASE(
    "embeds render as LATERAL joins: to-one an object, to-many an array, !inner an inner "
    "join, a composite foreign key joined on every column",
    "[rest]") {
    auto p = plan("GET", "/tasks",
                  "select=title,assignee_agent:agents!tasks_assignee_agent_id_fkey(name)");
    CHECK(p.main.sql.find("LEFT JOIN LATERAL") != std::string::npos);
    CHECK(
        p.main.sql.find("row_to_json(\"tasks_assignee_agent_1\".*)::jsonb AS \"assignee_agent\"") !=
        std::string::npos);
    CHECK(p.main.sql.find("\"agents_1\".\"tenant_id\" = \"tasks\".\"tenant_id\"") !=
          std::string::npos);
    CHECK(p.main.sql.find("\"agents_1\".\"id\" = \"tasks\".\"assignee_agent_id\"") !=
          std::string::npos);
    auto m = plan("GET", "/agents", "select=name,tasks!inner(title)&tasks.title=like.*x*");
    CHECK(m.main.sql.find("INNER JOIN LATERAL ( SELECT json_agg(") != std::string::npos);
    CHECK(has_param(m.main, "%x%"));
    try {
        (void)plan("GET", "/agents", "select=name,nothing(*)");
        FAIL("an embed of nothing was accepted");
    } catch (const rest::api_error& e) {
        CHECK(e.status() == 400);
        CHECK(e.code() == "PGRST200");
    }
}

TEST_CASE(
    "reads are READ ONLY and capped at max rows, writes decide their end after the "
    "statement when the answer can refuse them",
    "[rest]") {
    rest::options o;
    o.max_rows = 50;
    auto r = plan("GET", "/agents", "limit=500", {}, {}, std::nullopt, o);
    CHECK(r.req.read_only);
    CHECK(r.main.sql.find("LIMIT 50 OFFSET 0") != std::string::npos);
    CHECK_FALSE(r.decide_after);
    auto w = plan("POST", "/agents", "", R"({"name":"a"})", {"return=representation"},
                  "application/vnd.pgrst.object+json");
    CHECK_FALSE(w.req.read_only);
    CHECK(w.decide_after);  // .single() on a write: rolled back unless exactly one row
    auto u = plan("PATCH", "/agents", "name=eq.a", R"({"name":"b"})",
                  {"handling=strict", "max-affected=1"});
    CHECK(u.decide_after);
    CHECK_THROWS_AS(plan("POST", "/agents", "", R"({"nope":1})"), rest::api_error);
}

TEST_CASE(
    "the answer: Content-Range and 206 for a partial page, 416 past the end, 406 for "
    ".single() on two rows, max-affected refused",
    "[rest]") {
    rest::options o;
    auto p = plan("GET", "/agents", "offset=2&limit=2", {}, {"count=exact"}, std::nullopt, o);
    rest::main_row row;
    row.page_total = 2;
    row.total = "10";
    row.body = "[]";
    auto a = rest::respond(p, row, std::nullopt, o);
    CHECK(a.status == 206);
    bool range = false;
    for (const auto& [k, v] : a.headers) range = range || (k == "Content-Range" && v == "2-3/10");
    CHECK(range);
    row.total = "1";
    row.page_total = 0;
    auto past = rest::respond(p, row, std::nullopt, o);
    CHECK(past.status == 416);
    auto single = plan("GET", "/agents", "", {}, {}, "application/vnd.pgrst.object+json");
    rest::main_row two;
    two.page_total = 2;
    try {
        (void)rest::respond(single, two, std::nullopt, o);
        FAIL("two rows answered a single object");
    } catch (const rest::api_error& e) {
        CHECK(e.status() == 406);
        CHECK(e.code() == "PGRST116");
        CHECK(e.details() == "The result contains 2 rows");
    }
    auto del = plan("DELETE", "/agents", "name=like.*", {}, {"handling=strict", "max-affected=1"});
    rest::main_row three;
    three.page_total = 3;
    try {
        (void)rest::respond(del, three, std::nullopt, o);
        FAIL("max-affected was not enforced");
    } catch (const rest::api_error& e) {
        CHECK(e.code() == "PGRST124");
    }
}

TEST_CASE(
    "headers a function sets override the answer's, and a header with a line break is "
    "refused",
    "[rest]") {
    rest::options o;
    auto p = plan("GET", "/agents", "");
    rest::main_row row;
    row.body = "[]";
    row.response_headers = R"([{"X-Thing":"1"},{"Content-Type":"text/plain"}])";
    row.response_status = "418";
    auto a = rest::respond(p, row, std::nullopt, o);
    CHECK(a.status == 418);
    int content_types = 0;
    for (const auto& [k, v] : a.headers) {
        if (k == "Content-Type") {
            ++content_types;
            CHECK(v == "text/plain");
        }
    }
    CHECK(content_types == 1);
    row.response_headers = R"([{"X-Evil":"a\r\nSet-Cookie: x=1"}])";
    CHECK_THROWS_AS(rest::respond(p, row, std::nullopt, o), rest::api_error);
    row.response_headers = "not json";
    CHECK_THROWS_AS(rest::respond(p, row, std::nullopt, o), rest::api_error);
}

TEST_CASE("the setup statement carries the role, the claims and READ ONLY as parameters",
          "[rest]") {
    rest::session_facts f;
    f.role = "authenticated";
    f.claims_json = R"({"sub":"u","role":"authenticated"})";
    f.method = "GET";
    f.path = "/rest/v1/agents";
    f.headers_json = "{}";
    f.search_path = rest::search_path("public", {"public", "extensions"});
    f.role_settings = {{"statement_timeout", "3s"}};
    f.default_statement_timeout = "30s";
    f.read_only = true;
    const auto s = rest::setup_statement(f);
    CHECK(s.sql.find("authenticated") == std::string::npos);  // values never in the text
    CHECK(has_param(s, "authenticated"));
    CHECK(has_param(s, "transaction_read_only"));
    CHECK(has_param(s, "3s"));
    CHECK_FALSE(has_param(s, "30s"));  // the role's own timeout wins
    CHECK(cache().roles.at("anon").settings.front().second == "3s");
}

}  // namespace rest_query_test
