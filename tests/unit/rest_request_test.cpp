// The data API's request grammar (awp::rest::parse and its pieces): what PostgREST v14 accepts
// parses to the same structure, what it refuses is refused with its status, code and texts
// (the PGRST100 texts are Parsec's, compared verbatim by clients), and awp's limits refuse
// hostile requests with a 4xx instead of a crash.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "awp/rest/request.hpp"

namespace rest_request_test {

using namespace awp::rest;

namespace {

template <class F>
api_error refused(F&& f) {
    try {
        f();
    } catch (const api_error& e) {
        return e;
    }
    FAIL("accepted what should be refused");
    throw std::logic_error("unreachable");
}

raw_request get(std::string_view path, std::string_view query) {
    raw_request r;
    r.method = "GET";
    r.path = path;
    r.query = query;
    return r;
}

const std::vector<std::string> kSchemas{"public"};

api_request parse_get(std::string_view query) { return parse(get("/items", query), kSchemas); }

api_error refused_get(std::string_view query) {
    return refused([&] { (void)parse_get(query); });
}

/// A PGRST100 grammar refusal: status, code, message and Parsec's details.
void check_parse_error(const api_error& e, std::string_view message, std::string_view details) {
    CHECK(e.status() == 400);
    CHECK(e.code() == "PGRST100");
    CHECK(e.message() == message);
    CHECK(e.details() == details);
    CHECK(e.hint().empty());
}

json_step key(std::string k, bool text = false) { return {text, false, std::move(k)}; }
json_step element(std::string i, bool text = false) { return {text, true, std::move(i)}; }

}  // namespace

// ---- select ---------------------------------------------------------------------------------

TEST_CASE("select: columns, aliases, casts and JSON paths", "[rest]") {
    auto s = parse_select("id,full:name::text, meta->>key ,data->a->0->>-1::int,\"a,b\":x y");
    REQUIRE(s.size() == 5);
    CHECK(s[0].fld.name == "id");
    CHECK(s[0].alias.empty());
    CHECK(s[1].alias == "full");
    CHECK(s[1].fld.name == "name");
    CHECK(s[1].cast == "text");
    CHECK(s[2].fld.name == "meta");
    CHECK(s[2].fld.path == json_path{key("key", true)});
    CHECK(s[3].fld.path == json_path{key("a"), element("+0"), element("-1", true)});
    CHECK(s[3].cast == "int");
    CHECK(s[4].alias == "a,b");  // a quoted name keeps what plain names cannot hold
    CHECK(s[4].fld.name == "x y");
    for (const auto& it : s) CHECK(it.what == select_item::kind::field);

    CHECK(parse_select("*").at(0).fld.name == "*");
    CHECK(parse_select("first-name").at(0).fld.name == "first-name");
    CHECK(parse_select(" spaced name ").at(0).fld.name == "spaced name");
    CHECK(parse_select("data->\"a.b\"").at(0).fld.path == json_path{key("a.b")});
    CHECK(parse_select("").empty());  // select= selects nothing, as PostgREST
}

TEST_CASE("select: aggregates and count()", "[rest]") {
    auto s = parse_select(
        "count(),n:count()::int,amount.sum(),amount.avg()::int,id.max(),"
        "id.min(),total:amount::numeric.sum()::text,id.count()");
    REQUIRE(s.size() == 8);
    CHECK(s[0].fld.name == "*");
    CHECK(s[0].agg == aggregate::count);
    CHECK(s[1].alias == "n");
    CHECK(s[1].agg_cast == "int");
    CHECK(s[2].agg == aggregate::sum);
    CHECK(s[3].agg == aggregate::avg);
    CHECK(s[3].agg_cast == "int");
    CHECK(s[4].agg == aggregate::max);
    CHECK(s[5].agg == aggregate::min);
    CHECK(s[6].alias == "total");
    CHECK(s[6].cast == "numeric");
    CHECK(s[6].agg == aggregate::sum);
    CHECK(s[6].agg_cast == "text");
    CHECK(s[7].fld.name == "id");
    CHECK(s[7].agg == aggregate::count);
}

TEST_CASE("select: embeds with aliases, hints, join types, nesting and spreads", "[rest]") {
    // the web UI's own queries
    auto ui = parse_select("*,assignee_agent:agents!tasks_assignee_agent_id_fkey(id,name,slug)");
    REQUIRE(ui.size() == 2);
    const auto& a = ui[1];
    CHECK(a.what == select_item::kind::relation);
    CHECK(a.alias == "assignee_agent");
    CHECK(a.relation == "agents");
    CHECK(a.hint == "tasks_assignee_agent_id_fkey");
    CHECK(a.join == join_type::unspecified);
    REQUIRE(a.children.size() == 3);
    CHECK(a.children[2].fld.name == "slug");

    auto counted = parse_select("*, contacts(count)");
    REQUIRE(counted.size() == 2);
    CHECK(counted[1].relation == "contacts");
    CHECK(counted[1].children.at(0).fld.name == "count");

    auto joins = parse_select("a!inner(*),b!left(x),c:d!hint!inner(*),e!inner!hint(*)");
    REQUIRE(joins.size() == 4);
    CHECK(joins[0].join == join_type::inner);
    CHECK(joins[0].hint.empty());
    CHECK(joins[1].join == join_type::left);
    CHECK(joins[2].alias == "c");
    CHECK(joins[2].hint == "hint");
    CHECK(joins[2].join == join_type::inner);
    CHECK(joins[3].hint == "hint");
    CHECK(joins[3].join == join_type::inner);

    auto nested = parse_select("id,projects(id,tasks(id,name))");
    REQUIRE(nested[1].children.size() == 2);
    CHECK(nested[1].children[1].relation == "tasks");
    CHECK(nested[1].children[1].children[1].fld.name == "name");

    auto spread = parse_select("id,...client!fk!inner(name,code:id)");
    REQUIRE(spread.size() == 2);
    CHECK(spread[1].what == select_item::kind::spread);
    CHECK(spread[1].relation == "client");
    CHECK(spread[1].hint == "fk");
    CHECK(spread[1].join == join_type::inner);
    CHECK(spread[1].children[1].alias == "code");

    // "count" is never an embed (count() is the aggregate)
    check_parse_error(refused([] { (void)parse_select("count(*)"); }),
                      "\"failed to parse select parameter (count(*))\" (line 1, column 6)",
                      "unexpected '(' expecting letter, digit, \"-\", \"->>\", \"->\", \"::\", "
                      "\".\", \")\", \",\" or end of input");
}

TEST_CASE("select: refusals carry PostgREST's position and Parsec's words", "[rest]") {
    check_parse_error(
        refused([] { (void)parse_select("id,clients(name[])"); }),
        "\"failed to parse select parameter (id,clients(name[]))\" (line 1, column 16)",
        "unexpected '[' expecting letter, digit, \"-\", \"->>\", \"->\", \"::\", "
        "\".\", \")\", \",\" or end of input");
    check_parse_error(
        refused([] { (void)parse_select("data->>-78xy"); }),
        "\"failed to parse select parameter (data->>-78xy)\" (line 1, column 11)",
        "unexpected 'x' expecting digit, \"->\", \"::\", \".\", \",\" or end of input");
    check_parse_error(refused([] { (void)parse_select("name::"); }),
                      "\"failed to parse select parameter (name::)\" (line 1, column 7)",
                      "unexpected end of input expecting letter or digit");
    check_parse_error(refused([] { (void)parse_select("data->>--34"); }),
                      "\"failed to parse select parameter (data->>--34)\" (line 1, column 9)",
                      "unexpected \"-\" expecting digit");
    check_parse_error(
        refused([] { (void)parse_select("data->(!@#$%^&*_d->>!@#$%^&*_e::integer"); }),
        "\"failed to parse select parameter (data->(!@#$%^&*_d->>!@#$%^&*_e::integer)\" (line 1, "
        "column 7)",
        "unexpected \"(\" expecting \"-\", digit or any non reserved character different from: "
        ".,>()");
    check_parse_error(refused([] { (void)parse_select("abc,"); }),
                      "\"failed to parse select parameter (abc,)\" (line 1, column 5)",
                      "unexpected end of input expecting \"...\", field name (* or "
                      "[a..z0..9_$]), \"*\" or \"count()\"");
    // positions count code points, and tabs as Parsec does
    CHECK(refused([] { (void)parse_select("é!"); }).message() ==
          "\"failed to parse select parameter (é!)\" (line 1, column 2)");
    CHECK(refused([] { (void)parse_select("a\tb!"); }).message() ==
          "\"failed to parse select parameter (a\tb!)\" (line 1, column 9)");
}

// ---- filters --------------------------------------------------------------------------------

TEST_CASE("filters: every operator PostgREST has", "[rest]") {
    struct cas {
        const char* text;
        op o;
    };
    for (auto c : {cas{"eq.1", op::eq},
                   cas{"neq.1", op::neq},
                   cas{"gt.1", op::gt},
                   cas{"gte.1", op::gte},
                   cas{"lt.1", op::lt},
                   cas{"lte.1", op::lte},
                   cas{"like.a*", op::like},
                   cas{"ilike.a*", op::ilike},
                   cas{"match.^a", op::match},
                   cas{"imatch.^a", op::imatch},
                   cas{"isdistinct.1", op::isdistinct},
                   cas{"cs.{1,2}", op::cs},
                   cas{"cd.{1,2}", op::cd},
                   cas{"ov.[1,2]", op::ov},
                   cas{"sl.(1,2)", op::sl},
                   cas{"sr.(1,2)", op::sr},
                   cas{"nxr.(1,2)", op::nxr},
                   cas{"nxl.(1,2)", op::nxl},
                   cas{"adj.(1,2)", op::adj},
                   cas{"fts.cat", op::fts},
                   cas{"plfts.cat", op::plfts},
                   cas{"phfts.cat", op::phfts},
                   cas{"wfts.cat", op::wfts}}) {
        INFO(c.text);
        const auto e = parse_op_expr(c.text);
        CHECK(e.op == c.o);
        CHECK_FALSE(e.negated);
        CHECK(e.value == std::string(c.text).substr(std::string(c.text).find('.') + 1));
    }
    // the value is everything after the operator, dots and parentheses included
    CHECK(parse_op_expr("eq.a.b(c),d").value == "a.b(c),d");
    CHECK(parse_op_expr("eq.").value.empty());

    const auto n = parse_op_expr("not.ilike.*x*");
    CHECK(n.negated);
    CHECK(n.op == op::ilike);

    const auto any = parse_op_expr("like(any).{a*,b*}");
    CHECK(any.quant == quantifier::any);
    CHECK(any.value == "{a*,b*}");
    CHECK(parse_op_expr("not.eq(all).{1,2}").quant == quantifier::all);

    const auto lang = parse_op_expr("fts(english).cat & dog");
    CHECK(lang.language == "english");
    CHECK(lang.value == "cat & dog");
    CHECK(parse_op_expr("wfts.x").language.empty());

    using is_case = std::pair<const char*, is_value>;
    for (auto [text, v] : std::initializer_list<is_case>{{"is.null", is_value::null},
                                                         {"is.NULL", is_value::null},
                                                         {"is.not_null", is_value::not_null},
                                                         {"is.TRUE", is_value::true_},
                                                         {"is.false", is_value::false_},
                                                         {"is.unknown", is_value::unknown}}) {
        INFO(text);
        const auto e = parse_op_expr(text);
        CHECK(e.op == op::is);
        CHECK(e.is == v);
    }
}

TEST_CASE("filters: in lists with quoted elements", "[rest]") {
    CHECK(parse_op_expr("in.(todo,in_progress)").list ==
          std::vector<std::string>{"todo", "in_progress"});
    CHECK(parse_op_expr("in.( \"a,b\",\"c\\\"d\",e f )").list ==
          std::vector<std::string>{"a,b", "c\"d", "e f "});
    CHECK(parse_op_expr("in.()").list == std::vector<std::string>{""});
    // a quote not closing the element is part of an unquoted one
    CHECK(parse_op_expr("in.(\"a\"b)").list == std::vector<std::string>{"\"a\"b"});
    CHECK(parse_op_expr("not.in.(1)").negated);
}

TEST_CASE("filters: a value without an operator is refused, or an argument of a GET call",
          "[rest]") {
    check_parse_error(refused([] { (void)parse_op_expr("0"); }),
                      "\"failed to parse filter (0)\" (line 1, column 1)",
                      "unexpected \"0\" expecting \"not\" or operator (eq, gt, ...)");
    check_parse_error(refused([] { (void)parse_op_expr("noop.0"); }),
                      "\"failed to parse filter (noop.0)\" (line 1, column 1)",
                      "unexpected \"o\" expecting \"not\" or operator (eq, gt, ...)");
    check_parse_error(refused([] { (void)parse_op_expr("fts().value"); }),
                      "\"failed to parse filter (fts().value)\" (line 1, column 5)",
                      "unexpected \")\" expecting operator (eq, gt, ...)");
    check_parse_error(refused([] { (void)parse_op_expr("is.nul"); }),
                      "\"failed to parse filter (is.nul)\" (line 1, column 7)",
                      "unexpected end of input expecting isVal: (null, not_null, true, false, "
                      "unknown)");
    const auto arg = parse_op_expr("hello", true);
    CHECK(arg.no_op);
    CHECK(arg.value == "hello");
    CHECK_FALSE(parse_op_expr("eq.5", true).no_op);
    // an operator that started and then failed is still refused, as PostgREST does
    CHECK(refused([] { (void)parse_op_expr("in.5", true); }).code() == "PGRST100");
}

TEST_CASE("filters and RPC arguments in a whole request", "[rest]") {
    auto r = parse_get(
        "status=in.(todo,in_progress)&clients.projects.name=eq.x&"
        "meta->>kind=not.is.null&id=gt.5");
    REQUIRE(r.filters.size() == 4);
    CHECK(r.filters[0].first.empty());
    CHECK(r.filters[0].second.fld.name == "status");
    CHECK(r.filters[1].first == embed_path{"clients", "projects"});
    CHECK(r.filters[1].second.fld.name == "name");
    CHECK(r.filters[2].second.fld.path == json_path{key("kind", true)});
    CHECK(r.filters[2].second.expr.negated);
    CHECK(r.rpc_args.empty());

    auto call = parse(get("/rpc/search", "q=hello world&limit_to=5&id=eq.3&select=id"), kSchemas);
    CHECK(call.action == action::call);
    CHECK(call.read_only);
    CHECK(call.target == "search");
    CHECK(call.rpc_args == std::vector<std::pair<std::string, std::string>>{{"q", "hello world"},
                                                                            {"limit_to", "5"}});
    REQUIRE(call.filters.size() == 1);  // an operator makes it a filter on the result
    CHECK(call.filters[0].second.fld.name == "id");

    // on a table the same parameter is a refusal
    check_parse_error(refused_get("id=0"), "\"failed to parse filter (0)\" (line 1, column 1)",
                      "unexpected \"0\" expecting \"not\" or operator (eq, gt, ...)");
}

// ---- and/or ---------------------------------------------------------------------------------

TEST_CASE("logic trees: nesting, negation, quoted values and arrays, embed paths", "[rest]") {
    auto t = parse_logic("or", "(age.gte.11,and(name.eq.\"a,b\",tags.cs.{x,y}),id.not.in.(1,2))");
    CHECK(t.is_or);
    CHECK_FALSE(t.negated);
    REQUIRE(t.kids.size() == 3);
    CHECK(t.kids[0].is_leaf);
    CHECK(t.kids[0].leaf.fld.name == "age");
    CHECK(t.kids[0].leaf.expr.op == op::gte);
    CHECK(t.kids[0].leaf.expr.value == "11");
    const auto& inner = t.kids[1];
    CHECK_FALSE(inner.is_leaf);
    CHECK_FALSE(inner.is_or);
    CHECK(inner.kids[0].leaf.expr.value == "a,b");
    CHECK(inner.kids[1].leaf.expr.value == "{x,y}");
    CHECK(t.kids[2].leaf.expr.negated);
    CHECK(t.kids[2].leaf.expr.list == std::vector<std::string>{"1", "2"});

    auto n = parse_logic("not.and", "(a.eq.1,b.eq.2)");
    CHECK(n.negated);
    CHECK_FALSE(n.is_or);

    auto r = parse_get("clients.or=(id.eq.1,name.ilike.*a*)&not.or=(a.is.null)&or=(data->>k.eq.v)");
    REQUIRE(r.logic.size() == 3);
    CHECK(r.logic[0].first == embed_path{"clients"});
    CHECK(r.logic[0].second.is_or);
    CHECK(r.logic[1].first.empty());
    CHECK(r.logic[1].second.negated);
    CHECK(r.logic[2].second.kids[0].leaf.fld.path == json_path{key("k", true)});
    CHECK(r.filters.empty());
}

TEST_CASE("logic trees: refusals with PostgREST's texts", "[rest]") {
    check_parse_error(refused_get("or=()"),
                      "\"failed to parse logic tree (())\" (line 1, column 4)",
                      "unexpected \")\" expecting field name (* or [a..z0..9_$]), negation "
                      "operator (not) or logic operator (and, or)");
    check_parse_error(refused([] { (void)parse_logic("or", "(id.in.1,2,id.eq.3)"); }),
                      "\"failed to parse logic tree ((id.in.1,2,id.eq.3))\" (line 1, column 10)",
                      "unexpected \"1\" expecting \"(\"");
    check_parse_error(refused([] { (void)parse_logic("and", "(ord(id.eq.1,id.eq.1),id.eq.2)"); }),
                      "\"failed to parse logic tree ((ord(id.eq.1,id.eq.1),id.eq.2))\" (line 1, "
                      "column 7)",
                      "unexpected \"d\" expecting \"(\"");
    check_parse_error(
        refused([] { (void)parse_logic("or", "(id.eq.1,not.xor(id.eq.2,id.eq.3))"); }),
        "\"failed to parse logic tree ((id.eq.1,not.xor(id.eq.2,id.eq.3)))\" (line "
        "1, column 16)",
        "unexpected \"x\" expecting logic operator (and, or)");
}

// ---- order ----------------------------------------------------------------------------------

TEST_CASE("order: directions, nulls, JSON paths, embedded columns, per level", "[rest]") {
    auto o =
        parse_order("created_at.desc,name.asc.nullslast,meta->>rank,clients(name).desc.nullsfirst");
    REQUIRE(o.size() == 4);
    CHECK(o[0].fld.name == "created_at");
    CHECK(o[0].dir == order_dir::desc);
    CHECK(o[0].nulls == order_nulls::unspecified);
    CHECK(o[1].nulls == order_nulls::last);
    CHECK(o[2].fld.path == json_path{key("rank", true)});
    CHECK(o[2].dir == order_dir::unspecified);
    CHECK(o[3].relation == "clients");
    CHECK(o[3].fld.name == "name");
    CHECK(o[3].nulls == order_nulls::first);

    auto r = parse_get("order=id&projects.order=name.desc&select=id,projects(name)");
    REQUIRE(r.order.size() == 2);
    CHECK(r.order[0].first.empty());
    CHECK(r.order[1].first == embed_path{"projects"});
    CHECK(r.order[1].second.at(0).dir == order_dir::desc);
}

TEST_CASE("order: refusals with PostgREST's texts", "[rest]") {
    struct cas {
        const char* text;
        int column;
        const char* details;
    };
    for (auto c :
         {cas{"id.ac", 4,
              "unexpected \"c\" expecting \"asc\", \"desc\", \"nullsfirst\" or \"nullslast\""},
          cas{"id.descc", 8, "unexpected 'c' expecting delimiter (.), \",\" or end of input"},
          cas{"id.nullslasttt", 13, "unexpected 't' expecting \",\" or end of input"},
          cas{"id.asc.nlsfst", 8, "unexpected \"l\" expecting \"nullsfirst\" or \"nullslast\""},
          cas{"id.asc.nullslasttt", 17, "unexpected 't' expecting \",\" or end of input"},
          cas{"clients(name,id)", 8,
              "unexpected '(' expecting letter, digit, \"-\", \"->>\", \"->\", delimiter "
              "(.), \",\" or end of input"}}) {
        INFO(c.text);
        check_parse_error(refused([&] { (void)parse_order(c.text); }),
                          "\"failed to parse order (" + std::string(c.text) +
                              ")\" (line 1, column " + std::to_string(c.column) + ")",
                          c.details);
    }
}

// ---- columns, on_conflict, reserved names ---------------------------------------------------

TEST_CASE("columns= and on_conflict=, and the names that are never filters", "[rest]") {
    raw_request p = get("/items", "columns=b,a,b&on_conflict=id, tenant_id&select=id");
    p.method = "POST";
    p.body = R"([{"a":1,"b":2,"c":3}])";
    auto r = parse(p, kSchemas);
    REQUIRE(r.columns.has_value());
    CHECK(*r.columns == std::vector<std::string>{"a", "b"});
    CHECK(r.on_conflict == std::vector<std::string>{"id", "tenant_id"});
    CHECK(r.body_keys == std::vector<std::string>{"a", "b"});  // columns= decides the keys
    CHECK(r.filters.empty());

    check_parse_error(refused_get("columns="),
                      "\"failed to parse columns parameter ()\" (line 1, column 1)",
                      "unexpected end of input expecting field name (* or [a..z0..9_$])");
    // select, columns and on_conflict are reserved only at the top; below they are columns
    auto e = parse_get("clients.select=eq.1");
    REQUIRE(e.filters.size() == 1);
    CHECK(e.filters[0].second.fld.name == "select");
    // the first select= counts; an item without '=' is ignored
    CHECK(parse_get("select=id&select=name").select.at(0).fld.name == "id");
    CHECK(parse_get("flag&select=id").filters.empty());
}

// ---- resource, action, schema ---------------------------------------------------------------

TEST_CASE("resource and action from the path and method", "[rest]") {
    auto root = parse(get("/", ""), kSchemas);
    CHECK(root.action == action::root);
    auto tbl = parse(get("/agents", ""), kSchemas);
    CHECK(tbl.action == action::read);
    CHECK(tbl.target == "agents");
    CHECK(tbl.select.at(0).fld.name == "*");
    CHECK(parse(get("/my%20table", ""), kSchemas).target == "my table");

    struct cas {
        const char* method;
        action a;
        bool read_only;
    };
    for (auto c : {cas{"HEAD", action::read, true}, cas{"POST", action::insert, false},
                   cas{"PUT", action::upsert_one, false}, cas{"PATCH", action::update, false},
                   cas{"DELETE", action::remove, false}, cas{"OPTIONS", action::info, true}}) {
        INFO(c.method);
        raw_request q = get("/agents", "");
        q.method = c.method;
        q.body = "{}";
        auto r = parse(q, kSchemas);
        CHECK(r.action == c.a);
        CHECK(r.read_only == c.read_only);
        CHECK(r.head == (std::string_view(c.method) == "HEAD"));
    }
    raw_request post_call = get("/rpc/fn", "");
    post_call.method = "POST";
    auto pc = parse(post_call, kSchemas);
    CHECK(pc.action == action::call);
    CHECK_FALSE(pc.read_only);

    auto bad_path = refused([] { (void)parse(get("/first/second/third", "select=*"), kSchemas); });
    CHECK(bad_path.status() == 404);
    CHECK(bad_path.code() == "PGRST125");
    CHECK(bad_path.message() == "Invalid path specified in request URL");
    CHECK(
        bad_path.body() ==
        R"({"code":"PGRST125","details":null,"hint":null,"message":"Invalid path specified in request URL"})");
    CHECK(refused([] { (void)parse(get("/agents/", ""), kSchemas); }).code() == "PGRST125");

    raw_request del = get("/rpc/sayhello", "");
    del.method = "DELETE";
    auto rpc_method = refused([&] { (void)parse(del, kSchemas); });
    CHECK(rpc_method.status() == 405);
    CHECK(rpc_method.code() == "PGRST101");
    CHECK(rpc_method.message() == "Cannot use the DELETE method on RPC");

    raw_request trace = get("/agents", "");
    trace.method = "TRACE";
    auto unsupported = refused([&] { (void)parse(trace, kSchemas); });
    CHECK(unsupported.status() == 405);
    CHECK(unsupported.code() == "PGRST117");
    CHECK(unsupported.message() == "Unsupported HTTP method: TRACE");
}

TEST_CASE("schema from Accept-Profile on reads and Content-Profile on writes", "[rest]") {
    const std::vector<std::string> schemas{"v1", "v2", "SPECIAL \"@/\\#~_-"};
    auto def = parse(get("/parents", ""), schemas);
    CHECK(def.schema == "v1");
    CHECK(def.schema_negotiated);  // several schemas: the default counts as negotiated
    CHECK_FALSE(parse(get("/parents", ""), kSchemas).schema_negotiated);

    raw_request read = get("/parents", "");
    read.accept_profile = "v2";
    read.content_profile = "nope";  // not read on GET
    auto r = parse(read, schemas);
    CHECK(r.schema == "v2");
    CHECK(r.schema_negotiated);

    read.accept_profile = "unknown";
    auto e = refused([&] { (void)parse(read, schemas); });
    CHECK(e.status() == 406);
    CHECK(e.code() == "PGRST106");
    CHECK(e.message() == "Invalid schema: unknown");
    CHECK(e.hint() == "Only the following schemas are exposed: v1, v2, SPECIAL \"@/\\#~_-");

    raw_request write = get("/children", "");
    write.method = "POST";
    write.body = R"({"name":"child 4"})";
    write.accept_profile = "unknown";  // not read on POST
    write.content_profile = "v2";
    CHECK(parse(write, schemas).schema == "v2");
    write.content_profile = "unknown";
    CHECK(refused([&] { (void)parse(write, schemas); }).code() == "PGRST106");
}

// ---- ranges ---------------------------------------------------------------------------------

TEST_CASE("ranges: limit and offset per level, the Range header on GET", "[rest]") {
    auto r = parse_get("limit=50&offset=10&clients.limit=2&clients.offset=1&projects.limit=3");
    CHECK(r.top_range == row_range{10, 50});
    REQUIRE(r.ranges.size() == 3);
    CHECK(r.ranges[0] == std::pair<embed_path, row_range>{{}, {10, 50}});
    CHECK(r.ranges[1] == std::pair<embed_path, row_range>{{"clients"}, {1, 2}});
    CHECK(r.ranges[2] == std::pair<embed_path, row_range>{{"projects"}, {0, 3}});

    CHECK(parse_get("").top_range == row_range{0, std::nullopt});
    CHECK(parse_get("offset=5").top_range == row_range{5, std::nullopt});
    CHECK(parse_get("limit=0").top_range == row_range{0, 0});
    CHECK(parse_get("limit=1&limit=2").top_range == row_range{0, 2});  // the last counts

    raw_request h = get("/items", "");
    h.range = "0-9";
    CHECK(parse(h, kSchemas).top_range == row_range{0, 10});
    h.range = "10-";
    CHECK(parse(h, kSchemas).top_range == row_range{10, std::nullopt});
    h.range = "items=0-9";  // not the form PostgREST reads: every row
    CHECK(parse(h, kSchemas).top_range == row_range{0, std::nullopt});
    h.range = "5-20";
    h.query = "limit=10";  // header and limit intersect
    CHECK(parse(h, kSchemas).top_range == row_range{5, 5});
    h.method = "HEAD";  // the Range header counts on GET only
    CHECK(parse(h, kSchemas).top_range == row_range{0, 10});
}

TEST_CASE("ranges: refusals with PostgREST's texts", "[rest]") {
    auto neg = refused_get("select=id&limit=-1");
    CHECK(neg.status() == 416);
    CHECK(neg.code() == "PGRST103");
    CHECK(neg.message() == "Requested range not satisfiable");
    CHECK(neg.details() == "Limit should be greater than or equal to zero.");

    raw_request h = get("/items", "");
    h.range = "1-0";
    auto lgu = refused([&] { (void)parse(h, kSchemas); });
    CHECK(lgu.status() == 416);
    CHECK(lgu.details() ==
          "The lower boundary must be lower than or equal to the upper boundary in the Range "
          "header.");

    raw_request put = get("/items", "limit=10");
    put.method = "PUT";
    put.body = R"({"id":1})";
    auto p = refused([&] { (void)parse(put, kSchemas); });
    CHECK(p.status() == 400);
    CHECK(p.code() == "PGRST114");
    CHECK(p.message() == "limit/offset querystring parameters are not allowed for PUT");
}

// ---- Prefer ---------------------------------------------------------------------------------

TEST_CASE("Prefer: every token, the first of a kind wins, the rest is invalid", "[rest]") {
    auto p = parse_prefer({"return=representation, count=exact", "resolution=merge-duplicates",
                           "missing=default,handling=strict,tx=rollback",
                           "timezone=America/Los_Angeles, max-affected=5, count=planned, anything",
                           "params=single-object"});
    CHECK(p.ret == prefer_return::representation);
    CHECK(p.count == prefer_count::exact);
    CHECK(p.resolution == prefer_resolution::merge_duplicates);
    CHECK(p.missing == prefer_missing::apply_defaults);
    CHECK(p.handling == prefer_handling::strict);
    CHECK(p.tx == prefer_tx::rollback);
    CHECK(p.timezone == "America/Los_Angeles");
    CHECK(p.max_affected == 5);
    CHECK(p.params_single_object);
    CHECK(p.invalid == std::vector<std::string>{"anything", "params=single-object"});

    auto q = parse_prefer({"return=minimal,return=headers-only", "count=estimated",
                           "resolution=ignore-duplicates", "missing=null", "handling=lenient",
                           "tx=commit"});
    CHECK(q.ret == prefer_return::minimal);
    CHECK(q.count == prefer_count::estimated);
    CHECK(q.resolution == prefer_resolution::ignore_duplicates);
    CHECK(q.missing == prefer_missing::apply_nulls);
    CHECK(q.handling == prefer_handling::lenient);
    CHECK(q.tx == prefer_tx::commit);
    CHECK(q.invalid.empty());
    CHECK(parse_prefer({"return=headers-only"}).ret == prefer_return::headers_only);
    CHECK(parse_prefer({}).invalid.empty());
    CHECK(parse_prefer({"count=exact,"}).invalid == std::vector<std::string>{""});
}

TEST_CASE("Prefer: handling=strict refuses what was not understood, and the applied header",
          "[rest]") {
    auto strict = parse_prefer({"handling=strict, anything"});
    auto e = refused([&] { strict.check_strict(); });
    CHECK(e.status() == 400);
    CHECK(e.code() == "PGRST122");
    CHECK(e.message() == "Invalid preferences given with handling=strict");
    CHECK(e.details() == "Invalid preferences: anything");
    // what the client sent is quoted, and never makes the body invalid JSON
    auto bytes = refused([] {
        parse_prefer({"handling=strict, max\x94"
                      "affected=1"})
            .check_strict();
    });
    CHECK(bytes.body() ==
          "{\"code\":\"PGRST122\",\"details\":\"Invalid preferences: max\xEF\xBF\xBD"
          "affected=1\",\"hint\":null,\"message\":\"Invalid preferences given with "
          "handling=strict\"}");
    parse_prefer({"handling=lenient, anything"}).check_strict();  // no throw
    parse_prefer({"handling=strict, count=exact"}).check_strict();

    auto p =
        parse_prefer({"tx=commit, count=exact, return=representation, missing=default, "
                      "resolution=merge-duplicates, handling=strict, max-affected=10, "
                      "timezone=UTC"});
    CHECK(p.applied_header(true) ==
          "resolution=merge-duplicates, missing=default, return=representation, count=exact, "
          "tx=commit, handling=strict, timezone=UTC, max-affected=10");
    CHECK(p.applied_header(false) ==
          "resolution=merge-duplicates, missing=default, return=representation, count=exact, "
          "handling=strict, timezone=UTC, max-affected=10");
    // max-affected is applied only with handling=strict
    CHECK(parse_prefer({"max-affected=10, count=exact"}).applied_header(true) == "count=exact");
    CHECK(parse_prefer({}).applied_header(true).empty());
}

// ---- Accept ---------------------------------------------------------------------------------

TEST_CASE("Accept: media types in q-value and specificity order", "[rest]") {
    auto a = parse_accept(
        "text/csv;q=0.5, application/json;q=0.9, */*;q=0.9, "
        "application/vnd.pgrst.object+json");
    REQUIRE(a.size() == 4);
    CHECK(a[0].kind == media::object);
    CHECK(a[1].kind == media::json);  // same q as */*, more specific
    CHECK(a[2].kind == media::any);
    CHECK(a[3].kind == media::csv);

    CHECK(parse_accept("application/vnd.pgrst.object+json;nulls=stripped").at(0).kind ==
          media::object_nulls);
    CHECK(parse_accept("ApplicatIon/vnd.PgRsT.object+json").at(0).kind == media::object);
    CHECK(parse_accept("application/vnd.pgrst.array+json;nulls=stripped").at(0).kind ==
          media::array_nulls);
    CHECK(parse_accept("application/vnd.pgrst.array+json").at(0).kind == media::json);
    CHECK(parse_accept("text/plain").at(0).kind == media::text);
    CHECK(parse_accept("text/xml").at(0).kind == media::xml);
    CHECK(parse_accept("application/octet-stream").at(0).kind == media::octet);
    CHECK(parse_accept("application/geo+json").at(0).kind == media::geojson);
    CHECK(parse_accept("application/openapi+json").at(0).kind == media::openapi);

    auto plan =
        parse_accept("application/vnd.pgrst.plan+json; for=\"text/csv\"; options=buffers|analyze")
            .at(0);
    CHECK(plan.kind == media::plan);
    CHECK_FALSE(plan.plan_text);
    CHECK(plan.plan_for == "text/csv");
    CHECK(plan.plan_options == std::vector<std::string>{"analyze", "buffers"});
    CHECK(plan.raw == "application/vnd.pgrst.plan+json; for=\"text/csv\"; options=analyze|buffers");
    auto plain_plan = parse_accept("application/vnd.pgrst.plan").at(0);
    CHECK(plain_plan.plan_text);
    CHECK(plain_plan.plan_for == "application/json");

    // what PostgREST does not know is kept as sent, for the 406 message
    auto other = parse_accept("text/unknowntype, undefined, application/*");
    CHECK(other[0].kind == media::other);
    CHECK(other[0].raw == "text/unknowntype");
    CHECK(other[1].raw == "undefined");
    CHECK(other[2].kind == media::other);  // PostgREST 14 has no application/* wildcard
    CHECK(parse_accept("").empty());

    auto none = parse(get("/items", ""), kSchemas);
    REQUIRE(none.accept.size() == 1);
    CHECK(none.accept[0].kind == media::any);
}

// ---- bodies ---------------------------------------------------------------------------------

namespace {
api_request post(std::string_view path, std::string_view body, std::string_view content_type = {},
                 std::string_view query = {}) {
    raw_request r = get(path, query);
    r.method = "POST";
    r.body = body;
    if (!content_type.empty()) r.content_type = content_type;
    return parse(r, kSchemas);
}
api_error post_refused(std::string_view body, std::string_view content_type = {},
                       std::string_view path = "/articles") {
    return refused([&] { (void)post(path, body, content_type); });
}
}  // namespace

TEST_CASE("bodies: a JSON object or an array of objects with the same keys", "[rest]") {
    auto obj = post("/articles", R"({"id": 1, "body": "x", "id": 2})");
    CHECK(obj.body_keys == std::vector<std::string>{"body", "id"});
    CHECK_FALSE(obj.body_is_array);
    CHECK_FALSE(obj.body_empty);
    CHECK(obj.body == R"({"id": 1, "body": "x", "id": 2})");

    auto arr = post("/articles", R"([{"id":1,"body":"a"},{"body":"b","id":2}])");
    CHECK(arr.body_keys == std::vector<std::string>{"body", "id"});
    CHECK(arr.body_is_array);

    CHECK(post("/articles", "[]").body == "[]");
    CHECK(post("/articles", "42").body == "[]");  // PostgREST's rule for scalars

    for (auto bad :
         {R"([{"id": 100, "body": "xxxxx"}, 123, "xxxx", {"id": 111, "body": "xxxx"}])",
          R"([{"id": 100, "body": "xxxxx"}, {"id": 111, "body": "xxxx", "owner": "me"}])",
          R"([1, {"id": 1}])"}) {
        INFO(bad);
        auto e = post_refused(bad);
        CHECK(e.status() == 400);
        CHECK(
            e.body() ==
            R"({"code":"PGRST102","details":null,"hint":null,"message":"All object keys must match"})");
    }
    for (auto bad : {"}{ x = 2", "", "   ", "{\"a\":}"}) {
        INFO(bad);
        auto e = post_refused(bad);
        CHECK(e.code() == "PGRST102");
        CHECK(e.message() == "Empty or invalid json");
    }
    auto deep = post_refused(std::string(600, '[') + std::string(600, ']'));
    CHECK(deep.code() == "PGRST102");
    CHECK(deep.message() == "The JSON body is nested deeper than 512 levels");
}

TEST_CASE("bodies: calls, columns=, CSV, forms and raw media types", "[rest]") {
    auto none = post("/rpc/fn", "");
    CHECK(none.body_empty);
    CHECK(none.body_keys.empty());
    auto args = post("/rpc/fn", R"({"q":"x","n":1})");
    CHECK(args.body_keys == std::vector<std::string>{"n", "q"});
    CHECK(post_refused("   ", {}, "/rpc/fn").message() == "Empty or invalid json");

    // with columns= the JSON is not read here: the keys are the columns
    auto cols = post("/articles", "not json at all", {}, "columns=id,body");
    CHECK(cols.body_keys == std::vector<std::string>{"body", "id"});
    CHECK(cols.body == "not json at all");

    auto csv = post("/no_pk", "a,b\r\nfoo,NULL\n\"x,\"\"y\",bar\n", "text/csv");
    CHECK(csv.body_keys == std::vector<std::string>{"a", "b"});
    CHECK(csv.body_is_array);
    CHECK(csv.body == R"([{"a":"foo","b":null},{"a":"x,\"y","b":"bar"}])");
    CHECK(post("/no_pk", "a,b\n", "text/csv").body == "[]");
    auto few = post_refused("a,b\nfoo,bar\nbaz", "text/csv", "/no_pk");
    CHECK(few.code() == "PGRST102");
    CHECK(few.message() == "All lines must have same number of fields");
    CHECK(post_refused("a,b", "text/csv", "/no_pk").message().rfind("parse error", 0) == 0);

    auto form = post("/items", "name=a+b&id=%31&name=c", "application/x-www-form-urlencoded");
    CHECK(form.urlencoded);
    CHECK(form.body == R"({"id":"1","name":"c"})");
    CHECK(form.body_keys == std::vector<std::string>{"id", "name"});

    auto text = post("/rpc/echo", "plain words", "text/plain");
    CHECK(text.content_type == media::text);
    CHECK(text.body == "plain words");
    auto not_for_tables = post_refused("plain words", "text/plain");
    CHECK(not_for_tables.code() == "PGRST102");
    CHECK(not_for_tables.message() == "Content-Type not acceptable: text/plain");
    CHECK(post_refused("{}", "application/vnd.pgrst.object+json").message() ==
          "Content-Type not acceptable: application/vnd.pgrst.object+json");
    CHECK(post("/articles", "{}", "application/json; charset=utf-8").content_type == media::json);

    // DELETE and reads never read a body
    raw_request del = get("/articles", "id=eq.1");
    del.method = "DELETE";
    del.body = "garbage";
    CHECK(parse(del, kSchemas).body.empty());
}

