// The data API (/rest/v1) attacked as a hostile tenant, request and query string would: every
// identifier quoted, every value bound, the limits, GET that cannot write, two tenants who see
// nothing of each other, anon, bad tokens, the schema cache reloaded on NOTIFY pgrst. The
// client library's view of the same surface is tests/data-api (node, the real supabase-js).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include <rapidjson/document.h>

#include "awp/core/crypto.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "support/api_process.hpp"
#include "support/test_db.hpp"

namespace api_rest_test {

namespace {

namespace http = awp::http;
namespace crypto = awp::core::crypto;
using awp::test::api_gateway_process;
using awp::test::kApiJwtSecret;
using awp::test::random_name;

long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string jwt(const std::string& role, const std::string& tenant = {},
                const std::string& sub = awp::core::uuid::generate_v4().to_string()) {
    std::string claims = R"({"sub":")" + sub + R"(","role":")" + role + R"(","exp":)" +
                         std::to_string(now_s() + 3600);
    if (!tenant.empty()) claims += R"(,"app_metadata":{"tenant_id":")" + tenant + R"("})";
    claims += "}";
    return crypto::jwt_sign_hs256(claims, kApiJwtSecret);
}

http::headers auth(const std::string& token) {
    http::headers h;
    h.add("Authorization", "Bearer " + token);
    h.add("apikey", token);
    return h;
}

http::headers json_auth(const std::string& token) {
    auto h = auth(token);
    h.add("Content-Type", "application/json");
    return h;
}

rapidjson::Document parse(const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.c_str(), body.size());
    return d;
}

std::string code_of(const http::response& r) {
    auto d = parse(r.body);
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("code") || !d["code"].IsString()) {
        return "<no PostgREST error body: " + r.body + ">";
    }
    return d["code"].GetString();
}

std::size_t rows_of(const http::response& r) {
    auto d = parse(r.body);
    REQUIRE_FALSE(d.HasParseError());
    REQUIRE(d.IsArray());
    return d.Size();
}

struct world {
    awp::test::scoped_database db;
    std::string tenant_a, tenant_b;
    world() {
        auto admin = db.admin();
        tenant_a = std::string(admin
                                   .exec("INSERT INTO tenants (name, slug) VALUES ('A', $1) "
                                         "RETURNING id::text",
                                         {random_name("ta")})
                                   .text(0, 0));
        tenant_b = std::string(admin
                                   .exec("INSERT INTO tenants (name, slug) VALUES ('B', $1) "
                                         "RETURNING id::text",
                                         {random_name("tb")})
                                   .text(0, 0));
        for (const auto& [t, prefix] : {std::pair{tenant_a, "a"}, std::pair{tenant_b, "b"}}) {
            for (int i = 0; i < 3; ++i) {
                const auto slug = std::string(prefix) + "-agent-" + std::to_string(i);
                admin.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, $2, $2)",
                           {t, slug});
            }
        }
    }
};

}  // namespace

TEST_CASE(
    "the data API quotes every name and binds every value: injection attempts are "
    "refused or inert, and nothing is dropped",
    "[api][rest]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    const auto a = jwt("authenticated", w.tenant_a);
    const std::string attacks[] = {
        "/rest/v1/agents?select=id,name%22%3B%20DROP%20TABLE%20agents%3B--",
        "/rest/v1/agents?select=id::text%20from%20agents%3B%20drop%20table%20agents",
        "/rest/v1/agents?select=meta-%3E%3E%27x%27%29%3Bdrop%20table%20agents--",
        "/rest/v1/agents?order=name%3Bdrop%20table%20agents",
        "/rest/v1/agents?name=eq.%27%29%3B%20DROP%20TABLE%20agents%3B--",
        "/rest/v1/agents?name=in.(%22a%5C%22%29%3B%20drop%20table%20agents%3B--%22,b)",
        "/rest/v1/agents?select=*,tasks!%22x%22%22%3Bdrop(*)",
        "/rest/v1/agents?name=like.*%27%3B%20drop%20table%20agents%3B--",
        "/rest/v1/agents?or=(name.eq.x%29%3Bdrop%20table%20agents%3B--,id.is.null)",
        "/rest/v1/agents?select=id,meta-%3E%22a%27%3Bdrop%22",
        "/rest/v1/agents%22%3B%20drop%20table%20agents%3B--",
        "/rest/v1/rpc/"
        "agent_reports_chain?p_agent_id=00000000-0000-0000-0000-000000000000&p_max_depth=1%3Bdrop%"
        "20table%20agents",
    };
    for (const auto& target : attacks) {
        CAPTURE(target);
        const auto r = gw.get(target, auth(a));
        CHECK(r.status < 500);
        if (r.status >= 400) CHECK(code_of(r).size() >= 5);  // PostgREST's body, a real code
    }
    // The table and its rows are all there; nothing ran beyond the one statement.
    auto admin = w.db.admin();
    CHECK(admin.exec("SELECT count(*) FROM agents").get<int>(0, 0) == 6);
    // Values with quotes are values: an exact match on a name holding a quote finds it.
    admin.exec("INSERT INTO agents (tenant_id, name, slug) VALUES ($1, $2, 'quoted')",
               {w.tenant_a, "it's \"x\"; drop"});
    const auto q =
        gw.get("/rest/v1/agents?select=slug&name=eq.it%27s%20%22x%22%3B%20drop", auth(a));
    REQUIRE(q.status == 200);
    CHECK(q.body == R"([{"slug":"quoted"}])");
}

