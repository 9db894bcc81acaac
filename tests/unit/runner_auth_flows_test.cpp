// Unit tests of the runner's auth flows (auth_flows.hpp) with the fake runtime's login and no
// database: auth_start hands the command over to a background flow, auth_paste feeds it, and
// the flow writes its own end, the pasted value never in it.
#include <catch2/catch.hpp>
#include <string>

#include "actions.hpp"
#include "auth_flows.hpp"
#include "runner_test_util.hpp"

namespace runner_auth_flows_test {

using namespace awp::runner;
using namespace awp::runner_test;
using kind = command_outcome::kind;

namespace {

struct flows_fixture {
    fake_runtime_box box;
    runner_config cfg = box.config();
    net::io_context ioc;
    awp::core::pg::session db{"postgresql:///never-used", "test"};
    recording_io io;
    known_secrets secrets;
    awp::core::event ended{ioc.get_executor()};
    auth_flows flows{ioc, cfg, "gw-test", io, secrets, ended};
};

}  // namespace

TEST_CASE("runner auth flows: a paste-back login is handed off, fed and ends done on its own",
          "[runner]") {
    flows_fixture f;
    f.box.set("echo_secret");
    const auto start = command("auth_start", R"({"provider":"openai","profile_name":"work"})");
    const auto o = run_to_end(f.ioc, f.flows.start(f.db, start, plan_command(start, f.cfg)));
    CHECK(o.k == kind::handed_off);
    CHECK(f.flows.size() == 1);
    REQUIRE_FALSE(f.io.patches.empty());
    CHECK_THAT(f.io.patches.front(), Catch::Contains("\"stage\":\"starting\""));
    REQUIRE(run_until(f.ioc, [&] {
        return f.io.patches.size() >= 2 &&
               f.io.patches.back().find("url_ready") != std::string::npos;
    }));
    CHECK_THAT(f.io.patches.back(), Catch::Contains("https://auth.example.test/oauth/authorize"));

    const std::string value = "http://localhost:1455/callback?code=UNIT-CODE-42&state=xyz";
    const auto paste = command(
        "auth_paste", R"({"parent_command_id":")" + start.id + R"(","value":")" + value + R"("})");
    const auto p = run_to_end(f.ioc, f.flows.paste(paste, plan_command(paste, f.cfg)));
    CHECK(p.k == kind::done);
    CHECK(p.out == "Pasted to the auth flow of command " + start.id + ".");
    CHECK_THAT(settled(paste, p).patch(), Catch::Contains("\"value_scrubbed\":true"));

    REQUIRE(run_until(f.ioc, [&] { return !f.io.written.empty(); }));
    CHECK(f.io.written.size() == 1);
    const auto& [id, end] = f.io.written.front();
    CHECK(id == start.id);
    CHECK(end.k == kind::done);
    CHECK_THAT(end.patch, Catch::Contains("\"stage\":\"completed\"") &&
                              Catch::Contains("\"profileId\":\"openai:work\""));
    // The pasted value goes with the flow's outcome, redacted when it is settled.
    CHECK_THAT(settled(start, end).out(),
               Catch::Contains("Logged in.") && !Catch::Contains("UNIT-CODE"));
    CHECK(f.flows.empty());
    CHECK(f.ended.is_set());
}

TEST_CASE("runner auth flows: a paste without its flow fails, naming the command", "[runner]") {
    flows_fixture f;
    const std::string parent = new_id();
    const auto paste = command(
        "auth_paste", R"({"parent_command_id":")" + parent + R"(","value":"some-code-value"})");
    const auto p = run_to_end(f.ioc, f.flows.paste(paste, plan_command(paste, f.cfg)));
    CHECK(p.k == kind::failed);
    CHECK_THAT(p.error, Catch::Contains("no auth flow in progress for command " + parent));
    CHECK_THAT(settled(paste, p).patch(), Catch::Contains("\"value_scrubbed\":true"));
}

TEST_CASE("runner auth flows: a runner that stops ends the login, which fails saying so",
          "[runner]") {
    flows_fixture f;
    const auto start = command("auth_start", R"({"provider":"openai","profile_name":"work"})");
    const auto o = run_to_end(f.ioc, f.flows.start(f.db, start, plan_command(start, f.cfg)));
    REQUIRE(o.k == kind::handed_off);
    REQUIRE(run_until(f.ioc, [&] { return f.io.patches.size() >= 2; }));
    f.flows.stop_all();
    REQUIRE(run_until(f.ioc, [&] { return !f.io.written.empty(); }));
    const auto& end = f.io.written.front().second;
    CHECK(end.k == kind::failed);
    CHECK(end.error == "the runner stopped during the auth flow; start it again");
    CHECK_THAT(end.patch, Catch::Contains("\"stage\":\"failed\""));
}

}  // namespace runner_auth_flows_test