// ---- hostile input: every limit refuses with a 4xx ------------------------------------------

TEST_CASE("limits: the query string's length, parameters and conditions", "[rest]") {
    limits lim;
    lim.max_query_bytes = 64;
    auto len = refused([&] { (void)parse(get("/items", std::string(65, 'a')), kSchemas, lim); });
    CHECK(len.status() == 414);
    CHECK(len.code() == "PGRST100");
    CHECK(len.message() == "The query string is too long");
    CHECK(len.details() == "It has 65 bytes; at most 64 are accepted.");
    CHECK(len.body().find("\"hint\":\"Pass long lists") != std::string::npos);

    lim = {};
    lim.max_params = 3;
    auto params =
        refused([&] { (void)parse(get("/items", "a=eq.1&b=eq.2&c=eq.3&d=eq.4"), kSchemas, lim); });
    CHECK(params.status() == 400);
    CHECK(params.message() == "Too many query parameters");
    CHECK(params.details() == "The query string has 4 parameters; at most 3 are accepted.");

    lim = {};
    lim.max_conditions = 3;
    (void)parse(get("/items", "a=eq.1&or=(b.eq.2,c.eq.3)"), kSchemas, lim);
    auto conds = refused([&] {
        (void)parse(get("/items", "a=eq.1&or=(b.eq.2,and(c.eq.3,d.eq.4))"), kSchemas, lim);
    });
    CHECK(conds.message() == "Too many conditions");
}

