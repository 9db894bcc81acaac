// awp-inbox-dispatcher's service: LISTEN on the gateway's inbox channel (plus the safety poll and
// a timer for the next back-off), lease one item per agent at a time for agents that are ready,
// round-robin across agents and oldest first, wake the agent through the runtime CLI and
// complete or fail the item with the outcome.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/event.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"
#include "config.hpp"
#include "wake.hpp"

namespace awp::dispatcher {

namespace net = boost::asio;

/// Counters for heartbeats, logs and tests.
struct stats {
    std::uint64_t wakes = 0;
    std::uint64_t completed = 0;
    std::uint64_t failed = 0;
    std::uint64_t scans = 0;
};

class service : public core::daemon::service {
public:
    service(net::io_context& ioc, config cfg);
    ~service() override;

    net::awaitable<void> run() override;
    void request_stop() override;

    const stats& counters() const noexcept { return stats_; }
    std::size_t in_flight() const noexcept { return in_flight_; }

private:
    struct agent_state {
        double oldest = 0;         // epoch seconds of its oldest waiting item
        std::uint64_t served = 0;  // dispatch sequence of its last wake (0: never)
        bool has_work = false;
        bool busy = false;
    };

    net::awaitable<void> resolve_gateway();
    net::awaitable<void> dispatch_loop();
    net::awaitable<void> scan();
    net::awaitable<void> fill_slots();
    net::awaitable<std::optional<inbox_item>> lease(std::string agent_id);
    net::awaitable<void> handle(std::size_t slot, inbox_item item);
    net::awaitable<std::vector<blocker>> unresolved_blockers(std::size_t slot, std::string task_id);
    net::awaitable<void> transition(std::size_t slot, inbox_item item, bool success,
                                    std::string reason);
    net::awaitable<void> heartbeat_loop();
    net::awaitable<void> sleep_for(std::chrono::milliseconds d);
    void finished(std::size_t slot, const std::string& agent_id);
    const std::string* pick_agent();

    net::io_context& ioc_;
    config cfg_;
    std::string gateway_id_;
    std::string gateway_slug_;
    std::string tenant_id_;
    std::string started_at_;
    std::vector<std::string> secrets_;

    core::pg::session lease_db_;
    core::pg::session heartbeat_db_;
    std::vector<std::unique_ptr<core::pg::session>> slot_db_;
    std::vector<bool> slot_busy_;
    std::unique_ptr<core::listener> listener_;

    std::unordered_map<std::string, agent_state> agents_;
    std::uint64_t serve_seq_ = 0;
    std::size_t in_flight_ = 0;
    bool dirty_ = true;
    bool ready_ = false;
    bool stopping_ = false;
    std::optional<std::chrono::steady_clock::time_point> next_due_;

    core::event wake_;
    core::event idle_;
    core::event listener_done_;
    core::event heartbeat_done_;
    net::steady_timer heartbeat_timer_;
    stats stats_;
};

}  // namespace awp::dispatcher
