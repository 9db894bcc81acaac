// A wake-up flag one coroutine waits on and anyone on the same executor sets; sets coalesce.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace awp::core {

namespace net = boost::asio;

/// Single-waiter event for a single-threaded io_context: set() before wait() is remembered,
/// several set()s before one wait() count once.
class event {
public:
    explicit event(const net::any_io_executor& ex) : timer_(ex) {
        timer_.expires_at(net::steady_timer::time_point::max());
    }
    void set() {
        set_ = true;
        timer_.cancel();
    }
    bool is_set() const noexcept { return set_; }
    /// Returns once set() has been called since the last wait() returned, then clears it.
    net::awaitable<void> wait();
    /// Like wait(), but gives up after `timeout`; returns whether the event was set.
    net::awaitable<bool> wait_for(net::steady_timer::duration timeout);

private:
    net::steady_timer timer_;
    bool set_ = false;
};

}  // namespace awp::core
