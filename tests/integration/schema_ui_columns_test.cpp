// The columns the original product's UI reads (sql/0029): each has the original's name, type and
// meaning, and the code that owns its row keeps it right - the command's final transition, the
// inbox lease, fail and re-drive, the usage row's own trigger - whichever name a writer uses.
#include <string>

#include "schema_helpers.hpp"

namespace schema_ui_columns_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

std::string enqueue(pg::connection& c, const std::string& agent_slug) {
    return one(c,
               "INSERT INTO agent_commands (agent_slug, action, payload, status) "
               "VALUES ($1, 'update', '{}', 'pending') RETURNING id",
               {agent_slug});
}

/// The type of a column as information_schema names it ("timestamp with time zone").
std::string type_of(pg::connection& c, const std::string& table, const std::string& column) {
    return one(c,
               "SELECT coalesce((SELECT data_type FROM information_schema.columns WHERE "
               "table_schema = 'public' AND table_name = $1 AND column_name = $2), '<none>')",
               {table, column});
}

}  // namespace

TEST_CASE("agent_commands.completed_at is stamped by the final transition and by nothing else",
          "[schema][ui_columns]") {
    scoped_database db;
    auto admin = db.admin();
    new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    CHECK(type_of(admin, "agent_commands", "completed_at") == "timestamp with time zone");
    auto completed = [&](const std::string& id) {
        return one(d,
                   "SELECT completed_at IS NOT DISTINCT FROM finished_at AND "
                   "completed_at IS NOT NULL FROM agent_commands WHERE id = $1",
                   {id});
    };
    auto open = [&](const std::string& id) {
        return one(d, "SELECT completed_at IS NULL FROM agent_commands WHERE id = $1", {id});
    };

    // done: null while pending and running, then the time the command finished.
    const auto done = enqueue(d, "alice");
    CHECK(open(done) == "t");
    auto token = one(d, "SELECT lease_token FROM lease_and_start_command(180, 'default', 'r')");
    CHECK(open(done) == "t");
    d.exec("SELECT complete_command($1, 0, 'ok', NULL, $2)", {done, token});
    CHECK(completed(done) == "t");

    // failed, through the runner's RPC and through a lease that expired under a dead runner.
    const auto failed = enqueue(d, "alice");
    token = one(d, "SELECT lease_token FROM lease_and_start_command(180, 'default', 'r')");
    d.exec("SELECT fail_command($1, 1, 'boom', $2)", {failed, token});
    CHECK(completed(failed) == "t");
    const auto orphan = enqueue(d, "alice");
    d.exec("SELECT lease_and_start_command(180, 'default', 'r')");
    admin.exec(
        "UPDATE agent_commands SET lease_expires_at = now() - interval '1 second' "
        "WHERE id = $1",
        {orphan});
    d.exec("SELECT reap_expired_leases()");
    CHECK(one(d, "SELECT status FROM agent_commands WHERE id = $1", {orphan}) == "failed");
    CHECK(completed(orphan) == "t");

    // A cancelled command finished but did not complete.
    const auto cancelled = enqueue(d, "alice");
    d.exec("UPDATE agent_commands SET status = 'cancelled' WHERE id = $1", {cancelled});
    CHECK(open(cancelled) == "t");
    CHECK(one(d, "SELECT finished_at IS NOT NULL FROM agent_commands WHERE id = $1", {cancelled}) ==
          "t");

    // Nobody writes it by hand, not even the service role.
    CHECK(sqlstate_of([&] {
              d.exec("UPDATE agent_commands SET completed_at = now() WHERE id = $1", {cancelled});
          }) == "428C9");
}

