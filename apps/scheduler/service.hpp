// awp-scheduler's service: on every tick boundary (a minute by default) one scheduler of all
// those running claims the tick and runs spawn_routine_schedule_items(), the spawn of recurring
// tasks, the overdue escalation and the reaping of expired leases, then logs the counts.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/event.hpp"
#include "awp/core/heartbeat.hpp"
#include "awp/core/pg.hpp"

namespace awp::scheduler {

namespace net = boost::asio;

struct config {
    core::daemon::common_config common;
    double tick_interval_s = 60;  // TICK_INTERVAL: ticks fall on multiples of it (epoch-aligned)
    std::string gateway = "default";  // GATEWAY_ID: the gateway its heartbeat is filed under
    std::string tenant_id;            // TENANT_ID: optional; the gateway must belong to it
    double heartbeat_s = 30;          // HEARTBEAT_INTERVAL

    std::chrono::milliseconds tick_interval() const {
        return std::chrono::milliseconds(static_cast<long>(tick_interval_s * 1000));
    }
    std::chrono::milliseconds heartbeat() const {
        return std::chrono::milliseconds(static_cast<long>(heartbeat_s * 1000));
    }
};

void add_options(core::daemon::cli& cli, config& c);

/// What one tick did.
struct tick_counts {
    std::int64_t tick = 0;  // tick number: epoch milliseconds / interval
    bool ran = false;       // false: another scheduler had it
    int routine_items = 0;
    int overdue_missed = 0;
    int task_instances = 0;  // recurring tasks spawned (spawn_due_task_instances)
    int commands_requeued = 0;
    int commands_failed = 0;
    int inbox_retried = 0;
    int inbox_dead_lettered = 0;
    int knowledge_released = 0;
    std::string errors;  // steps that failed (the others still ran)
};

class service : public core::daemon::service {
public:
    service(net::io_context& ioc, config cfg);

    net::awaitable<void> run() override;
    void request_stop() override;

    /// Claims tick `n` (unless another scheduler has it) and runs it. Public for tests.
    net::awaitable<tick_counts> run_tick(std::int64_t n);

    std::uint64_t ticks_run() const noexcept { return ticks_run_; }
    std::uint64_t ticks_skipped() const noexcept { return ticks_skipped_; }

private:
    std::int64_t tick_of(std::chrono::system_clock::time_point t) const;
    std::chrono::system_clock::time_point start_of(std::int64_t n) const;

    net::io_context& ioc_;
    config cfg_;
    core::pg::session db_;
    core::pg::session heartbeat_db_;
    core::heartbeat::beater heartbeat_;  // GATEWAY_ID resolved by its first beat
    std::int64_t last_tick_ = -1;
    bool stopping_ = false;
    net::steady_timer tick_timer_;
    core::event heartbeat_done_;
    std::uint64_t ticks_run_ = 0;
    std::uint64_t ticks_skipped_ = 0;
};

}  // namespace awp::scheduler
