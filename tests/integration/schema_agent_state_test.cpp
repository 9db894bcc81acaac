// The runner's one write on agents (awp_command_agent_state, sql/0030): a gateway's login sets
// status, error, model and thinking of an agent of its own gateway, only through a running
// provision or set_agent_model whose lease it holds and which names that agent.
#include <catch2/catch.hpp>

#include "schema_helpers.hpp"

namespace schema_agent_state_test {

using namespace awp::schema_test;

namespace {

struct world {
    awp::test::scoped_database db;
    pg::connection admin = db.admin();
    std::string gw = new_gateway(admin, kDefaultTenant, awp::test::random_name("gw"));
    std::string other_gw = new_gateway(admin, kDefaultTenant, awp::test::random_name("gw"));
    std::string agent = "ana-" + awp::test::random_name("a");
    std::string agent_id = one(admin,
                               "INSERT INTO agents (tenant_id, name, slug, gateway_id, status) "
                               "VALUES ($1, 'Ana', $2, $3, 'ready') RETURNING id",
                               {kDefaultTenant, agent, gw});
    pg::connection runner = pg::connection::connect(db.gateway_dsn(gw));

    /// A command of `gateway` leased and started as the runner does; returns id and token.
    std::pair<std::string, std::string> running(const std::string& action,
                                                const std::string& payload,
                                                const std::string& gateway) {
        const std::string id = one(
            admin,
            "INSERT INTO agent_commands (tenant_id, gateway_id, agent_slug, action, payload, "
            "status) VALUES ($1, $2, $3, $4::command_action, $5::jsonb, 'pending') RETURNING id",
            {kDefaultTenant, gateway, agent, action, payload});
        const std::string token = one(admin,
                                      "SELECT lease_token::text FROM lease_and_start_command(180, "
                                      "$1::text, 'test-runner')",
                                      {gateway});
        return {id, token};
    }
    std::string set(pg::connection& as, const std::string& id, const std::string& token,
                    const std::string& slug, const std::string& state) {
        return one(as, "SELECT awp_command_agent_state($1, $2, $3, $4::jsonb)::text",
                   {id, token, slug, state});
    }
    std::string row() {
        return one(admin,
                   "SELECT status || '|' || coalesce(error, '-') || '|' || coalesce(model, '-') || "
                   "'|' || coalesce(thinking, '-') FROM agents WHERE id = $1",
                   {agent_id});
    }
};

}  // namespace

TEST_CASE("agent state: a provision of the gateway's own agent sets status, error and model",
          "[schema][runner]") {
    world w;
    auto [id, token] = w.running("provision", R"({"channel":"none"})", w.gw);
    CHECK(w.set(w.runner, id, token, w.agent, R"({"status":"provisioning","error":null})") ==
          "true");
    CHECK(w.row() == "provisioning|-|-|-");
    CHECK(w.set(w.runner, id, token, w.agent,
                R"({"status":"error","error":"exited with code 1: no key"})") == "true");
    CHECK(w.row() == "error|exited with code 1: no key|-|-");
    CHECK(w.set(w.runner, id, token, w.agent,
                R"({"status":"ready","error":null,"model":"openai/gpt-5"})") == "true");
    CHECK(w.row() == "ready|-|openai/gpt-5|-");
    // A provision sets no thinking, and only the statuses of a provision.
    CHECK(sqlstate_of([&] { w.set(w.runner, id, token, w.agent, R"({"thinking":"low"})"); }) ==
          "AW004");
    CHECK(sqlstate_of([&] { w.set(w.runner, id, token, w.agent, R"({"status":"paused"})"); }) ==
          "AW004");
    CHECK(sqlstate_of([&] { w.set(w.runner, id, token, w.agent, R"({"avatar_url":"x"})"); }) ==
          "AW004");
    // An agent the command does not name, or of no such slug: nothing written.
    CHECK(w.set(w.runner, id, token, "someone-else", R"({"status":"error"})") == "false");
    CHECK(w.row() == "ready|-|openai/gpt-5|-");
}

TEST_CASE("agent state: set_agent_model sets model and thinking, null clears them",
          "[schema][runner]") {
    world w;
    auto [id, token] = w.running("set_agent_model", R"({"thinking":"high"})", w.gw);
    CHECK(w.set(w.runner, id, token, w.agent, R"({"model":"a/b","thinking":"high"})") == "true");
    CHECK(w.row() == "ready|-|a/b|high");
    CHECK(w.set(w.runner, id, token, w.agent, R"({"model":null})") == "true");
    CHECK(w.row() == "ready|-|-|high");
    CHECK(sqlstate_of([&] { w.set(w.runner, id, token, w.agent, R"({"status":"ready"})"); }) ==
          "AW004");
    CHECK(sqlstate_of([&] { w.set(w.runner, id, token, w.agent, R"({"thinking":"max"})"); }) ==
          "AW004");
}

TEST_CASE(
    "agent state: refused without the lease, for another gateway's command or agent, for other "
    "actions, and to every user",
    "[schema][runner][security]") {
    world w;
    auto [id, token] = w.running("provision", "{}", w.gw);
    const std::string state = R"({"status":"error","error":"x"})";
    CHECK(sqlstate_of([&] {
              w.set(w.runner, id, "00000000-0000-0000-0000-000000000001", w.agent, state);
          }) == "AW002");
    // Another gateway's login does not see the command at all.
    auto stranger = pg::connection::connect(w.db.gateway_dsn(w.other_gw));
    CHECK(sqlstate_of([&] { w.set(stranger, id, token, w.agent, state); }) == "AW003");
    // A command of the other gateway naming this gateway's agent touches nothing.
    auto [oid, otoken] = w.running("provision", "{}", w.other_gw);
    CHECK(w.set(stranger, oid, otoken, w.agent, state) == "false");
    // Not an action that changes its agent.
    auto [lid, ltoken] = w.running("list_models", "{}", w.gw);
    CHECK(sqlstate_of([&] { w.set(w.runner, lid, ltoken, w.agent, state); }) == "AW004");
    // Once the command is finished the lease is gone.
    w.admin.exec("SELECT complete_command($1, 0, NULL, NULL, $2::uuid)", {id, token});
    CHECK(sqlstate_of([&] { w.set(w.runner, id, token, w.agent, state); }) == "AW001");
    CHECK(w.row() == "ready|-|-|-");
    // Users never call it (EXECUTE is the gateways' and the service role's).
    auto user = w.db.api();
    awp::test::as_user(user, kDefaultTenant, "00000000-0000-0000-0000-0000000000aa");
    CHECK(sqlstate_of([&] { w.set(user, id, token, w.agent, state); }) == "42501");
}

}  // namespace schema_agent_state_test