TEST_CASE(
    "agent_inbox_items.attempt_count is counted by the lease and reset by a re-drive, context is "
    "the payload with the last failure's reason, and either name may be written",
    "[schema][ui_columns]") {
    scoped_database db;
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    auto d = db.daemon();
    CHECK(type_of(admin, "agent_inbox_items", "attempt_count") == "integer");
    CHECK(type_of(admin, "agent_inbox_items", "context") == "jsonb");
    const auto id = one(admin,
                        "INSERT INTO agent_inbox_items (agent_id, event_type, dedup_key, payload) "
                        "VALUES ($1, 'heartbeat', 'k1', '{\"task_title\": \"Ship\"}') RETURNING id",
                        {agent});
    auto row = [&] {
        return one(d,
                   "SELECT attempt_count || ' ' || attempts || ' ' || context::text FROM "
                   "agent_inbox_items WHERE id = $1",
                   {id});
    };
    CHECK(row() == R"(0 0 {"task_title": "Ship"})");
    auto make_ready = [&] {
        admin.exec("UPDATE agent_inbox_items SET not_before = NULL WHERE id = $1", {id});
    };

    // Each lease counts; a failure's reason shows in the context until the item completes.
    d.exec("SELECT lease_inbox_item($1, 60, 'd')", {agent});
    CHECK(row() == R"(1 1 {"task_title": "Ship"})");
    d.exec("SELECT fail_inbox_item($1, 'agent crashed')", {id});
    CHECK(row() == R"(1 1 {"task_title": "Ship", "last_failure_reason": "agent crashed"})");
    make_ready();
    d.exec("SELECT lease_inbox_item($1, 60, 'd')", {agent});
    CHECK(row() == R"(2 2 {"task_title": "Ship", "last_failure_reason": "agent crashed"})");
    // An expired lease is a failed attempt too (the reaper).
    admin.exec(
        "UPDATE agent_inbox_items SET lease_expires_at = now() - interval '1 second' "
        "WHERE id = $1",
        {id});
    d.exec("SELECT reap_expired_leases()");
    CHECK(
        one(d, "SELECT context->>'last_failure_reason' FROM agent_inbox_items WHERE id = $1", {id})
            .find("lease expired") != std::string::npos);
    make_ready();
    d.exec("SELECT lease_inbox_item($1, 60, 'd')", {agent});
    d.exec("SELECT fail_inbox_item($1, 'third time')", {id});
    CHECK(one(d, "SELECT status || ' ' || attempt_count FROM agent_inbox_items WHERE id = $1",
              {id}) == "dead_letter 3");

    // The original UI's re-drive writes attempt_count: the attempts start afresh and the item is
    // leasable again.
    admin.exec(
        "UPDATE agent_inbox_items SET status = 'pending', attempt_count = 0, "
        "failed_at = NULL WHERE id = $1",
        {id});
    CHECK(one(d, "SELECT attempts || ' ' || attempt_count FROM agent_inbox_items WHERE id = $1",
              {id}) == "0 0");
    auto again = d.exec("SELECT attempt_count FROM lease_inbox_item($1, 60, 'd')", {agent});
    REQUIRE(again.size() == 1);
    CHECK(again.get<int>(0, "attempt_count") == 1);
    auto token = one(d, "SELECT lease_token FROM agent_inbox_items WHERE id = $1", {id});
    d.exec("SELECT complete_inbox_item($1, $2)", {id, token});
    CHECK(row() == R"(1 1 {"task_title": "Ship"})");  // done: no failure to report

    // The original UI inserts a context: it is the payload the dispatcher hands the agent.
    const auto manual =
        one(admin,
            "INSERT INTO agent_inbox_items (agent_id, event_type, dedup_key, context) VALUES ($1, "
            "'routine_schedule', 'k2', '{\"routine_id\": \"r1\", \"manual\": true}') RETURNING id",
            {agent});
    CHECK(one(d, "SELECT payload::text FROM agent_inbox_items WHERE id = $1", {manual}) ==
          R"({"manual": true, "routine_id": "r1"})");
    // And may update it; a context that is not an object is refused.
    admin.exec(R"(UPDATE agent_inbox_items SET context = '{"manual": false}' WHERE id = $1)",
               {manual});
    CHECK(one(d, "SELECT payload::text || context::text FROM agent_inbox_items WHERE id = $1",
              {manual}) == R"({"manual": false}{"manual": false})");
    CHECK(sqlstate_of([&] {
              admin.exec("UPDATE agent_inbox_items SET context = '[1]' WHERE id = $1", {manual});
          }) == "23514");
}

