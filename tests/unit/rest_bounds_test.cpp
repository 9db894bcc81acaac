// The data API's refusals of a hostile request before it reaches Postgres (issue 37): embeds and
// joins past their bounds, `limit`/`offset` that are not integers, casts that look names up in
// the catalog, a VOLATILE function called by GET or HEAD, and planned counts that would tell a
// role rows it may not see.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "awp/rest/query.hpp"
#include "awp/rest/request.hpp"
#include "awp/rest/schema.hpp"
#include "support/rest_catalog.hpp"

namespace rest_bounds_test {

namespace {

namespace rest = awp::rest;
using awp::test::rest_catalog::catalog;
using awp::test::rest_catalog::param_spec;

const rest::schema_cache& cache() {
    static const auto sc = [] {
        const rest::qualified_name agents{"public", "agents"}, tasks{"public", "tasks"};
        catalog c;
        c.table("public", "agents", {{"id", "uuid", false}, {"name", "text", false}}, {"id"});
        c.table("public", "tasks", {{"id", "uuid", false}, {"title", "text"}, {"agent_id", "uuid"}},
                {"id"});
        c.fk("tasks_agent_id_fkey", tasks, {{"agent_id", "id"}}, agents);
        // A lookup table without row-level security: every role's rows are the table's.
        c.table("public", "colours", {{"id", "integer", false}, {"name", "text"}}, {"id"}, 'r',
                false);
        c.table("public", "colour_names", {{"id", "integer", false}, {"name", "text"}}, {"id"}, 'v',
                false);
        c.function({"public", "touch"}, 20, {param_spec{"n", "integer"}}, "integer", false,
                   std::nullopt, 'v');
        c.function({"public", "peek"}, 21, {param_spec{"n", "integer"}}, "integer", false,
                   std::nullopt, 's');
        return rest::decode(c.json(), {"public"});
    }();
    return *sc;
}

template <class F>
rest::api_error refused(F&& f) {
    try {
        f();
    } catch (const rest::api_error& e) {
        return e;
    }
    FAIL("accepted what should be refused");
    throw std::logic_error("unreachable");
}

rest::raw_request request(std::string_view method, std::string_view path, std::string_view query,
                          std::string_view body = {}) {
    rest::raw_request in;
    in.method = method;
    in.path = path;
    in.query = query;
    in.body = body;
    if (!body.empty()) in.content_type = "application/json";
    return in;
}

rest::prepared plan(const rest::raw_request& in, const rest::options& o = {},
                    const rest::limits& lim = {}) {
    return rest::prepare(rest::parse(in, cache().schemas, lim), cache(), o);
}

std::string embeds(int n) {
    std::string s = "select=id";
    for (int i = 0; i < n; ++i) s += ",a" + std::to_string(i) + ":agents(id)";
    return s;
}

}  // namespace

TEST_CASE("bounds: embeds past API_REST_MAX_EMBEDS are refused by the grammar", "[rest]") {
    rest::limits lim;
    lim.max_embeds = 3;
    (void)rest::parse(request("GET", "/tasks", embeds(3)), cache().schemas, lim);
    auto e =
        refused([&] { (void)rest::parse(request("GET", "/tasks", embeds(4)), {"public"}, lim); });
    CHECK(e.status() == 400);
    CHECK(e.code() == "PGRST100");
    CHECK(e.message() == "Too many embedded resources");
    CHECK(e.details().find("more than 3") != std::string::npos);
    // Nested and spread embeds count too.
    (void)rest::parse(request("GET", "/tasks", "select=a:agents(id),b:agents(id)"), {"public"},
                      lim);
    CHECK(refused([&] {
              (void)rest::parse(
                  request("GET", "/tasks",
                          "select=a:agents(id,x:tasks(id,y:agents(id))),...agents(name)"),
                  {"public"}, lim);
          }).message() == "Too many embedded resources");
    // Finding 4's request (200 embeds, 2.9 KB) is refused with the default bound.
    CHECK(refused([&] {
              (void)rest::parse(request("GET", "/tasks", embeds(200)), {"public"});
          }).status() == 400);
}

TEST_CASE("bounds: joins past the planner's bound are refused before a statement is made",
          "[rest]") {
    rest::options o;
    o.max_joins = 2;
    (void)plan(request("GET", "/tasks", "select=id,a:agents(id),b:agents(id)"), o);
    auto e = refused([&] {
        (void)plan(request("GET", "/tasks", "select=id,a:agents(id),b:agents(id),c:agents(id)"), o);
    });
    CHECK(e.status() == 400);
    CHECK(e.message() == "Too many joins");
    CHECK(e.details() ==
          "The embedded resources make 3 joins (a many-to-many counts two); at most 2 "
          "are accepted.");
}

TEST_CASE("bounds: limit and offset must be integers (PostgREST reads anything else as none)",
          "[rest]") {
    for (const std::string q : {"limit=-1abc", "limit=abc", "limit=1.5", "limit=", "offset=x",
                                "offset=2e3", "agents.limit=ten"}) {
        CAPTURE(q);
        auto e = refused([&] { (void)rest::parse(request("GET", "/tasks", q), {"public"}); });
        CHECK(e.status() == 400);
        CHECK(e.code() == "PGRST100");
        CHECK(e.message().find("failed to parse") != std::string::npos);
    }
    // What Haskell's read takes stays: blanks, parentheses, a sign (a negative limit is 416).
    CHECK(rest::parse(request("GET", "/tasks", "limit=%2010&offset=(2)"), {"public"}).top_range ==
          rest::row_range{2, 10});
    CHECK(refused([&] {
              (void)rest::parse(request("GET", "/tasks", "limit=-1"), {"public"});
          }).status() == 416);
}

TEST_CASE("bounds: casts to the catalog's name-lookup types are refused", "[rest]") {
    for (const std::string cast :
         {"regclass", "regrole", "RegRole", "regproc", "regprocedure", "regoper", "regoperator",
          "regtype", "regnamespace", "regconfig", "regdictionary", "regcollation"}) {
        CAPTURE(cast);
        auto e = refused([&] { (void)plan(request("GET", "/agents", "select=name::" + cast)); });
        CHECK(e.status() == 400);
        CHECK(e.code() == "PGRST100");
        CHECK(e.details().find("catalog") != std::string::npos);
        CHECK(refused([&] {
                  (void)plan(request("GET", "/agents", "select=count()::" + cast));
              }).status() == 400);
    }
    // Other casts stay.
    (void)plan(request("GET", "/agents", "select=name::text,id::uuid"));
}

TEST_CASE("bounds: a VOLATILE function is not called by GET or HEAD", "[rest]") {
    for (const std::string_view method : {"GET", "HEAD"}) {
        CAPTURE(method);
        auto e = refused([&] { (void)plan(request(method, "/rpc/touch", "n=1")); });
        CHECK(e.status() == 405);
        CHECK(e.code() == "25006");
        CHECK(e.message() == "cannot execute public.touch() in a read-only transaction");
        REQUIRE(e.headers.size() == 1);
        CHECK(e.headers[0] == std::pair<std::string, std::string>{"Allow", "OPTIONS,POST"});
    }
    // POST calls it; a STABLE function is called by GET.
    CHECK(plan(request("POST", "/rpc/touch", "", R"({"n":1})")).main.sql.find("touch") !=
          std::string::npos);
    CHECK(plan(request("GET", "/rpc/peek", "n=1")).main.sql.find("peek") != std::string::npos);
}

TEST_CASE("bounds: planned and estimated counts only where the role's rows are the table's",
          "[rest]") {
    for (const std::string_view count : {"count=planned", "count=estimated"}) {
        CAPTURE(count);
        auto in = request("GET", "/agents", "select=id");
        in.prefer = {count};
        // Under row-level security: the exact count of what the role sees, said so.
        const auto p = plan(in);
        CHECK_FALSE(p.planned_count);
        CHECK(p.req.prefer.count == rest::prefer_count::exact);
        CHECK(p.main.sql.find("pgrst_source_count") != std::string::npos);
        CHECK(p.req.prefer.applied_header(false) == "count=exact");
        // A role whose rows are the table's (the service role): the planner's estimate.
        rest::options bypass;
        bypass.role_bypasses_rls = true;
        const auto q = plan(in, bypass);
        CHECK(q.planned_count);
        CHECK(q.planned_count->sql.rfind("EXPLAIN", 0) == 0);
        // A table without row-level security: the estimate, for anyone.
        auto lookup = request("GET", "/colours", "select=id");
        lookup.prefer = {count};
        CHECK(plan(lookup).planned_count);
        CHECK(plan(lookup).req.prefer.applied_header(false) == std::string(count));
        // A view: its rows depend on its definition, so the exact count.
        auto view = request("GET", "/colour_names", "select=id");
        view.prefer = {count};
        CHECK_FALSE(plan(view).planned_count);
        // A function: whatever it returns for the caller, so the exact count.
        auto call = request("GET", "/rpc/peek", "n=1");
        call.prefer = {count};
        CHECK(plan(call).req.prefer.count == rest::prefer_count::exact);
    }
}

}  // namespace rest_bounds_test
