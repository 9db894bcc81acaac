// Fault drills (issue #9, point 6): the five daemons as real processes under a steady load of
// commands, inbox items and knowledge items; one fault per test case; then the accounting: no
// work lost, nothing run twice, and how long recovery took. Each drill prints one line
//   drill <name>: lost=0 duplicates=0 recovery_ms=<n> (interrupted=<n>) ...
// Run them with `ctest -R drill` (label e2e; Catch2 tag [drill]). docs/operations.md, "Fault
// drills", says what each one does and what it measured.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "awp/core/crypto.hpp"
#include "support/drill_load.hpp"

namespace drills_test {

namespace fs = std::filesystem;
namespace pg = awp::core::pg;
namespace drill = awp::test::drill;
using namespace std::chrono_literals;
using awp::test::drill::epoch_now;
using awp::test::drill::name_of;
using awp::test::drill::options;
using awp::test::drill::report;
using awp::test::drill::stack;

namespace {

constexpr drill::daemon kWorkers[] = {drill::daemon::runner, drill::daemon::dispatcher,
                                      drill::daemon::embedder, drill::daemon::scheduler};

std::string one(pg::connection& c, const std::string& sql, const pg::params& p = {}) {
    auto r = c.exec(sql, p);
    if (r.empty() || r.is_null(0, 0)) return {};
    return std::string(r.text(0, 0));
}

long ms_between(double from, double to) { return std::lround((to - from) * 1000.0); }

/// Every kind of work flows before the fault: a command done, an inbox item done, a knowledge
/// item indexed, a tick.
void warm_up(stack& s) {
    const double t0 = epoch_now() - 3600;
    const auto until = std::chrono::steady_clock::now() + 30s;
    bool flowing = false;
    while (!flowing && std::chrono::steady_clock::now() < until) {
        flowing = true;
        // Two of each; one tick (the start-up tick: a drill may run the 60 s tick).
        for (drill::daemon d : kWorkers) {
            const long need = d == drill::daemon::scheduler ? 1 : 2;
            flowing = flowing && s.work_between(d, t0, epoch_now()) >= need;
        }
        if (!flowing) std::this_thread::sleep_for(100ms);
    }
    INFO("runner:\n"
         << s.logs(drill::daemon::runner) << "\ndispatcher:\n"
         << s.logs(drill::daemon::dispatcher));
    REQUIRE(flowing);
}

/// Polls `d` until it finished a unit of work after `since`; the time from `since` in ms, -1
/// when it did not within `limit`.
long recovery_of(stack& s, drill::daemon d, double since, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
        std::optional<double> t;
        try {
            t = s.first_work_after(d, since);
        } catch (const pg::connection_error&) {
        }
        if (t) return ms_between(since, *t);
        if (std::chrono::steady_clock::now() >= until) return -1;
        std::this_thread::sleep_for(20ms);
    }
}

void print_and_check(const report& r) {
    std::cout << r.line() << std::endl;
    std::string problems;
    for (const auto& p : r.problems) problems += p + "\n";
    INFO(problems);
    CHECK(r.lost == 0);
    CHECK(r.duplicates == 0);
    CHECK(r.commands > 0);
    CHECK(r.inbox > 0);
    CHECK(r.knowledge > 0);
    // /api/health answered throughout (while the gateway was not the one restarted).
    CHECK(r.health_failures == 0);
}

/// A process alive and not a zombie.
bool alive(long pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) return false;
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

/// Restart one daemon alone, as systemd does (SIGTERM) or after a crash (SIGKILL), with a
/// second of downtime (RestartSec), while the load goes on.
void restart_drill(drill::daemon d, int sig) {
    const std::string name = name_of(d) + (sig == SIGTERM ? "-sigterm" : "-kill9");
    stack s;
    s.start_all();
    s.start_load();
    warm_up(s);
    // Signal it with work in hand, so that the drain (SIGTERM) or the recovery of interrupted
    // work (SIGKILL) is what gets tested.
    const bool in_flight = s.wait_in_flight(d, 5s);
    if (d == drill::daemon::api_gateway) s.expect_gateway_up(false);
    const double t_fault = epoch_now();
    const auto code = s.stop(d, sig, 30s);
    REQUIRE(code.has_value());
    INFO(s.logs(d));
    CHECK(*code == (sig == SIGTERM ? 0 : 128 + SIGKILL));
    std::this_thread::sleep_for(1500ms);
    const double t_spawn = epoch_now();
    // The others kept working while it was down.
    for (drill::daemon other : kWorkers) {
        if (other == d) continue;
        INFO("awp-" << name_of(other) << " did no work while awp-" << name_of(d) << " was down");
        CHECK(s.work_between(other, t_fault, t_spawn) > 0);
    }
    s.start(d);
    long recovery = 0;
    if (d == drill::daemon::api_gateway) {
        recovery = ms_between(t_spawn, epoch_now());  // start() waited for /api/health
        s.expect_gateway_up(true);
        CHECK(s.api_get("/api/agents/" + s.agent_slug() + "/skills", true) == 200);
    } else {
        recovery = recovery_of(s, d, t_spawn, 15s);
        CHECK(recovery >= 0);
    }
    std::this_thread::sleep_for(2s);  // load after the restart
    // A dispatcher killed mid-wake: the item's lease (8 s) expires, then its 30 s back-off.
    report r = s.settle(name, 75s);
    r.recovery_ms = recovery;
    // in_flight: the signal found work in hand (the gateway and the scheduler hold none).
    const bool holds_work = d != drill::daemon::api_gateway && d != drill::daemon::scheduler;
    r.extra = "exit=" + std::to_string(*code) +
              " in_flight=" + (holds_work ? (in_flight ? "1" : "0") : "-");
    print_and_check(r);
    if (sig == SIGTERM) {
        CHECK(r.interrupted == 0);  // the drain finished what was in hand
        CHECK(r.redelivered == 0);
    }
    if (d == drill::daemon::runner && sig == SIGKILL) CHECK(r.interrupted <= 1);  // one at a time
    if (d != drill::daemon::runner) CHECK(r.interrupted == 0);
}

std::string secrets_service_key() { return "drill-service-role-key-for-secrets-0123456789"; }

}  // namespace

