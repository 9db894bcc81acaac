// Runs an io_context in short slices until a condition holds: the tests' way to wait for what
// coroutines do on the test's own thread.
#pragma once

#include <chrono>

#include <boost/asio/io_context.hpp>

namespace awp::test {

/// Runs `ioc` until pred() holds or `timeout` passes; returns pred().
template <class P>
bool run_until(boost::asio::io_context& ioc, P pred, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!pred() && std::chrono::steady_clock::now() < end) {
        ioc.restart();
        ioc.run_for(std::chrono::milliseconds(10));
    }
    return pred();
}

}  // namespace awp::test
