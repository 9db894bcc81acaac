// Running one leased command's action: the runtime CLI and script steps (run_steps), the
// in-process ones (upload_file, auth_remove), the runtime operations that read what the runtime
// answers before the next call (list_models of the connected providers, auth_set_default), and
// source writes. Returns what the action came to, raw; the service settles and writes it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "actions.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/process.hpp"
#include "awp/runtime/openclaw.hpp"
#include "command.hpp"
#include "config.hpp"

namespace awp::runner {

class housekeeping;

/// How the runner starts a child: argv only, the runner's own credentials never in its
/// environment (an allowlist), AWP_* and OPENCLAW_STATE_DIR set, as AGENT_USER when `as_agent`
/// and one is set (everything but host operations), output bounded with room for redaction.
core::process::spawn_options child_options(const runner_config& cfg,
                                           const std::string& gateway_slug,
                                           std::vector<std::string> argv, bool as_agent = true);

class executor {
public:
    /// `db`: the lease loop's connection (the checks and queries of an action); `hk`: the
    /// secrets sync (provision syncs first) and the values to redact.
    executor(const runner_config& cfg, std::string gateway_slug, core::pg::session& db,
             command_io& io, housekeeping& hk);

    /// spawn, provision, set_agent_model: the steps one after another, stopping at the first
    /// failure, within the plan's timeout in all.
    net::awaitable<command_outcome> run_steps(command_row cmd, plan p);
    /// auth_remove and upload_file, in-process.
    net::awaitable<command_outcome> run_local(command_row cmd, plan p);
    /// list_models without a provider and auth_set_default: runtime calls whose next step
    /// depends on what the runtime answered (runtime_ops.cpp).
    net::awaitable<command_outcome> run_runtime_op(command_row cmd, plan p);
    /// source_write: the provider's action on a writable connection, within the outbound policy.
    net::awaitable<command_outcome> run_source_write(command_row cmd, plan p);

    /// Another agent of the command's gateway whose slug maps to the same runtime id, or "";
    /// nullopt when the database stayed away (pre_run.hpp).
    net::awaitable<std::optional<std::string>> shared_runtime_id(const command_row& cmd,
                                                                 std::string slug, std::string id);

private:
    /// The steps that need the host: provision's (after the secrets sync: the channel token
    /// file, the template, awp's own record of the agent) and set_agent_model's (the agent's
    /// place in the runtime's config). Returns "" or why the command cannot run.
    std::string prepare_steps(const command_row& cmd, plan& p);
    /// set_agent_model's reload of the agent's live session: the payload patch that says how it
    /// went ({"session_reloaded": true} or false with "session_reload_error").
    net::awaitable<std::string> reload_session(const plan& p);
    /// auth_remove: the profile out of every agent's auth store (the runtime's CLI where it has
    /// one, else the files under the runtime's own lock). Returns the summary; throws.
    net::awaitable<std::string> remove_profile(const std::string& id);
    /// list_models without a provider: the catalogue of the providers the runtime has
    /// credentials for. auth_set_default: the profile first in its provider's order, and the
    /// gateway's default model one of that provider's. Both in runtime_ops.cpp.
    net::awaitable<command_outcome> connected_models(command_row cmd, plan p);
    net::awaitable<command_outcome> set_default_provider(command_row cmd, plan p);
    /// One runtime call within `timeout`; a failure to start is a result with exit code 127.
    net::awaitable<core::process::process_result> call(runtime::call c,
                                                       std::chrono::milliseconds timeout,
                                                       bool whole_output = false) const;
    /// A file of the runtime's state, read as AGENT_USER when set (it owns them).
    std::string read_runtime_file(const std::string& path) const;
    core::process::spawn_options child(std::vector<std::string> argv, bool as_agent = true) const {
        return child_options(cfg_, slug_, std::move(argv), as_agent);
    }
    /// Values to redact before a line of output is picked for an error text (the settle of the
    /// outcome redacts again, but a secret cut in half by the pick would escape it).
    std::vector<std::string> redactions(const command_row& cmd) const;

    const runner_config& cfg_;
    std::string slug_;
    core::pg::session& db_;
    command_io& io_;
    housekeeping& hk_;
};

}  // namespace awp::runner