// ---- each daemon restarted alone ------------------------------------------------------------

TEST_CASE("drill: api-gateway SIGTERM and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::api_gateway, SIGTERM);
}
TEST_CASE("drill: api-gateway kill -9 and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::api_gateway, SIGKILL);
}
TEST_CASE("drill: command-runner SIGTERM and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::runner, SIGTERM);
}
TEST_CASE("drill: command-runner kill -9 and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::runner, SIGKILL);
}
TEST_CASE("drill: inbox-dispatcher SIGTERM and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::dispatcher, SIGTERM);
}
TEST_CASE("drill: inbox-dispatcher kill -9 and restart", "[drill][e2e][slow]") {
    restart_drill(drill::daemon::dispatcher, SIGKILL);
}
TEST_CASE("drill: embedder SIGTERM and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::embedder, SIGTERM);
}
TEST_CASE("drill: embedder kill -9 and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::embedder, SIGKILL);
}
TEST_CASE("drill: scheduler SIGTERM and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::scheduler, SIGTERM);
}
TEST_CASE("drill: scheduler kill -9 and restart", "[drill][e2e]") {
    restart_drill(drill::daemon::scheduler, SIGKILL);
}

// ---- Postgres restarts ----------------------------------------------------------------------

TEST_CASE("drill: Postgres restart, every daemon reconnects and resumes within 5 s",
          "[drill][e2e][restart]") {
    options o;
    o.private_postgres = true;
    stack s(o);
    s.start_all();
    s.start_load();
    warm_up(s);
    s.postgres()->restart();
    const double t_up = epoch_now();
    std::map<drill::daemon, long> recovery;
    for (drill::daemon d : kWorkers) recovery[d] = -1;
    recovery[drill::daemon::api_gateway] = -1;
    const std::string skills = "/api/agents/" + s.agent_slug() + "/skills";
    const auto until = std::chrono::steady_clock::now() + 20s;
    bool all = false;
    while (!all && std::chrono::steady_clock::now() < until) {
        all = true;
        for (auto& [d, ms] : recovery) {
            if (ms >= 0) continue;
            if (d == drill::daemon::api_gateway) {
                // A route that runs SQL: the gateway's pool reconnected.
                if (s.api_get(skills, true) == 200) ms = ms_between(t_up, epoch_now());
            } else if (auto t = s.first_work_after(d, t_up)) {
                ms = ms_between(t_up, *t);
            }
            all = all && ms >= 0;
        }
        if (!all) std::this_thread::sleep_for(20ms);
    }
    std::this_thread::sleep_for(2s);
    report r = s.settle("postgres-restart", 60s);
    long worst = 0;
    std::string each;
    for (const auto& [d, ms] : recovery) {
        worst = ms < 0 ? 99999 : std::max(worst, ms);
        each += (each.empty() ? "" : " ") + name_of(d) + "_ms=" + std::to_string(ms);
    }
    r.recovery_ms = worst;
    r.extra = each + " load_insert_failures=" + std::to_string(s.load_insert_failures());
    print_and_check(r);
    for (const auto& [d, ms] : recovery) {
        INFO("awp-" << name_of(d) << " resumed after " << ms << " ms\n" << s.logs(d));
        CHECK(ms >= 0);
        CHECK(ms <= 5000);
    }
    CHECK(r.interrupted == 0);
}

