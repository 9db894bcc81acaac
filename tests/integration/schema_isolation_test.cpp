// Tenant isolation: for every tenant table and every RPC, a user of tenant A can neither read
// nor change tenant B's rows; anon gets nothing; no function is executable by PUBLIC.
#include <algorithm>
#include <cctype>
#include <map>

#include "schema_helpers.hpp"

namespace schema_isolation_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

struct tenant_rows {
    std::string tenant, gateway, agent, task, command, knowledge_item;
};

// A row in each of the product's tables (sql/0035) for `tenant`, written as the superuser.
void seed_product_tables(pg::connection& a, const std::string& tenant, const std::string& task,
                         const std::string& agent, const std::string& contact,
                         const std::string& collection, const std::string& source,
                         const std::string& knowledge_item) {
    auto stream =
        one(a, "INSERT INTO streams (tenant_id, name) VALUES ($1, 'Ops') RETURNING id", {tenant});
    auto series = one(a,
                      "INSERT INTO task_series (tenant_id, title, cadence_type, timezone, "
                      "stream_id, assignee_agent_id) VALUES ($1, 'Standup', 'daily', 'UTC', $2, "
                      "$3) RETURNING id",
                      {tenant, stream, agent});
    a.exec("UPDATE tasks SET stream_id = $2, series_id = $3 WHERE id = $1", {task, stream, series});
    auto label =
        one(a, "INSERT INTO labels (tenant_id, name) VALUES ($1, 'bug') RETURNING id", {tenant});
    a.exec("INSERT INTO task_labels (tenant_id, task_id, label_id) VALUES ($1, $2, $3)",
           {tenant, task, label});
    a.exec("INSERT INTO task_templates (tenant_id, name) VALUES ($1, 'Launch')", {tenant});
    auto campaign = one(
        a, "INSERT INTO campaigns (tenant_id, name) VALUES ($1, 'Spring') RETURNING id", {tenant});
    a.exec("UPDATE contacts SET campaign_id = $2 WHERE id = $1", {contact, campaign});
    auto org = one(a, "INSERT INTO organizations (tenant_id, name) VALUES ($1, 'Org') RETURNING id",
                   {tenant});
    a.exec("INSERT INTO contact_organizations (tenant_id, contact_id, org_id) VALUES ($1, $2, $3)",
           {tenant, contact, org});
    auto tmpl = one(a,
                    "INSERT INTO templates (tenant_id, name, body) VALUES ($1, 'Intro', 'Hi') "
                    "RETURNING id",
                    {tenant});
    a.exec(
        "INSERT INTO interactions (tenant_id, contact_id, org_id, template_id, type, "
        "actor_agent_id) "
        "VALUES ($1, $2, $3, $4, 'email', $5)",
        {tenant, contact, org, tmpl, agent});
    a.exec(
        "INSERT INTO draft_sets (tenant_id, contact_id, template_id, channel, stage, variants) "
        "VALUES ($1, $2, $3, 'email', 'first', '[]')",
        {tenant, contact, tmpl});
    a.exec("INSERT INTO pipeline_stages (tenant_id, stage_key, label) VALUES ($1, 'lead', 'Lead')",
           {tenant});
    a.exec(
        "INSERT INTO field_definitions (tenant_id, field_key, field_type, label) VALUES ($1, "
        "'deal', 'number', 'Deal')",
        {tenant});
    a.exec(
        "INSERT INTO comments (tenant_id, entity_type, entity_id, body, actor_agent_id) VALUES "
        "($1, 'task', $2, 'looks good', $3)",
        {tenant, task, agent});
    a.exec(
        "INSERT INTO entity_links (tenant_id, owner_type, owner_id, target_type, url, "
        "is_deliverable, submitted_by_agent_id) VALUES ($1, 'task', $2, 'url', 'https://x.test', "
        "true, $3)",
        {tenant, task, agent});
    a.exec(
        "INSERT INTO audit_log (tenant_id, module, entity_type, entity_id, action, actor_agent_id) "
        "VALUES ($1, 'tasks', 'task', $2, 'created', $3)",
        {tenant, task, agent});
    a.exec("INSERT INTO notifications (tenant_id, type, title) VALUES ($1, 'note', 'Hello')",
           {tenant});
    a.exec(
        "INSERT INTO collection_fields (tenant_id, collection_id, field_key, field_type, label) "
        "VALUES ($1, $2, 'name', 'text', 'Name')",
        {tenant, collection});
    a.exec(
        "INSERT INTO collection_views (tenant_id, collection_id, name, view_type) VALUES ($1, "
        "$2, 'All', 'table')",
        {tenant, collection});
    a.exec(
        "INSERT INTO agent_budgets (tenant_id, agent_id, monthly_limit_usd) VALUES ($1, $2, 10) "
        "ON CONFLICT (agent_id) DO UPDATE SET monthly_limit_usd = 10",
        {tenant, agent});
    a.exec(
        "INSERT INTO knowledge_item_agents (tenant_id, knowledge_item_id, agent_id) VALUES ($1, "
        "$2, $3)",
        {tenant, knowledge_item, agent});
    a.exec(
        "INSERT INTO hq_plugins (tenant_id, plugin_id, name, webhook_secret) VALUES ($1, 'p', "
        "'P', 'shh')",
        {tenant});
    a.exec(
        "INSERT INTO hq_plugin_events (tenant_id, plugin_id, hook, status) VALUES ($1, 'p', "
        "'task.created', 'success')",
        {tenant});
    a.exec("INSERT INTO source_sync_runs (tenant_id, connection_id) VALUES ($1, $2)",
           {tenant, source});
}

