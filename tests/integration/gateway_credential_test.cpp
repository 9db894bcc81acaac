// A gateway host holds only its own keys (sql/0023): with one gateway's login, every other
// gateway's and tenant's rows are invisible and unwritable, every queue RPC on them is refused,
// and the gateway's own work goes through.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gateway_world.hpp"

namespace gateway_credential_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

TEST_CASE(
    "integration: a gateway's own login sees only its gateway's rows and its tenant's work, and "
    "writes nothing else",
    "[gateway][security][integration]") {
    gateway_world w;
    auto gw = pg::connection::connect(w.db.gateway_dsn(w.a_slug));

    // Its gateway's rows only.
    CHECK(one(gw, "SELECT string_agg(id::text, ',') FROM gateways") == w.a);
    CHECK(one(gw, "SELECT string_agg(id::text, ',') FROM agents") == w.a_agent);
    CHECK(one(gw, "SELECT string_agg(id::text, ',') FROM agent_commands") == w.a_cmd);
    CHECK(one(gw, "SELECT string_agg(id::text, ',') FROM agent_inbox_items") == w.a_item);
    CHECK(one(gw, "SELECT string_agg(id::text, ',') FROM secrets") == w.a_secret);
    CHECK(count(gw, "SELECT count(*) FROM daemon_heartbeats") == 0);
    // Its tenant's work (what its agents and its embedder work on), not the other tenant's.
    CHECK(one(gw, "SELECT string_agg(id::text, ',') FROM knowledge_items") == w.t1_page);
    CHECK(one(gw, "SELECT string_agg(title, ',') FROM tasks") == "one");
    CHECK(one(gw, "SELECT string_agg(id::text, ',') FROM tenants") == w.t1);
    CHECK(one(gw, "SELECT current_tenant_id()::text") == w.t1);
    // Of the logins' bindings, its own only.
    CHECK(one(gw, "SELECT string_agg(gateway_id::text, ',') FROM gateway_roles") == w.a);

    // Tables of the platform and of the tenant's users: no privilege at all.
    for (const char* table :
         {"app_users", "gateway_registration_tokens", "workspace", "contacts", "routines",
          "collection_definitions", "collection_records", "audit_log", "notifications",
          "task_series", "streams", "organizations", "agent_budgets", "knowledge_folders",
          "plugins", "task_comments", "work_products", "agent_usage", "knowledge_item_versions"}) {
        INFO(table);
        CHECK(sqlstate_of([&] { gw.exec(std::string("SELECT 1 FROM ") + table + " LIMIT 1"); }) ==
              "42501");
    }

    // Other gateways' rows cannot be changed, even by id.
    CHECK(gw.exec("UPDATE agent_commands SET meta = '{\"x\":1}' WHERE id = ANY($1::uuid[])",
                  {"{" + w.b_cmd + "," + w.c_cmd + "}"})
              .affected() == 0);
    CHECK(gw.exec("UPDATE agent_inbox_items SET summary = 'x' WHERE id = ANY($1::uuid[])",
                  {"{" + w.b_item + "," + w.c_item + "}"})
              .affected() == 0);
    CHECK(gw.exec("UPDATE secrets SET sync_status = 'active' WHERE id = ANY($1::uuid[])",
                  {"{" + w.b_secret + "," + w.c_secret + "}"})
              .affected() == 0);
    CHECK(gw.exec("UPDATE gateways SET last_seen_at = now() WHERE id <> $1", {w.a}).affected() ==
          0);
    // Nor moved onto another gateway, nor inserted, nor deleted.
    CHECK(sqlstate_of([&] {
              gw.exec("UPDATE agent_commands SET gateway_id = $1 WHERE id = $2", {w.b, w.a_cmd});
          }) == "42501");
    CHECK(sqlstate_of([&] {
              gw.exec("UPDATE secrets SET encrypted_value = 'enc:v1:x.y.z' WHERE id = $1",
                      {w.a_secret});
          }) == "42501");
    CHECK(sqlstate_of([&] {
              gw.exec(
                  "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) "
                  "VALUES ($1, $2, 'update', '{}')",
                  {w.t1, w.a_agent});
          }) == "42501");
    CHECK(sqlstate_of([&] { gw.exec("DELETE FROM agent_commands"); }) == "42501");
    CHECK(sqlstate_of([&] { gw.exec("DELETE FROM secrets"); }) == "42501");
    CHECK(sqlstate_of([&] {
              gw.exec(
                  "INSERT INTO daemon_heartbeats (tenant_id, gateway_id, daemon, instance) "
                  "VALUES ($1, $2, 'x', 'y')",
                  {w.t1, w.b});
          }) == "42501");
    CHECK(sqlstate_of([&] { gw.exec("UPDATE gateways SET run_shell_policy = 'members'"); }) ==
          "42501");
    CHECK(sqlstate_of([&] { gw.exec("UPDATE agents SET model = 'x'"); }) == "42501");
    // No way up: not a member of any API role.
    for (const char* role : {"service_role", "authenticated", "anon", "awp_daemon", "postgres"}) {
        INFO(role);
        CHECK(sqlstate_of([&] { gw.exec(std::string("SET ROLE ") + role); }) == "42501");
    }

    // Nothing was changed by any of it.
    CHECK(count(w.admin, "SELECT count(*) FROM agent_commands WHERE meta <> '{}'") == 0);
    CHECK(count(w.admin, "SELECT count(*) FROM secrets WHERE sync_status = 'active'") == 0);
    CHECK(count(w.admin, "SELECT count(*) FROM agent_commands") == 3);
}

