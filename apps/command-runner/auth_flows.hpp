// The interactive logins (auth_start) the runner keeps in the background: each one's process,
// its URL and code reported into the command's payload as they appear, values pasted into it
// (auth_paste), and its end written by the flow itself on a connection of its own.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "actions.hpp"
#include "awp/core/event.hpp"
#include "awp/core/pg.hpp"
#include "command.hpp"
#include "config.hpp"
#include "scrub.hpp"

namespace awp::runner {

/// {"connection_state": {...}}: the auth flow's stage as the UI reads it from the payload.
std::string auth_state(const std::vector<std::pair<std::string, std::string>>& fields,
                       bool auto_callback = false);

struct auth_flow;

class auth_flows {
public:
    /// `secrets`: the synced values, redacted from a flow's output when it ends. `ended` is set
    /// whenever a flow ends.
    auth_flows(net::io_context& ioc, const runner_config& cfg, std::string gateway_slug,
               command_io& io, const known_secrets& secrets, core::event& ended);
    ~auth_flows();

    /// auth_start on the lease loop's connection `db`: the login process started in the
    /// background (handed_off: it finishes the command), or why it could not start.
    net::awaitable<command_outcome> start(core::pg::session& db, command_row cmd, plan p);
    /// auth_paste: the value fed to the flow of parent_command_id.
    net::awaitable<command_outcome> paste(command_row cmd, plan p);
    /// The runner stops: every flow's process is ended (its command fails, saying so).
    void stop_all();
    std::size_t size() const noexcept { return flows_.size(); }
    bool empty() const noexcept { return flows_.empty(); }

private:
    net::awaitable<void> follow(std::shared_ptr<auth_flow> flow);

    net::io_context& ioc_;
    const runner_config& cfg_;
    std::string slug_;
    command_io& io_;
    const known_secrets& secrets_;
    core::event& ended_;
    std::map<std::string, std::shared_ptr<auth_flow>> flows_;
};

}  // namespace awp::runner
