// sql/0028 against a real server: what a schema written for a hosted Supabase project expects of
// the database (auth.uid(), auth.role(), auth.jwt(), auth.email() under each API role; auth.users
// in step with app_users, a foreign key to it), a Supabase project's own auth schema left alone,
// the composite tenant foreign keys under the names embed hints use, and the schema cache's
// reload signal after a migration.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "awp/core/migrate.hpp"
#include "schema_helpers.hpp"

namespace schema_auth_test {

using namespace awp::schema_test;
using awp::test::scoped_database;
namespace migrate = awp::core::migrate;
namespace fs = std::filesystem;

namespace {

const char* const kHash = "$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA";

void claims(pg::connection& c, const std::string& role, const std::string& json) {
    c.exec("SET ROLE " + role);
    c.exec("SELECT set_config('request.jwt.claims', $1, false)", {json});
}

}  // namespace

TEST_CASE("auth.uid(), auth.role(), auth.jwt() and auth.email() read the request's claims",
          "[schema][auth]") {
    scoped_database db;
    auto api = db.api();
    const std::string uid = "0b6c3d1e-5f8a-4b7c-9d2e-1f3a5b7c9d0e";
    claims(api, "authenticated",
           R"({"sub":")" + uid +
               R"(","role":"authenticated","email":"ada@example.com",)"
               R"("app_metadata":{"tenant_id":"x"}})");
    CHECK(one(api, "SELECT auth.uid()") == uid);
    CHECK(one(api, "SELECT auth.role()") == "authenticated");
    CHECK(one(api, "SELECT auth.email()") == "ada@example.com");
    CHECK(one(api, "SELECT auth.jwt() -> 'app_metadata' ->> 'tenant_id'") == "x");
    // The older per-claim settings (PostgREST before v9) come first, as on Supabase.
    api.exec(
        "SELECT set_config('request.jwt.claim.sub', '11111111-2222-4333-8444-555555555555', "
        "false)");
    CHECK(one(api, "SELECT auth.uid()") == "11111111-2222-4333-8444-555555555555");
    api.exec("SELECT set_config('request.jwt.claim.sub', '', false)");
    CHECK(one(api, "SELECT auth.uid()") == uid);

    claims(api, "anon", R"({"role":"anon"})");
    CHECK(one(api, "SELECT auth.uid()") == "<null>");
    CHECK(one(api, "SELECT auth.role()") == "anon");
    CHECK(one(api, "SELECT auth.jwt() ->> 'role'") == "anon");
    api.exec("RESET ROLE");
    api.exec("SET ROLE service_role");
    api.exec("SELECT set_config('request.jwt.claims', '', false)");
    CHECK(one(api, "SELECT auth.uid()") == "<null>");
    CHECK(one(api, "SELECT auth.jwt()") == "<null>");
    // A policy written for a hosted project works here as it does there.
    auto admin = db.admin();
    admin.exec(
        "CREATE TABLE public.notes (id serial PRIMARY KEY, owner uuid NOT NULL DEFAULT auth.uid(), "
        "body text)");
    admin.exec("ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY");
    admin.exec("GRANT SELECT, INSERT ON public.notes TO authenticated");
    admin.exec("GRANT USAGE ON SEQUENCE public.notes_id_seq TO authenticated");
    admin.exec(
        "CREATE POLICY own ON public.notes TO authenticated USING (owner = auth.uid()) "
        "WITH CHECK (owner = auth.uid())");
    admin.exec(
        "INSERT INTO public.notes (owner, body) VALUES ($1::uuid, 'mine'), "
        "('22222222-2222-4222-8222-222222222222', 'theirs')",
        {uid});
    auto user = db.api();
    claims(user, "authenticated", R"({"sub":")" + uid + R"(","role":"authenticated"})");
    CHECK(one(user, "SELECT string_agg(body, ',') FROM public.notes") == "mine");
    user.exec("INSERT INTO public.notes (body) VALUES ('new')");
    CHECK(count(user, "SELECT count(*) FROM public.notes") == 2);
}

