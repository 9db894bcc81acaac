// Unit tests of the runner's one exit (outcome.hpp, agent_state.hpp): whatever an action
// reports, what its row stores is scrubbed, redacted, cut and valid, and the agents row it
// changes is derived from the command and its settled outcome.
#include <catch2/catch.hpp>
#include <string>

#include "agent_state.hpp"
#include "runner_test_util.hpp"

namespace runner_outcome_test {

using namespace awp::runner;
using namespace awp::runner_test;
using kind = command_outcome::kind;

TEST_CASE("runner outcome: every settled outcome scrubs the payload, whatever the action reported",
          "[runner]") {
    const auto key =
        command("auth_set_api_key", R"({"provider":"openai","api_key":"sk-one-1234"})");
    // An action that forgot everything: raw outputs with the key in them, no patch of its own.
    auto raw =
        command_outcome::failure("boom sk-one-1234", 1, "out sk-one-1234", "err sk-one-1234");
    const auto f = settled(key, raw);
    CHECK(f.k() == kind::failed);
    CHECK_THAT(f.out() + f.err() + f.error(), !Catch::Contains("sk-one-1234"));
    CHECK_THAT(f.patch(), Catch::Contains("\"api_key\":null") &&
                              Catch::Contains("\"api_key_scrubbed\":true") &&
                              Catch::Contains("\"base_url_applied\":false"));
    // The action's own patch is kept beside the scrub.
    raw = command_outcome::success("ok", "", R"({"connection_state":{"stage":"completed"}})");
    const auto s = settled(key, raw);
    CHECK(s.done());
    CHECK(s.exit_code() == std::optional<int>(0));
    CHECK_THAT(s.patch(), Catch::Contains("\"connection_state\"") &&
                              Catch::Contains("\"api_key_scrubbed\":true"));
    // Synced secrets and the action's own values are redacted too; outputs cut to their limit.
    auto extra = command_outcome::success(std::string(5000, 'x') + " synced-value-77 pasted-99");
    extra.secrets = {"pasted-99"};
    extra.out_limit = 100;
    const auto e = settled(command("list_models"), extra, {"synced-value-77"});
    CHECK_THAT(e.out(), Catch::StartsWith("[... ") && Catch::EndsWith("[redacted] [redacted]"));
    // Nothing to write: nothing settled.
    CHECK(settled(key, command_outcome::of(kind::handed_off)).writes_nothing());
    CHECK(settled(key, command_outcome::of(kind::abandoned)).patch().empty());
}

TEST_CASE("runner outcome: merged patches keep both sides, the second winning", "[runner]") {
    CHECK(merge_patches("", R"({"a":1})") == R"({"a":1})");
    CHECK(merge_patches(R"({"a":1})", "") == R"({"a":1})");
    CHECK(merge_patches(R"({"a":1,"b":2})", R"({"b":3,"c":null})") == R"({"a":1,"b":3,"c":null})");
}

TEST_CASE("runner agent state: provision sets ready or error, set_agent_model its values",
          "[runner]") {
    const auto prov = command("provision", R"({"model":"openai/gpt-5","channel":"none"})", "ana");
    const auto ready = agent_state_of(prov, settled(prov, command_outcome::success()));
    REQUIRE(ready);
    CHECK(ready->agent_slug == "ana");
    CHECK(ready->json == R"({"status":"ready","error":null,"model":"openai/gpt-5"})");
    const auto broken =
        agent_state_of(prov, settled(prov, command_outcome::failure("exited with code 1: no")));
    REQUIRE(broken);
    CHECK(broken->json == R"({"status":"error","error":"exited with code 1: no"})");
    CHECK(provisioning_state() == R"({"status":"provisioning","error":null})");

    const auto model =
        command("set_agent_model", R"({"agent_slug":"bob","model":"","thinking":"high"})", "x");
    const auto m = agent_state_of(model, settled(model, command_outcome::success()));
    REQUIRE(m);
    CHECK(m->agent_slug == "bob");  // the payload's agent
    CHECK(m->json == R"({"model":null,"thinking":"high"})");
    // A failed set_agent_model changed nothing; other actions never touch the row.
    CHECK_FALSE(agent_state_of(model, settled(model, command_outcome::failure("x"))));
    const auto other = command("list_models");
    CHECK_FALSE(agent_state_of(other, settled(other, command_outcome::success())));
}

}  // namespace runner_outcome_test