// One row in every tenant table for `tenant`, written as the superuser.
tenant_rows seed(pg::connection& a, const std::string& tenant, const std::string& slug) {
    tenant_rows t;
    t.tenant = tenant;
    t.gateway = new_gateway(a, tenant, slug + "-gw");
    t.agent = new_agent(a, tenant, slug + "-agent", t.gateway);
    auto manager = new_agent(a, tenant, slug + "-boss", t.gateway);
    a.exec("UPDATE agents SET reports_to_id = $2 WHERE id = $1", {t.agent, manager});
    t.task = new_task(a, tenant, slug + " task", t.agent);
    auto other = new_task(a, tenant, slug + " other");
    a.exec(
        "INSERT INTO task_relations (tenant_id, source_task_id, target_task_id, relation_type) "
        "VALUES ($1, $2, $3, 'blocked_by')",
        {tenant, t.task, other});
    a.exec(
        "INSERT INTO task_comments (tenant_id, task_id, body, mentions) VALUES ($1, $2, 'hi', "
        "$3::text[])",
        {tenant, t.task, "{" + slug + "-agent}"});
    a.exec("INSERT INTO work_products (tenant_id, task_id, title) VALUES ($1, $2, 'wp')",
           {tenant, t.task});
    auto secret = one(a,
                      "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) "
                      "VALUES ($1, $2, 'TELEGRAM_BOT_TOKEN', 'enc:v1:aXY.dGFn.Y3Q') RETURNING id",
                      {tenant, t.gateway});
    auto source = one(a,
                      "INSERT INTO source_connections (tenant_id, provider, secret_id) VALUES ($1, "
                      "'notion', $2) RETURNING id",
                      {tenant, secret});
    auto folder =
        one(a, "INSERT INTO knowledge_folders (tenant_id, name) VALUES ($1, 'f') RETURNING id",
            {tenant});
    t.knowledge_item = one(a,
                           "INSERT INTO knowledge_items (tenant_id, kind, title, plain_text, "
                           "folder_id, source_connection_id) "
                           "VALUES ($1, 'skill', 'shared secret plan', 'shared secret plan text', "
                           "$2, $3) RETURNING id",
                           {tenant, folder, source});
    std::string v = "[1";
    for (int i = 1; i < 384; ++i) v += ",0";
    v += "]";
    a.exec(
        "SELECT * FROM mark_knowledge_item_indexed($1, $2::vector, 'test', 384, "
        "(SELECT source_hash FROM knowledge_items WHERE id = $1), "
        "jsonb_build_array(jsonb_build_object('chunk_index', 0, 'content', 'shared secret plan "
        "text', 'embedding', $3::jsonb)))",
        {t.knowledge_item, v, v});
    auto contact =
        one(a, "INSERT INTO contacts (tenant_id, name) VALUES ($1, 'Ada') RETURNING id", {tenant});
    auto coll = one(a,
                    "INSERT INTO collection_definitions (tenant_id, slug, name) VALUES ($1, 'c', "
                    "'C') RETURNING id",
                    {tenant});
    a.exec("INSERT INTO collection_records (tenant_id, collection_id) VALUES ($1, $2)",
           {tenant, coll});
    seed_product_tables(a, tenant, t.task, t.agent, contact, coll, source, t.knowledge_item);
    a.exec(
        "INSERT INTO routines (tenant_id, agent_id, name, cadence_type) VALUES ($1, $2, 'r', "
        "'daily')",
        {tenant, t.agent});
    t.command = one(a,
                    "INSERT INTO agent_commands (tenant_id, agent_id, action) VALUES ($1, $2, "
                    "'update') RETURNING id",
                    {tenant, t.agent});
    a.exec(
        "INSERT INTO agent_usage (tenant_id, agent_id, model, input_tokens, output_tokens, "
        "cost_usd) "
        "VALUES ($1, $2, 'm', 10, 5, 0.1)",
        {tenant, t.agent});
    a.exec("INSERT INTO plugins (tenant_id, slug, name, source) VALUES ($1, 'p', 'P', 'builtin')",
           {tenant});
    // The tenant's workspace row is made with the tenant (sql/0037); the default tenant's by the
    // migration.
    a.exec("SELECT issue_gateway_token($1)", {tenant});
    a.exec("SELECT awp_gateway_role($1, $2)",  // the gateway's own login (gateway_roles)
           {t.gateway, awp::test::require_env("AWP_PG_GATEWAY_PASSWORD")});
    a.exec("SELECT * FROM awp_gateway_key($1, sha256('seed'::bytea))",  // gateway_keys
           {t.gateway});
    a.exec("SELECT daemon_heartbeat($1, 'command-runner', 'x', 1, 'v', NULL, NULL, $2)",
           {slug + "-gw", tenant});
    a.exec(
        "INSERT INTO app_users (tenant_id, email, password_hash) VALUES ($1, $2, "
        "'$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA')",
        {tenant, slug + "@example.com"});
    return t;
}