TEST_CASE(
    "integration: with a gateway's own login every queue RPC on another gateway's row, slug or "
    "id is refused, and its own work goes through",
    "[gateway][security][integration]") {
    gateway_world w;
    auto gw = pg::connection::connect(w.db.gateway_dsn(w.a));
    const std::string token = "00000000-0000-0000-0000-000000000001";

    // Another gateway named by slug or id: "not found", as if it did not exist.
    for (const auto& other : {w.b_slug, w.b, w.c_slug, w.c}) {
        INFO(other);
        for (const char* sql : {"SELECT * FROM lease_command(60, $1, 'spy')",
                                "SELECT * FROM lease_and_start_command(60, $1, 'spy')",
                                "SELECT * FROM daemon_heartbeat($1, 'command-runner')",
                                "SELECT * FROM lease_knowledge_items_for_indexing($1, 10, 60)"}) {
            INFO(sql);
            CHECK(sqlstate_of([&] { gw.exec(sql, {other}); }) == "AW003");
        }
    }
    // Another gateway's rows by id: not found.
    for (const auto& cmd : {w.b_cmd, w.c_cmd}) {
        CHECK(sqlstate_of([&] { gw.exec("SELECT * FROM start_command($1::uuid)", {cmd}); }) ==
              "AW003");
        CHECK(sqlstate_of([&] {
                  gw.exec("SELECT * FROM complete_command($1::uuid, 0, 'out', '')", {cmd});
              }) == "AW003");
        CHECK(sqlstate_of([&] {
                  gw.exec("SELECT * FROM fail_command($1::uuid, 1, 'no')", {cmd});
              }) == "AW003");
        CHECK(
            sqlstate_of([&] {
                gw.exec("SELECT * FROM extend_command_lease($1::uuid, $2::uuid, 60)", {cmd, token});
            }) == "AW003");
        CHECK(sqlstate_of([&] {
                  gw.exec("SELECT * FROM patch_command_payload($1::uuid, '{}', $2::uuid)",
                          {cmd, token});
              }) == "AW003");
    }
    for (const auto& agent : {w.b_agent, w.c_agent}) {
        CHECK(sqlstate_of([&] { gw.exec("SELECT * FROM lease_inbox_item($1::uuid)", {agent}); }) ==
              "AW003");
    }
    for (const auto& it : {w.b_item, w.c_item}) {
        CHECK(sqlstate_of([&] {
                  gw.exec("SELECT * FROM complete_inbox_item($1::uuid, $2::uuid)", {it, token});
              }) == "AW003");
        CHECK(sqlstate_of([&] {
                  gw.exec("SELECT * FROM fail_inbox_item($1::uuid, 'no', $2::uuid)", {it, token});
              }) == "AW003");
    }
    CHECK(sqlstate_of([&] {
              gw.exec("SELECT * FROM mark_knowledge_item_failed($1::uuid, 'no', $2::uuid)",
                      {w.t2_page, token});
          }) == "AW003");
    // The platform's RPCs and the users' RPCs: no privilege.
    for (const char* sql :
         {"SELECT * FROM reap_expired_leases()", "SELECT * FROM spawn_routine_schedule_items()",
          "SELECT * FROM escalate_overdue_tasks()",
          "SELECT * FROM issue_gateway_token(NULL, 'x', 3600, 'spy')",
          "SELECT * FROM consume_gateway_token('x')",
          "SELECT * FROM awp_gateway_role('default', repeat('x', 30))",
          "SELECT * FROM cancel_command(gen_random_uuid())",
          "SELECT * FROM search_knowledge_items_text('x')"}) {
        INFO(sql);
        CHECK(sqlstate_of([&] { gw.exec(sql); }) == "42501");
    }
    // None of that touched another gateway's rows.
    CHECK(count(w.admin, "SELECT count(*) FROM agent_commands WHERE status <> 'pending'") == 0);
    CHECK(count(w.admin, "SELECT count(*) FROM agent_inbox_items WHERE status <> 'pending'") == 0);
    CHECK(count(w.admin,
                "SELECT count(*) FROM daemon_heartbeats WHERE gateway_id = $1 OR daemon <> "
                "'command-runner'",
                {w.a}) == 0);

    // Its own work: lease, run and finish its command; heartbeat; lease and finish its inbox
    // item; read its secret and report it synced; lease and mark its tenant's knowledge.
    auto leased =
        gw.exec("SELECT id::text, lease_token::text FROM lease_and_start_command(60, $1, 'r1')",
                {w.a_slug});
    REQUIRE(leased.size() == 1);
    CHECK(leased.get<std::string>(0, 0) == w.a_cmd);
    gw.exec("SELECT * FROM complete_command($1::uuid, 0, 'ok', '', $2::uuid)",
            {w.a_cmd, leased.get<std::string>(0, 1)});
    CHECK(one(w.admin, "SELECT status::text FROM agent_commands WHERE id = $1", {w.a_cmd}) ==
          "done");
    CHECK(one(gw, "SELECT gateway_status::text FROM daemon_heartbeat($1, 'command-runner')",
              {w.a_slug}) == "ready");
    CHECK(count(w.admin, "SELECT count(*) FROM daemon_heartbeats WHERE gateway_id = $1", {w.a}) ==
          1);
    auto item =
        gw.exec("SELECT id::text, lease_token::text FROM lease_inbox_item($1::uuid)", {w.a_agent});
    REQUIRE(item.size() == 1);
    gw.exec("SELECT * FROM complete_inbox_item($1::uuid, $2::uuid)",
            {w.a_item, item.get<std::string>(0, 1)});
    CHECK(one(w.admin, "SELECT status::text FROM agent_inbox_items WHERE id = $1", {w.a_item}) ==
          "done");
    CHECK(gw.exec("UPDATE secrets SET sync_status = 'active', last_synced_at = now() WHERE id = $1",
                  {w.a_secret})
              .affected() == 1);
    auto knowledge = gw.exec(
        "SELECT id::text, lease_token::text FROM lease_knowledge_items_for_indexing($1, "
        "10, 60)",
        {w.a_slug});
    REQUIRE(knowledge.size() == 1);
    CHECK(knowledge.get<std::string>(0, 0) == w.t1_page);
    gw.exec("SELECT * FROM mark_knowledge_item_failed($1::uuid, 'model down', $2::uuid)",
            {w.t1_page, knowledge.get<std::string>(0, 1)});
    // The other tenant's page was never leased.
    CHECK(one(w.admin, "SELECT embedding_attempts::text FROM knowledge_items WHERE id = $1",
              {w.t2_page}) == "0");
}

