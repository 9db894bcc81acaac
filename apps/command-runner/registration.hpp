// The runner's start-up: which gateway it serves (GATEWAY_ID, the stored registration or a first
// registration with GATEWAY_TOKEN), resolved once to its id, and the commands a dead runner of
// this gateway left behind.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "awp/core/gateway.hpp"
#include "awp/core/pg.hpp"
#include "command.hpp"
#include "config.hpp"

namespace awp::runner {

/// The gateway as configured: GATEWAY_ID, else the registration stored in
/// <state_dir>/registration.json, else a first registration with GATEWAY_TOKEN
/// (consume_gateway_token, retried while the database is away, never after a refusal), then
/// stored there. Returns its id or slug; "" when `stopping` turned true during a retry. Throws
/// config_error when there is none.
net::awaitable<std::string> register_gateway(core::pg::session& db, const runner_config& cfg,
                                             const bool& stopping);

/// `configured` (id or slug, and TENANT_ID when set) resolved once to the gateway's id and
/// tenant, retried while the database is away; nullopt when `stopping` turned true meanwhile.
net::awaitable<std::optional<core::gateway::ref>> resolve_gateway(core::pg::session& db,
                                                                  const runner_config& cfg,
                                                                  const std::string& configured,
                                                                  const bool& stopping);

/// A command a dead runner left running: to be failed, never retried (it may have run).
struct dead_run {
    command_row cmd;
    std::string holder;  // leased_by of the dead runner
    command_outcome outcome;
};

/// Start-up recovery on the gateway's commands held by this instance name or by a runner of
/// this host whose process is gone: a leased one (never started) goes back to the queue here;
/// a running one is returned, with the failure to record.
net::awaitable<std::vector<dead_run>> recover_dead_runs(core::pg::session& db,
                                                        const std::string& gateway_id,
                                                        const std::string& instance);

}  // namespace awp::runner
