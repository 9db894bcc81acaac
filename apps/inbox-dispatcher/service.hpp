// awp-inbox-dispatcher's service: the gateway resolved once, its inbox queue (queue.hpp: one item
// per ready agent at a time, round-robin, woken through the runtime CLI) driven by the shared lease
// driver (core::queue_driver: LISTEN on the gateway's inbox channel, the safety poll, the next
// back-off's due time, drain on stop), and the daemon heartbeat.
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
#include "awp/core/heartbeat.hpp"
#include "awp/core/lease.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"
#include "config.hpp"
#include "queue.hpp"

namespace awp::dispatcher {

namespace net = boost::asio;

class service : public core::daemon::service {
public:
    service(net::io_context& ioc, config cfg);
    ~service() override;

    net::awaitable<void> run() override;
    void request_stop() override;

    const stats& counters() const noexcept { return queue_.counters(); }
    std::size_t in_flight() const noexcept { return driver_ ? driver_->in_flight() : 0; }

private:
    net::awaitable<void> resolve_gateway();

    net::io_context& ioc_;
    config cfg_;
    std::string gateway_id_;
    std::string gateway_slug_;
    std::string tenant_id_;
    std::string started_at_;

    inbox_queue queue_;
    std::unique_ptr<core::queue_driver<inbox_queue>> driver_;
    core::pg::session heartbeat_db_;
    bool ready_ = false;
    bool stopping_ = false;
    std::unique_ptr<core::heartbeat::beater> beater_;
    core::event heartbeat_done_;
};

}  // namespace awp::dispatcher
