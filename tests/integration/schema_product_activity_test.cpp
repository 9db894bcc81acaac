// The original product's data model on awp (sql/0035-0038), its second half: budgets rolled up
// from usage, notifications, deliverables, mentions, interactions, the foreign-key names of the
// UI's embed hints, realtime, the global tables, and the grants on a Supabase-shaped database.
#include <filesystem>
#include <string>

#include "awp/core/migrate.hpp"
#include "schema_helpers.hpp"

namespace schema_product_activity_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

const char* const kUserA = "7d1c0a52-0000-4000-8000-00000000000a";
const char* const kUserB = "7d1c0a52-0000-4000-8000-00000000000b";

}  // namespace

TEST_CASE(
    "usage rolls up into the agent's monthly budget, which warns and is exceeded once each with "
    "a notification, a new month starts over, recompute_agent_budget counts again, for the "
    "caller's tenant only",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    const auto a = new_tenant(admin, "budget-a");
    const auto b = new_tenant(admin, "budget-b");
    const auto agent = new_agent(admin, a, "spender");
    const auto other = new_agent(admin, b, "other");
    // The workspace's defaults make the budget on the first usage row.
    admin.exec(
        "UPDATE workspace SET default_agent_budget_usd = 1.00, default_soft_threshold_pct = 80, "
        "owner_timezone = 'Pacific/Auckland' WHERE tenant_id = $1",
        {a});
    auto d = db.daemon();
    auto use = [&](const std::string& cost, const std::string& when = "now()") {
        d.exec(
            "INSERT INTO agent_usage (tenant_id, agent_id, model, input_tokens, output_tokens, "
            "cost_usd, created_at) VALUES ($1, $2, 'anthropic/claude', 10, 5, $3::numeric, " +
                when + ")",
            {a, agent, cost});
    };
    auto budget = [&] {
        return one(admin,
                   "SELECT status || ' ' || current_period_spend_usd::numeric(10,2) || ' ' || "
                   "current_period_tokens || ' ' || current_period_metered_calls FROM "
                   "agent_budgets WHERE agent_id = $1",
                   {agent});
    };
    auto notes = [&](const std::string& type) {
        return count(admin, "SELECT count(*) FROM notifications WHERE type = $1 AND entity_id = $2",
                     {type, agent});
    };
    use("0.50");
    CHECK(one(admin,
              "SELECT monthly_limit_usd || ' ' || period_anchor_tz || ' ' || (current_period_start "
              "= date_trunc('month', now() AT TIME ZONE 'Pacific/Auckland')::date) FROM "
              "agent_budgets WHERE agent_id = $1",
              {agent}) == "1.00 Pacific/Auckland true");
    CHECK(budget() == "ok 0.50 15 1");
    use("0.35");
    CHECK(budget() == "warned 0.85 30 2");
    CHECK(notes("budget.warned") == 1);
    use("0.20");
    CHECK(budget() == "exceeded 1.05 45 3");
    CHECK(notes("budget.exceeded") == 1);
    use("0.01");
    CHECK(notes("budget.exceeded") == 1);
    CHECK(notes("budget.warned") == 1);
    CHECK(one(admin, "SELECT tenant_id FROM notifications WHERE type = 'budget.exceeded'") == a);
    // A row of next month starts the period over.
    use("0.10", "now() + interval '40 days'");
    CHECK(budget() == "ok 0.10 15 1");

    // Recompute: the current month counted again from the rows.
    auto user = db.api();
    awp::test::as_user(user, a, kUserA);
    CHECK(one(user,
              "SELECT status || ' ' || current_period_spend_usd::numeric(10,2) || ' ' || "
              "current_period_metered_calls FROM recompute_agent_budget($1)",
              {agent}) == "exceeded 1.06 4");
    // Another tenant's agent: not found, and nothing made for it; anon: no privilege; its own
    // tenant's user gets the row made when it is missing.
    CHECK(sqlstate_of([&] { user.exec("SELECT recompute_agent_budget($1)", {other}); }) == "AW003");
    CHECK(count(admin, "SELECT count(*) FROM agent_budgets WHERE agent_id = $1", {other}) == 0);
    auto user_b = db.api();
    awp::test::as_user(user_b, b, kUserB);
    CHECK(one(user_b,
              "SELECT status || ' ' || current_period_spend_usd FROM recompute_agent_budget($1)",
              {other}) == "ok 0.000000");
    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(sqlstate_of([&] { anon.exec("SELECT recompute_agent_budget($1)", {agent}); }) == "42501");
    // The UI's upsert of a budget: its own agent only; a bad zone refused.
    CHECK(sqlstate_of([&] {
              user.exec(
                  "INSERT INTO agent_budgets (agent_id, monthly_limit_usd) VALUES ($1, 5) "
                  "ON CONFLICT (agent_id) DO UPDATE SET monthly_limit_usd = 5",
                  {other});
          }) == "42501");
    user.exec(
        "INSERT INTO agent_budgets (agent_id, monthly_limit_usd) VALUES ($1, 5) ON CONFLICT "
        "(agent_id) DO UPDATE SET monthly_limit_usd = EXCLUDED.monthly_limit_usd",
        {agent});
    CHECK(one(admin, "SELECT monthly_limit_usd FROM agent_budgets WHERE agent_id = $1", {agent}) ==
          "5.00");
    CHECK(sqlstate_of([&] {
              user.exec("UPDATE agent_budgets SET period_anchor_tz = 'Nope/Nowhere'");
          }) == "AW004");
    // get_agent_daily_usage has the product's spend_usd and tokens.
    CHECK(one(user,
              "SELECT sum(spend_usd)::numeric(10,2) || ' ' || sum(tokens) FROM "
              "get_agent_daily_usage($1)",
              {agent}) == "1.06 60");
}

