// Wake-up flag on a steady_timer: set() cancels the pending wait.
#include "awp/core/event.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace awp::core {

net::awaitable<void> event::wait() {
    while (!set_) {
        boost::system::error_code ec;
        timer_.expires_at(net::steady_timer::time_point::max());
        co_await timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    set_ = false;
}

net::awaitable<bool> event::wait_for(net::steady_timer::duration timeout) {
    const auto deadline = net::steady_timer::clock_type::now() + timeout;
    while (!set_ && net::steady_timer::clock_type::now() < deadline) {
        boost::system::error_code ec;
        timer_.expires_at(deadline);
        co_await timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    const bool was = set_;
    set_ = false;
    co_return was;
}

}  // namespace awp::core