TEST_CASE(
    "agent_usage: a row written with the spec's fields has the original's, and one written "
    "with the original's has the spec's",
    "[schema][ui_columns]") {
    scoped_database db;
    auto admin = db.admin();
    auto agent = new_agent(admin, kDefaultTenant, "alice", default_gateway(admin));
    CHECK(type_of(admin, "agent_usage", "provider") == "text");
    CHECK(type_of(admin, "agent_usage", "total_tokens") == "bigint");
    CHECK(type_of(admin, "agent_usage", "cost_total_usd") == "numeric");
    CHECK(type_of(admin, "agent_usage", "occurred_at") == "timestamp with time zone");
    const std::string fields =
        "SELECT coalesce(provider, '-') || ' ' || total_tokens || ' ' || cost_total_usd || ' ' || "
        "cost_usd || ' ' || (occurred_at = created_at) || ' ' || "
        "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM agent_usage WHERE id = $1";

    // The spec's writer: model, tokens, cost_usd, created_at.
    const auto spec = one(admin,
                          "INSERT INTO agent_usage (agent_id, model, input_tokens, output_tokens, "
                          "cost_usd, created_at) VALUES ($1, 'anthropic/claude-sonnet-4', 10, 5, "
                          "0.25, '2026-03-01T12:00:00Z') RETURNING id",
                          {agent});
    CHECK(one(admin, fields, {spec}) == "anthropic 15 0.250000 0.250000 true 2026-03-01");

    // The original's writer: provider, total_tokens (with cache), cost_total_usd, occurred_at.
    const auto original = one(admin,
                              "INSERT INTO agent_usage (agent_id, provider, model, input_tokens, "
                              "output_tokens, total_tokens, cost_total_usd, occurred_at) VALUES "
                              "($1, 'openai', 'gpt-4o', 1, 2, 40, 1.5, '2026-03-02T08:00:00Z') "
                              "RETURNING id",
                              {agent});
    CHECK(one(admin, fields, {original}) == "openai 40 1.500000 1.500000 true 2026-03-02");
    // The spec's usage query sees it on the day it happened.
    CHECK(one(admin, "SELECT cost_usd FROM get_agent_daily_usage($1, '2026-03-02', '2026-03-02')",
              {agent}) == "1.500000");

    // A model without a provider part leaves provider empty; nothing given at all is fine.
    const auto bare =
        one(admin, "INSERT INTO agent_usage (agent_id, model) VALUES ($1, 'local') RETURNING id",
            {agent});
    CHECK(one(admin,
              "SELECT coalesce(provider, '-') || ' ' || total_tokens || ' ' || "
              "cost_total_usd || ' ' || (occurred_at = created_at) FROM agent_usage "
              "WHERE id = $1",
              {bare}) == "- 0 0.000000 true");

    // Updates keep them in step, whichever name is written.
    admin.exec("UPDATE agent_usage SET input_tokens = 100 WHERE id = $1", {spec});
    admin.exec("UPDATE agent_usage SET cost_total_usd = 2 WHERE id = $1", {spec});
    admin.exec("UPDATE agent_usage SET occurred_at = '2026-03-05T00:00:00Z' WHERE id = $1", {spec});
    CHECK(one(admin, fields, {spec}) == "anthropic 105 2.000000 2.000000 true 2026-03-05");
    admin.exec(
        "UPDATE agent_usage SET cost_usd = 3, created_at = '2026-03-06T00:00:00Z' "
        "WHERE id = $1",
        {spec});
    CHECK(one(admin, fields, {spec}) == "anthropic 105 3.000000 3.000000 true 2026-03-06");
}

