// libs/realtime's claims analysis without a server: pg_node_tree text read as Postgres writes it
// (tests/fixtures/realtime_claims: awp's tasks policy and current_tenant_id's body as a
// PostgreSQL 15 cluster printed them, see the README there), its bounds, the analysis over a
// catalog built by hand from those trees, and the grouping key two sessions' claims give.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "awp/realtime/claims.hpp"
#include "awp/realtime/node_tree.hpp"
#include "awp/rest/query.hpp"

namespace realtime_claims_test {

namespace claims = awp::realtime::claims;
namespace nt = awp::realtime::node_tree;

namespace {

std::string fixture(const std::string& name) {
    std::ifstream in(std::string(AWP_SOURCE_DIR) + "/tests/fixtures/realtime_claims/" + name);
    REQUIRE(in);
    std::stringstream s;
    s << in.rdbuf();
    auto text = s.str();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
}

constexpr std::uint32_t kTasks = 17000;
constexpr std::uint32_t kCurrentTenantId = 16746;  // as in the fixtures
constexpr std::uint32_t kGatewayTenant = 18027;    // awp_session_gateway_tenant, ditto
constexpr std::uint32_t kAuthenticated = 16390, kServiceRole = 16391, kGatewayRole = 16392;

claims::catalog base_catalog() {
    claims::catalog c;
    c.role_oids = {{"authenticated", kAuthenticated},
                   {"service_role", kServiceRole},
                   {"awp_gateway", kGatewayRole},
                   {"anon", 16389}};
    c.roles[kAuthenticated] = {"authenticated", {kAuthenticated}, {kAuthenticated}};
    c.roles[kServiceRole] = {"service_role", {kServiceRole}, {kServiceRole}};
    c.roles[kGatewayRole] = {"awp_gateway", {kGatewayRole}, {kGatewayRole}};
    claims::function_info f;
    f.schema = "public";
    f.name = "current_tenant_id";
    f.language = 's';
    f.body = std::make_shared<const nt::value>(nt::parse(fixture("current_tenant_id.txt")));
    c.functions[kCurrentTenantId] = f;
    claims::policy p;
    p.name = "tenant_isolation";
    p.roles = {kAuthenticated};
    p.qual = std::make_shared<const nt::value>(nt::parse(fixture("tasks_tenant_isolation.txt")));
    c.relations[kTasks] = {'r', {p}};
    return c;
}

/// Fills in what the analysis asks for: built-in functions by the names PostgreSQL 15 gives
/// their oids in the fixtures (what realtime_policy.cpp reads from pg_proc).
void fill(claims::catalog& c, const claims::wanted& w) {
    static const std::map<std::uint32_t, std::string> builtins = {
        {2956, "uuid_eq"},
        {3294, "show_config_by_name_missing_ok"},
        {67, "texteq"},
        {3214, "jsonb_object_field_text"},
        {3478, "jsonb_object_field"},
        {2705, "pg_has_role_name_name"},
    };
    for (auto oid : w.functions) {
        claims::function_info f;
        if (auto it = builtins.find(oid); it != builtins.end()) {
            f.schema = "pg_catalog";
            f.name = it->second;
            f.symbol = it->second;
            f.language = 'i';
        } else if (oid == kGatewayTenant) {
            f.schema = "public";
            f.name = "awp_session_gateway_tenant";
            f.language = 'o';  // stands for what the analysis cannot see into
        } else {
            FAIL("the analysis asked for an unexpected function " << oid);
        }
        c.functions[oid] = f;
    }
    for (auto oid : w.roles) c.roles.try_emplace(oid);
    for (auto oid : w.relations) c.relations.try_emplace(oid);
}

claims::analysis settle(claims::catalog& c, std::uint32_t table, std::uint32_t role) {
    for (int i = 0; i < 10; ++i) {
        auto a = claims::analyze(c, table, role);
        if (a.missing.empty()) return a;
        fill(c, a.missing);
    }
    FAIL("the analysis never settled");
    return {};
}

std::set<std::string> paths(const claims::reads& r) {
    std::set<std::string> out;
    for (const auto& p : r.paths) out.insert(claims::to_string(p));
    return out;
}

}  // namespace

TEST_CASE("a pg_node_tree reads as Postgres wrote it: nodes, lists, NULL, datums",
          "[realtime][claims]") {
    const auto v = nt::parse(fixture("tasks_tenant_isolation.txt"));
    REQUIRE(v.is_node("OPEXPR"));
    CHECK(v.number("opno") == 2972);
    CHECK(v.boolean("opretset") == false);
    const auto* args = v.field("args");
    REQUIRE(args);
    REQUIRE(args->is_list());
    REQUIRE(args->items.size() == 2);
    CHECK(args->items[0].is_node("VAR"));
    const auto* sub = args->items[1].field("subselect");
    REQUIRE(sub);
    CHECK(sub->is_node("QUERY"));
    CHECK(sub->field("utilityStmt")->is_null());

    // Datums: text (a 4-byte varlena header), name (64 bytes, NUL-padded), bool, int4, NULL.
    const auto text = nt::parse(
        "{CONST :consttype 25 :constlen -1 :constbyval false :constisnull false :constvalue 22 [ "
        "88 0 0 0 114 101 113 117 101 115 116 46 106 119 116 46 99 108 97 105 109 115 ]}");
    CHECK(nt::const_text(text) == "request.jwt.claims");
    std::string name_bytes = "115 101 114 118 105 99 101 95 114 111 108 101";
    for (int i = 12; i < 64; ++i) name_bytes += " 0";
    const auto name = nt::parse(
        "{CONST :consttype 19 :constlen 64 :constbyval false "
        ":constisnull false :constvalue 64 [ " +
        name_bytes + " ]}");
    CHECK(nt::const_text(name) == "service_role");
    CHECK(nt::const_bool(nt::parse("{CONST :consttype 16 :constisnull false :constvalue 1 [ 1 0 0 "
                                   "0 0 0 0 0 ]}")) == true);
    CHECK(nt::const_integer(nt::parse("{CONST :consttype 23 :constisnull false :constvalue 4 [ -2 "
                                      "-1 -1 -1 0 0 0 0 ]}")) == -2);
    CHECK_FALSE(
        nt::const_text(nt::parse("{CONST :consttype 25 :constisnull true :constvalue <>}")));
    // A backslash keeps a delimiter in a token.
    CHECK(nt::parse("{ALIAS :aliasname a\\ b\\(c :colnames <>}").field("aliasname")->text ==
          "a b(c");
}

TEST_CASE("a pg_node_tree that is cut, lies or nests too deep is refused with where",
          "[realtime][claims]") {
    for (const char* bad : {"{OPEXPR :opno", "{CONST :constvalue 4 [ 1 2", "(1 2", "{A :b 1}}",
                            "{CONST :constvalue 4 [ 1 999 ]}", "{ :x 1}", "{A b}", ")"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(nt::parse(bad), nt::parse_error);
    }
    nt::limits l;
    l.max_depth = 8;
    std::string deep;
    for (int i = 0; i < 9; ++i) deep += "{A :x ";
    deep += "1";
    for (int i = 0; i < 9; ++i) deep += "}";
    CHECK_THROWS_WITH(nt::parse(deep, l), Catch::Contains("deeper than 8"));
    l.max_bytes = 16;
    CHECK_THROWS_WITH(nt::parse("{QUERY :commandType 1 :x 2}", l), Catch::Contains("above 16"));
}

TEST_CASE("awp's tenant policy reads the claims' two tenant paths, for authenticated",
          "[realtime][claims]") {
    auto c = base_catalog();
    const auto a = settle(c, kTasks, kAuthenticated);
    INFO(a.r.why);
    CHECK_FALSE(a.r.whole);
    CHECK(paths(a.r) == std::set<std::string>{"app_metadata.tenant_id", "tenant_id"});
    CHECK(a.functions_used.contains(kCurrentTenantId));
    // The CASE branch a gateway role takes (awp_session_gateway_tenant, not followed) is never
    // reached for authenticated: pg_has_role decided it.
    CHECK_FALSE(a.functions_used.contains(kGatewayTenant));

    // A role for which that branch may be taken: the function it calls cannot be followed.
    claims::policy p;
    p.name = "for_gateways";
    p.roles = {kGatewayRole};
    p.qual = c.relations[kTasks].policies[0].qual;
    c.relations[kTasks].policies.push_back(p);
    const auto g = settle(c, kTasks, kGatewayRole);
    CHECK(g.r.whole);
    CHECK(g.r.why.find("awp_session_gateway_tenant") != std::string::npos);
    // And a role no policy names reads nothing.
    CHECK(paths(settle(c, kTasks, kServiceRole).r).empty());
}

TEST_CASE("the grouping key keeps exactly what the policies read", "[realtime][claims]") {
    claims::reads r;
    r.paths.insert({{false, "app_metadata"}, {false, "tenant_id"}});
    r.paths.insert({{false, "tenant_id"}});
    const auto k = [&](const std::string& c) { return claims::projection(r, c); };
    const std::string a1 =
        R"({"sub":"u1","session_id":"s1","iat":1,"app_metadata":{"tenant_id":"A","x":1}})";
    const std::string a2 =
        R"({"sub":"u2","session_id":"s2","iat":2,"app_metadata":{"tenant_id":"A"}})";
    CHECK(k(a1) == k(a2));
    CHECK(k(a1) != k(R"({"app_metadata":{"tenant_id":"B"}})"));
    // Where the walk stops matters (COALESCE(claims -> 'app_metadata', ...) sees an absent key
    // as NULL, a JSON null as a value); what stopped it past a present key does not (-> on {}
    // and on null are both NULL).
    CHECK(k(R"({})") != k(R"({"app_metadata":null})"));
    CHECK(k(R"({"app_metadata":{}})") == k(R"({"app_metadata":null})"));
    CHECK(k(R"({"app_metadata":{"tenant_id":null}})") != k(R"({"app_metadata":{}})"));
    // Numbers as written (jsonb keeps 1.0 and 1.00 apart), a string is not a number.
    CHECK(k(R"({"tenant_id":1.0})") != k(R"({"tenant_id":1.00})"));
    CHECK(k(R"({"tenant_id":"1"})") != k(R"({"tenant_id":1})"));
    // An escape is the character it stands for.
    CHECK(k(R"({"tenant_id":"A"})") == k(R"({"tenant_id":"\u0041"})"));
    // Duplicate keys, a document that is not an object: the whole claims decide.
    CHECK(k(R"({"tenant_id":"A","tenant_id":"B"})").front() == 'w');
    CHECK(k(R"([1])").front() == 'w');
    // An array on the way is kept whole.
    claims::reads arr;
    arr.paths.insert({{false, "teams"}, {true, "0"}});
    CHECK(claims::projection(arr, R"({"teams":[1,2]})") !=
          claims::projection(arr, R"({"teams":[1,3]})"));
    // Whole: the claims' text itself.
    claims::reads whole;
    whole.whole = true;
    CHECK(claims::projection(whole, a1) != claims::projection(whole, a2));
}

TEST_CASE("the data API's settings are the ones the claims analysis knows", "[realtime][claims]") {
    // The analysis reads request.jwt.claims and request.jwt.claim.<name> as the claims, and
    // every other setting as the same for every session of a role: a new setting made from the
    // claims must be taught to it (claims.cpp, setting()).
    awp::rest::session_facts f;
    f.role = "authenticated";
    f.claims_json = "{}";
    f.sub = "u";
    f.search_path = "public";
    f.default_statement_timeout = "1s";
    const auto st = awp::rest::setup_statement(f);
    std::set<std::string> names;
    for (std::size_t i = 0; i < st.params.size(); i += 2) names.insert(st.params[i].value_or(""));
    CHECK(names == std::set<std::string>{"role", "request.jwt.claims", "request.jwt.claim.sub",
                                         "request.jwt.claim.role", "request.method", "request.path",
                                         "request.headers", "search_path", "statement_timeout",
                                         "transaction_read_only"});
}

}  // namespace realtime_claims_test
