// Unit tests of the runner's executor (executor.hpp) with the fake runtime CLI and no database:
// it runs a leased command's action and returns the outcome raw, which the service's one exit
// settles (outcome.hpp); it never writes a final transition itself.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "actions.hpp"
#include "executor.hpp"
#include "housekeeping.hpp"
#include "runner_test_util.hpp"

namespace runner_executor_test {

using namespace awp::runner;
using namespace awp::runner_test;
using kind = command_outcome::kind;

namespace {

struct executor_fixture {
    fake_runtime_box box;
    runner_config cfg = box.config();
    net::io_context ioc;
    awp::core::pg::session db{"postgresql:///never-used", "test"};  // no action here queries
    recording_io io;
    housekeeping hk{ioc.get_executor(), cfg, [] { return std::size_t{0}; }};
    executor ex{cfg, "gw-test", db, io, hk};

    /// The action run, and settled as the service's one exit does.
    final_outcome run(const command_row& c) {
        plan p = plan_command(c, cfg);
        if (p.kind == plan_kind::upload_file || p.kind == plan_kind::auth_remove)
            return settled(c, run_to_end(ioc, ex.run_local(c, std::move(p))));
        return settled(c, run_to_end(ioc, ex.run_steps(c, std::move(p))));
    }
};

}  // namespace

TEST_CASE("runner executor: a runtime call that works comes back done with its output",
          "[runner]") {
    executor_fixture f;
    f.box.set("stdout", R"({"models":[{"id":"gpt-x"}]})");
    const auto o = f.run(command("list_models", R"({"provider":"openai"})"));
    CHECK(o.k() == kind::done);
    CHECK(o.exit_code().value_or(0) == 0);
    CHECK_THAT(o.out(), Catch::Contains("gpt-x"));
    CHECK(o.error().empty());
    REQUIRE(f.io.holds.size() == 1);  // asked for its lease before running
    CHECK(f.io.written.empty());      // the service writes the outcome, not the executor
}

TEST_CASE(
    "runner executor: a failing call comes back failed, its secrets redacted, payload "
    "scrubbed",
    "[runner]") {
    executor_fixture f;
    f.box.set("echo_secret");
    f.box.set("exit", "3");
    const std::string key = "sk-unit-secret-98765";
    const auto o =
        f.run(command("auth_set_api_key", R"({"provider":"openai","api_key":")" + key + R"("})"));
    CHECK(o.k() == kind::failed);
    REQUIRE(o.exit_code());
    CHECK(*o.exit_code() == 3);
    CHECK_THAT(o.error(), Catch::StartsWith("exited with code 3"));
    CHECK_THAT(o.out(), Catch::Contains("got key [redacted]"));
    CHECK_THAT(o.out() + o.err() + o.error(), !Catch::Contains(key));
    CHECK_THAT(o.patch(),
               Catch::Contains("\"api_key\":null") && Catch::Contains("\"api_key_scrubbed\":true"));
}

TEST_CASE("runner executor: a lost lease runs nothing and leaves nothing to write", "[runner]") {
    executor_fixture f;
    f.io.keep_lease = false;
    const auto o = f.run(command("list_models", R"({"provider":"openai"})"));
    CHECK(o.k() == kind::lease_lost);
    CHECK_FALSE(std::filesystem::exists(f.box.fake("calls")));
}

TEST_CASE("runner executor: upload_file writes into the agent's workspace or says why not",
          "[runner]") {
    executor_fixture f;
    const auto missing =
        f.run(command("upload_file", R"({"path":"notes/a.txt","content":"hello"})", "ana"));
    CHECK(missing.k() == kind::failed);
    CHECK_FALSE(missing.error().empty());
    std::filesystem::create_directories(f.cfg.workspace("ana"));
    const auto o =
        f.run(command("upload_file", R"({"path":"notes/a.txt","content":"hello"})", "ana"));
    CHECK(o.k() == kind::done);
    std::ifstream in(f.cfg.workspace("ana") + "/notes/a.txt");
    std::string text;
    std::getline(in, text);
    CHECK(text == "hello");
}

}  // namespace runner_executor_test
