// awp-scheduler as real processes: two schedulers share the ticks (each tick run by one), every
// due routine fires exactly once, a routine due during downtime fires once on restart, and
// each tick logs its counts (routine items, overdue tasks, reaped leases).
#include <signal.h>

#include <catch2/catch.hpp>

#include <regex>
#include <set>
#include <thread>

#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/private_cluster.hpp"
#include "support/test_db.hpp"

namespace scheduler_test {

namespace pg = awp::core::pg;
using awp::test::child;
using namespace std::chrono_literals;

namespace {

const std::string kScheduler = std::string(AWP_BIN_DIR) + "/awp-scheduler";
constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    REQUIRE(r.size() == 1);
    return r.is_null(0, 0) ? std::string("<null>") : std::string(r.text(0, 0));
}
long count(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    return std::stol(one(c, sql, p));
}

std::set<long long> ticks_run(const std::string& log) {
    std::set<long long> out;
    static const std::regex kTick(R"re("msg":"tick","tick":(\d+))re");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), kTick);
         it != std::sregex_iterator(); ++it) {
        out.insert(std::stoll((*it)[1]));
    }
    return out;
}

std::unique_ptr<child> scheduler(const awp::test::scoped_database& db, const std::string& tick,
                                 const std::string& instance) {
    auto s = std::make_unique<child>(
        std::vector<std::string>{kScheduler},
        std::map<std::string, std::string>{{"DATABASE_URL", db.daemon_dsn()},
                                           {"TICK_INTERVAL", tick},
                                           {"HEARTBEAT_INTERVAL", "0.5"},
                                           {"AWP_INSTANCE", instance}});
    REQUIRE(s->wait_for_log("\"msg\":\"ready\"", 10s));
    return s;
}

std::string agent(pg::connection& admin, const std::string& slug) {
    return one(admin, "INSERT INTO agents (tenant_id, name, slug) VALUES ($1, $2, $2) RETURNING id",
               {kTenant, slug});
}

}  // namespace

TEST_CASE("two schedulers over ten ticks: each tick runs once, each due routine fires once",
          "[scheduler][e2e]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto a = agent(admin, "sched-agent");
    // Ten routines coming due one second apart during the run (a 1 s tick stands for a
    // minute): every 10 minutes, so none is due twice while the test runs.
    admin.exec(
        "INSERT INTO routines (tenant_id, agent_id, name, trigger_type, cadence_type, interval_n) "
        "SELECT $1, $2, 'r' || n, 'schedule', 'every_n_minutes', 10 FROM generate_series(0, 9) n",
        {kTenant, a});
    admin.exec(
        "UPDATE routines SET next_run_at = date_trunc('second', now()) + make_interval(secs => "
        "substr(name, 2)::int + 1)");

    auto s1 = scheduler(db, "1", "s1");
    auto s2 = scheduler(db, "1", "s2");
    std::this_thread::sleep_for(12500ms);
    s1->signal(SIGTERM);
    s2->signal(SIGTERM);
    CHECK(s1->wait(5s) == std::optional<int>(0));
    CHECK(s2->wait(5s) == std::optional<int>(0));

    CHECK(count(admin,
                "SELECT count(*) FROM agent_inbox_items WHERE event_type = 'routine_schedule'") ==
          10);
    CHECK(count(admin, "SELECT count(DISTINCT routine_id) FROM agent_inbox_items") == 10);
    CHECK(count(admin, "SELECT count(*) FROM routines WHERE run_count = 1") == 10);
    const auto t1 = ticks_run(s1->log());
    const auto t2 = ticks_run(s2->log());
    std::set<long long> both;
    for (auto t : t1) both.insert(t);
    for (auto t : t2) CHECK(both.count(t) == 0);  // no tick ran twice
    for (auto t : t2) both.insert(t);
    CHECK(both.size() >= 11);
    CHECK(*both.rbegin() - *both.begin() + 1 == static_cast<long long>(both.size()));  // no gaps
    CHECK((s1->log() + s2->log()).find("tick skipped: another scheduler has it") !=
          std::string::npos);
    CHECK(count(admin, "SELECT count(*) FROM daemon_heartbeats WHERE daemon = 'scheduler'") == 2);
}