// ---- a secrets folder that cannot be written -------------------------------------------------

TEST_CASE("drill: secrets folder not writable, the runner says so and keeps running commands",
          "[drill][e2e]") {
    options o;
    const fs::path locked = fs::temp_directory_path() / awp::test::random_name("awp-drill-ro-");
    fs::create_directories(locked);
    const fs::path secrets = locked / "secrets";
    o.env[drill::daemon::runner] = {{"SERVICE_ROLE_KEY", secrets_service_key()},
                                    {"SECRETS_DIR", secrets.string()},
                                    {"SECRETS_SYNC_INTERVAL", "1"}};
    // Not writable for the runner: read-only for an ordinary user, immutable for root (whom
    // permissions do not stop).
    ::chmod(locked.c_str(), 0555);
    bool immutable = false;
    if (::access(locked.c_str(), W_OK) == 0) {
        immutable = std::system(("chattr +i '" + locked.string() + "' 2>/dev/null").c_str()) == 0;
    }
    struct unlock {
        fs::path p;
        bool immutable;
        void operator()() const {
            if (immutable) std::system(("chattr -i '" + p.string() + "' 2>/dev/null").c_str());
            ::chmod(p.c_str(), 0755);
        }
        ~unlock() {
            (*this)();
            std::error_code ec;
            fs::remove_all(p, ec);
        }
    } restore{locked, immutable};
    {
        std::error_code ec;
        fs::create_directories(secrets, ec);
        REQUIRE(ec);  // the folder really cannot be made
    }
    stack s(o);
    const std::string token = "drill-telegram-token-7f3a9c1e";
    {
        auto c = s.admin();
        c.exec(
            "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value, category) VALUES "
            "('00000000-0000-0000-0000-000000000000', $1, 'TELEGRAM_BOT_TOKEN', $2, 'channel')",
            {s.gateway_id(), awp::core::crypto::encrypt_secret(token, secrets_service_key())});
    }
    s.start_all();
    s.start_load();
    warm_up(s);
    // Said clearly in the log: what failed and where.
    CHECK(s.current(drill::daemon::runner).wait_for_log("secrets sync failed", 5s));
    const std::string log = s.logs(drill::daemon::runner);
    CHECK(log.find(secrets.string()) != std::string::npos);
    CHECK(std::regex_search(log, std::regex("Permission denied|Operation not permitted")));

    // A provision needs the synced secrets (its channel token).
    const std::string provision =
        s.enqueue_probe_command("provision", R"({"channel":"telegram","name":"Drill"})");
    std::string status, error;
    {
        auto c = s.admin();
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (std::chrono::steady_clock::now() < until) {
            status = one(c, "SELECT status::text FROM agent_commands WHERE id = $1", {provision});
            if (status == "done" || status == "failed") break;
            std::this_thread::sleep_for(50ms);
        }
        error = one(c, "SELECT coalesce(error_message, '') FROM agent_commands WHERE id = $1",
                    {provision});
    }
    INFO("provision ended " << status << ": " << error);
    // The provision does not run without its env file: it fails, naming the secrets folder.
    CHECK(status == "failed");
    CHECK(error.find(secrets.string()) != std::string::npos);
    CHECK(error.find(token) == std::string::npos);
    if (status == "failed") s.expect_failed(provision);
    {
        // The agents row says so too (sql/0030); the drill's load needs the agent awake, so it
        // is set ready again, as an operator would once the folder is fixed.
        auto c = s.admin();
        CHECK_THAT(one(c,
                       "SELECT status::text || ' ' || coalesce(error, '') FROM agents "
                       "WHERE id = $1",
                       {s.agent_id()}),
                   Catch::StartsWith("error secrets sync failed"));
        c.exec("UPDATE agents SET status = 'ready', error = NULL WHERE id = $1", {s.agent_id()});
    }
    // Visible outside the log: the secrets rows say why, and so does the runner's heartbeat.
    {
        auto c = s.admin();
        CHECK(one(c, "SELECT sync_status FROM secrets") == "error");
        CHECK(one(c, "SELECT coalesce(sync_error, '') FROM secrets").find(secrets.string()) !=
              std::string::npos);
        const auto until = std::chrono::steady_clock::now() + 10s;
        std::string state;
        while (std::chrono::steady_clock::now() < until) {
            state = one(c,
                        "SELECT coalesce(meta->>'secrets_sync', '') FROM daemon_heartbeats "
                        "WHERE daemon = 'command-runner' ORDER BY last_seen_at DESC LIMIT 1");
            if (state == "failed") break;
            std::this_thread::sleep_for(50ms);
        }
        CHECK(state == "failed");
    }

    // Writable again: the next sync writes the file, with no restart.
    const double t_fixed = epoch_now();
    restore();
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!fs::exists(secrets / "gateway.env") && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(20ms);
    const long recovery = ms_between(t_fixed, epoch_now());
    REQUIRE(fs::exists(secrets / "gateway.env"));
    {
        std::ifstream in(secrets / "gateway.env");
        std::stringstream body;
        body << in.rdbuf();
        CHECK(body.str().find("TELEGRAM_BOT_TOKEN='" + token + "'") != std::string::npos);
    }
    {
        auto c = s.admin();
        const auto until_active = std::chrono::steady_clock::now() + 10s;
        std::string st;
        while (std::chrono::steady_clock::now() < until_active) {
            st = one(c, "SELECT sync_status || coalesce(sync_error, '') FROM secrets");
            if (st == "active") break;
            std::this_thread::sleep_for(50ms);
        }
        CHECK(st == "active");
    }
    std::this_thread::sleep_for(1s);
    report r = s.settle("secrets-not-writable", 30s);
    r.recovery_ms = recovery;
    r.extra = "provision=" + status;
    print_and_check(r);
    // The secret never reached a log line.
    CHECK(s.logs(drill::daemon::runner).find(token) == std::string::npos);
}

