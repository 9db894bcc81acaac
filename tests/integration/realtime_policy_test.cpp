// Realtime's reading of the catalog against a real server (apps/api-gateway/src/realtime_policy
// .cpp and libs/realtime claims.hpp): which claims each table's policies read for a role, learnt
// from Postgres' own parse trees (awp's tenant policies through current_tenant_id, a per-user
// policy through auth.uid, auth.jwt() ->> 'email', a path into app_metadata, a subquery into
// another table's policies), and where nothing narrower can be proven (plpgsql, a setting of a
// computed name) the whole claims. Subscribers are grouped by exactly this, so the test asserts
// what grouping two users' claims gives, and that a policy changed later moves the fingerprint
// the delivery checks after its statements.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "awp/core/pg.hpp"
#include "awp/realtime/claims.hpp"
#include "realtime_policy.hpp"
#include "support/test_db.hpp"

namespace realtime_policy_test {

namespace net = boost::asio;
namespace pg = awp::core::pg;
namespace claims = awp::realtime::claims;
using awp::api::realtime_policies;
using awp::rest::qualified_name;
using awp::test::scoped_database;

namespace {

template <class T>
T run_coro(net::io_context& ioc, net::awaitable<T> a) {
    auto f = net::co_spawn(ioc, std::move(a), net::use_future);
    ioc.restart();
    ioc.run();
    return f.get();
}

// The tables a hosted project's schema would have, beside awp's own.
constexpr const char* kSchema = R"SQL(
CREATE TABLE public.rt_notes (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), user_id uuid,
                              tenant_id uuid, body text, secret text);
ALTER TABLE public.rt_notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON public.rt_notes FOR SELECT TO authenticated USING (user_id = auth.uid());
GRANT SELECT (id, user_id, tenant_id, body) ON public.rt_notes TO authenticated;

CREATE TABLE public.rt_mail (id int PRIMARY KEY, email text);
ALTER TABLE public.rt_mail ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON public.rt_mail FOR SELECT TO authenticated
  USING (email = (SELECT auth.jwt() ->> 'email'));
GRANT SELECT ON public.rt_mail TO authenticated;

CREATE TABLE public.rt_team_rows (id int PRIMARY KEY, team text);
ALTER TABLE public.rt_team_rows ENABLE ROW LEVEL SECURITY;
CREATE POLICY team ON public.rt_team_rows FOR SELECT TO authenticated
  USING (team = auth.jwt() -> 'app_metadata' ->> 'team');
GRANT SELECT ON public.rt_team_rows TO authenticated;

CREATE TABLE public.rt_members (team_id int, user_id uuid);
ALTER TABLE public.rt_members ENABLE ROW LEVEL SECURITY;
CREATE POLICY me ON public.rt_members FOR SELECT TO authenticated USING (user_id = auth.uid());
GRANT SELECT ON public.rt_members TO authenticated;
CREATE TABLE public.rt_projects (id int PRIMARY KEY, team_id int);
ALTER TABLE public.rt_projects ENABLE ROW LEVEL SECURITY;
CREATE POLICY via_team ON public.rt_projects FOR SELECT TO authenticated
  USING (EXISTS (SELECT 1 FROM public.rt_members m WHERE m.team_id = rt_projects.team_id));
GRANT SELECT ON public.rt_projects TO authenticated;

CREATE FUNCTION public.rt_opaque() RETURNS text LANGUAGE plpgsql STABLE
  AS $$ BEGIN RETURN current_setting('request.jwt.claims', true); END $$;
GRANT EXECUTE ON FUNCTION public.rt_opaque() TO authenticated;
CREATE TABLE public.rt_opaque_rows (id int PRIMARY KEY, v text);
ALTER TABLE public.rt_opaque_rows ENABLE ROW LEVEL SECURITY;
CREATE POLICY opaque ON public.rt_opaque_rows FOR SELECT TO authenticated
  USING (v = public.rt_opaque());
GRANT SELECT ON public.rt_opaque_rows TO authenticated;

CREATE TABLE public.rt_computed (id int PRIMARY KEY, v text);
ALTER TABLE public.rt_computed ENABLE ROW LEVEL SECURITY;
CREATE POLICY computed ON public.rt_computed FOR SELECT TO authenticated
  USING (v = current_setting('request.jwt.' || 'claims', true));
GRANT SELECT ON public.rt_computed TO authenticated;
)SQL";

struct world {
    scoped_database db;
    net::io_context ioc;
    pg::connection api;
    realtime_policies policies;
    awp::rest::schema_cache cache;

    world()
        : api([&] {
              db.admin().exec_script(kSchema);
              return db.api();
          }()),
          policies([this](std::string sp, std::vector<pg::connection::pipelined> stmts)
                       -> net::awaitable<std::vector<pg::result>> {
              std::vector<pg::connection::pipelined> all;
              pg::params p;
              p.emplace_back(std::move(sp));
              all.push_back({"SELECT set_config('search_path', $1, true)", std::move(p)});
              for (auto& s : stmts) all.push_back(std::move(s));
              auto r = co_await api.async_pipeline(std::move(all));
              r.erase(r.begin());
              co_return r;
          }) {
        cache.schemas = {"public"};
        for (const auto* t : {"tasks", "rt_notes", "rt_mail", "rt_team_rows", "rt_projects",
                              "rt_opaque_rows", "rt_computed"}) {
            awp::rest::table tab;
            tab.id = qualified_name{"public", t};
            tab.primary_key = {"id"};
            cache.tables[tab.id] = tab;
        }
    }

