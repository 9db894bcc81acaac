// The reads an action makes before it runs (the run_shell policy, the gateway's other agents, a
// source connection), on the lease loop's connection right after the lease: retried on a fresh
// connection through an outage, so a database blip never fails a command that has not run.
#pragma once

#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "awp/core/lease.hpp"
#include "awp/core/pg.hpp"
#include "command.hpp"

namespace awp::runner {

/// The back-off of every statement about a leased command: the driver's final transitions, the
/// runner's own (lease extensions, payload patches, the agents row) and the reads before a run.
core::retry_policy command_retry();

/// `sql` with `params` on `db`. A lost connection (pg::connection_error) is retried on a new
/// one with command_retry()'s back-off for its finish_for; nullopt when the database stayed away
/// that long (logged: the command's lease expiry settles it, nothing ran). Any other error is
/// thrown (a bug or a refusal, not an outage).
net::awaitable<std::optional<core::pg::result>> read_before_run(core::pg::session& db,
                                                                const command_row& cmd,
                                                                std::string what, std::string sql,
                                                                core::pg::params params);

}  // namespace awp::runner
