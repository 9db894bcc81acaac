// Options of awp-inbox-dispatcher.
#include "config.hpp"

#include <cmath>

#include "awp/core/error.hpp"

namespace awp::dispatcher {

int config::effective_lease_seconds() const {
    if (lease_seconds > 0) return lease_seconds;
    return static_cast<int>(std::ceil(wake_timeout_s + kill_grace_s)) + 60;
}

void config::validate() const {
    if (gateway.empty()) {
        throw core::config_error("GATEWAY_ID (--gateway) is required: the gateway's id or slug");
    }
    if (runtime.empty()) throw core::config_error("AGENT_RUNTIME must not be empty");
    // A lease that can run out while its wake is still running would let a second dispatcher
    // wake the agent for the same item: the lease must outlast the wake and its kill.
    const double needed = wake_timeout_s + kill_grace_s + 5;
    if (effective_lease_seconds() < needed) {
        throw core::config_error("LEASE_SECONDS (" + std::to_string(effective_lease_seconds()) +
                                 ") must be at least WAKE_TIMEOUT + WAKE_KILL_GRACE + 5 (" +
                                 std::to_string(static_cast<int>(std::ceil(needed))) + ")");
    }
    if (effective_lease_seconds() > 86400) {
        throw core::config_error("LEASE_SECONDS must be at most 86400");
    }
}

void add_options(core::daemon::cli& cli, config& c) {
    cli.add_common(c.common);
    cli.add_wake(c.common);
    cli.add_gateway_key(c.common);
    auto& app = cli.app();
    app.add_option("--gateway", c.gateway, "This gateway's id or slug")->envname("GATEWAY_ID");
    app.add_option("--tenant-id", c.tenant_id,
                   "Tenant of the gateway (optional: refuse to start on another tenant's)")
        ->envname("TENANT_ID");
    app.add_option("--runtime", c.runtime, "Agent runtime CLI (an executable, never a shell)")
        ->envname("AGENT_RUNTIME")
        ->capture_default_str();
    app.add_option("--runtime-state-dir", c.state_dir,
                   "The runtime's state folder (its OPENCLAW_STATE_DIR; the runner's too)")
        ->envname("OPENCLAW_STATE_DIR");
    app.add_option("--agent-user", c.agent_user_name,
                   "The user a woken agent runs as (the runner's AGENT_USER; it owns "
                   "OPENCLAW_STATE_DIR). Unset: the dispatcher's own user")
        ->envname("AGENT_USER");
    app.add_option("--max-concurrent", c.max_concurrent, "Agents woken at the same time")
        ->envname("MAX_CONCURRENT")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("--wake-timeout", c.wake_timeout_s,
                   "Seconds a wake may run before its process group is killed")
        ->envname("WAKE_TIMEOUT")
        ->check(CLI::Range(0.1, 86000.0))
        ->capture_default_str();
    app.add_option("--wake-kill-grace", c.kill_grace_s,
                   "Seconds between SIGTERM and SIGKILL of a timed-out wake")
        ->envname("WAKE_KILL_GRACE")
        ->check(CLI::Range(0.0, 300.0))
        ->capture_default_str();
    app.add_option("--lease-seconds", c.lease_seconds,
                   "Inbox lease length (0: wake timeout + kill grace + 60)")
        ->envname("LEASE_SECONDS")
        ->check(CLI::Range(0, 86400))
        ->capture_default_str();
    app.add_option("--heartbeat-interval", c.heartbeat_s, "Seconds between heartbeats")
        ->envname("HEARTBEAT_INTERVAL")
        ->check(CLI::Range(0.1, 3600.0))
        ->capture_default_str();
}

}  // namespace awp::dispatcher