TEST_CASE(
    "tasks assigned, done, blocked and missed, and a deliverable submitted, notify their tenant, "
    "a deliverable's review wakes its agent or completes its task",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    const auto a = new_tenant(admin, "notify-a");
    const auto agent = new_agent(admin, a, "worker");
    auto user = db.api();
    awp::test::as_user(user, a, kUserA);
    const auto task = one(user, "INSERT INTO tasks (title) VALUES ('Write it') RETURNING id");
    user.exec("UPDATE tasks SET assignee_agent_id = $2 WHERE id = $1", {task, agent});
    user.exec("UPDATE tasks SET status = 'blocked' WHERE id = $1", {task});
    user.exec("UPDATE tasks SET status = 'done' WHERE id = $1", {task});
    const auto late = one(user, "INSERT INTO tasks (title) VALUES ('Late') RETURNING id");
    user.exec("UPDATE tasks SET status = 'missed' WHERE id = $1", {late});
    CHECK(one(user,
              "SELECT string_agg(type || ':' || title, ',' ORDER BY created_at, type) FROM "
              "notifications") ==
          "task_assigned:Worker assigned to task,task_blocked:Worker is blocked,"
          "task_completed:Worker completed a task,task_overdue:Task overdue: Late");
    CHECK(count(admin, "SELECT count(*) FROM notifications WHERE tenant_id <> $1", {a}) == 0);

    // A deliverable (the agent submits it through the service role).
    const auto open = one(user, "INSERT INTO tasks (title) VALUES ('Report') RETURNING id");
    auto service = db.api();
    awp::test::as_service(service);
    auto link = [&](const std::string& label) {
        return one(service,
                   "INSERT INTO entity_links (tenant_id, owner_type, owner_id, target_type, url, "
                   "label, is_deliverable, submitted_by_agent_id, review_status) VALUES ($1, "
                   "'task', $2, 'url', $3, $4, true, $5, 'in_review') RETURNING id",
                   {a, open, "https://x.test/" + label, label, agent});
    };
    const auto d1 = link("draft-1");
    const auto d2 = link("draft-2");
    CHECK(count(user, "SELECT count(*) FROM notifications WHERE type = 'deliverable_submitted'") ==
          2);
    // Revision requested: the agent gets a deliverable_review item for the task.
    user.exec(
        "UPDATE entity_links SET review_status = 'revision_requested', review_note = 'more' "
        "WHERE id = $1",
        {d1});
    CHECK(one(admin,
              "SELECT event_type || ' ' || (task_id = $2) || ' ' || (payload ->> 'review_note') "
              "FROM agent_inbox_items WHERE agent_id = $1 AND event_type = 'deliverable_review'",
              {agent, open}) == "deliverable_review true more");
    // Approved, both: the task is done (not before the second).
    user.exec("UPDATE entity_links SET review_status = 'approved' WHERE id = $1", {d1});
    CHECK(one(user, "SELECT status FROM tasks WHERE id = $1", {open}) == "todo");
    user.exec("UPDATE entity_links SET review_status = 'approved' WHERE id = $1", {d2});
    CHECK(one(user, "SELECT status FROM tasks WHERE id = $1", {open}) == "done");

    // A link whose owner id is another tenant's task completes nothing there.
    const auto b = new_tenant(admin, "notify-b");
    const auto theirs = new_task(admin, b, "Theirs");
    const auto stray =
        one(service,
            "INSERT INTO entity_links (tenant_id, owner_type, owner_id, target_type, "
            "url, is_deliverable, submitted_by_agent_id) VALUES ($1, 'task', $2, "
            "'url', 'https://y.test', true, $3) RETURNING id",
            {a, theirs, agent});
    user.exec("UPDATE entity_links SET review_status = 'approved' WHERE id = $1", {stray});
    CHECK(one(admin, "SELECT status FROM tasks WHERE id = $1", {theirs}) == "todo");
    CHECK(count(admin, "SELECT count(*) FROM notifications WHERE tenant_id = $1", {b}) == 0);
}

