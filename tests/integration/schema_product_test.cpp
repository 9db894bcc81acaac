// The original product's data model on awp (sql/0035-0038), its first half: the workspace row
// every tenant has, complete_setup, recurring tasks and their spawn, a task's deadline, each RPC
// confined to its caller's tenant (the second half: schema_product_activity_test.cpp). Row-level
// security of every new table, per tenant, is schema_isolation_test's (its seed writes a row into
// each).
#include <string>

#include "schema_helpers.hpp"

namespace schema_product_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

const char* const kUserA = "7d1c0a52-0000-4000-8000-00000000000a";
const char* const kUserB = "7d1c0a52-0000-4000-8000-00000000000b";

const std::string kStages =
    R"([{"stage_key":"lead","label":"Lead","color":"#111","sort_order":0,"is_default":true},)"
    R"({"stage_key":"won","label":"Won","sort_order":1,"is_terminal":true}])";
const std::string kFields =
    R"([{"field_key":"deal","field_type":"number","label":"Deal","field_group":"sales",)"
    R"("sort_order":0,"required":false,"options":null,"description":null},)"
    R"({"field_key":"src","field_type":"select","label":"Source","options":["In","Out"]}])";
const std::string kStreams =
    R"([{"name":"Operations","description":"Ops","type":"functional","color":"#6b7280",)"
    R"("icon":null,"sort_order":0},{"name":"Side","type":"custom","sort_order":1}])";

std::string setup_sql(const std::string& tenant_arg = "") {
    return "SELECT complete_setup(p_name => $1, p_slug => $2, p_description => $3, "
           "p_owner_name => $4, p_preferred_name => $5, p_timezone => $6, p_stages => $7::jsonb, "
           "p_fields => $8::jsonb, p_streams => $9::jsonb" +
           tenant_arg + ")";
}

pg::params setup_params(const std::string& name, const std::string& timezone = "Europe/Berlin") {
    return {name,     "acme",  "What we do", "Ada Lovelace", "Ada",
            timezone, kStages, kFields,      kStreams};
}

// A daily series (UTC) whose occurrences fall about twelve hours from now, so none is near
// "now" while a test runs; its next occurrence set an hour ago: due.
std::string due_series(pg::connection& admin, const std::string& tenant, const std::string& title) {
    auto id = one(admin,
                  "INSERT INTO task_series (tenant_id, title, cadence_type, timezone, time_of_day) "
                  "VALUES ($1, $2, 'daily', 'UTC', ((now() AT TIME ZONE 'UTC') + interval '12 "
                  "hours')::time(0)) RETURNING id",
                  {tenant, title});
    admin.exec(
        "UPDATE task_series SET next_occurrence_at = now() - interval '1 hour' WHERE id = $1",
        {id});
    return id;
}

}  // namespace

TEST_CASE(
    "every tenant has one workspace row, made with the tenant and not set up until the wizard "
    "runs, users read their own, anon none",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    // The default tenant's row, made by the migration.
    CHECK(one(admin, "SELECT name || ' ' || initialized FROM workspace WHERE tenant_id = $1",
              {kDefaultTenant}) == "HQ false");
    const auto a = new_tenant(admin, "ws-a");
    const auto b = new_tenant(admin, "ws-b");
    CHECK(count(admin, "SELECT count(*) FROM workspace WHERE tenant_id = ANY($1::uuid[])",
                {"{" + a + "," + b + "}"}) == 2);
    CHECK(one(admin, "SELECT initialized FROM workspace WHERE tenant_id = $1", {a}) == "f");
    // One per tenant.
    CHECK(sqlstate_of([&] {
              admin.exec("INSERT INTO workspace (tenant_id, name) VALUES ($1, 'Second')", {a});
          }) == "23505");

    auto user = db.api();
    awp::test::as_user(user, a, kUserA);
    CHECK(one(user, "SELECT string_agg(tenant_id::text, ',') FROM workspace") == a);
    // The settings pages write their fields; name and label are one value; a bad zone is refused.
    user.exec("UPDATE workspace SET name = 'Acme HQ', owner_timezone = '' WHERE tenant_id = $1",
              {a});
    CHECK(one(user, "SELECT label || '|' || coalesce(owner_timezone, '<null>') FROM workspace") ==
          "Acme HQ|<null>");
    CHECK(sqlstate_of([&] { user.exec("UPDATE workspace SET owner_timezone = 'Mars/Olympus'"); }) ==
          "AW004");
    CHECK(user.exec("UPDATE workspace SET name = 'Mine' WHERE tenant_id = $1", {b}).affected() ==
          0);
    CHECK(one(admin, "SELECT name FROM workspace WHERE tenant_id = $1", {b}) == "HQ");

    // Before sign-in (anon): an empty answer, not a privilege error, as on a hosted project.
    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(count(anon, "SELECT count(*) FROM workspace") == 0);
    CHECK(count(anon, "SELECT count(*) FROM audit_log") == 0);
    CHECK(sqlstate_of([&] { anon.exec("UPDATE workspace SET name = 'x'"); }) == "42501");
    CHECK(sqlstate_of([&] { anon.exec("SELECT 1 FROM secrets"); }) == "42501");
    CHECK(sqlstate_of([&] { anon.exec("SELECT 1 FROM tenants"); }) == "42501");
}