    std::shared_ptr<const realtime_policies::snapshot> facts(
        std::set<realtime_policies::key> needs) {
        return run_coro(ioc, policies.prepare(std::move(needs), cache));
    }
    const awp::api::realtime_table_facts& of(const std::string& table,
                                             const std::string& role = "authenticated") {
        snap = facts({{qualified_name{"public", table}, role}});
        const auto* f = snap->find(qualified_name{"public", table}, role);
        REQUIRE(f != nullptr);
        INFO(f->error);
        REQUIRE(f->error.empty());
        return *f;
    }
    std::shared_ptr<const realtime_policies::snapshot> snap;
};

std::set<std::string> paths(const claims::reads& r) {
    std::set<std::string> out;
    for (const auto& p : r.paths) out.insert(claims::to_string(p));
    return out;
}

std::string user(const std::string& sub, const std::string& tenant, const std::string& extra = {}) {
    return R"({"sub":")" + sub + R"(","role":"authenticated","session_id":")" + sub +
           R"(-session","iat":1,"exp":9999999999,"app_metadata":{"tenant_id":")" + tenant +
           R"("})" + extra + "}";
}

}  // namespace

TEST_CASE("realtime learns the claims awp's tenant policies read, through current_tenant_id",
          "[realtime][policy]") {
    world w;
    const auto& f = w.of("tasks");
    INFO(f.reads.why);
    CHECK_FALSE(f.reads.whole);
    CHECK(paths(f.reads) == std::set<std::string>{"app_metadata.tenant_id", "tenant_id"});
    // Two sessions of one tenant: one group; another tenant: another group.
    const auto a1 = claims::projection(f.reads, user("u1", "t-a"));
    const auto a2 = claims::projection(f.reads, user("u2", "t-a", R"(,"email":"x@y")"));
    const auto b = claims::projection(f.reads, user("u3", "t-b"));
    CHECK(a1 == a2);
    CHECK(a1 != b);
    // The service role's policy reads nothing; anon has none at all.
    CHECK(paths(w.of("tasks", "service_role").reads).empty());
    CHECK_FALSE(w.of("tasks", "service_role").reads.whole);
    CHECK(paths(w.of("tasks", "anon").reads).empty());
}

TEST_CASE("realtime learns per-user, e-mail and app_metadata policies, and subqueries' policies",
          "[realtime][policy]") {
    world w;
    const auto& notes = w.of("rt_notes");
    CHECK(paths(notes.reads) == std::set<std::string>{"sub"});
    // The same tenant, two users: two groups (a policy reading sub never groups them).
    CHECK(claims::projection(notes.reads, user("u1", "t-a")) !=
          claims::projection(notes.reads, user("u2", "t-a")));
    // One user, two sessions (other claims differ): one group.
    CHECK(claims::projection(notes.reads, user("u1", "t-a")) ==
          claims::projection(notes.reads, user("u1", "t-b", R"(,"amr":["password"])")));
    // Column privileges: the revoked column is not the role's.
    CHECK(notes.columns ==
          std::set<std::string, std::less<>>{"id", "user_id", "tenant_id", "body"});
    CHECK(notes.primary_key_selectable);

    CHECK(paths(w.of("rt_mail").reads) == std::set<std::string>{"email"});
    CHECK(paths(w.of("rt_team_rows").reads) == std::set<std::string>{"app_metadata.team"});
    // rt_projects' policy reads rt_members, whose own policy reads sub.
    CHECK(paths(w.of("rt_projects").reads) == std::set<std::string>{"sub"});
}

TEST_CASE("realtime falls back to the whole claims where it cannot prove narrower",
          "[realtime][policy]") {
    world w;
    const auto& opaque = w.of("rt_opaque_rows");
    CHECK(opaque.reads.whole);
    CHECK(opaque.reads.why.find("rt_opaque") != std::string::npos);
    CHECK(claims::projection(opaque.reads, user("u1", "t-a")) !=
          claims::projection(opaque.reads, user("u1", "t-a", R"(,"amr":["password"])")));
    const auto& computed = w.of("rt_computed");
    CHECK(computed.reads.whole);
    CHECK(computed.reads.why.find("computed name") != std::string::npos);
}

TEST_CASE("realtime's catalog fingerprint moves when a policy, a function or a grant changes",
          "[realtime][policy]") {
    world w;
    auto check = [&](const std::shared_ptr<const realtime_policies::snapshot>& s) {
        auto st = realtime_policies::fingerprint_statement(*s);
        auto r = w.api.exec(st.sql, st.p);
        return realtime_policies::unchanged(*s, r);
    };
    auto s = w.facts({{qualified_name{"public", "tasks"}, "authenticated"},
                      {qualified_name{"public", "rt_notes"}, "authenticated"}});
    CHECK(check(s));
    auto admin = w.db.admin();
    admin.exec("ALTER POLICY own ON public.rt_notes USING (user_id IS NOT NULL)");
    CHECK_FALSE(check(s));
    w.policies.invalidate(s);
    s = w.facts({{qualified_name{"public", "rt_notes"}, "authenticated"}});
    CHECK(check(s));
    CHECK(paths(s->find(qualified_name{"public", "rt_notes"}, "authenticated")->reads).empty());
    admin.exec("GRANT SELECT (secret) ON public.rt_notes TO authenticated");
    CHECK_FALSE(check(s));
    w.policies.invalidate(s);
    s = w.facts({{qualified_name{"public", "tasks"}, "authenticated"}});
    CHECK(check(s));
    // current_tenant_id() replaced (same body): its row moved, the answer is read again.
    const auto body = std::string(
        admin.exec("SELECT pg_get_functiondef('public.current_tenant_id'::regproc)").text(0, 0));
    admin.exec(body);
    CHECK_FALSE(check(s));
}

}  // namespace realtime_policy_test