TEST_CASE(
    "integration: a gateway credential is made and rotated by an administrator only, the old "
    "password stops working and a deleted gateway's login sees nothing",
    "[gateway][security][integration]") {
    gateway_world w;
    // The daemons' shared role and the API role cannot make one.
    for (const auto& dsn : {w.db.daemon_dsn(), w.db.api_dsn()}) {
        auto conn = pg::connection::connect(dsn);
        CHECK(sqlstate_of([&] {
                  conn.exec("SELECT * FROM awp_gateway_role($1, repeat('x', 30))", {w.a});
              }) == "42501");
    }
    CHECK(sqlstate_of([&] {
              w.admin.exec("SELECT * FROM awp_gateway_role($1, 'short')", {w.a});
          }) == "AW004");
    CHECK(sqlstate_of([&] {
              w.admin.exec("SELECT * FROM awp_gateway_role('no-such-gateway', repeat('x', 30))");
          }) == "AW003");

    const auto role =
        one(w.admin, "SELECT role_name FROM awp_gateway_role($1, $2)", {w.a, std::string(40, 'p')});
    const std::string base = "host=127.0.0.1 port=" + awp::test::require_env("AWP_PG_PORT") +
                             " dbname=" + w.db.name() + " user=" + role;
    auto before = pg::connection::connect(base + " password=" + std::string(40, 'p'));
    CHECK(count(before, "SELECT count(*) FROM agent_commands") == 1);
    w.admin.exec("SELECT * FROM awp_gateway_role($1, $2)", {w.a, std::string(40, 'q')});
    CHECK_THROWS(pg::connection::connect(base + " password=" + std::string(40, 'p')));
    auto after = pg::connection::connect(base + " password=" + std::string(40, 'q'));
    CHECK(count(after, "SELECT count(*) FROM agent_commands") == 1);
    // The login role has nothing but its membership of awp_gateway.
    CHECK(one(w.admin,
              "SELECT string_agg(b.rolname, ',') FROM pg_auth_members m JOIN pg_roles b ON b.oid "
              "= m.roleid JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = $1",
              {role}) == "awp_gateway");
    CHECK(one(w.admin,
              "SELECT (rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls OR "
              "rolreplication)::text FROM pg_roles WHERE rolname = $1",
              {role}) == "false");

    // A role named in advance (the compose stack's): bound to one gateway only; binding the
    // gateway to another role unbinds the first, which then sees nothing.
    const std::string named = "awp_gw_" + awp::test::random_name("n");
    const std::string pw(40, 'n');
    w.admin.exec("SELECT * FROM awp_gateway_role($1, $2, $3)", {w.b_slug, pw, named});
    CHECK(message_of([&] {
              w.admin.exec("SELECT * FROM awp_gateway_role($1, $2, $3)", {w.c, pw, named});
          }).find("already belongs to another gateway") != std::string::npos);
    CHECK(sqlstate_of([&] {
              w.admin.exec("SELECT * FROM awp_gateway_role($1, $2, 'postgres')", {w.c, pw});
          }) == "AW004");
    const std::string named_base = "host=127.0.0.1 port=" + awp::test::require_env("AWP_PG_PORT") +
                                   " dbname=" + w.db.name() + " password=" + pw + " user=";
    {
        auto as_named = pg::connection::connect(named_base + named);
        CHECK(one(as_named, "SELECT string_agg(id::text, ',') FROM agent_commands") == w.b_cmd);
    }
    const std::string second = named + "_2";
    w.admin.exec("SELECT * FROM awp_gateway_role($1, $2, $3)", {w.b, pw, second});
    auto unbound = pg::connection::connect(named_base + named);
    CHECK(count(unbound, "SELECT count(*) FROM agent_commands") == 0);
    auto rebound = pg::connection::connect(named_base + second);
    CHECK(one(rebound, "SELECT string_agg(id::text, ',') FROM agent_commands") == w.b_cmd);

    // The gateway deleted: its login, still able to connect, is bound to nothing.
    w.admin.exec("DELETE FROM gateways WHERE id = $1", {w.a});
    auto orphan = pg::connection::connect(base + " password=" + std::string(40, 'q'));
    for (const char* table : {"gateways", "agents", "agent_commands", "agent_inbox_items",
                              "secrets", "knowledge_items", "tasks", "tenants"}) {
        INFO(table);
        CHECK(count(orphan, std::string("SELECT count(*) FROM ") + table) == 0);
    }
}

}  // namespace gateway_credential_test