TEST_CASE(
    "complete_setup fills the caller's workspace row once and replaces its contact stages, "
    "contact fields and streams",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    const auto a = new_tenant(admin, "setup-a");
    const auto b = new_tenant(admin, "setup-b");
    admin.exec("INSERT INTO pipeline_stages (tenant_id, stage_key, label) VALUES ($1, 'b', 'B')",
               {b});
    admin.exec("INSERT INTO streams (tenant_id, name) VALUES ($1, 'B stream')", {b});

    auto user = db.api();
    awp::test::as_user(user, a, kUserA);
    user.exec(setup_sql(), setup_params("Acme"));
    CHECK(one(user,
              "SELECT concat_ws('|', name, slug, description, owner_name, owner_preferred_name, "
              "owner_timezone, initialized) FROM workspace") ==
          "Acme|acme|What we do|Ada Lovelace|Ada|Europe/Berlin|t");
    CHECK(one(user,
              "SELECT string_agg(stage_key || ':' || label || ':' || is_default || ':' || "
              "is_terminal, ',' ORDER BY sort_order) FROM pipeline_stages WHERE entity_type = "
              "'contact'") == "lead:Lead:true:false,won:Won:false:true");
    CHECK(one(user,
              "SELECT string_agg(field_key || ':' || field_type || ':' || coalesce(options::text, "
              "'-') || ':' || is_active, ',' ORDER BY sort_order, field_key) FROM "
              "field_definitions") == "deal:number:-:true,src:select:[\"In\", \"Out\"]:true");
    CHECK(
        one(user, "SELECT string_agg(name || ':' || type, ',' ORDER BY sort_order) FROM streams") ==
        "Operations:functional,Side:custom");
    const auto stream = one(user, "SELECT id FROM streams WHERE name = 'Operations'");
    const auto task =
        one(user, "INSERT INTO tasks (title, stream_id) VALUES ('t', $1) RETURNING id", {stream});

    // Again: the set-up workspace row stays; the three lists are replaced (a task's stream goes).
    user.exec(setup_sql(), {"Other", "other", "", "", "", "", R"([{"stage_key":"x","label":"X"}])",
                            "[]", "null"});
    CHECK(one(user, "SELECT name || '|' || slug FROM workspace") == "Acme|acme");
    CHECK(one(user, "SELECT string_agg(stage_key, ',') FROM pipeline_stages") == "x");
    CHECK(count(user, "SELECT count(*) FROM field_definitions") == 0);
    CHECK(count(user, "SELECT count(*) FROM streams") == 0);
    CHECK(one(user, "SELECT stream_id IS NULL FROM tasks WHERE id = $1", {task}) == "t");

    // The other tenant's rows are untouched.
    CHECK(one(admin, "SELECT string_agg(stage_key, ',') FROM pipeline_stages WHERE tenant_id = $1",
              {b}) == "b");
    CHECK(count(admin, "SELECT count(*) FROM streams WHERE tenant_id = $1", {b}) == 1);
    CHECK(one(admin, "SELECT initialized FROM workspace WHERE tenant_id = $1", {b}) == "f");
}