TEST_CASE(
    "a comment on a task that mentions agents wakes each of them once, on another tenant's task "
    "id it wakes nobody, an interaction dates its contact and counts its template",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    const auto a = new_tenant(admin, "mention-a");
    const auto b = new_tenant(admin, "mention-b");
    const auto ann = new_agent(admin, a, "ann");
    const auto bo = new_agent(admin, a, "bo");
    new_agent(admin, b, "ann");  // same slug in another tenant
    const auto task = new_task(admin, a, "Plan");
    const auto theirs = new_task(admin, b, "Theirs");
    auto user = db.api();
    awp::test::as_user(user, a, kUserA);
    user.exec(
        "INSERT INTO comments (entity_type, entity_id, body, mentions) VALUES ('task', $1, "
        "'@ann and @BO please look', '{@ann}')",
        {task});
    CHECK(one(admin,
              "SELECT string_agg(a.slug, ',' ORDER BY a.slug) FROM agent_inbox_items i JOIN "
              "agents a ON a.id = i.agent_id WHERE i.event_type = 'task_comment_mention' AND "
              "i.task_id = $1",
              {task}) == "ann,bo");
    (void)ann;
    (void)bo;
    // A comment naming another tenant's task id (it is stored in the writer's tenant): no item.
    user.exec("INSERT INTO comments (entity_type, entity_id, body) VALUES ('task', $1, '@ann')",
              {theirs});
    CHECK(count(admin,
                "SELECT count(*) FROM agent_inbox_items WHERE event_type = "
                "'task_comment_mention'") == 2);
    // A comment on a contact mentions nobody's task.
    user.exec(
        "INSERT INTO comments (entity_type, entity_id, body) VALUES ('contact', "
        "gen_random_uuid(), '@ann')");
    CHECK(count(admin,
                "SELECT count(*) FROM agent_inbox_items WHERE event_type = "
                "'task_comment_mention'") == 2);

    // Interactions: the contact's last contact moves forward only; the template counts uses.
    const auto contact = one(user, "INSERT INTO contacts (name) VALUES ('Cleo') RETURNING id");
    const auto tmpl =
        one(user, "INSERT INTO templates (name, body) VALUES ('Hi', 'Hello') RETURNING id");
    user.exec(
        "INSERT INTO interactions (contact_id, type, occurred_at, template_id) VALUES ($1, "
        "'email', '2026-03-02T10:00:00Z', $2)",
        {contact, tmpl});
    user.exec(
        "INSERT INTO interactions (contact_id, type, occurred_at) VALUES ($1, 'call', "
        "'2026-03-01T10:00:00Z')",
        {contact});
    CHECK(one(user,
              "SELECT to_char(last_contact_date AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24') || ' ' || "
              "status FROM contacts WHERE id = $1",
              {contact}) == "2026-03-02 10 new");
    CHECK(one(user, "SELECT use_count FROM templates WHERE id = $1", {tmpl}) == "1");
    // An interaction needs a contact or an organization.
    CHECK(sqlstate_of([&] { user.exec("INSERT INTO interactions (type) VALUES ('note')"); }) ==
          "23514");
}