TEST_CASE(
    "tasks.series_id, contacts.full_name, workspace.slug and initialized, and the sync fields of "
    "source_connections have the original's types, defaults and rules",
    "[schema][ui_columns]") {
    scoped_database db;
    auto admin = db.admin();
    CHECK(type_of(admin, "tasks", "series_id") == "uuid");
    CHECK(type_of(admin, "contacts", "full_name") == "text");
    CHECK(type_of(admin, "workspace", "slug") == "text");
    CHECK(type_of(admin, "workspace", "initialized") == "boolean");
    CHECK(type_of(admin, "source_connections", "sync_interval_hours") == "integer");
    CHECK(type_of(admin, "source_connections", "next_sync_at") == "timestamp with time zone");
    CHECK(type_of(admin, "source_connections", "last_verified_at") == "timestamp with time zone");
    CHECK(type_of(admin, "source_connections", "error_message") == "text");

    // A task of a series (task_series since sql/0035, its foreign key tasks_series_id_fkey); a
    // query finds them.
    const auto series = one(admin,
                            "INSERT INTO task_series (tenant_id, title, cadence_type, timezone) "
                            "VALUES ($1, 'Weekly', 'weekly', 'UTC') RETURNING id",
                            {kDefaultTenant});
    admin.exec("INSERT INTO tasks (tenant_id, title, series_id) VALUES ($1, 'Weekly', $2)",
               {kDefaultTenant, series});
    CHECK(sqlstate_of([&] {
              admin.exec(
                  "INSERT INTO tasks (tenant_id, title, series_id) VALUES ($1, 'Lost', "
                  "'0d7ae6c4-4b0d-4f4e-9d1e-3c1c6a1b2f00')",
                  {kDefaultTenant});
          }) == "23503");
    CHECK(count(admin, "SELECT count(*) FROM tasks WHERE series_id = $1", {series}) == 1);

    // A contact's full name is its name, kept when the name changes.
    const auto contact = one(
        admin, "INSERT INTO contacts (tenant_id, name) VALUES ($1, 'Ada Lovelace') RETURNING id",
        {kDefaultTenant});
    admin.exec("UPDATE contacts SET name = 'Ada King' WHERE id = $1", {contact});
    CHECK(one(admin, "SELECT full_name FROM contacts WHERE id = $1", {contact}) == "Ada King");

    // A tenant's workspace row (made with the tenant, sql/0037) is not initialized until the
    // wizard says so; its slug is its own (another tenant may have the same); a tenant has one.
    const auto other = new_tenant(admin, "other-tenant");
    CHECK(one(admin, "SELECT initialized FROM workspace WHERE tenant_id = $1", {other}) == "f");
    admin.exec("UPDATE workspace SET slug = 'hq' WHERE tenant_id = ANY($1::uuid[])",
               {"{" + std::string(kDefaultTenant) + "," + other + "}"});
    CHECK(count(admin, "SELECT count(*) FROM workspace WHERE slug = 'hq'") == 2);
    CHECK(sqlstate_of([&] {
              admin.exec("INSERT INTO workspace (tenant_id, label, slug) VALUES ($1, 'B', 'hq2')",
                         {kDefaultTenant});
          }) == "23505");

    // A source connection syncs every 6 hours unless told otherwise, at least hourly;
    // error_message is the connection's last_error.
    const auto conn = one(admin,
                          "INSERT INTO source_connections (tenant_id, provider) VALUES ($1, "
                          "'notion') RETURNING id",
                          {kDefaultTenant});
    CHECK(one(admin,
              "SELECT sync_interval_hours || ' ' || (next_sync_at IS NULL) || ' ' || "
              "(last_verified_at IS NULL) FROM source_connections WHERE id = $1",
              {conn}) == "6 true true");
    CHECK(sqlstate_of([&] {
              admin.exec("UPDATE source_connections SET sync_interval_hours = 0 WHERE id = $1",
                         {conn});
          }) == "23514");
    admin.exec("UPDATE source_connections SET last_error = 'token revoked' WHERE id = $1", {conn});
    CHECK(one(admin, "SELECT error_message FROM source_connections WHERE id = $1", {conn}) ==
          "token revoked");
}

}  // namespace schema_ui_columns_test