TEST_CASE(
    "the data API's limits: a long URL, too many filters, deep embeds and large bodies "
    "are 4xx with PostgREST's error shape",
    "[api][rest]") {
    world w;
    api_gateway_process gw(w.db.api_dsn(), {{"API_REST_BODY_LIMIT", "65536"}});
    const auto a = jwt("authenticated", w.tenant_a);
    std::string many = "/rest/v1/agents?select=id";
    for (int i = 0; i < 400; ++i) many += "&name=neq.x" + std::to_string(i);
    const auto m = gw.get(many, auth(a));
    CHECK(m.status >= 400);
    CHECK(m.status < 500);
    std::string deep = "/rest/v1/agents?select=id";
    std::string open, close;
    for (int i = 0; i < 40; ++i) {
        open += ",agents(id";
        close += ")";
    }
    const auto d = gw.get(deep + open + close, auth(a));
    CHECK(d.status >= 400);
    CHECK(d.status < 500);
    std::string parens(20000, '(');
    const auto p = gw.get("/rest/v1/agents?or=" + parens, auth(a));
    CHECK(p.status >= 400);
    CHECK(p.status < 500);
    const auto big = gw.request("POST", "/rest/v1/agents", json_auth(a),
                                "[" + std::string(100 * 1024, ' ') + "]");
    CHECK(big.status == 413);
    // A long query string is PostgREST's 414 (below the HTTP server's own 16 KiB of headers).
    const auto long_query =
        gw.get("/rest/v1/agents?select=id&name=eq." + std::string(13000, 'x'), auth(a));
    CHECK(long_query.status == 414);
    CHECK(code_of(long_query).size() >= 5);
    const auto bad_json = gw.request("POST", "/rest/v1/agents", json_auth(a), "{\"name\":");
    CHECK(bad_json.status == 400);
}

TEST_CASE(
    "GET cannot change state: a volatile function that writes is refused on GET and "
    "nothing is written",
    "[api][rest]") {
    world w;
    auto admin = w.db.admin();
    admin.exec(
        "CREATE FUNCTION public.rest_test_write(p_tenant uuid) RETURNS int LANGUAGE sql AS "
        "$$ INSERT INTO public.agents (tenant_id, name, slug) VALUES (p_tenant, 'w', "
        "'written-by-get') RETURNING 1 $$");
    admin.exec("GRANT EXECUTE ON FUNCTION public.rest_test_write(uuid) TO authenticated");
    admin.exec("NOTIFY pgrst, 'reload schema'");
    api_gateway_process gw(w.db.api_dsn());
    const auto a = jwt("authenticated", w.tenant_a);
    const auto g = gw.get("/rest/v1/rpc/rest_test_write?p_tenant=" + w.tenant_a, auth(a));
    CHECK(g.status == 405);
    CHECK(code_of(g) == "25006");
    CHECK(admin.exec("SELECT count(*) FROM agents WHERE slug = 'written-by-get'").get<int>(0, 0) ==
          0);
    // The same call by POST writes (RLS lets the tenant insert its own row).
    const auto p = gw.request("POST", "/rest/v1/rpc/rest_test_write", json_auth(a),
                              R"({"p_tenant":")" + w.tenant_a + R"("})");
    CHECK(p.status == 200);
    CHECK(admin.exec("SELECT count(*) FROM agents WHERE slug = 'written-by-get'").get<int>(0, 0) ==
          1);
}