TEST_CASE("the foreign keys the product UI's embed hints name join the right columns, per tenant",
          "[schema][product]") {
    scoped_database db;
    auto c = db.admin();
    struct hint {
        const char* name;
        const char* table;
        const char* column;
        const char* target;
    };
    for (const auto& h :
         {hint{"tasks_stream_id_fkey", "tasks", "stream_id", "streams"},
          hint{"tasks_series_id_fkey", "tasks", "series_id", "task_series"},
          hint{"tasks_org_id_fkey", "tasks", "org_id", "organizations"},
          hint{"contacts_campaign_id_fkey", "contacts", "campaign_id", "campaigns"},
          hint{"audit_log_actor_agent_id_fkey", "audit_log", "actor_agent_id", "agents"},
          hint{"comments_actor_agent_id_fkey", "comments", "actor_agent_id", "agents"},
          hint{"entity_links_submitted_by_agent_id_fkey", "entity_links", "submitted_by_agent_id",
               "agents"},
          hint{"notifications_actor_agent_id_fkey", "notifications", "actor_agent_id", "agents"},
          hint{"collection_records_collection_id_fkey", "collection_records", "collection_id",
               "collection_definitions"},
          hint{"collection_fields_collection_id_fkey", "collection_fields", "collection_id",
               "collection_definitions"},
          hint{"collection_views_collection_id_fkey", "collection_views", "collection_id",
               "collection_definitions"},
          hint{"contact_organizations_contact_id_fkey", "contact_organizations", "contact_id",
               "contacts"},
          hint{"contact_organizations_org_id_fkey", "contact_organizations", "org_id",
               "organizations"},
          hint{"interactions_contact_id_fkey", "interactions", "contact_id", "contacts"},
          hint{"task_labels_label_id_fkey", "task_labels", "label_id", "labels"},
          hint{"task_series_stream_id_fkey", "task_series", "stream_id", "streams"},
          hint{"task_series_assignee_agent_id_fkey", "task_series", "assignee_agent_id", "agents"},
          hint{"knowledge_item_agents_knowledge_item_id_fkey", "knowledge_item_agents",
               "knowledge_item_id", "knowledge_items"},
          hint{"agent_budgets_agent_id_fkey", "agent_budgets", "agent_id", "agents"},
          hint{"source_sync_runs_connection_id_fkey", "source_sync_runs", "connection_id",
               "source_connections"}}) {
        INFO(h.name);
        CHECK(one(c,
                  "SELECT coalesce((SELECT format('%s %s %s', k.conrelid::regclass, "
                  "k.confrelid::regclass, (SELECT string_agg(a.attname, ',' ORDER BY x.n) FROM "
                  "unnest(k.conkey) WITH ORDINALITY x(att, n) JOIN pg_attribute a ON a.attrelid = "
                  "k.conrelid AND a.attnum = x.att)) FROM pg_constraint k WHERE k.conname = $1), "
                  "'<none>')",
                  {std::string(h.name)}) ==
              std::string(h.table) + " " + h.target + " tenant_id," + h.column);
    }
    // A row of one tenant cannot point at another tenant's row through any of them.
    const auto a = new_tenant(c, "fk-a");
    const auto b = new_tenant(c, "fk-b");
    const auto stream_b =
        one(c, "INSERT INTO streams (tenant_id, name) VALUES ($1, 'S') RETURNING id", {b});
    const auto label_b =
        one(c, "INSERT INTO labels (tenant_id, name) VALUES ($1, 'L') RETURNING id", {b});
    const auto task_a = new_task(c, a, "mine");
    CHECK(sqlstate_of([&] {
              c.exec("UPDATE tasks SET stream_id = $2 WHERE id = $1", {task_a, stream_b});
          }) == "23503");
    CHECK(sqlstate_of([&] {
              c.exec("INSERT INTO task_labels (tenant_id, task_id, label_id) VALUES ($1, $2, $3)",
                     {a, task_a, label_b});
          }) == "23503");
}