TEST_CASE(
    "complete_setup stays in the caller's tenant, refuses bad input with a clear error and "
    "changes nothing then",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    const auto a = new_tenant(admin, "conf-a");
    const auto b = new_tenant(admin, "conf-b");
    auto user = db.api();
    awp::test::as_user(user, a, kUserA);

    // Another tenant's id from a user: refused, whoever's it is; the user's own: fine.
    auto msg = message_of([&] {
        auto p = setup_params("Evil");
        p.push_back(b);
        user.exec(setup_sql(", p_tenant_id => $10::uuid"), p);
    });
    CHECK_THAT(msg, Catch::Contains("only the service role sets up another tenant"));
    CHECK(one(admin, "SELECT name || initialized FROM workspace WHERE tenant_id = $1", {b}) ==
          "HQfalse");
    CHECK(count(admin, "SELECT count(*) FROM streams WHERE tenant_id = $1", {b}) == 0);
    auto own = setup_params("Mine");
    own.push_back(a);
    user.exec(setup_sql(", p_tenant_id => $10::uuid"), own);
    CHECK(one(admin, "SELECT name FROM workspace WHERE tenant_id = $1", {a}) == "Mine");

    // The service role names the tenant (the product's onboarding does, with the default one).
    auto service = db.api();
    awp::test::as_service(service);
    auto for_b = setup_params("Bolt");
    for_b.push_back(b);
    service.exec(setup_sql(", p_tenant_id => $10::uuid"), for_b);
    CHECK(one(admin, "SELECT name || initialized FROM workspace WHERE tenant_id = $1", {b}) ==
          "Bolttrue");
    CHECK(one(admin, "SELECT name FROM workspace WHERE tenant_id = $1", {a}) == "Mine");
    auto nowhere = setup_params("Ghost");
    nowhere.push_back("0e0e0e0e-0000-4000-8000-000000000000");
    CHECK(sqlstate_of([&] { service.exec(setup_sql(", p_tenant_id => $10::uuid"), nowhere); }) ==
          "AW003");

    // A session of no tenant, and anon: nothing.
    auto none = db.api();
    none.exec("SET ROLE authenticated");
    none.exec("SELECT set_config('request.jwt.claims', '{\"role\":\"authenticated\"}', false)");
    CHECK(sqlstate_of([&] { none.exec(setup_sql(), setup_params("X")); }) == "AW009");
    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(sqlstate_of([&] { anon.exec(setup_sql(), setup_params("X")); }) == "42501");

    // Bad input: 22023 naming what is wrong (AW004 for the zone), and nothing written.
    const auto c = new_tenant(admin, "conf-c");
    auto fresh = db.api();
    awp::test::as_user(fresh, c, kUserB);
    struct bad {
        pg::params params;
        std::string state, says;
    };
    const bad cases[] = {
        {{"  ", "s", "", "", "", "", "[]", "[]", "[]"}, "22023", "p_name"},
        {{"N", "s", "", "", "", "", R"({"stage_key":"x"})", "[]", "[]"},
         "22023",
         "p_stages must be an array of objects, got object"},
        {{"N", "s", "", "", "", "", "[1]", "[]", "[]"}, "22023", "p_stages must hold objects only"},
        {{"N", "s", "", "", "", "", R"([{"label":"No key"}])", "[]", "[]"},
         "22023",
         "needs a stage_key and a label"},
        {{"N", "s", "", "", "", "", "[]", R"([{"field_key":"k","label":"L"}])", "[]"},
         "22023",
         "field_type"},
        {{"N", "s", "", "", "", "", "[]", "[]", R"([{"name":"S","type":"planetary"}])"},
         "22023",
         "unknown stream type planetary"},
        {{"N", "s", "", "", "", "Mars/Olympus", "[]", "[]", "[]"}, "AW004", "Mars/Olympus"},
    };
    for (const auto& k : cases) {
        INFO(k.says);
        std::string state, message;
        try {
            fresh.exec(setup_sql(), k.params);
        } catch (const pg::sql_error& e) {
            state = e.sqlstate();
            message = e.what();
        }
        CHECK(state == k.state);
        CHECK_THAT(message, Catch::Contains(k.says));
    }
    std::string many = "[";
    for (int i = 0; i < 201; ++i) many += std::string(i ? "," : "") + R"({"name":"s"})";
    many += "]";
    CHECK(sqlstate_of([&] {
              fresh.exec(setup_sql(), {"N", "s", "", "", "", "", "[]", "[]", many});
          }) == "22023");
    CHECK(one(admin, "SELECT name || initialized FROM workspace WHERE tenant_id = $1", {c}) ==
          "HQfalse");
    CHECK(count(admin, "SELECT count(*) FROM pipeline_stages WHERE tenant_id = $1", {c}) == 0);
}