TEST_CASE(
    "auth.users is kept in step with app_users, is not readable by the API's user roles, and a "
    "foreign key to it works as on the platform",
    "[schema][auth]") {
    scoped_database db;
    auto admin = db.admin();
    const auto tenant = new_tenant(admin, "auth-users");
    const auto id = one(admin,
                        "INSERT INTO app_users (tenant_id, email, password_hash, is_operator, "
                        "user_metadata) VALUES ($1, 'Ada@Example.com', $2, true, "
                        "'{\"name\":\"Ada\"}') RETURNING id",
                        {tenant, std::string(kHash)});
    CHECK(one(admin, "SELECT email FROM auth.users WHERE id = $1", {id}) == "Ada@Example.com");
    CHECK(one(admin,
              "SELECT raw_app_meta_data = jsonb_build_object('provider', 'email', 'providers', "
              "'[\"email\"]'::jsonb, 'tenant_id', $2::text, 'awp_role', 'operator') FROM "
              "auth.users WHERE id = $1",
              {id, tenant}) == "t");
    CHECK(one(admin, "SELECT raw_user_meta_data ->> 'name' FROM auth.users WHERE id = $1", {id}) ==
          "Ada");
    CHECK(one(admin, "SELECT role || ' ' || aud FROM auth.users WHERE id = $1", {id}) ==
          "authenticated authenticated");
    // Changed there, changed here.
    admin.exec(
        "UPDATE app_users SET email = 'ada@new.example', disabled = true, tenant_id = NULL, "
        "is_operator = false, last_login_at = now() WHERE id = $1",
        {id});
    CHECK(one(admin, "SELECT email FROM auth.users WHERE id = $1", {id}) == "ada@new.example");
    CHECK(one(admin, "SELECT banned_until = 'infinity' FROM auth.users WHERE id = $1", {id}) ==
          "t");
    CHECK(one(admin,
              "SELECT raw_app_meta_data = '{\"provider\": \"email\", \"providers\": "
              "[\"email\"]}'::jsonb FROM auth.users WHERE id = $1",
              {id}) == "t");
    CHECK(one(admin, "SELECT last_sign_in_at IS NOT NULL FROM auth.users WHERE id = $1", {id}) ==
          "t");
    // Only the service role reads it; nobody but the trigger writes it.
    auto user = db.api();
    awp::test::as_user(user, tenant, id);
    CHECK(sqlstate_of([&] { user.exec("SELECT count(*) FROM auth.users"); }) == "42501");
    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(sqlstate_of([&] { anon.exec("SELECT count(*) FROM auth.users"); }) == "42501");
    auto service = db.daemon();
    CHECK(count(service, "SELECT count(*) FROM auth.users WHERE id = $1", {id}) == 1);
    CHECK(sqlstate_of([&] {
              service.exec("UPDATE auth.users SET email = 'x@y' WHERE id = $1", {id});
          }) == "42501");
    // A table written for a hosted project: REFERENCES auth.users (id). A referenced user
    // cannot be removed (as on the platform); with ON DELETE CASCADE the rows go with it.
    admin.exec(
        "CREATE TABLE public.todos (id serial PRIMARY KEY, user_id uuid REFERENCES auth.users "
        "(id))");
    admin.exec(
        "CREATE TABLE public.profiles (id uuid PRIMARY KEY REFERENCES auth.users (id) ON DELETE "
        "CASCADE)");
    admin.exec("INSERT INTO public.todos (user_id) VALUES ($1)", {id});
    admin.exec("INSERT INTO public.profiles (id) VALUES ($1)", {id});
    CHECK(sqlstate_of([&] {
              admin.exec("INSERT INTO public.todos (user_id) VALUES (gen_random_uuid())");
          }) == "23503");
    CHECK(sqlstate_of([&] { admin.exec("DELETE FROM app_users WHERE id = $1", {id}); }) == "23503");
    admin.exec("DELETE FROM public.todos");
    admin.exec("DELETE FROM app_users WHERE id = $1", {id});
    CHECK(count(admin, "SELECT count(*) FROM auth.users WHERE id = $1", {id}) == 0);
    CHECK(count(admin, "SELECT count(*) FROM public.profiles") == 0);
    // A user of no tenant is allowed (a self-service sign-up) and sees nothing of awp's tables.
    const auto loner = one(admin,
                           "INSERT INTO app_users (tenant_id, email, password_hash) VALUES (NULL, "
                           "'loner@example.com', $1) RETURNING id",
                           {std::string(kHash)});
    auto l = db.api();
    l.exec("SET ROLE authenticated");
    l.exec("SELECT set_config('request.jwt.claims', $1, false)",
           {R"({"sub":")" + loner + R"(","role":"authenticated"})"});
    CHECK(one(l, "SELECT public.current_tenant_id()") == "<null>");
    CHECK(count(l, "SELECT count(*) FROM public.agents") == 0);
    CHECK(count(l, "SELECT count(*) FROM public.tenants") == 0);
}