TEST_CASE("the tables the product UI subscribes to are published to realtime",
          "[schema][product]") {
    scoped_database db;
    auto c = db.admin();
    // The publication exists where migrations ran as a superuser (sql/0031), as in the tests.
    REQUIRE(count(c, "SELECT count(*) FROM pg_publication WHERE pubname = 'awp_realtime'") == 1);
    for (const char* t : {"agent_budgets",     "agent_commands",
                          "agent_inbox_items", "agents",
                          "audit_log",         "collection_definitions",
                          "collection_fields", "collection_records",
                          "comments",          "contacts",
                          "entity_links",      "field_definitions",
                          "gateways",          "hq_plugins",
                          "knowledge_folders", "knowledge_item_agents",
                          "knowledge_items",   "labels",
                          "notifications",     "organizations",
                          "pipeline_stages",   "routines",
                          "secrets",           "source_connections",
                          "source_sync_runs",  "streams",
                          "task_relations",    "task_series",
                          "task_templates",    "tasks"}) {
        INFO(t);
        CHECK(count(c,
                    "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'awp_realtime' "
                    "AND schemaname = 'public' AND tablename = $1",
                    {std::string(t)}) == 1);
        // The default replica identity: an UPDATE or DELETE carries the old row's key only.
        CHECK(one(c, "SELECT relreplident FROM pg_class WHERE oid = ('public.' || $1)::regclass",
                  {std::string(t)}) == "d");
    }
}

TEST_CASE(
    "the product's global tables: every user reads the collection templates and the schema "
    "version the UI checks, only the service role writes them",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    const auto a = new_tenant(admin, "global-a");
    auto user = db.api();
    awp::test::as_user(user, a, kUserA);
    CHECK(one(user, "SELECT string_agg(slug, ',' ORDER BY sort_order) FROM collection_templates") ==
          "content-calendar,job-search,inventory");
    CHECK(one(user,
              "SELECT count(*) FROM collection_templates, jsonb_array_elements(definition -> "
              "'fields') f WHERE f ->> 'field_type' NOT IN ('text', 'number', 'date', 'datetime', "
              "'boolean', 'select', 'multi_select', 'url', 'email', 'phone', 'relation', "
              "'rich_text')") == "0");
    CHECK(one(user, "SELECT max(version) FROM _schema_version") == "25");
    CHECK(sqlstate_of([&] { user.exec("UPDATE collection_templates SET name = 'x'"); }) == "42501");
    CHECK(sqlstate_of([&] { user.exec("INSERT INTO _schema_version (version) VALUES (99)"); }) ==
          "42501");
    // The webhook secret of a plugin is not for the browser.
    admin.exec(
        "INSERT INTO hq_plugins (tenant_id, plugin_id, name, webhook_secret) VALUES ($1, "
        "'p', 'P', 'shh')",
        {a});
    CHECK(one(user, "SELECT name FROM hq_plugins") == "P");
    CHECK(sqlstate_of([&] { user.exec("SELECT webhook_secret FROM hq_plugins"); }) == "42501");
    // The audit log is append-only for users.
    user.exec(
        "INSERT INTO audit_log (module, entity_type, entity_id, action) VALUES ('tasks', "
        "'task', gen_random_uuid(), 'restored')");
    CHECK(sqlstate_of([&] { user.exec("UPDATE audit_log SET summary = 'x'"); }) == "42501");
    CHECK(sqlstate_of([&] { user.exec("DELETE FROM audit_log"); }) == "42501");
}