std::vector<std::string> tenant_tables(pg::connection& a) {
    auto r = a.exec(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute at ON at.attrelid = c.oid AND at.attname = 'tenant_id' "
        "WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1");
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.get<std::string>(i, 0));
    return out;
}

}  // namespace

TEST_CASE("every table has RLS, and no function of ours is executable by PUBLIC",
          "[schema][isolation]") {
    scoped_database db;
    auto a = db.admin();
    CHECK(count(a,
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r' AND NOT c.relrowsecurity "
                "AND c.relname <> 'schema_migrations'") == 0);
    auto ours = std::string(
        "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND "
        "d.objid = p.oid "
        "AND d.deptype = 'e')");
    CHECK(count(a, "SELECT count(*) " + ours) > 40);
    auto pub = a.exec("SELECT p.proname " + ours +
                      " AND (p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) x "
                      "WHERE x.grantee = 0))");
    for (int i = 0; i < pub.size(); ++i)
        UNSCOPED_INFO("PUBLIC can execute " << pub.get<std::string>(i, 0));
    CHECK(pub.size() == 0);
    auto anon = a.exec("SELECT p.proname " + ours +
                       " AND has_function_privilege('anon', p.oid, 'EXECUTE')");
    REQUIRE(anon.size() == 1);
    CHECK(anon.get<std::string>(0, 0) == "consume_gateway_token");
    // SECURITY DEFINER functions all pin search_path.
    CHECK(count(a, "SELECT count(*) " + ours +
                       " AND p.prosecdef AND NOT EXISTS "
                       "(SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')") == 0);
    // Daemon-only RPCs are not executable by authenticated.
    for (auto fn :
         {"lease_command", "lease_and_start_command", "finish_and_lease_command", "start_command",
          "complete_command", "fail_command", "lease_inbox_item", "complete_inbox_item",
          "fail_inbox_item", "lease_knowledge_items_for_indexing", "mark_knowledge_item_indexed",
          "mark_knowledge_item_failed", "spawn_routine_schedule_items", "reap_expired_leases",
          "escalate_overdue_tasks", "daemon_heartbeat", "issue_gateway_token"}) {
        INFO(fn);
        CHECK(count(a,
                    "SELECT count(*) FROM pg_proc WHERE proname = $1 AND "
                    "has_function_privilege('authenticated', oid, 'EXECUTE')",
                    {std::string(fn)}) == 0);
        CHECK(count(a,
                    "SELECT count(*) FROM pg_proc WHERE proname = $1 AND "
                    "has_function_privilege('service_role', oid, 'EXECUTE')",
                    {std::string(fn)}) == 1);
    }
}