// ---- a runtime CLI that hangs ---------------------------------------------------------------

TEST_CASE("drill: a hanging runtime CLI times out, its process group is killed, the queue moves",
          "[drill][e2e]") {
    options o;
    o.env[drill::daemon::runner] = {{"COMMAND_TIMEOUT", "3"}};
    stack s(o);
    s.start_all();
    s.start_load();
    warm_up(s);
    const fs::path rt = s.runtime_dir();
    fs::remove(rt / "child.pid");
    std::ofstream(rt / "hang") << "1\n";
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!fs::exists(rt / "grandchild.pid") && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(50ms);  // child.pid is written right after grandchild.pid
    fs::remove(rt / "hang");            // only this one run hangs
    REQUIRE(fs::exists(rt / "child.pid"));
    long runtime_pid = 0, grandchild_pid = 0;
    std::ifstream(rt / "child.pid") >> runtime_pid;
    std::ifstream(rt / "grandchild.pid") >> grandchild_pid;
    REQUIRE(runtime_pid > 0);
    REQUIRE(grandchild_pid > 0);
    auto c = s.admin();
    const std::string hung =
        one(c, "SELECT id::text FROM agent_commands WHERE status = 'running' LIMIT 1");
    REQUIRE_FALSE(hung.empty());
    s.expect_failed(hung);

    std::string status;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < deadline) {
        status = one(c, "SELECT status::text FROM agent_commands WHERE id = $1", {hung});
        if (status != "running") break;
        std::this_thread::sleep_for(20ms);
    }
    CHECK(status == "failed");
    CHECK(one(c, "SELECT error_message FROM agent_commands WHERE id = $1", {hung}) ==
          "timed out after 3 s (process group killed)");
    const double hung_for = std::stod(one(
        c, "SELECT extract(epoch FROM finished_at - started_at) FROM agent_commands WHERE id = $1",
        {hung}));
    CHECK(hung_for >= 3.0);
    CHECK(hung_for < 8.0);
    // The whole group went, the grandchild too.
    const auto gone_by = std::chrono::steady_clock::now() + 3s;
    while ((alive(runtime_pid) || alive(grandchild_pid)) &&
           std::chrono::steady_clock::now() < gone_by)
        std::this_thread::sleep_for(20ms);
    CHECK_FALSE(alive(runtime_pid));
    CHECK_FALSE(alive(grandchild_pid));
    if (alive(grandchild_pid)) ::kill(static_cast<pid_t>(grandchild_pid), SIGKILL);
    // The next command runs at once.
    const double t_failed = std::stod(
        one(c, "SELECT extract(epoch FROM finished_at) FROM agent_commands WHERE id = $1", {hung}));
    const long recovery = recovery_of(s, drill::daemon::runner, t_failed, 10s);
    CHECK(recovery >= 0);
    CHECK(recovery < 5000);
    std::this_thread::sleep_for(2s);
    report r = s.settle("runtime-hangs", 45s);
    r.recovery_ms = recovery;
    r.extra = "hung_ms=" + std::to_string(std::lround(hung_for * 1000));
    print_and_check(r);
    CHECK(r.interrupted == 1);  // the hung command: failed by design, run once
}

