// The command runner service: registration at start, then the command queue on the shared lease
// driver (core::queue_driver: LISTEN + safety poll, lease and start -> run (executor.hpp,
// auth_flows.hpp) -> complete/fail with the next lease, one command at a time); heartbeat and
// secrets sync alongside (housekeeping.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "actions.hpp"
#include "auth_flows.hpp"
#include "awp/core/daemon.hpp"
#include "awp/core/event.hpp"
#include "awp/core/lease.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"
#include "command.hpp"
#include "config.hpp"
#include "executor.hpp"
#include "housekeeping.hpp"
#include "outcome.hpp"

namespace awp::runner {

class runner_service;

/// The runner's side of core::queue_driver (service.cpp): one command at a time, leased and
/// started in one statement, its final transition written with the next lease (sql/0015).
struct command_queue {
    using row_type = command_row;
    using outcome_type = final_outcome;
    runner_service& svc;

    net::awaitable<core::lease_batch<command_row>> lease(std::size_t room);
    net::awaitable<core::lease_batch<command_row>> finish_and_lease(const command_row& cmd,
                                                                    const final_outcome& o,
                                                                    std::size_t room);
    net::awaitable<final_outcome> work(command_row& cmd, std::size_t slot);
    final_outcome failed(const command_row& cmd, std::string what) const;
    net::awaitable<void> finish(const command_row& cmd, const final_outcome& o, std::size_t slot);
    void settled(const command_row& cmd, const final_outcome& o, core::finish_status status);
};

class runner_service : public core::daemon::service, private command_io {
public:
    runner_service(net::io_context& ioc, runner_config cfg);
    ~runner_service() override;

    net::awaitable<void> run() override;
    void request_stop() override;

    /// LISTEN works and start-up recovery is done (READY=1 was sent).
    bool ready() const noexcept { return ready_; }
    const std::string& gateway_id() const noexcept { return gateway_id_; }
    const std::string& gateway_slug() const noexcept { return slug_; }
    std::uint64_t handled() const noexcept { return driver_ ? driver_->handled() : 0; }
    std::size_t auth_flows() const noexcept { return flows_ ? flows_->size() : 0; }

private:
    friend struct command_queue;
    /// The command planned, checked and run: what it came to, not yet settled.
    net::awaitable<command_outcome> outcome_of(const command_row& cmd);
    /// The one exit of every command: its outcome settled (outcome.hpp: scrubbed, redacted,
    /// cut) and, while the lease is still held, the agents row it changes written
    /// (agent_state.hpp). What this returns is what the final transition writes.
    net::awaitable<final_outcome> conclude(core::pg::session& db, const command_row& cmd,
                                           command_outcome raw);
    net::awaitable<void> run_housekeeping();
    /// The back-off of every transition of a command (core::retry_policy).
    static core::retry_policy transition_retry();

    /// The command is running from its lease on, with a COMMAND_TIMEOUT + 60 s lease; a run
    /// that may take longer extends it. False when the lease was lost (logged).
    net::awaitable<bool> hold_for(core::pg::session& db, const command_row& cmd,
                                  int lease_seconds) override;
    /// A done or failed outcome concluded and written at once (an auth flow's end on its
    /// connection, a dead run failed at start-up); the lease loop's own commands are concluded
    /// in work() and written by the driver.
    net::awaitable<void> write_outcome(core::pg::session& db, command_row cmd,
                                       command_outcome o) override;
    net::awaitable<void> patch_payload(core::pg::session& db, command_row cmd,
                                       std::string patch) override;
    net::awaitable<void> agent_state(core::pg::session& db, const command_row& cmd,
                                     std::string agent_slug, std::string state) override;
    /// One statement of a leased command, retried through an outage (core::retry_transition);
    /// false when it was refused or given up (logged).
    net::awaitable<bool> transition(core::pg::session& db, std::string what, std::string sql,
                                    core::pg::params params, std::string command_id);

    net::io_context& ioc_;
    runner_config cfg_;
    std::string slug_, gateway_id_, tenant_id_;
    core::pg::session db_;  // the lease loop's connection (one command at a time)
    housekeeping hk_;       // heartbeat and secrets sync, on a connection of its own
    command_queue queue_{*this};
    std::unique_ptr<core::queue_driver<command_queue>> driver_;
    std::unique_ptr<executor> executor_;  // made once the gateway is known
    std::unique_ptr<runner::auth_flows> flows_;
    core::event flows_idle_;  // an auth flow, the housekeeping or the listener ended
    bool ready_ = false, stopping_ = false, housekeeping_done_ = false;
};

}  // namespace awp::runner