TEST_CASE(
    "a user of tenant A can neither read nor change tenant B's rows in any table, anon nothing",
    "[schema][isolation]") {
    scoped_database db;
    auto a = db.admin();
    auto ta = seed(a, new_tenant(a, "tenant-a"), "a");
    auto tb = seed(a, new_tenant(a, "tenant-b"), "b");
    auto tables = tenant_tables(a);
    CHECK(tables.size() >= 24);

    auto user = db.api();
    awp::test::as_user(user, ta.tenant, "7d1c0a52-0000-4000-8000-00000000000a");
    auto anon = db.api();
    awp::test::as_anon(anon);
    auto service = db.daemon();

    for (const auto& t : tables) {
        INFO("table " << t);
        auto b_rows = count(a, "SELECT count(*) FROM " + t + " WHERE tenant_id = $1", {tb.tenant});
        REQUIRE(b_rows > 0);
        CHECK(count(service, "SELECT count(*) FROM " + t + " WHERE tenant_id = $1", {tb.tenant}) ==
              b_rows);

        // Read: nothing of B (or no privilege at all; a grant of some columns counts).
        bool readable = one(a,
                            "SELECT has_any_column_privilege('authenticated', ('public.' || "
                            "quote_ident($1))::regclass, 'SELECT')",
                            {t}) == "t";
        if (readable) {
            CHECK(count(user, "SELECT count(*) FROM " + t + " WHERE tenant_id = $1", {tb.tenant}) ==
                  0);
            CHECK(count(user, "SELECT count(*) FROM " + t) >
                  0);  // its own rows: the check is not vacuous
        } else {
            CHECK(sqlstate_of([&] { user.exec("SELECT count(*) FROM " + t); }) == "42501");
        }
        // Change: no row of B is updated or deleted.
        for (auto sql : {"UPDATE " + t + " SET tenant_id = tenant_id WHERE tenant_id = $1",
                         "DELETE FROM " + t + " WHERE tenant_id = $1"}) {
            auto state = sqlstate_of([&] {
                auto r = user.exec(sql, {tb.tenant});
                CHECK(r.affected() == 0);
            });
            CHECK((state.empty() || state == "42501"));
        }
        // Insert into B (a copy of one of A's rows, moved to B): refused.
        auto cols =
            one(a,
                "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
                "WHERE attrelid = ('public.' || $1)::regclass AND attnum > 0 AND NOT attisdropped "
                "AND attgenerated = ''",
                {t});
        auto state = sqlstate_of([&] {
            user.exec("INSERT INTO " + t + " (" + cols + ") SELECT " + cols +
                          " FROM jsonb_populate_record(NULL::" + t +
                          ", (SELECT to_jsonb(r) || jsonb_build_object('tenant_id', $1::text, "
                          "'id', gen_random_uuid()) "
                          "FROM " +
                          t + " r WHERE tenant_id = $2 LIMIT 1))",
                      {tb.tenant, ta.tenant});
        });
        CHECK_FALSE(state.empty());
        CHECK(count(a, "SELECT count(*) FROM " + t + " WHERE tenant_id = $1", {tb.tenant}) ==
              b_rows);
        // A user of tenant A cannot move its own rows into B either.
        if (readable && t != "agent_commands" && t != "agent_inbox_items" && t != "agent_usage" &&
            t != "knowledge_chunks" && t != "knowledge_item_versions" && t != "daemon_heartbeats") {
            // Refused by the policy (42501) or first by a trigger that finds no such agent in B
            // (AW003).
            auto moved = sqlstate_of([&] {
                user.exec("UPDATE " + t + " SET tenant_id = $1 WHERE tenant_id = $2",
                          {tb.tenant, ta.tenant});
            });
            CHECK((moved == "42501" || moved == "AW003"));
            CHECK(count(a, "SELECT count(*) FROM " + t + " WHERE tenant_id = $1", {tb.tenant}) ==
                  b_rows);
        }
        // anon: no privilege on the table, or (the tables the product's UI reads, sql/0036) no
        // row of it.
        std::string anon_rows;
        const auto anon_state =
            sqlstate_of([&] { anon_rows = one(anon, "SELECT count(*) FROM " + t); });
        CHECK((anon_state == "42501" || (anon_state.empty() && anon_rows == "0")));
    }
    CHECK(sqlstate_of([&] { anon.exec("SELECT count(*) FROM tenants"); }) == "42501");
    CHECK(count(user, "SELECT count(*) FROM tenants") == 1);
}