TEST_CASE("limits: select items, nesting, lists, names and values", "[rest]") {
    limits lim;
    lim.max_select_items = 4;
    (void)parse(get("/items", "select=a,b(c,d)"), kSchemas, lim);
    CHECK(refused([&] {
              (void)parse(get("/items", "select=a,b(c,d,e)"), kSchemas, lim);
          }).message() == "Too many items in the select parameter");

    lim = {};
    lim.max_embed_depth = 2;
    (void)parse_select("a(b(c))", lim);
    auto deep = refused([&] { (void)parse_select("a(b(c(d)))", lim); });
    CHECK(deep.status() == 400);
    CHECK(deep.message() == "Embedded resources in the select parameter are nested too deeply");
    CHECK(deep.details() == "At most 2 levels are accepted.");
    CHECK(refused([&] {
              (void)parse(get("/items", "a.b.c.name=eq.1"), kSchemas, lim);
          }).message() == "Embedded resources are nested too deeply");

    lim = {};
    lim.max_logic_depth = 2;
    (void)parse_logic("or", "(and(a.eq.1))", lim);
    CHECK(refused([&] { (void)parse_logic("or", "(and(or(a.eq.1)))", lim); }).message() ==
          "Logic trees (and/or) are nested too deeply");

    lim = {};
    lim.max_list_values = 3;
    CHECK(refused([&] {
              (void)parse(get("/items", "id=in.(1,2,3,4)"), kSchemas, lim);
          }).message() == "Too many values in an in list");
    CHECK(refused([&] {
              (void)parse(get("/items", "or=(id.in.(1,2,3,4))"), kSchemas, lim);
          }).message() == "Too many values in an in list");

    lim = {};
    lim.max_identifier_bytes = 8;
    auto name = refused([&] { (void)parse(get("/items", "select=abcdefghi"), kSchemas, lim); });
    CHECK(name.message() == "A name in the query string is too long");
    CHECK(name.details() == "A column name has 9 bytes; at most 8 are accepted.");
    CHECK(refused([&] {
              (void)parse(get("/items", "select=x:a!hint_too_long(*)"), kSchemas, lim);
          }).code() == "PGRST100");

    lim = {};
    lim.max_value_bytes = 4;
    (void)parse(get("/items", "a=eq.abcd"), kSchemas, lim);
    CHECK(refused([&] { (void)parse(get("/items", "a=eq.abcde"), kSchemas, lim); }).message() ==
          "A value in the query string is too long");
    CHECK(refused([&] { (void)parse(get("/rpc/f", "q=abcde"), kSchemas, lim); }).message() ==
          "A value in the query string is too long");
}

