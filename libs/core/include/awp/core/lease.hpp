// The queue driver the three queue daemons share: wake -> lease until empty -> handle with
// bounded concurrency -> (the handler) transition; stops leasing and drains on shutdown.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/event.hpp"
#include "awp/core/log.hpp"
#include "awp/core/pg.hpp"

namespace awp::core {

struct queue_options {
    std::string name = "queue";
    std::size_t concurrency = 1;
    /// Pause after a failed lease call (database down) before trying again.
    std::chrono::milliseconds retry_after{std::chrono::seconds(1)};
};

/// Drives one queue on a single-threaded executor. lease() returns the next item or nullopt
/// when the queue is empty; handle() does the work and the transition (it must not throw for
/// an item's own failure: it records that in the row).
template <class Item>
class queue_driver {
public:
    using lease_fn = std::function<net::awaitable<std::optional<Item>>()>;
    using handle_fn = std::function<net::awaitable<void>(Item)>;

    queue_driver(const net::any_io_executor& ex, queue_options opts, lease_fn lease,
                 handle_fn handle)
        : ex_(ex),
          opts_(std::move(opts)),
          lease_(std::move(lease)),
          handle_(std::move(handle)),
          wake_(ex),
          slot_(ex),
          idle_(ex) {}

    /// Something may be waiting: a notification, a reconnect or a safety poll.
    void wake() { wake_.set(); }
    /// Stops leasing; run() returns once the items in flight are done.
    void stop() {
        stopping_ = true;
        wake_.set();
        slot_.set();
    }
    std::size_t in_flight() const noexcept { return in_flight_; }
    std::uint64_t handled() const noexcept { return handled_; }

    net::awaitable<void> run() {
        while (!stopping_) {
            co_await wake_.wait();
            co_await drain_queue();
        }
        while (in_flight_ > 0) co_await idle_.wait();
    }

private:
    net::awaitable<void> drain_queue() {
        while (!stopping_) {
            if (in_flight_ >= opts_.concurrency) {
                co_await slot_.wait();
                continue;
            }
            std::optional<Item> item;
            std::string failure;
            try {
                item = co_await lease_();
            } catch (const std::exception& e) {
                failure = e.what();
            }
            if (!failure.empty()) {
                // The database is likely down: pause instead of spinning, then look again.
                log::warn("lease failed", {{"queue", opts_.name}, {"error", failure}});
                net::steady_timer t(ex_, opts_.retry_after);
                boost::system::error_code ec;
                co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
                wake_.set();
                co_return;
            }
            if (!item) co_return;
            ++in_flight_;
            net::co_spawn(ex_, handle_(std::move(*item)), [this](std::exception_ptr e) {
                if (e) {
                    try {
                        std::rethrow_exception(e);
                    } catch (const std::exception& ex) {
                        log::error("handler failed", {{"queue", opts_.name}, {"error", ex.what()}});
                    }
                }
                --in_flight_;
                ++handled_;
                slot_.set();
                if (in_flight_ == 0) idle_.set();
            });
        }
    }

    net::any_io_executor ex_;
    queue_options opts_;
    lease_fn lease_;
    handle_fn handle_;
    event wake_, slot_, idle_;
    std::size_t in_flight_ = 0;
    std::uint64_t handled_ = 0;
    bool stopping_ = false;
};

}  // namespace awp::core