TEST_CASE("RPCs of a user of tenant A never return or touch tenant B's rows, anon may call none",
          "[schema][isolation]") {
    scoped_database db;
    auto a = db.admin();
    auto ta = seed(a, new_tenant(a, "tenant-a"), "a");
    auto tb = seed(a, new_tenant(a, "tenant-b"), "b");
    auto user = db.api();
    awp::test::as_user(user, ta.tenant, "7d1c0a52-0000-4000-8000-00000000000a");
    std::string v = "[1";
    for (int i = 1; i < 384; ++i) v += ",0";
    v += "]";

    auto hits = user.exec("SELECT id FROM search_knowledge_items($1::vector, 50)", {v});
    REQUIRE(hits.size() == 1);
    CHECK(hits.get<std::string>(0, 0) == ta.knowledge_item);
    CHECK(user.exec("SELECT id FROM search_knowledge_items($1::vector, 50, NULL, NULL, NULL, $2)",
                    {v, tb.tenant})
              .empty());
    CHECK(user.exec("SELECT id FROM search_knowledge_items_text('shared secret')").size() == 1);
    CHECK(user.exec("SELECT id FROM search_knowledge_items_text('')").size() == 1);
    CHECK(user.exec("SELECT * FROM search_knowledge_chunks($1::vector, 50)", {v}).size() == 1);
    CHECK(user.exec("SELECT * FROM search_knowledge_chunks_text('shared')").size() == 1);
    CHECK(sqlstate_of([&] { user.exec("SELECT * FROM agent_reports_chain($1)", {tb.agent}); }) ==
          "AW003");
    CHECK(user.exec("SELECT * FROM agent_reports_chain($1)", {ta.agent}).size() == 2);
    CHECK(sqlstate_of([&] { user.exec("SELECT * FROM get_task_relations($1)", {tb.task}); }) ==
          "AW003");
    CHECK(user.exec("SELECT * FROM get_task_relations($1)", {ta.task}).size() == 1);
    CHECK(sqlstate_of([&] { user.exec("SELECT * FROM get_agent_daily_usage($1)", {tb.agent}); }) ==
          "AW003");
    CHECK(sqlstate_of([&] { user.exec("SELECT * FROM cancel_command($1)", {tb.command}); }) ==
          "AW003");
    CHECK(one(a, "SELECT status FROM agent_commands WHERE id = $1", {tb.command}) == "pending");
    for (auto sql :
         {"SELECT * FROM lease_command(60, 'b-gw')", "SELECT spawn_routine_schedule_items()",
          "SELECT * FROM reap_expired_leases()", "SELECT escalate_overdue_tasks()"}) {
        CHECK(sqlstate_of([&] { user.exec(sql); }) == "42501");
    }
    CHECK(sqlstate_of([&] { user.exec("SELECT * FROM lease_inbox_item($1, 60)", {tb.agent}); }) ==
          "42501");
    CHECK(sqlstate_of([&] {
              user.exec("SELECT * FROM mark_knowledge_item_failed($1, 'x')", {tb.knowledge_item});
          }) == "42501");

    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(sqlstate_of([&] { anon.exec("SELECT * FROM search_knowledge_items_text('shared')"); }) ==
          "42501");
    CHECK(sqlstate_of([&] { anon.exec("SELECT * FROM routine_next_occurrence('daily')"); }) ==
          "42501");
    CHECK(sqlstate_of([&] { anon.exec("SELECT * FROM agent_reports_chain($1)", {tb.agent}); }) ==
          "42501");
    CHECK(sqlstate_of([&] { anon.exec("SELECT current_tenant_id()"); }) == "42501");
}

TEST_CASE("current_tenant_id reads app_metadata, then tenant_id, then the default, '' is missing",
          "[schema][isolation]") {
    scoped_database db;
    auto c = db.admin();
    auto tid = [&](const std::string& claims) {
        c.exec("SELECT set_config('request.jwt.claims', $1, false)", {claims});
        return one(c, "SELECT current_tenant_id()");
    };
    CHECK(
        tid(R"({"app_metadata":{"tenant_id":"11111111-1111-1111-1111-111111111111"},"tenant_id":"22222222-2222-2222-2222-222222222222"})") ==
        "11111111-1111-1111-1111-111111111111");
    CHECK(
        tid(R"({"app_metadata":{"tenant_id":""},"tenant_id":"22222222-2222-2222-2222-222222222222"})") ==
        "22222222-2222-2222-2222-222222222222");
    CHECK(tid(R"({"role":"authenticated"})") == kDefaultTenant);
    CHECK(tid("") == kDefaultTenant);
}

