// End to end: every producer of inbox items (task assignment and reassignment, comment mention,
// blocker resolved, deliverable review, event routine, schedule routine, overdue escalation)
// reaches the agent through awp-scheduler and awp-inbox-dispatcher running as processes.
#include <signal.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/test_db.hpp"

namespace dispatcher_producers_test {

namespace pg = awp::core::pg;
namespace fs = std::filesystem;
using awp::test::child;
using namespace std::chrono_literals;

namespace {

constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    REQUIRE(r.size() == 1);
    return r.is_null(0, 0) ? std::string("<null>") : std::string(r.text(0, 0));
}
long count(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    return std::stol(one(c, sql, p));
}

// Every message the fake runtime was woken with, per agent slug.
std::multimap<std::string, std::string> messages(const fs::path& dir) {
    std::multimap<std::string, std::string> out;
    for (const auto& f : fs::directory_iterator(dir)) {
        if (f.path().extension() != ".argv") continue;  // .environ, .status beside it
        std::ifstream in(f.path(), std::ios::binary);
        std::vector<std::string> argv;
        std::string a;
        while (std::getline(in, a, '\0')) argv.push_back(a);
        if (argv.size() >= 6) out.emplace(argv[3], argv[5]);
    }
    return out;
}

}  // namespace

TEST_CASE("every producer trigger and event routine reaches the agent end to end",
          "[dispatcher][scheduler][e2e]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto gw = one(admin,
                        "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ($1, 'gw-p', "
                        "'p', 'ready') RETURNING id",
                        {kTenant});
    const auto boss = one(admin,
                          "INSERT INTO agents (tenant_id, name, slug, gateway_id) VALUES ($1, "
                          "'Boss', 'boss', $2) RETURNING id",
                          {kTenant, gw});
    const auto p1 = one(admin,
                        "INSERT INTO agents (tenant_id, name, slug, gateway_id, reports_to_id) "
                        "VALUES ($1, 'P1', 'p1', $2, $3) RETURNING id",
                        {kTenant, gw, boss});
    const auto p2 = one(admin,
                        "INSERT INTO agents (tenant_id, name, slug, gateway_id) VALUES ($1, 'P2', "
                        "'p2', $2) RETURNING id",
                        {kTenant, gw});

    const fs::path dir = fs::temp_directory_path() / awp::test::random_name("awp-prod-");
    fs::create_directories(dir);
    child dispatcher(
        {std::string(AWP_BIN_DIR) + "/awp-inbox-dispatcher"},
        {{"DATABASE_URL", db.gateway_dsn("gw-p")},
         {"GATEWAY_ID", "gw-p"},
         {"AGENT_RUNTIME", std::string(AWP_SOURCE_DIR) + "/tests/fakes/fake-agent-wake"},
         {"FAKE_WAKE_ARGV_DIR", dir.string()},
         {"AWP_CHILD_ENV_ALLOW", "FAKE_*"},
         {"MAX_CONCURRENT", "3"},
         {"SAFETY_POLL", "1"}});
    REQUIRE(dispatcher.wait_for_log("\"msg\":\"ready\"", 10s));

    // An event routine of p2: fires when a task is created.
    admin.exec(
        "INSERT INTO routines (tenant_id, agent_id, name, instruction, trigger_type, entity_type, "
        "condition) "
        "VALUES ($1, $2, 'triage new tasks', 'Triage it', 'event', 'task', 'created')",
        {kTenant, p2});
    // task_assignment (+ routine_event for the new task)
    const auto t1 = one(admin,
                        "INSERT INTO tasks (tenant_id, title, assignee_agent_id) VALUES ($1, "
                        "'First task', $2) RETURNING id",
                        {kTenant, p1});
    // task_reassignment
    admin.exec("UPDATE tasks SET assignee_agent_id = $1 WHERE id = $2", {p2, t1});
    // task_comment_mention
    admin.exec(
        "INSERT INTO task_comments (tenant_id, task_id, body) VALUES ($1, $2, 'hey @p1, look')",
        {kTenant, t1});
    // blocker_resolved: t3 (p1) is blocked by t2; t2 is done
    const auto t2 =
        one(admin, "INSERT INTO tasks (tenant_id, title) VALUES ($1, 'Blocker') RETURNING id",
            {kTenant});
    const auto t3 =
        one(admin, "INSERT INTO tasks (tenant_id, title) VALUES ($1, 'Blocked') RETURNING id",
            {kTenant});
    admin.exec(
        "INSERT INTO task_relations (tenant_id, source_task_id, target_task_id, relation_type) "
        "VALUES ($1, $2, $3, 'blocked_by')",
        {kTenant, t3, t2});
    admin.exec("UPDATE tasks SET assignee_agent_id = $1 WHERE id = $2", {p1, t3});
    admin.exec("UPDATE tasks SET status = 'done' WHERE id = $1", {t2});
    // deliverable_review: sent for review (reviewer p2), then revision requested (submitter p1)
    const auto wp = one(admin,
                        "INSERT INTO work_products (tenant_id, task_id, title, "
                        "submitted_by_agent_id, reviewer_agent_id, status) "
                        "VALUES ($1, $2, 'Draft', $3, $4, 'in_review') RETURNING id",
                        {kTenant, t3, p1, p2});
    admin.exec(
        "UPDATE work_products SET status = 'revision_requested', review_note = 'more' WHERE id = "
        "$1",
        {wp});
    // routine_schedule: a schedule routine of p1 already due; overdue: a task of p1 past due
    admin.exec(
        "INSERT INTO routines (tenant_id, agent_id, name, instruction, trigger_type, cadence_type, "
        "interval_n) "
        "VALUES ($1, $2, 'standup', 'Post the standup', 'schedule', 'every_n_minutes', 60)",
        {kTenant, p1});
    admin.exec(
        "UPDATE routines SET next_run_at = now() - interval '1 minute' WHERE name = 'standup'");
    admin.exec(
        "INSERT INTO tasks (tenant_id, title, assignee_agent_id, due_at) VALUES ($1, 'Late one', "
        "$2, now() + interval '2 seconds')",
        {kTenant, p1});

    std::this_thread::sleep_for(2500ms);  // the late task is now overdue
    child scheduler({std::string(AWP_BIN_DIR) + "/awp-scheduler"},
                    {{"DATABASE_URL", db.daemon_dsn()}, {"TICK_INTERVAL", "60"}});
    REQUIRE(scheduler.wait_for_log("\"msg\":\"tick\"", 10s));

    const std::set<std::string> expected{
        "task_assignment",    "task_reassignment", "task_comment_mention", "blocker_resolved",
        "deliverable_review", "routine_event",     "routine_schedule"};
    const bool all_done = [&] {
        const auto end = std::chrono::steady_clock::now() + 30s;
        while (std::chrono::steady_clock::now() < end) {
            if (count(admin, "SELECT count(*) FROM agent_inbox_items WHERE status <> 'done'") ==
                    0 &&
                count(admin, "SELECT count(DISTINCT event_type) FROM agent_inbox_items") >= 7) {
                return true;
            }
            std::this_thread::sleep_for(200ms);
        }
        return false;
    }();
    CHECK(all_done);
    auto r = admin.exec("SELECT DISTINCT event_type::text FROM agent_inbox_items");
    std::set<std::string> seen;
    for (int i = 0; i < r.size(); ++i) seen.insert(std::string(r.text(i, 0)));
    for (const auto& e : expected) {
        INFO(e);
        CHECK(seen.count(e) == 1);
    }
    // Each item reached its agent as a message naming its event.
    const auto msgs = messages(dir);
    CHECK(static_cast<long>(msgs.size()) == count(admin, "SELECT count(*) FROM agent_inbox_items"));
    auto woke = [&](const std::string& slug, const std::string& needle) {
        auto range = msgs.equal_range(slug);
        for (auto it = range.first; it != range.second; ++it) {
            if (it->second.find(needle) != std::string::npos) return true;
        }
        return false;
    };
    CHECK(woke("p1", "Event: task_assignment"));
    CHECK(woke("p2", "Event: task_reassignment"));
    CHECK(woke("p1", "Event: task_comment_mention"));
    CHECK(woke("p1", "Event: blocker_resolved"));
    CHECK(woke("p2", "Deliverable sent for review: Draft"));
    CHECK(woke("p1", "Revision requested on deliverable: Draft"));
    CHECK(woke("p2", "Event: routine_event"));
    CHECK(woke("p1", "Event: routine_schedule"));
    CHECK(woke("p1", "OVERDUE: task missed its deadline: Late one"));
    CHECK(woke("boss", "ESCALATION"));

    dispatcher.signal(SIGTERM);
    scheduler.signal(SIGTERM);
    CHECK(dispatcher.wait(10s) == std::optional<int>(0));
    CHECK(scheduler.wait(10s) == std::optional<int>(0));
    std::error_code ec;
    fs::remove_all(dir, ec);
}

}  // namespace dispatcher_producers_test
