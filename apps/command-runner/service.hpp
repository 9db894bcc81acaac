// The command runner service: registration, LISTEN + safety poll, lease and start -> run ->
// complete/fail (with the next lease) one command at a time, auth flows in the background,
// heartbeat, secrets sync.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "actions.hpp"
#include "awp/core/daemon.hpp"
#include "awp/core/event.hpp"
#include "awp/core/lease.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/process.hpp"
#include "config.hpp"

namespace awp::runner {

namespace net = boost::asio;

struct auth_flow;
class runner_service;

/// The runner's side of core::queue_driver: one command at a time (service.cpp).
struct command_queue {
    using row_type = command_row;
    struct outcome_type {
        std::string crash;  // the handler threw: failed with this error
    };
    using outcome = outcome_type;
    runner_service& svc;
    net::awaitable<core::lease_batch<command_row>> lease(std::size_t room);
    net::awaitable<outcome> work(command_row& cmd, std::size_t slot);
    outcome failed(const command_row&, std::string what) { return {std::move(what)}; }
    net::awaitable<void> finish(const command_row& cmd, const outcome& out, std::size_t slot);
    void settled(const command_row&, const outcome&, core::finish_status) {}
};

class runner_service : public core::daemon::service {
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
    std::size_t auth_flows() const noexcept { return flows_.size(); }

private:
    net::awaitable<void> register_gateway();
    net::awaitable<void> heartbeat(core::pg::session& db);
    net::awaitable<void> recover_dead_runs();
    /// Syncs the secrets files; returns the failure ("" when synced or when sync is off) and
    /// keeps it for the heartbeat.
    net::awaitable<std::string> sync_secrets_on(core::pg::session& db);
    net::awaitable<void> housekeeping();

    net::awaitable<std::optional<command_row>> lease();
    net::awaitable<void> handle(command_row cmd);
    net::awaitable<void> run_steps(command_row cmd, plan p);
    /// The steps that need the host: provision's (after the secrets sync: the channel token
    /// file, the template, awp's own record of the agent) and set_agent_model's (the agent's
    /// place in the runtime's config). Returns "" or why the command cannot run.
    std::string prepare_steps(const command_row& cmd, plan& p);
    /// set_agent_model's reload of the agent's live session; a line for stdout.
    net::awaitable<std::string> reload_session(const plan& p);
    /// auth_remove: the profile out of every agent's auth store (the runtime's CLI where it has
    /// one, else the files under the runtime's own lock). Returns the summary; throws.
    net::awaitable<std::string> remove_profile(const std::string& id);
    net::awaitable<void> run_local(command_row cmd, plan p);
    net::awaitable<void> run_source_write(command_row cmd, plan p);
    net::awaitable<void> start_auth(command_row cmd, plan p);
    net::awaitable<void> paste_auth(command_row cmd, plan p);
    net::awaitable<void> auth_flow_main(std::shared_ptr<auth_flow> flow);

    /// The command is running from lease() on, with a COMMAND_TIMEOUT + 60 s lease; a run that
    /// may take longer extends it. False when the lease was lost (logged).
    net::awaitable<bool> hold_for(core::pg::session& db, const command_row& cmd, int lease_seconds);
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
    net::awaitable<void> patch_payload(core::pg::session& db, command_row cmd, std::string patch);

    std::vector<std::string> redactions(const command_row& cmd) const;
    std::string keep(const std::string& text, const std::vector<std::string>& secrets,
                     std::size_t limit) const;
    /// as_agent: the process runs as AGENT_USER when it is set (everything but host operations).
    core::process::spawn_options child_options(std::vector<std::string> argv,
                                               bool as_agent = true) const;
    /// Another agent of the command's gateway whose slug maps to the same runtime id, or "".
    boost::asio::awaitable<std::string> shared_runtime_id(const command_row& cmd, std::string slug,
                                                          std::string id);
    /// A file of the runtime's state, read as AGENT_USER when set (it owns them).
    std::string read_runtime_file(const std::string& path) const;

    net::io_context& ioc_;
    runner_config cfg_;
    std::string configured_gateway_;  // GATEWAY_ID or the stored registration: id or slug
    std::string slug_, gateway_id_, tenant_id_, secrets_key_;
    std::string started_at_;
    core::pg::session db_;     // the lease loop's connection (one command at a time)
    core::pg::session hk_db_;  // heartbeat and periodic secrets sync
    std::unique_ptr<core::listener> listener_;
    friend struct command_queue;
    command_queue queue_{*this};
    std::unique_ptr<core::queue_driver<command_queue>> driver_;
    core::event housekeeping_wake_, flows_idle_;
    std::map<std::string, std::shared_ptr<auth_flow>> flows_;
    std::optional<final_transition> final_;   // see complete()
    std::vector<std::string> secret_values_;  // decrypted secrets: redacted from every output
    bool heartbeat_due_ = true, secrets_due_ = true;
    std::chrono::steady_clock::time_point last_sync_{};
    std::string secrets_error_;  // the last sync's failure, "" when it worked
    bool ready_ = false, stopping_ = false, housekeeping_done_ = false, listener_done_ = false;
};

}  // namespace awp::runner