TEST_CASE("current_is_operator: the service role, or a session whose claims say operator",
          "[schema][isolation]") {
    scoped_database db;
    auto c = db.api();
    const std::string tenant = kDefaultTenant;
    awp::test::as_user(c, tenant, "7d1c0a52-0000-4000-8000-00000000000a");
    CHECK(one(c, "SELECT current_is_operator()") == "f");
    c.exec("SELECT set_config('request.jwt.claims', $1, false)",
           {R"({"role":"authenticated","sub":"u","app_metadata":{"tenant_id":")" + tenant +
            R"(","awp_role":"operator"}})"});
    CHECK(one(c, "SELECT current_is_operator()") == "t");
    // A claim outside app_metadata is writable by the user on a hosted platform: not trusted.
    c.exec(
        "SELECT set_config('request.jwt.claims', $1, false)",
        {R"({"role":"authenticated","sub":"u","awp_role":"operator","user_metadata":{"awp_role":"operator"}})"});
    CHECK(one(c, "SELECT current_is_operator()") == "f");
    awp::test::as_service(c);
    CHECK(one(c, "SELECT current_is_operator()") == "t");
    awp::test::as_anon(c);
    CHECK(sqlstate_of([&] { c.exec("SELECT current_is_operator()"); }) == "42501");
    auto admin = db.admin();
    // Nobody is an operator unless made one.
    CHECK(one(admin,
              "INSERT INTO app_users (email, password_hash) VALUES ('o@x.test', '$argon2id$x') "
              "RETURNING is_operator") == "f");
}

namespace {

// Every relation of schema public a role could select from: tables, views, materialized views,
// partitioned and foreign tables (what information_schema.tables does not all list).
std::vector<std::string> public_relations(pg::connection& a) {
    auto r = a.exec(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p', 'f') ORDER BY 1");
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.get<std::string>(i, 0));
    return out;
}

// A session of role authenticated whose claims carry no tenant: a fresh sign-up of a hosted
// Supabase project (valid signature, no app_metadata.tenant_id).
void as_claimless(pg::connection& c) {
    c.exec("SET ROLE authenticated");
    c.exec(
        "SELECT set_config('request.jwt.claims', "
        "'{\"role\":\"authenticated\",\"sub\":\"7d1c0a52-0000-4000-8000-0000000000ff\","
        "\"app_metadata\":{\"provider\":\"email\"}}', false)");
}

}  // namespace