TEST_CASE(
    "a task series keeps its next occurrence in its zone, the spawn makes one task per due "
    "occurrence, catches up once, auto-skips the open one, and stops at its end",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    const auto agent = new_agent(admin, kDefaultTenant, "rex", default_gateway(admin));

    // The next occurrence, computed on insert, in the series' zone: weekly on Sunday (0) at 09:00
    // in Berlin is a Sunday, 09:00 there; monthly on the last day (-1) is a month's last day.
    auto weekly = one(admin,
                      "INSERT INTO task_series (title, cadence_type, days_of_week, time_of_day, "
                      "timezone) VALUES ('w', 'weekly', '{0}', '09:00', 'Europe/Berlin') RETURNING "
                      "id");
    CHECK(one(admin,
              "SELECT extract(dow FROM next_occurrence_at AT TIME ZONE 'Europe/Berlin') || ' ' || "
              "(next_occurrence_at AT TIME ZONE 'Europe/Berlin')::time || ' ' || "
              "(next_occurrence_at > now()) FROM task_series WHERE id = $1",
              {weekly}) == "0 09:00:00 true");
    auto monthly = one(admin,
                       "INSERT INTO task_series (title, cadence_type, day_of_month, timezone) "
                       "VALUES ('m', 'monthly', -1, 'UTC') RETURNING id");
    CHECK(one(admin,
              "SELECT extract(day FROM (next_occurrence_at AT TIME ZONE 'UTC') + interval '1 day') "
              "FROM task_series WHERE id = $1",
              {monthly}) == "1");
    // Paused: no next occurrence; a bad zone or weekday is refused.
    admin.exec("UPDATE task_series SET is_paused = true WHERE id = $1", {monthly});
    CHECK(one(admin, "SELECT next_occurrence_at IS NULL FROM task_series WHERE id = $1",
              {monthly}) == "t");
    CHECK(sqlstate_of([&] {
              admin.exec(
                  "INSERT INTO task_series (title, cadence_type, timezone) VALUES ('z', 'daily', "
                  "'Nowhere/Town')");
          }) == "AW004");
    CHECK(sqlstate_of([&] {
              admin.exec(
                  "INSERT INTO task_series (title, cadence_type, days_of_week, timezone) VALUES "
                  "('z', 'weekly', '{7}', 'UTC')");
          }) == "23514");
    admin.exec("UPDATE task_series SET is_paused = true WHERE id = $1", {weekly});

    // Due three days and an hour ago (a daily series whose slots are ~12 h from now): one task,
    // for the latest due occurrence (~12 h ago), the three after the first due one skipped; its
    // agent is woken; the audit log says so.
    const auto s = due_series(admin, kDefaultTenant, "Standup");
    admin.exec(
        "UPDATE task_series SET assignee_agent_id = $2, ends_after_count = 2, next_occurrence_at "
        "= next_occurrence_at - interval '3 days' WHERE id = $1",
        {s, agent});
    auto d = db.daemon();
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "1");
    CHECK(
        one(admin,
            "SELECT title || '|' || status || '|' || (meta ->> 'catchup_skipped') || '|' || "
            "(due_date = series_occurrence_at) || '|' || (series_occurrence_at BETWEEN now() - "
            "interval '13 hours' AND now() - interval '11 hours') FROM tasks WHERE series_id = $1",
            {s}) == "Standup|todo|3|true|true");
    CHECK(count(admin,
                "SELECT count(*) FROM agent_inbox_items i JOIN tasks t ON t.id = i.task_id "
                "WHERE t.series_id = $1 AND i.event_type = 'task_assignment'",
                {s}) == 1);
    CHECK(count(admin,
                "SELECT count(*) FROM audit_log a JOIN tasks t ON t.id = a.entity_id WHERE "
                "t.series_id = $1 AND a.action = 'created' AND a.actor_type = 'system'",
                {s}) == 1);
    CHECK(one(admin,
              "SELECT spawned_count || ' ' || (next_occurrence_at > now()) FROM task_series WHERE "
              "id = $1",
              {s}) == "1 true");
    // Nothing due: nothing spawned, however often it is called.
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "0");

    // Due again while the first is open: the first becomes missed (auto_skip), logged; then the
    // series has spawned ends_after_count = 2 and pauses.
    admin.exec(
        "UPDATE task_series SET next_occurrence_at = now() - interval '1 minute' WHERE id = $1",
        {s});
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "1");
    CHECK(one(admin,
              "SELECT string_agg(status::text, ',' ORDER BY series_occurrence_at) FROM tasks "
              "WHERE series_id = $1",
              {s}) == "missed,todo");
    CHECK(count(admin,
                "SELECT count(*) FROM audit_log WHERE action = 'status_changed' AND meta ->> "
                "'reason' = 'recurring_auto_skip'") == 1);
    CHECK(one(admin,
              "SELECT is_paused || ' ' || (next_occurrence_at IS NULL) || ' ' || spawned_count "
              "FROM task_series WHERE id = $1",
              {s}) == "true true 2");

    // missed_policy queue leaves the open one alone; the same occurrence is never spawned twice.
    const auto q = due_series(admin, kDefaultTenant, "Queue");
    admin.exec("UPDATE task_series SET missed_policy = 'queue' WHERE id = $1", {q});
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "1");
    const auto first_at =
        one(admin, "SELECT series_occurrence_at FROM tasks WHERE series_id = $1", {q});
    admin.exec(
        "UPDATE task_series SET next_occurrence_at = now() - interval '1 minute' WHERE id = $1",
        {q});
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "1");
    CHECK(one(admin, "SELECT string_agg(status::text, ',') FROM tasks WHERE series_id = $1", {q}) ==
          "todo,todo");
    admin.exec("UPDATE task_series SET next_occurrence_at = $2::timestamptz WHERE id = $1",
               {q, first_at});
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "0");
    CHECK(count(admin, "SELECT count(*) FROM tasks WHERE series_id = $1", {q}) == 2);
}