TEST_CASE(
    "on a database that grants every new table and function to the API roles by default (a "
    "Supabase project), the product's tables grant only what sql/0036 grants",
    "[schema][product][migrate]") {
    scoped_database db;
    auto c = db.admin();
    c.exec("DROP SCHEMA public CASCADE");
    c.exec("CREATE SCHEMA public");
    c.exec("GRANT USAGE ON SCHEMA public TO anon, authenticated, service_role");
    for (const char* kind : {"TABLES", "FUNCTIONS", "SEQUENCES"}) {
        c.exec(std::string("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON ") + kind +
               " TO anon, authenticated, service_role");
    }
    const auto sql = std::filesystem::path(AWP_SOURCE_DIR) / "sql";
    const auto rep = awp::core::migrate::apply(c, sql);
    CHECK(rep.applied.size() == awp::core::migrate::list(sql).size());
    auto privileges = [&](const std::string& role, const std::string& table) {
        return one(
            c,
            "SELECT coalesce(string_agg(p, ',' ORDER BY p), '-') FROM unnest(ARRAY['SELECT', "
            "'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p WHERE "
            "has_table_privilege($1, ('public.' || $2)::regclass, p)",
            {role, table});
    };
    for (const char* t : {"streams", "task_series", "notifications", "agent_budgets", "workspace",
                          "comments", "collection_fields"}) {
        INFO(t);
        CHECK(privileges("anon", t) == "SELECT");
        CHECK(privileges("authenticated", t) == "DELETE,INSERT,SELECT,UPDATE");
    }
    CHECK(privileges("anon", "audit_log") == "SELECT");
    CHECK(privileges("authenticated", "audit_log") == "INSERT,SELECT");
    CHECK(privileges("authenticated", "collection_templates") == "SELECT");
    CHECK(privileges("authenticated", "source_sync_runs") == "SELECT");
    CHECK(privileges("anon", "secrets") == "-");
    CHECK(privileges("anon", "tenants") == "-");
    CHECK(privileges("anon", "agents") == "-");
    CHECK(one(c,
              "SELECT has_column_privilege('authenticated', 'public.hq_plugins', 'webhook_secret', "
              "'SELECT') || ' ' || has_column_privilege('anon', 'public.hq_plugins', "
              "'webhook_secret', 'SELECT')") == "false false");
    // The product's RPCs: the API roles but anon.
    for (const char* fn :
         {"complete_setup", "spawn_due_task_instances", "recompute_agent_budget"}) {
        INFO(fn);
        CHECK(one(c,
                  "SELECT string_agg(r, ',' ORDER BY r) FROM unnest(ARRAY['anon', "
                  "'authenticated', 'service_role']) r, pg_proc p WHERE p.proname = $1 AND "
                  "p.pronamespace = 'public'::regnamespace AND has_function_privilege(r, p.oid, "
                  "'EXECUTE')",
                  {std::string(fn)}) == "authenticated,service_role");
    }
    // And again: nothing to apply.
    CHECK(awp::core::migrate::apply(c, sql).applied.empty());
}

}  // namespace schema_product_activity_test