TEST_CASE("two tenants see, change and delete nothing of each other through /rest/v1",
          "[api][rest]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    const auto a = jwt("authenticated", w.tenant_a);
    const auto b = jwt("authenticated", w.tenant_b);
    const auto ra = gw.get("/rest/v1/agents?select=slug,tenant_id&order=slug", auth(a));
    REQUIRE(ra.status == 200);
    CHECK(rows_of(ra) == 3);
    CHECK(ra.body.find(w.tenant_b) == std::string::npos);
    // B cannot update or delete A's rows: 0 rows touched, A's rows unchanged.
    http::headers rep = json_auth(b);
    rep.add("Prefer", "return=representation");
    const auto u =
        gw.request("PATCH", "/rest/v1/agents?slug=eq.a-agent-0", rep, R"({"name":"pwned"})");
    CHECK(u.status == 200);
    CHECK(u.body == "[]");
    const auto del = gw.request("DELETE", "/rest/v1/agents?slug=like.a-*", rep);
    CHECK(del.status == 200);
    CHECK(del.body == "[]");
    auto admin = w.db.admin();
    CHECK(admin
              .exec("SELECT count(*) FROM agents WHERE tenant_id = $1 AND name <> 'pwned'",
                    {w.tenant_a})
              .get<int>(0, 0) == 3);
    // B cannot insert a row into A's tenant: row-level security's WITH CHECK refuses it.
    const auto ins =
        gw.request("POST", "/rest/v1/agents", json_auth(b),
                   R"({"tenant_id":")" + w.tenant_a + R"(","name":"x","slug":"planted"})");
    CHECK(ins.status == 403);
    CHECK(code_of(ins) == "42501");
    CHECK(admin.exec("SELECT count(*) FROM agents WHERE slug = 'planted'").get<int>(0, 0) == 0);
    // Counts and embeds do not leak either.
    http::headers cnt = auth(b);
    cnt.add("Prefer", "count=exact");
    const auto c = gw.request("HEAD", "/rest/v1/agents", cnt);
    CHECK(c.status == 200);
    CHECK(c.header.get("content-range") == "0-2/3");
}

TEST_CASE("anon sees nothing of awp's tables, and bad tokens are refused with 401", "[api][rest]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    const auto none = gw.get("/rest/v1/agents");
    CHECK(none.status == 401);  // no grant to anon: 42501 without a JWT is 401
    CHECK(code_of(none) == "42501");
    // The anon key is a JWT but not an authenticated one: PostgREST answers 401 for it too.
    const auto anon = gw.get("/rest/v1/agents", auth(jwt("anon")));
    CHECK(anon.status == 401);
    CHECK(code_of(anon) == "42501");
    const auto forged = crypto::jwt_sign_hs256(
        R"({"role":"service_role","exp":)" + std::to_string(now_s() + 60) + "}",
        "another-secret-that-is-long-enough-0123456789");
    const auto f = gw.get("/rest/v1/agents", auth(forged));
    CHECK(f.status == 401);
    CHECK(f.header.get("www-authenticate").has_value());
    const auto garbage = gw.get("/rest/v1/agents", auth("not-a-jwt"));
    CHECK(garbage.status == 401);
    // A session without a tenant reads nothing of awp's tables (no tenant, no data).
    const auto no_tenant = gw.get("/rest/v1/agents", auth(jwt("authenticated")));
    CHECK(no_tenant.status == 200);
    CHECK(no_tenant.body == "[]");
}

TEST_CASE("the schema cache reloads on NOTIFY pgrst: a new table is served without a restart",
          "[api][rest]") {
    world w;
    api_gateway_process gw(w.db.api_dsn());
    const auto s = jwt("service_role");
    CHECK(gw.get("/rest/v1/agents?select=id&limit=1", auth(s)).status == 200);  // cache loaded
    auto admin = w.db.admin();
    admin.exec("CREATE TABLE public.rest_late (id int PRIMARY KEY, note text)");
    admin.exec("GRANT SELECT ON public.rest_late TO service_role");
    admin.exec("INSERT INTO public.rest_late VALUES (1, 'hello')");
    const auto before = gw.get("/rest/v1/rest_late", auth(s));
    CHECK(before.status == 404);
    CHECK(code_of(before) == "PGRST205");
    admin.exec("NOTIFY pgrst, 'reload schema'");
    http::response after;
    for (int i = 0; i < 50; ++i) {
        after = gw.get("/rest/v1/rest_late", auth(s));
        if (after.status == 200) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(after.status == 200);
    CHECK(after.body == R"([{"id":1,"note":"hello"}])");
}

}  // namespace api_rest_test
