// The inbox dispatcher's wake: message, argv, failure reasons and redaction, config checks.
#include <catch2/catch.hpp>

#include "awp/core/error.hpp"
#include "inbox-dispatcher/config.hpp"
#include "inbox-dispatcher/wake.hpp"

namespace dispatcher_wake_test {

using namespace awp::dispatcher;

namespace {
inbox_item sample() {
    inbox_item it;
    it.id = "11111111-2222-3333-4444-555555555555";
    it.agent_id = "aaaaaaaa-2222-3333-4444-555555555555";
    it.agent_slug = "ada";
    it.event_type = "task_assignment";
    it.title = "Write the report";
    it.summary = "Task assigned: Write the report";
    it.payload_json =
        R"({"task_title":"Write the report","task_priority":"high","model_override":"openai/gpt-x",)"
        R"("api_token":"tok-123456789","n":3})";
    it.task_id = "bbbbbbbb-2222-3333-4444-555555555555";
    it.attempts = 1;
    it.max_attempts = 3;
    it.model = "anthropic/claude";
    it.thinking = "low";
    return it;
}
}  // namespace

TEST_CASE("the wake argv is the runtime's agent command with the agent's slug, model and thinking",
          "[dispatcher]") {
    auto it = sample();
    const awp::runtime::cli rt("/opt/rt", "2026.6.1");
    const auto argv = build_argv(rt, it, "hello");
    REQUIRE(argv.size() == 10);
    CHECK(argv[0] == "/opt/rt");
    CHECK(argv[1] == "agent");
    CHECK(argv[2] == "--agent");
    CHECK(argv[3] == "ada");
    CHECK(argv[4] == "--message");
    CHECK(argv[5] == "hello");
    CHECK(argv[6] == "--model");
    CHECK(argv[7] == "openai/gpt-x");  // the item's override wins over the agent's model
    CHECK(argv[8] == "--thinking");
    CHECK(argv[9] == "low");

    it.payload_json = "{}";
    it.model.reset();
    it.thinking = "";
    const auto bare = build_argv(rt, it, "m");
    CHECK(bare.size() == 6);

    // The runtime's spelling: its agent id (lower case) and "off" for the spec's "none".
    it.agent_slug = "Ada.Lovelace";
    it.thinking = "none";
    const auto mapped = build_argv(rt, it, "m");
    REQUIRE(mapped.size() == 8);
    CHECK(mapped[3] == "ada-lovelace");
    CHECK(mapped[6] == "--thinking");
    CHECK(mapped[7] == "off");
    // A slug the runtime would take for its own default agent is never woken as it.
    it.agent_slug = "MAIN";
    CHECK_THROWS_WITH(build_argv(rt, it, "m"), Catch::Contains("reserves for its default agent"));
}

TEST_CASE("the message carries event, summary, item, task, context and blockers, no secrets",
          "[dispatcher]") {
    const auto it = sample();
    const auto m = build_message(it, {{"Get the data", "todo"}, {"Ask legal", "in_progress"}});
    CHECK(m.rfind("[inbox] Task assigned: Write the report", 0) == 0);
    CHECK(m.find("Event: task_assignment") != std::string::npos);
    CHECK(m.find("Item: " + it.id + " (attempt 1 of 3)") != std::string::npos);
    CHECK(m.find("Task: " + *it.task_id) != std::string::npos);
    CHECK(m.find("task_priority: high") != std::string::npos);
    CHECK(m.find("n: 3") != std::string::npos);
    CHECK(m.find("model_override") == std::string::npos);
    CHECK(m.find("tok-123456789") == std::string::npos);
    CHECK(m.find("2 unresolved blocker(s): \"Get the data\" (todo), \"Ask legal\" (in_progress)") !=
          std::string::npos);
    CHECK(wants_blockers(it));
    auto routine = it;
    routine.event_type = "routine_schedule";
    CHECK_FALSE(wants_blockers(routine));
    CHECK(build_message(routine, {}).find("blocker") == std::string::npos);
}

TEST_CASE("a huge payload gives a bounded message", "[dispatcher]") {
    auto it = sample();
    it.payload_json = "{";
    for (int i = 0; i < 200; ++i) {
        it.payload_json += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":\"" +
                           std::string(1000, 'x') + "\"";
    }
    it.payload_json += "}";
    CHECK(build_message(it, {}).size() <= kMaxMessage + 3);
}

TEST_CASE("failure reasons give exit code, signal or timeout and the redacted stderr tail",
          "[dispatcher]") {
    awp::core::process::process_result r;
    r.exit_code = 3;
    r.err =
        "boom: password=hunter22 Authorization: Bearer abc.def and sk-ABCDEFGHIJKLMN "
        "postgresql://awp:s3cretpw@db/awp dbpass-verysecret\n";
    const auto reason = failure_reason(r, std::chrono::seconds(5), {"dbpass-verysecret"});
    CHECK(reason.rfind("wake exited with code 3; stderr: boom:", 0) == 0);
    for (const char* s : {"hunter22", "abc.def", "ABCDEFGHIJKLMN", "s3cretpw", "verysecret"}) {
        INFO(s);
        CHECK(reason.find(s) == std::string::npos);
    }

    awp::core::process::process_result t;
    t.timed_out = true;
    t.term_signal = 15;
    CHECK(failure_reason(t, std::chrono::milliseconds(1500), {}) ==
          "wake timed out after 1.5 s; process group killed");

    awp::core::process::process_result k;
    k.term_signal = 9;
    CHECK(failure_reason(k, std::chrono::seconds(1), {}).find("signal 9 (SIGKILL)") !=
          std::string::npos);

    awp::core::process::process_result big;
    big.exit_code = 1;
    big.err = std::string(100000, 'e') + "THE END";
    const auto b = failure_reason(big, std::chrono::seconds(1), {});
    CHECK(b.size() <= kMaxReason);
    CHECK(b.find("THE END") != std::string::npos);  // the tail, not the head
}

TEST_CASE("dispatcher config: the lease must outlast the wake, a gateway is required",
          "[dispatcher]") {
    config c;
    CHECK_THROWS_AS(c.validate(), awp::core::config_error);
    c.gateway = "default";
    CHECK_NOTHROW(c.validate());
    CHECK(c.effective_lease_seconds() == 365);
    c.lease_seconds = 60;
    CHECK_THROWS_AS(c.validate(), awp::core::config_error);
    c.wake_timeout_s = 10;
    CHECK_NOTHROW(c.validate());
}

}  // namespace dispatcher_wake_test