TEST_CASE("a routine due during downtime fires once when the scheduler starts, not per missed slot",
          "[scheduler][e2e]") {
    awp::test::scoped_database db;
    auto admin = db.admin();
    const auto a = agent(admin, "late-agent");
    const auto r =
        one(admin,
            "INSERT INTO routines (tenant_id, agent_id, name, trigger_type, cadence_type, "
            "interval_n) VALUES ($1, $2, 'every five', 'schedule', 'every_n_minutes', 5) "
            "RETURNING id",
            {kTenant, a});
    // Down for 17 minutes: four slots missed.
    admin.exec("UPDATE routines SET next_run_at = now() - interval '17 minutes' WHERE id = $1",
               {r});
    // Also an overdue task and an expired inbox lease for the tick's other counts.
    admin.exec(
        "INSERT INTO tasks (tenant_id, title, due_at) VALUES ($1, 'late task', now() - interval '1 "
        "hour')",
        {kTenant});
    const auto item =
        one(admin, "SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'lease-x', 't', 's')",
            {kTenant, a});
    admin.exec(
        "UPDATE agent_inbox_items SET status = 'leased', attempts = 1, lease_expires_at = now() - "
        "interval '1 minute' WHERE id = $1",
        {item});

    // And a recurring task (sql/0037) whose occurrence came due meanwhile.
    const auto series = one(admin,
                            "INSERT INTO task_series (tenant_id, title, cadence_type, timezone, "
                            "assignee_agent_id) VALUES ($1, 'standup', 'daily', 'UTC', $2) "
                            "RETURNING id",
                            {kTenant, a});
    // (Within today, UTC: the task it spawns is due today, so the same tick's escalation leaves
    // it open.)
    admin.exec(
        "UPDATE task_series SET next_occurrence_at = greatest(date_trunc('day', now() AT TIME "
        "ZONE 'UTC') AT TIME ZONE 'UTC', now() - interval '17 minutes') WHERE id = $1",
        {series});

    auto s = scheduler(db, "60", "s1");
    REQUIRE(s->wait_for_log("\"msg\":\"tick\"", 10s));
    const auto log = s->log();
    CHECK(log.find("\"catch_up\":true,\"routine_items\":1,\"overdue_missed\":1,"
                   "\"task_instances\":1") != std::string::npos);
    CHECK(count(admin, "SELECT count(*) FROM tasks WHERE series_id = $1 AND status = 'todo'",
                {series}) == 1);
    CHECK(log.find("\"inbox_retried\":1") != std::string::npos);
    CHECK(count(admin, "SELECT count(*) FROM agent_inbox_items WHERE routine_id = $1", {r}) == 1);
    CHECK(one(admin, "SELECT next_run_at > now() FROM routines WHERE id = $1", {r}) == "t");
    CHECK(one(admin, "SELECT status::text FROM agent_inbox_items WHERE id = $1", {item}) ==
          "failed");
    s->signal(SIGTERM);
    CHECK(s->wait(5s) == std::optional<int>(0));

    // A restart within the same minute finds nothing more to fire.
    auto again = scheduler(db, "60", "s1");
    REQUIRE(again->wait_for_log("\"msg\":\"tick", 10s));
    CHECK(count(admin, "SELECT count(*) FROM agent_inbox_items WHERE routine_id = $1", {r}) == 1);
    again->signal(SIGTERM);
    const auto code = again->wait(5s);
    INFO("the restarted scheduler's log:\n" << again->log());
    CHECK(code == std::optional<int>(0));
}

TEST_CASE("a scheduler started before its database waits for it, then ticks",
          "[scheduler][e2e][restart]") {
    awp::test::private_cluster pgc(true);
    pgc.stop();
    child s({kScheduler}, {{"DATABASE_URL", pgc.dsn()}, {"TICK_INTERVAL", "1"}});
    CHECK(s.wait_for_log("database unavailable, retrying", 10s));
    CHECK(s.running());
    pgc.start();
    CHECK(s.wait_for_log("\"msg\":\"tick\"", 15s));
    // And through a restart of Postgres it goes on ticking.
    pgc.restart();
    const auto before = ticks_run(s.log()).size();
    CHECK(s.wait_for_log("tick failed", 10s));
    std::this_thread::sleep_for(4s);
    CHECK(ticks_run(s.log()).size() > before);
    s.signal(SIGTERM);
    CHECK(s.wait(10s) == std::optional<int>(0));
}

TEST_CASE("bad scheduler configuration exits 78", "[scheduler][e2e]") {
    child s({kScheduler}, {{"TICK_INTERVAL", "0"}});
    CHECK(s.wait(5s) == std::optional<int>(78));
}

}  // namespace scheduler_test