TEST_CASE(
    "no tenant, no data: a session without a tenant claim sees no row of any table and cannot "
    "insert, and anon reads nothing",
    "[schema][isolation]") {
    scoped_database db;
    auto a = db.admin();
    seed(a, kDefaultTenant, "d");  // rows of the default tenant in every tenant table
    seed(a, new_tenant(a, "tenant-b"), "b");

    auto none = db.api();
    as_claimless(none);
    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(one(none, "SELECT current_tenant_id() IS NULL") == "t");

    const auto relations = public_relations(a);
    CHECK(relations.size() >= 26);
    const auto with_tenant = tenant_tables(a);
    for (const auto& t : relations) {
        INFO("relation " << t);
        // anon: no privilege, or no row.
        {
            std::string rows;
            auto state = sqlstate_of([&] { rows = one(anon, "SELECT count(*) FROM " + t); });
            CHECK((state == "42501" || (state.empty() && rows == "0")));
        }
        const bool tenant_table =
            std::find(with_tenant.begin(), with_tenant.end(), t) != with_tenant.end();
        if (!tenant_table) continue;
        REQUIRE(count(a, "SELECT count(*) FROM " + t + " WHERE tenant_id = $1", {kDefaultTenant}) >
                0);
        // Read: no row of the default tenant (or of any other), or no privilege at all.
        {
            std::string rows;
            auto state = sqlstate_of([&] { rows = one(none, "SELECT count(*) FROM " + t); });
            CHECK((state == "42501" || (state.empty() && rows == "0")));
        }
        // Insert relying on the column default: refused, saying the session has no tenant.
        const bool may_insert =
            count(a,
                  "SELECT count(*) FROM information_schema.role_table_grants WHERE table_schema = "
                  "'public' AND table_name = $1 AND grantee = 'authenticated' AND "
                  "privilege_type = 'INSERT'",
                  {t}) > 0;
        const auto before = count(a, "SELECT count(*) FROM " + t);
        std::string message;
        auto state = sqlstate_of([&] {
            try {
                none.exec("INSERT INTO " + t + " DEFAULT VALUES");
            } catch (const pg::sql_error& e) {
                message = e.what();
                throw;
            }
        });
        if (may_insert) {
            CHECK(state == "AW009");
            CHECK_THAT(message,
                       Catch::Contains("the session has no tenant (app_metadata.tenant_id)"));
        } else {
            CHECK((state == "42501" || state == "AW009"));
        }
        // Insert naming the default tenant (a copy of one of its rows): refused by the policy.
        auto cols =
            one(a,
                "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
                "WHERE attrelid = ('public.' || $1)::regclass AND attnum > 0 AND NOT attisdropped "
                "AND attgenerated = ''",
                {t});
        auto row = one(a,
                       "SELECT (SELECT to_jsonb(r) || jsonb_build_object('id', gen_random_uuid()) "
                       "FROM " +
                           t + " r WHERE tenant_id = $1 LIMIT 1)::text",
                       {kDefaultTenant});
        CHECK_FALSE(sqlstate_of([&] {
                        none.exec("INSERT INTO " + t + " (" + cols + ") SELECT " + cols +
                                      " FROM jsonb_populate_record(NULL::" + t + ", $1::jsonb)",
                                  {row});
                    }).empty());
        // Update and delete: nothing.
        for (auto sql : {"UPDATE " + t + " SET tenant_id = tenant_id", "DELETE FROM " + t}) {
            long affected = -1;
            auto s = sqlstate_of([&] { affected = static_cast<long>(none.exec(sql).affected()); });
            INFO(sql);
            if (s.empty()) {
                CHECK(affected == 0);
            } else {
                CHECK(s == "42501");
            }
        }
        CHECK(count(a, "SELECT count(*) FROM " + t) == before);
    }
    // The tenants row and the user RPCs: nothing either.
    CHECK(count(none, "SELECT count(*) FROM tenants") == 0);
    CHECK(count(none, "SELECT count(*) FROM search_knowledge_items_text('')") == 0);
    CHECK(count(none, "SELECT count(*) FROM search_knowledge_chunks_text('shared')") == 0);
    auto d_agent =
        one(a, "SELECT id FROM agents WHERE tenant_id = $1 AND slug = 'd-agent'", {kDefaultTenant});
    CHECK(sqlstate_of([&] { none.exec("SELECT * FROM agent_reports_chain($1)", {d_agent}); }) ==
          "AW003");
    CHECK(sqlstate_of([&] { none.exec("SELECT * FROM get_agent_daily_usage($1)", {d_agent}); }) ==
          "AW003");

    // Claims that are empty, or a tenant claim that is '', count as no tenant; so does the role
    // set the way the api-gateway sets it (set_config('role', ..., true) in a transaction).
    for (auto claims : {"", "{}", R"({"role":"authenticated","app_metadata":{"tenant_id":""}})"}) {
        INFO(claims);
        none.exec("SELECT set_config('request.jwt.claims', $1, false)", {std::string(claims)});
        CHECK(one(none, "SELECT current_tenant_id() IS NULL") == "t");
        CHECK(count(none, "SELECT count(*) FROM agents") == 0);
    }
    auto api = db.api();
    api.exec("BEGIN");
    api.exec(
        "SELECT set_config('role', 'authenticated', true), set_config('request.jwt.claims', "
        "'{\"role\":\"authenticated\"}', true)");
    CHECK(one(api, "SELECT current_tenant_id() IS NULL") == "t");
    CHECK(count(api, "SELECT count(*) FROM gateways") == 0);
    api.exec("ROLLBACK");

    // anon may execute no function of ours but the registration exchange (which needs a token).
    auto anon_fns = a.exec(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'public' AND has_function_privilege('anon', p.oid, 'EXECUTE') "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass "
        "AND d.objid = p.oid AND d.deptype = 'e')");
    REQUIRE(anon_fns.size() == 1);
    CHECK(anon_fns.get<std::string>(0, 0) == "consume_gateway_token");
    CHECK(sqlstate_of([&] { anon.exec("SELECT consume_gateway_token('awpgt_guess')"); }) ==
          "AW006");

    // The service role, the daemons and the superuser keep the default tenant; the function
    // stays STABLE plain SQL, an InitPlan in the plan of a policy-filtered query.
    auto svc = db.api();
    awp::test::as_service(svc);
    CHECK(one(svc, "SELECT current_tenant_id()") == kDefaultTenant);
    auto daemon = db.daemon();
    CHECK(one(daemon, "SELECT current_tenant_id()") == kDefaultTenant);
    CHECK(one(daemon, "INSERT INTO contacts (name) VALUES ('Grace') RETURNING tenant_id") ==
          kDefaultTenant);
    CHECK(one(a, "SELECT current_tenant_id()") == kDefaultTenant);
    CHECK(one(a,
              "SELECT p.provolatile::text || ' ' || l.lanname FROM pg_proc p JOIN pg_language l ON "
              "l.oid = p.prolang WHERE p.oid = 'public.current_tenant_id()'::regprocedure") ==
          "s sql");
    auto user = db.api();
    awp::test::as_user(user, kDefaultTenant, "7d1c0a52-0000-4000-8000-00000000000a");
    auto plan = user.exec("EXPLAIN (COSTS OFF) SELECT id FROM agents WHERE gateway_id = $1",
                          {default_gateway(a)});
    std::string text;
    for (int i = 0; i < plan.size(); ++i) text += plan.get<std::string>(i, 0) + "\n";
    INFO(text);
    CHECK_THAT(text, Catch::Contains("InitPlan"));
    CHECK_THAT(text, Catch::Contains("tenant_id = $"));
}