TEST_CASE(
    "spawn_due_task_instances called by a user spawns only that tenant's series, anon may not "
    "call it",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    const auto a = new_tenant(admin, "spawn-a");
    const auto b = new_tenant(admin, "spawn-b");
    const auto sa = due_series(admin, a, "A daily");
    const auto sb = due_series(admin, b, "B daily");
    auto user = db.api();
    awp::test::as_user(user, a, kUserA);
    CHECK(one(user, "SELECT spawn_due_task_instances()") == "1");
    CHECK(count(admin, "SELECT count(*) FROM tasks WHERE series_id = $1", {sa}) == 1);
    CHECK(count(admin, "SELECT count(*) FROM tasks WHERE series_id = $1", {sb}) == 0);
    CHECK(one(admin, "SELECT next_occurrence_at <= now() FROM task_series WHERE id = $1", {sb}) ==
          "t");
    auto anon = db.api();
    awp::test::as_anon(anon);
    CHECK(sqlstate_of([&] { anon.exec("SELECT spawn_due_task_instances()"); }) == "42501");
    // The scheduler (a service_role member) spawns every active tenant's.
    auto d = db.daemon();
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "1");
    CHECK(count(admin, "SELECT count(*) FROM tasks WHERE series_id = $1", {sb}) == 1);
    // A suspended tenant's series wait.
    admin.exec("UPDATE tenants SET status = 'suspended' WHERE id = $1", {b});
    admin.exec(
        "UPDATE task_series SET next_occurrence_at = now() - interval '1 minute' WHERE id = $1",
        {sb});
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "0");
}

TEST_CASE(
    "a task due on a day is missed once that day has passed, not at its start, and a recurring "
    "task spawned at its occurrence is not missed at once",
    "[schema][product]") {
    scoped_database db;
    auto admin = db.admin();
    // The product UI's date picker writes a day ("2026-03-06": midnight); its escalation missed a
    // task once due_date was before the current date.
    const auto today = new_task(admin, kDefaultTenant, "Due today");
    const auto yesterday = new_task(admin, kDefaultTenant, "Due yesterday");
    const auto at = new_task(admin, kDefaultTenant, "Due an hour ago");
    admin.exec(
        "UPDATE tasks SET due_date = date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME "
        "ZONE 'UTC' WHERE id = $1",
        {today});
    admin.exec(
        "UPDATE tasks SET due_date = (date_trunc('day', now() AT TIME ZONE 'UTC') - "
        "interval '1 day') AT TIME ZONE 'UTC' WHERE id = $1",
        {yesterday});
    admin.exec("UPDATE tasks SET due_at = now() - interval '1 hour' WHERE id = $1", {at});
    // A series due within today (UTC): its task is due today.
    const auto s = due_series(admin, kDefaultTenant, "Daily check");
    admin.exec(
        "UPDATE task_series SET next_occurrence_at = greatest(date_trunc('day', now() AT TIME "
        "ZONE 'UTC') AT TIME ZONE 'UTC', now() - interval '1 hour') WHERE id = $1",
        {s});
    auto d = db.daemon();
    CHECK(one(d, "SELECT spawn_due_task_instances()") == "1");
    CHECK(one(d, "SELECT escalate_overdue_tasks()") == "2");
    CHECK(one(admin,
              "SELECT string_agg(title || ':' || status, ',' ORDER BY title) FROM tasks "
              "WHERE id = ANY($1::uuid[]) OR series_id = $2",
              {"{" + today + "," + yesterday + "," + at + "}", s}) ==
          "Daily check:todo,Due an hour ago:missed,Due today:todo,Due yesterday:missed");
    // The escalation finds them by the deadline's index.
    CHECK(count(admin,
                "SELECT count(*) FROM pg_indexes WHERE indexname = 'tasks_overdue_idx' AND "
                "indexdef LIKE '%awp_task_deadline(due_at, due_date)%'") == 1);
}

}  // namespace schema_product_test
