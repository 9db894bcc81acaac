// Fault drills: the whole stack (five daemons as real processes, the fake runtimes at the edge)
// over one database, a steady load of commands, inbox items and knowledge items, and the
// accounting that says, once the load has settled, what was lost, what ran twice and what was
// interrupted by design. Used by tests/e2e/drills_*.cpp; docs/operations.md "Fault drills".
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "awp/core/pg.hpp"
#include "support/child.hpp"
#include "support/private_cluster.hpp"
#include "support/test_db.hpp"

namespace awp::test::drill {

enum class daemon { api_gateway, runner, dispatcher, embedder, scheduler };
inline constexpr daemon kDaemons[] = {daemon::api_gateway, daemon::runner, daemon::dispatcher,
                                      daemon::embedder, daemon::scheduler};
/// "api-gateway", "command-runner", "inbox-dispatcher", "embedder", "scheduler".
std::string name_of(daemon d);

/// Seconds since the epoch, as a double (the machine's clock: Postgres runs on the same host).
double epoch_now();

struct options {
    /// A Postgres of the drill's own (private_cluster) instead of a clone on the shared cluster:
    /// for drills that restart the server.
    bool private_postgres = false;
    /// Rows per second of each kind the load inserts (commands, inbox items, knowledge items).
    double rate = 2.0;
    /// Seconds the fake runtime and the fake wake take per run, so that a signal finds work in
    /// flight.
    std::string run_seconds = "0.05";
    /// Extra environment per daemon (wins over the stack's defaults).
    std::map<daemon, std::map<std::string, std::string>> env;
};

/// What a drill measured; line() is the report line the suite prints.
struct report {
    std::string drill;
    long commands = 0, inbox = 0, knowledge = 0, routine_items = 0;
    long lost = 0;
    long duplicates = 0;
    /// Commands a dead runner was running (ended failed, by design never re-run) and commands
    /// the drill expected to fail (a hung runtime's timeout).
    long interrupted = 0;
    /// Inbox items woken again after an interrupted attempt (at-least-once, attempt counted).
    long redelivered = 0;
    long recovery_ms = -1;
    long settle_ms = 0;
    long health_failures = 0, health_probes = 0;
    /// Drill-specific figures, appended to the line ("name=value ...").
    std::string extra;
    /// One line per lost or duplicated row or failed health probe, for the failure message.
    std::vector<std::string> problems;
    std::string line() const;
};

class stack {
public:
    explicit stack(options o = {});
    ~stack();
    stack(const stack&) = delete;
    stack& operator=(const stack&) = delete;

    // ---- processes ------------------------------------------------------------------------
    /// Starts every daemon and waits until each is ready.
    void start_all();
    /// Starts a fresh process of `d` (the previous one, if any, is kept for its log) and waits
    /// until it is ready.
    void start(daemon d);
    /// Signals the current process of `d` and waits for it to end: its exit code (or 128 +
    /// signal), nullopt if it is still running after `limit`.
    std::optional<int> stop(daemon d, int sig, std::chrono::milliseconds limit);
    child& current(daemon d);
    /// Every log line the processes of `d` wrote, oldest process first.
    std::string logs(daemon d) const;

    // ---- load -----------------------------------------------------------------------------
    void start_load();
    void stop_load();
    /// Inserts the load could not make (Postgres down): not rows, so never counted as lost.
    long load_insert_failures() const { return insert_failures_.load(); }

    // ---- the database ---------------------------------------------------------------------
    /// Superuser on the drill's database.
    core::pg::connection admin() const;
    std::string admin_dsn() const;
    std::string daemon_dsn() const;
    private_cluster* postgres() { return cluster_.get(); }
    const std::string& gateway_slug() const { return gateway_slug_; }
    const std::string& gateway_id() const { return gateway_id_; }
    const std::string& agent_slug() const { return agent_slugs_.front(); }
    const std::string& agent_id() const { return agent_ids_.front(); }
    /// Enqueues a command outside the load (meta.drill = "probe") for the drill's first agent.
    std::string enqueue_probe_command(const std::string& action, const std::string& payload_json);
    /// A command the drill expects to end failed (counted as interrupted, not lost).
    void expect_failed(const std::string& command_id);

    /// First time (epoch seconds) after `since` at which `d` finished a unit of work: a command
    /// done (runner), an inbox item done (dispatcher), an item indexed (embedder), a tick
    /// (scheduler, from the current process's log), nullopt if none yet. Not for the gateway.
    std::optional<double> first_work_after(daemon d, double since);
    /// Units of work `d` finished in [from, to].
    long work_between(daemon d, double from, double to);
    /// Waits until `d` has work in flight (a command running, an inbox item or a knowledge
    /// item leased); false after `limit`.
    bool wait_in_flight(daemon d, std::chrono::milliseconds limit);

    // ---- the api-gateway ------------------------------------------------------------------
    int api_port() const { return api_port_; }
    /// HTTP status of a GET on the gateway (0 when it does not answer; `why` says what failed).
    int api_get(const std::string& path, bool service_role = false,
                std::string* why = nullptr) const;
    /// The health poller counts /api/health failures only while it expects the gateway up.
    void expect_gateway_up(bool up) { health_expected_.store(up); }
    long health_failures() const { return health_failures_.load(); }

    // ---- settling and accounting ----------------------------------------------------------
    /// Stops the load, waits (up to `limit`) until every row reached a final state, and counts.
    /// AWP_DRILL_DEBUG=1 prints what it is still waiting for.
    report settle(const std::string& drill, std::chrono::seconds limit);

    /// The fake runtime's folder: its call log and control files (sleep, hang).
    const std::filesystem::path& runtime_dir() const { return runtime_dir_; }

private:
    std::map<std::string, std::string> env_of(daemon d) const;
    std::vector<std::string> argv_of(daemon d) const;
    void wait_ready(daemon d, child& c);
    void load_loop();
    void health_loop();
    bool settled(core::pg::connection& c);

    options opt_;
    std::unique_ptr<scoped_database> db_;
    std::unique_ptr<private_cluster> cluster_;
    std::filesystem::path dir_, runtime_dir_, wake_dir_;
    std::string gateway_slug_, gateway_id_;
    std::vector<std::string> agent_slugs_, agent_ids_;
    std::string routine_id_;
    int api_port_ = 0;
    std::map<daemon, std::vector<std::unique_ptr<child>>> procs_;
    std::set<std::string> expected_failures_;

    std::atomic<bool> load_on_{false}, health_on_{true}, health_expected_{false};
    std::atomic<long> insert_failures_{0}, health_failures_{0}, health_probes_{0};
    std::thread load_thread_, health_thread_;
    std::mutex health_mutex_;
    std::vector<std::string> health_problems_;
};

}  // namespace awp::test::drill