TEST_CASE(
    "on a database whose auth schema already exists (a Supabase project), the migration makes "
    "what is missing and replaces nothing",
    "[schema][auth][migrate]") {
    scoped_database db;
    auto c = db.admin();
    c.exec("DROP SCHEMA public CASCADE");
    c.exec("CREATE SCHEMA public");
    c.exec("DROP SCHEMA auth CASCADE");
    // What the platform has: its own auth.uid() and auth.users (GoTrue's, other columns).
    c.exec("CREATE SCHEMA auth");
    c.exec("GRANT USAGE ON SCHEMA auth TO anon, authenticated, service_role");
    c.exec(
        "CREATE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql STABLE AS "
        "$$ SELECT '99999999-9999-4999-8999-999999999999'::uuid $$");
    c.exec(
        "CREATE TABLE auth.users (id uuid PRIMARY KEY, email varchar(255), "
        "encrypted_password varchar(255))");
    c.exec("INSERT INTO auth.users (id, email) VALUES (gen_random_uuid(), 'platform@example.com')");
    const auto rep = migrate::apply(c, fs::path(AWP_SOURCE_DIR) / "sql");
    CHECK(rep.applied.size() == migrate::list(fs::path(AWP_SOURCE_DIR) / "sql").size());
    // Theirs, unchanged.
    CHECK(one(c, "SELECT auth.uid()") == "99999999-9999-4999-8999-999999999999");
    CHECK(count(c,
                "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'auth' AND "
                "table_name = 'users'") == 3);
    CHECK(count(c, "SELECT count(*) FROM pg_trigger WHERE tgname = 'app_users_auth_users_sync'") ==
          0);
    // Ours, where missing.
    CHECK(count(c, "SELECT count(*) FROM pg_proc WHERE pronamespace = 'auth'::regnamespace") == 4);
    c.exec(
        "INSERT INTO app_users (tenant_id, email, password_hash) VALUES (NULL, 'a@example.com', "
        "$1)",
        {std::string(kHash)});
    CHECK(count(c, "SELECT count(*) FROM auth.users") == 1);  // the platform's row only
    auto api = db.api();
    claims(api, "authenticated", R"({"sub":"x","role":"authenticated","email":"e@x"})");
    CHECK(one(api, "SELECT auth.role()") == "authenticated");
    CHECK(one(api, "SELECT auth.email()") == "e@x");
    // And again: nothing to do, nothing changes.
    CHECK(migrate::apply(c, fs::path(AWP_SOURCE_DIR) / "sql").applied.empty());
}

TEST_CASE("the composite tenant foreign keys carry the names PostgREST embed hints use",
          "[schema][auth]") {
    scoped_database db;
    auto c = db.admin();
    // None keeps Postgres' name for a (tenant_id, x) key.
    CHECK(
        count(
            c,
            "SELECT count(*) FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid "
            "WHERE k.contype = 'f' AND t.relnamespace = 'public'::regnamespace "
            "AND cardinality(k.conkey) = 2 AND k.conname LIKE t.relname || '\\_tenant\\_id\\_%'") ==
        0);
    // The hints of the original UI, each on its (tenant_id, column) key to the right table.
    struct hint {
        const char* name;
        const char* table;
        const char* column;
        const char* target;
    };
    for (const auto& h :
         {hint{"tasks_assignee_agent_id_fkey", "tasks", "assignee_agent_id", "agents"},
          hint{"routines_agent_id_fkey", "routines", "agent_id", "agents"},
          hint{"agent_inbox_items_agent_id_fkey", "agent_inbox_items", "agent_id", "agents"},
          hint{"agent_inbox_items_contact_id_fkey", "agent_inbox_items", "contact_id", "contacts"},
          hint{"collection_records_collection_id_fkey", "collection_records", "collection_id",
               "collection_definitions"},
          hint{"gateway_registration_tokens_consumed_by_gateway_id_fkey",
               "gateway_registration_tokens", "consumed_by_gateway_id", "gateways"}}) {
        INFO(h.name);
        CHECK(one(c,
                  "SELECT format('%s %s %s', k.conrelid::regclass, k.confrelid::regclass, "
                  "(SELECT string_agg(a.attname, ',' ORDER BY x.n) FROM unnest(k.conkey) WITH "
                  "ORDINALITY x(att, n) JOIN pg_attribute a ON a.attrelid = k.conrelid AND "
                  "a.attnum = x.att)) FROM pg_constraint k WHERE k.conname = $1",
                  {std::string(h.name)}) ==
              std::string(h.table) + " " + h.target + " tenant_id," + h.column);
    }
    // A renamed key still refuses a row of another tenant.
    const auto a = new_tenant(c, "fk-a");
    const auto b = new_tenant(c, "fk-b");
    const auto agent_b = new_agent(c, b, "fk-agent-b");
    CHECK(message_of([&] {
              c.exec("INSERT INTO tasks (tenant_id, title, assignee_agent_id) VALUES ($1, 't', $2)",
                     {a, agent_b});
          }).find("tasks_assignee_agent_id_fkey") != std::string::npos);
}

TEST_CASE("a migration that applied something ends with the schema cache's reload signal",
          "[schema][auth][migrate]") {
    scoped_database db;
    auto c = db.admin();
    c.exec("DROP SCHEMA public CASCADE");  // a database of its own migrations only
    c.exec("CREATE SCHEMA public");
    auto listener = db.admin();
    listener.exec("LISTEN pgrst");
    const fs::path dir = fs::temp_directory_path() / awp::test::random_name("awp-sql-");
    fs::create_directories(dir / "functions");
    std::ofstream(dir / "0001_a.sql") << "CREATE TABLE notify_probe (v int);";
    auto wait_for = [&] {
        std::vector<pg::notification> got;
        for (int i = 0; i < 20 && got.empty(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            listener.exec("SELECT 1");  // reads what arrived
            got = listener.drain_notifications();
        }
        return got;
    };
    migrate::apply(c, dir);
    auto got = wait_for();
    REQUIRE(got.size() == 1);
    CHECK(got[0].channel == "pgrst");
    CHECK(got[0].payload == "reload schema");
    // Nothing applied: no signal.
    migrate::apply(c, dir);
    CHECK(wait_for().empty());
    fs::remove_all(dir);
}

}  // namespace schema_auth_test
