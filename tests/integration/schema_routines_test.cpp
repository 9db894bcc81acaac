// Routines: routine_next_occurrence against an independent computation (Python zoneinfo, see
// tools/routine-cases/), bad schedules, the per-minute spawn, and event routines.
#include <fstream>
#include <set>
#include <sstream>

#include "schema_helpers.hpp"

namespace schema_routines_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

std::vector<std::string> split_csv(const std::string& line) {
    // The fixture quotes nothing except "{1,3,5}" arrays, which Python's csv writes quoted.
    std::vector<std::string> out;
    std::string cur;
    bool quoted = false;
    for (char ch : line) {
        if (ch == '"')
            quoted = !quoted;
        else if (ch == ',' && !quoted) {
            out.push_back(cur);
            cur.clear();
        } else
            cur.push_back(ch);
    }
    out.push_back(cur);
    return out;
}

std::optional<std::string> opt(const std::string& s) {
    if (s.empty()) return std::nullopt;
    return s;
}

}  // namespace

TEST_CASE("routine_next_occurrence matches an independent computation across DST and month ends",
          "[schema][routines]") {
    scoped_database db;
    auto c = db.api();
    awp::test::as_user(c, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");
    std::ifstream in(std::string(AWP_SOURCE_DIR) + "/tests/fixtures/routines/cases.csv");
    REQUIRE(in.good());
    std::string line;
    std::getline(in, line);  // header
    int cases = 0, mismatches = 0;
    std::set<std::string> zones;
    while (std::getline(in, line)) {
        auto f = split_csv(line);
        REQUIRE(f.size() == 8);
        auto r = c.exec(
            "SELECT to_char(routine_next_occurrence($1, $2::int, $3::smallint[], $4::int, $5, $6, "
            "$7::timestamptz) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS next",
            {f[0], opt(f[1]), opt(f[2]), opt(f[3]), f[4], f[5], f[6]});
        auto got = r.get<std::string>(0, "next");
        ++cases;
        zones.insert(f[5]);
        if (got != f[7]) {
            ++mismatches;
            if (mismatches <= 10) UNSCOPED_INFO(line << " -> got " << got);
        }
    }
    CHECK(cases > 1000);
    CHECK(zones.size() == 4);
    CHECK(mismatches == 0);
}

TEST_CASE("bad cadence, time, zone, interval and day are clear AW004 errors",
          "[schema][routines]") {
    scoped_database db;
    auto c = db.daemon();
    auto call = [&](const std::string& args) {
        return message_of([&] { c.exec("SELECT routine_next_occurrence(" + args + ")"); });
    };
    CHECK(call("'hourly', NULL, NULL, NULL, '09:00', 'UTC'")
              .find("unknown cadence_type \"hourly\"") != std::string::npos);
    CHECK(call("'daily', NULL, NULL, NULL, '25:00', 'UTC'").find("invalid time_of_day \"25:00\"") !=
          std::string::npos);
    CHECK(call("'daily', NULL, NULL, NULL, '9am', 'UTC'").find("invalid time_of_day") !=
          std::string::npos);
    CHECK(call("'daily', NULL, NULL, NULL, '09:00', 'Mars/Olympus'")
              .find("unknown time zone \"Mars/Olympus\"") != std::string::npos);
    CHECK(call("'daily', NULL, NULL, NULL, '09:00', 'XYZ+3'").find("unknown time zone") !=
          std::string::npos);
    CHECK(call("'every_n_days', 0, NULL, NULL, '09:00', 'UTC'").find("interval_n") !=
          std::string::npos);
    CHECK(call("'weekly', NULL, '{0,8}', NULL, '09:00', 'UTC'").find("days_of_week") !=
          std::string::npos);
    CHECK(call("'monthly', NULL, NULL, 32, '09:00', 'UTC'").find("day_of_month") !=
          std::string::npos);
    CHECK(sqlstate_of([&] {
              c.exec(
                  "SELECT routine_next_occurrence('daily', NULL, NULL, NULL, '09:00', "
                  "'Nowhere/Else')");
          }) == "AW004");
    // A routine row with a bad zone is refused when written.
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice");
    CHECK(sqlstate_of([&] {
              c.exec(
                  "INSERT INTO routines (agent_id, name, cadence_type, timezone) VALUES ($1, 'r', "
                  "'daily', 'Moon/Base')",
                  {agent});
          }) == "AW004");
    CHECK(sqlstate_of([&] {
              c.exec(
                  "INSERT INTO routines (agent_id, name, cadence_type) VALUES ($1, 'r', "
                  "'fortnightly')",
                  {agent});
          }) == "AW004");
    CHECK(sqlstate_of([&] {
              c.exec(
                  "INSERT INTO routines (agent_id, name, trigger_type, entity_type, field, "
                  "condition) "
                  "VALUES ($1, 'r', 'event', 'task', 'no_such_column', 'any_change')",
                  {agent});
          }) == "AW004");
    CHECK(count(c, "SELECT count(*) FROM routines") == 0);
}

TEST_CASE(
    "spawn_routine_schedule_items is idempotent within a minute and never bursts after downtime",
    "[schema][routines]") {
    scoped_database db;
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    auto fast = one(
        d,
        "INSERT INTO routines (agent_id, name, instruction, cadence_type, interval_n, timezone) "
        "VALUES ($1, 'poll', 'check mail', 'every_n_minutes', 5, 'Europe/Berlin') RETURNING id",
        {agent});
    auto daily = one(d,
                     "INSERT INTO routines (agent_id, name, cadence_type, time_of_day, timezone) "
                     "VALUES ($1, 'standup', 'daily', '09:00', 'Australia/Sydney') RETURNING id",
                     {agent});
    CHECK(one(d, "SELECT agent_slug FROM routines WHERE id = $1", {fast}) == "alice");
    CHECK(count(d, "SELECT count(*) FROM routines WHERE next_run_at > now()") == 2);
    CHECK(count(d, "SELECT spawn_routine_schedule_items()") == 0);

    // Three days of downtime: each routine fires once, then waits for its next slot after now.
    admin.exec("UPDATE routines SET next_run_at = date_trunc('minute', now()) - interval '3 days'");
    CHECK(count(d, "SELECT spawn_routine_schedule_items()") == 2);
    CHECK(count(d, "SELECT spawn_routine_schedule_items()") == 0);
    CHECK(
        count(d, "SELECT count(*) FROM agent_inbox_items WHERE event_type = 'routine_schedule'") ==
        2);
    CHECK(count(d, "SELECT count(*) FROM routines WHERE next_run_at > now() AND run_count = 1") ==
          2);
    // The elapsed-time cadence keeps its 5-minute grid from the old slot.
    CHECK(count(d,
                "SELECT extract(epoch FROM next_run_at - (date_trunc('minute', now()) - interval "
                "'3 days'))::bigint % 300 "
                "FROM routines WHERE id = $1",
                {fast}) == 0);
    CHECK(one(d, "SELECT summary FROM agent_inbox_items WHERE routine_id = $1", {fast}) ==
          "check mail");
    CHECK(one(d,
              "SELECT next_run_at = routine_next_occurrence('daily', NULL, NULL, NULL, '09:00', "
              "'Australia/Sydney', now()) "
              "FROM routines WHERE id = $1",
              {daily}) == "t");

    // The same slot spawned again (two schedulers, a replayed minute) dedups.
    admin.exec(
        "UPDATE routines SET next_run_at = date_trunc('minute', now()) - interval '3 days' WHERE "
        "id = $1",
        {fast});
    CHECK(count(d, "SELECT spawn_routine_schedule_items()") == 0);
    CHECK(count(d, "SELECT count(*) FROM agent_inbox_items WHERE routine_id = $1", {fast}) == 1);
}

TEST_CASE("event routines fire once per change on tasks, contacts, knowledge items and records",
          "[schema][routines][producers]") {
    scoped_database db;
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto add = [&](const std::string& entity, const std::string& field, const std::string& cond,
                   const std::optional<std::string>& value) {
        return one(
            admin,
            "INSERT INTO routines (agent_id, name, trigger_type, entity_type, field, condition, "
            "value) "
            "VALUES ($1, $2 || ':' || $4, 'event', $2, $3, $4, $5) RETURNING id",
            {agent, entity, field.empty() ? std::optional<std::string>() : field, cond, value});
    };
    auto on_done = add("task", "status", "changed_to", "done");
    auto from_todo = add("task", "status", "changed_from", "todo");
    auto created = add("contact", "", "created", std::nullopt);
    auto any = add("knowledge_item", "title", "any_change", std::nullopt);
    auto record = add("collection_record", "stage", "changed_to", "won");
    auto items = [&](const std::string& routine) {
        return count(admin,
                     "SELECT count(*) FROM agent_inbox_items WHERE routine_id = $1 AND event_type "
                     "= 'routine_event'",
                     {routine});
    };

    auto task = new_task(admin, kDefaultTenant, "ship it");
    auto api = db.api();
    awp::test::as_user(api, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");
    api.exec("UPDATE tasks SET status = 'in_progress' WHERE id = $1", {task});
    CHECK(items(from_todo) == 1);
    CHECK(items(on_done) == 0);
    api.exec("UPDATE tasks SET description = 'x' WHERE id = $1", {task});
    api.exec("UPDATE tasks SET status = 'done' WHERE id = $1", {task});
    CHECK(items(on_done) == 1);
    CHECK(items(from_todo) == 1);
    CHECK(
        one(admin,
            "SELECT payload->>'old_value' || '>' || (payload->>'new_value') FROM agent_inbox_items "
            "WHERE routine_id = $1",
            {on_done}) == "in_progress>done");
    // The same change twice in one transaction: one item.
    api.exec("BEGIN");
    api.exec("UPDATE tasks SET status = 'todo' WHERE id = $1", {task});
    api.exec("UPDATE tasks SET status = 'done' WHERE id = $1", {task});
    api.exec("UPDATE tasks SET status = 'todo' WHERE id = $1", {task});
    api.exec("UPDATE tasks SET status = 'done' WHERE id = $1", {task});
    api.exec("COMMIT");
    CHECK(items(on_done) == 2);

    api.exec("INSERT INTO contacts (name) VALUES ('Ada')");
    CHECK(items(created) == 1);
    auto ki = one(api, "INSERT INTO knowledge_items (title) VALUES ('Old') RETURNING id");
    CHECK(items(any) == 0);
    api.exec("UPDATE knowledge_items SET pinned = true WHERE id = $1", {ki});
    CHECK(items(any) == 0);
    api.exec("UPDATE knowledge_items SET title = 'New' WHERE id = $1", {ki});
    CHECK(items(any) == 1);
    auto coll = one(
        api,
        "INSERT INTO collection_definitions (slug, name) VALUES ('deals', 'Deals') RETURNING id");
    auto rec = one(api,
                   "INSERT INTO collection_records (collection_id, \"values\") VALUES ($1, "
                   "'{\"stage\":\"lead\"}') RETURNING id",
                   {coll});
    api.exec("UPDATE collection_records SET \"values\" = '{\"stage\":\"won\"}' WHERE id = $1",
             {rec});
    CHECK(items(record) == 1);
    CHECK(count(admin, "SELECT run_count FROM routines WHERE id = $1", {on_done}) == 2);
}

}  // namespace schema_routines_test
