// Unit tests of the queue driver: bounded concurrency, no lost wake-ups, drain on stop.
#include <catch2/catch.hpp>

#include <deque>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/event.hpp"
#include "awp/core/lease.hpp"

namespace net = boost::asio;
using namespace awp::core;
using namespace std::chrono_literals;

namespace {
// A fake queue: items are ints; handling one takes `work` of timer time.
struct fake_queue {
    std::deque<int> pending;
    std::vector<int> done;
    std::size_t running = 0, max_running = 0;
    int lease_calls = 0;
};

net::awaitable<void> sleep_for(std::chrono::milliseconds d) {
    net::steady_timer t(co_await net::this_coro::executor, d);
    co_await t.async_wait(net::use_awaitable);
}
}  // namespace

TEST_CASE("the queue driver leases until empty and never exceeds its concurrency", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    for (int i = 0; i < 20; ++i) q.pending.push_back(i);
    queue_driver<int> driver(
        ioc.get_executor(), {"test", 3},
        [&]() -> net::awaitable<std::optional<int>> {
            ++q.lease_calls;
            if (q.pending.empty()) co_return std::nullopt;
            int v = q.pending.front();
            q.pending.pop_front();
            co_return v;
        },
        [&](int v) -> net::awaitable<void> {
            q.max_running = std::max(q.max_running, ++q.running);
            co_await sleep_for(2ms);
            --q.running;
            q.done.push_back(v);
        });
    driver.wake();
    net::co_spawn(ioc, driver.run(), net::detached);
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            while (q.done.size() < 20) co_await sleep_for(1ms);
            driver.stop();
        },
        net::detached);
    ioc.run_for(5s);
    CHECK(q.done.size() == 20);
    CHECK(q.max_running == 3);
    CHECK(q.max_running <= 3);
}

TEST_CASE("a wake during a lease round is not lost", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    int handled = 0;
    queue_driver<int> driver(
        ioc.get_executor(), {"test", 1},
        [&]() -> net::awaitable<std::optional<int>> {
            co_await sleep_for(1ms);
            if (q.pending.empty()) co_return std::nullopt;
            int v = q.pending.front();
            q.pending.pop_front();
            co_return v;
        },
        [&](int) -> net::awaitable<void> {
            ++handled;
            co_return;
        });
    net::co_spawn(ioc, driver.run(), net::detached);
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            driver.wake();  // empty queue: the driver leases nothing and goes back to waiting
            co_await sleep_for(5ms);
            // An item arrives with its notification while nothing is in flight.
            q.pending.push_back(1);
            driver.wake();
            co_await sleep_for(20ms);
            driver.stop();
        },
        net::detached);
    ioc.run_for(2s);
    CHECK(handled == 1);
}

TEST_CASE("stop lets in-flight items finish and leases nothing new", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    for (int i = 0; i < 10; ++i) q.pending.push_back(i);
    bool run_returned = false;
    queue_driver<int> driver(
        ioc.get_executor(), {"test", 2},
        [&]() -> net::awaitable<std::optional<int>> {
            if (q.pending.empty()) co_return std::nullopt;
            int v = q.pending.front();
            q.pending.pop_front();
            co_return v;
        },
        [&](int v) -> net::awaitable<void> {
            co_await sleep_for(30ms);
            q.done.push_back(v);
        });
    driver.wake();
    net::co_spawn(ioc, driver.run(), [&](std::exception_ptr) { run_returned = true; });
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            co_await sleep_for(10ms);  // two items in flight now
            driver.stop();
        },
        net::detached);
    ioc.run_for(2s);
    CHECK(run_returned);
    CHECK(q.done.size() == 2);  // the two in flight finished; the other eight stay queued
    CHECK(q.pending.size() == 8);
}

TEST_CASE("a failing lease call is retried after a pause instead of spinning", "[lease]") {
    net::io_context ioc;
    int calls = 0;
    int handled = 0;
    queue_options opts{"test", 1, 20ms};
    queue_driver<int> driver(
        ioc.get_executor(), opts,
        [&]() -> net::awaitable<std::optional<int>> {
            ++calls;
            if (calls <= 2) throw std::runtime_error("database down");
            if (calls == 3) co_return 7;
            co_return std::nullopt;
        },
        [&](int) -> net::awaitable<void> {
            ++handled;
            co_return;
        });
    driver.wake();
    net::co_spawn(ioc, driver.run(), net::detached);
    ioc.run_for(200ms);
    driver.stop();
    ioc.run_for(50ms);
    CHECK(handled == 1);
    CHECK(calls >= 3);
    CHECK(calls <= 6);  // paused between failures, not thousands of calls
}

TEST_CASE("events coalesce and remember a set before the wait", "[lease]") {
    net::io_context ioc;
    event e(ioc.get_executor());
    int woke = 0;
    bool second_wait_set = true;
    e.set();
    e.set();
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            co_await e.wait();
            ++woke;
            second_wait_set = co_await e.wait_for(10ms);
        },
        net::detached);
    ioc.run_for(1s);
    CHECK(woke == 1);
    CHECK_FALSE(second_wait_set);
}
