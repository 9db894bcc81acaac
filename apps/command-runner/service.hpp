// The command runner service: the queue work. Registration and LISTEN + safety poll at start,
// then lease and start -> run (executor.hpp, auth_flows.hpp) -> complete/fail (with the next
// lease) one command at a time; heartbeat and secrets sync alongside (housekeeping.hpp).
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

namespace awp::runner {

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
    net::awaitable<std::optional<command_row>> lease();
    net::awaitable<void> handle(command_row cmd);
    /// The command planned, checked and run: what handle() writes.
    net::awaitable<command_outcome> outcome_of(const command_row& cmd);
    net::awaitable<void> run_housekeeping();

    /// The command is running from lease() on, with a COMMAND_TIMEOUT + 60 s lease; a run that
    /// may take longer extends it. False when the lease was lost (logged).
    net::awaitable<bool> hold_for(core::pg::session& db, const command_row& cmd,
                                  int lease_seconds) override;
    net::awaitable<void> write_outcome(core::pg::session& db, command_row cmd,
                                       command_outcome o) override;
    /// complete_command / fail_command, retried across a reconnect. Outputs must be clean text.
    /// On the lease loop's connection (db_) the transition is kept in final_ and made by the next
    /// lease() in the same transaction as the next lease (finish_and_lease_command), or by
    /// flush_final() when no lease follows; on any other connection it is made at once.
    net::awaitable<void> complete(core::pg::session& db, command_row cmd, int exit_code,
                                  std::string out, std::string err, std::string patch);
    net::awaitable<void> fail(core::pg::session& db, command_row cmd, std::optional<int> exit_code,
                              std::string error, std::string out, std::string err,
                              std::string patch);
    /// The final transition of a command handled on the lease loop, not yet written.
    struct final_transition {
        command_row cmd;
        bool done = true;  // complete_command; false: fail_command
        std::optional<int> exit_code;
        std::optional<std::string> error, out, err, patch;
    };
    net::awaitable<void> finish(core::pg::session& db, final_transition f);
    /// Writes final_ on its own (complete_command / fail_command), if there is one.
    net::awaitable<void> flush_final();
    net::awaitable<void> write_final(core::pg::session& db, final_transition f);
    void log_final(const final_transition& f) const;
    net::awaitable<bool> transition(core::pg::session& db, std::string what, std::string sql,
                                    core::pg::params params, std::string command_id);
    net::awaitable<void> patch_payload(core::pg::session& db, command_row cmd,
                                       std::string patch) override;

    net::io_context& ioc_;
    runner_config cfg_;
    std::string slug_, gateway_id_, tenant_id_;
    core::pg::session db_;  // the lease loop's connection (one command at a time)
    housekeeping hk_;       // heartbeat and secrets sync, on a connection of its own
    std::unique_ptr<core::listener> listener_;
    std::unique_ptr<core::queue_driver<command_row>> driver_;
    std::unique_ptr<executor> executor_;  // made once the gateway is known
    std::unique_ptr<runner::auth_flows> flows_;
    core::event flows_idle_;                 // an auth flow, the housekeeping or the listener ended
    std::optional<final_transition> final_;  // see complete()
    bool ready_ = false, stopping_ = false, housekeeping_done_ = false, listener_done_ = false;
};

}  // namespace awp::runner