// ---- a scheduler stopped for three minutes ---------------------------------------------------

TEST_CASE("drill: scheduler SIGSTOP for three minutes then SIGCONT, one catch-up tick",
          "[drill][e2e][slow]") {
    // The production tick (60 s), so that "one catch-up tick, no burst" is visible: three
    // ticks are missed, one runs at SIGCONT, the next at its minute boundary. The routine's
    // minutes are real minutes, so the stop is a real three minutes (TICK_INTERVAL would not
    // scale them); AWP_DRILL_SIGSTOP_SECONDS shortens it when iterating on this file.
    long stop_s = 180;
    if (const char* v = std::getenv("AWP_DRILL_SIGSTOP_SECONDS")) stop_s = std::atol(v);
    options o;
    o.rate = 1.0;
    o.env[drill::daemon::scheduler] = {{"TICK_INTERVAL", "60"}};
    stack s(o);
    s.start_all();
    s.start_load();
    warm_up(s);
    auto c = s.admin();
    const std::string routine_items =
        "SELECT count(*) FROM agent_inbox_items WHERE event_type = 'routine_schedule'";
    REQUIRE(one(c, routine_items) == "1");  // fired by the start-up tick

    awp::test::child& sched = s.current(drill::daemon::scheduler);
    const double t_stop = epoch_now();
    sched.signal(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::seconds(stop_s));
    // SIGCONT away from a minute boundary, so the boundary tick cannot be taken for a burst.
    if (std::fmod(epoch_now(), 60.0) > 54.0)
        std::this_thread::sleep_for(
            std::chrono::duration<double>(61.0 - std::fmod(epoch_now(), 60.0)));
    // Nobody else fired it meanwhile, and everything else went on.
    CHECK(one(c, routine_items) == "1");
    const double t_cont = epoch_now();
    for (drill::daemon d :
         {drill::daemon::runner, drill::daemon::dispatcher, drill::daemon::embedder}) {
        INFO("awp-" << name_of(d) << " stalled while the scheduler was stopped");
        CHECK(s.work_between(d, t_stop, t_cont) > 0);
    }
    const std::size_t log_before = sched.log().size();
    sched.signal(SIGCONT);
    long recovery = -1;
    {
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (recovery < 0 && std::chrono::steady_clock::now() < until) {
            if (auto t = s.first_work_after(drill::daemon::scheduler, t_cont)) {
                recovery = ms_between(t_cont, *t);
            } else {
                std::this_thread::sleep_for(10ms);
            }
        }
    }
    std::this_thread::sleep_for(3s);
    const std::string after = sched.log().substr(log_before);
    std::vector<long long> ticks;
    static const std::regex kTick(R"re("msg":"tick","tick":(\d+))re");
    for (auto it = std::sregex_iterator(after.begin(), after.end(), kTick);
         it != std::sregex_iterator(); ++it)
        ticks.push_back(std::stoll((*it)[1]));
    // Tick n is the minute n since the epoch: one from the stopped minutes is a replay.
    const auto minute_at_cont = static_cast<long long>(t_cont / 60.0);
    long replayed = 0;
    for (auto t : ticks) replayed += t < minute_at_cont;
    const long fired = std::stol(one(c, routine_items)) - 1;
    report r = s.settle("scheduler-sigstop-" + std::to_string(stop_s) + "s", 45s);
    r.recovery_ms = recovery;
    r.extra = "ticks_after_cont=" + std::to_string(ticks.size()) +
              " replayed_ticks=" + std::to_string(replayed) +
              " routine_fired_after_cont=" + std::to_string(fired);
    INFO(after);
    print_and_check(r);
    CHECK(recovery >= 0);
    CHECK(recovery < 1500);    // the catch-up runs at SIGCONT, not at the next minute
    CHECK(ticks.size() == 1);  // one catch-up tick, no burst
    CHECK(replayed == 0);
    // The routine was due every minute while stopped: it fires once now, not once per slot.
    if (stop_s >= 120) {
        CHECK(fired == 1);
    } else {
        CHECK(fired <= 1);
    }
    CHECK(one(c, "SELECT next_run_at > now() FROM routines") == "t");
    CHECK(r.interrupted == 0);
}

}  // namespace drills_test