TEST_CASE(
    "gateway slugs are unique across tenants and never uuid-shaped, and a gateway is named by its "
    "id "
    "or its slug",
    "[schema][isolation]") {
    scoped_database db;
    auto a = db.admin();
    auto ta = new_tenant(a, "tenant-a");
    auto tb = new_tenant(a, "tenant-b");
    auto ga = new_gateway(a, ta, "edge");
    // Even the superuser cannot give a second tenant the same slug.
    CHECK(sqlstate_of([&] { new_gateway(a, tb, "edge"); }) == "23505");
    // A tenant's user neither (the refusal does not depend on what RLS lets it see).
    auto ub = db.api();
    awp::test::as_user(ub, tb, "7d1c0a52-0000-4000-8000-00000000000b");
    CHECK(sqlstate_of([&] { ub.exec("INSERT INTO gateways (slug) VALUES ('edge')"); }) == "23505");
    auto gb = one(ub, "INSERT INTO gateways (slug) VALUES ('edge-b') RETURNING id");
    CHECK(sqlstate_of([&] { ub.exec("UPDATE gateways SET slug = 'edge' WHERE id = $1", {gb}); }) ==
          "23505");
    // A slug shaped like a uuid would name a gateway other than the one with that id.
    CHECK(sqlstate_of([&] { ub.exec("INSERT INTO gateways (slug) VALUES ($1)", {ga}); }) ==
          "23514");

    auto d = db.daemon();
    CHECK(one(d, "SELECT awp_resolve_gateway($1)", {ga}) == ga);
    std::string upper = ga;
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    CHECK(one(d, "SELECT awp_resolve_gateway($1)", {upper}) == ga);
    CHECK(one(d, "SELECT awp_resolve_gateway('edge')") == ga);
    CHECK(one(d, "SELECT awp_resolve_gateway($1, $2)", {ga, ta}) == ga);
    CHECK(sqlstate_of([&] { d.exec("SELECT awp_resolve_gateway($1, $2)", {ga, tb}); }) == "AW003");
    // Every p_gateway_slug parameter takes the id.
    a.exec(
        "INSERT INTO agent_commands (tenant_id, gateway_id, action) VALUES ($1, $2, 'auth_list')",
        {ta, ga});
    CHECK(d.exec("SELECT * FROM lease_and_start_command(60, $1, 'r1')", {ga}).size() == 1);
    CHECK(d.exec("SELECT * FROM daemon_heartbeat($1, 'command-runner')", {ga}).size() == 1);
    CHECK(d.exec("SELECT * FROM lease_knowledge_items_for_indexing($1)", {ga}).empty());

    // Registration picks a slug no tenant uses.
    auto token = one(a, "SELECT token FROM issue_gateway_token($1, 'Edge')", {tb});
    auto anon = db.api();
    awp::test::as_anon(anon);
    auto reg = one(anon, "SELECT consume_gateway_token($1, 'Edge', 'edge')::text", {token});
    CHECK_THAT(reg, Catch::Contains("\"gateway_slug\": \"edge-2\""));
}

}  // namespace schema_isolation_test
