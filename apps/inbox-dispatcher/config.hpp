// awp-inbox-dispatcher's configuration: every option has an environment name; checked once.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "awp/core/daemon.hpp"
#include "awp/core/identity.hpp"
#include "awp/runtime/openclaw.hpp"

namespace awp::dispatcher {

struct config {
    core::daemon::common_config common;
    std::string gateway;               // GATEWAY_ID: the gateway's id or slug (resolved once)
    std::string tenant_id;             // TENANT_ID: optional; the gateway must belong to it
    std::string runtime = "openclaw";  // AGENT_RUNTIME
    runtime::cli cli;                  // its version, detected at start (main)
    std::string state_dir;             // OPENCLAW_STATE_DIR for the runtime ("" = its default)
    std::string agent_user_name;       // AGENT_USER: the user a woken agent runs as
    std::optional<core::identity::user> agent_user;  // resolved at start (main)
    int max_concurrent = 2;                          // MAX_CONCURRENT agents woken at once
    double wake_timeout_s = 300;  // WAKE_TIMEOUT: a wake running longer is killed and failed
    double kill_grace_s = 5;      // WAKE_KILL_GRACE: SIGTERM -> SIGKILL of a timed-out wake
    int lease_seconds = 0;        // LEASE_SECONDS: 0 = wake timeout + kill grace + 60
    double heartbeat_s = 30;      // HEARTBEAT_INTERVAL

    std::chrono::milliseconds wake_timeout() const {
        return std::chrono::milliseconds(static_cast<long>(wake_timeout_s * 1000));
    }
    std::chrono::milliseconds kill_grace() const {
        return std::chrono::milliseconds(static_cast<long>(kill_grace_s * 1000));
    }
    std::chrono::milliseconds heartbeat() const {
        return std::chrono::milliseconds(static_cast<long>(heartbeat_s * 1000));
    }
    /// The lease actually requested (the default filled in).
    int effective_lease_seconds() const;
    /// Throws core::config_error when options contradict each other; detects the runtime's
    /// version (unsupported: runtime::unsupported_runtime, a config_error).
    void validate() const;
};

/// Registers the dispatcher's options (and the common ones) on the command line.
void add_options(core::daemon::cli& cli, config& c);

}  // namespace awp::dispatcher