TEST_CASE("limits: deep nesting is refused before recursing, never a crash", "[rest]") {
    limits lim;
    lim.max_query_bytes = 1 << 20;
    std::string embeds;
    for (int i = 0; i < 100000; ++i) embeds += "a(";
    CHECK(refused([&] {
              (void)parse(get("/items", "select=" + embeds), kSchemas, lim);
          }).status() == 400);
    std::string ors = "or=(";
    for (int i = 0; i < 100000; ++i) ors += "or(";
    CHECK(refused([&] { (void)parse(get("/items", ors), kSchemas, lim); }).status() == 400);
    // a run of parentheses is just text the grammar does not accept
    const std::string parens(100000, '(');
    (void)parse_select(parens, lim);
    CHECK(refused([&] { (void)parse(get("/items", "or=" + parens), kSchemas, lim); }).code() ==
          "PGRST100");
    CHECK(refused([&] { (void)parse(get("/items", "order=" + parens), kSchemas, lim); }).code() ==
          "PGRST100");
}

TEST_CASE("limits: bad %-escapes, invalid UTF-8 and NUL bytes in the query", "[rest]") {
    auto pct = refused_get("select=a%zz");
    CHECK(pct.status() == 400);
    CHECK(pct.code() == "PGRST100");
    CHECK(pct.message() == "Invalid percent-encoding in the query string");
    CHECK(pct.details() == "'%' at byte 9 is not followed by two hexadecimal digits.");
    CHECK(refused_get("a=eq.%4").code() == "PGRST100");
    CHECK(refused_get("a=eq.%ff%fe").message() == "Invalid UTF-8 in the query string");
    CHECK(refused_get("a=eq.%c0%af").message() == "Invalid UTF-8 in the query string");  // overlong
    CHECK(refused_get("a=eq.x%00y").message() == "NUL bytes are not accepted in the query string");
    CHECK(parse_get("a=eq.%E2%9C%93+ok").filters.at(0).second.expr.value == "\xE2\x9C\x93 ok");

    CHECK(parse_query_string("a=1&b;c=%2B&d=") ==
          std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"c", "+"}, {"d", ""}});
}

TEST_CASE("the web UI's list query parses whole", "[rest]") {
    raw_request r = get("/tasks",
                        "select=*,assignee_agent:agents!tasks_assignee_agent_id_fkey(id,name,slug)"
                        "&status=in.(todo,in_progress)&order=created_at.desc&limit=50");
    r.prefer = {"count=exact"};
    r.accept = "application/json";
    auto q = parse(r, kSchemas);
    CHECK(q.target == "tasks");
    CHECK(q.select.size() == 2);
    CHECK(q.filters.at(0).second.expr.list == std::vector<std::string>{"todo", "in_progress"});
    CHECK(q.order.at(0).second.at(0).dir == order_dir::desc);
    CHECK(q.top_range == row_range{0, 50});
    CHECK(q.prefer.count == prefer_count::exact);
    CHECK(q.accept.at(0).kind == media::json);
}

}  // namespace rest_request_test
