// Unit tests of the queue driver (core::queue_driver): bounded concurrency, batches, no lost
// wake-ups, due times, one back-off policy, the final transition written once by the driver
// (retried, refused, abandoned, combined with the next lease), nothing swallowed, drain on stop.
#include <catch2/catch.hpp>

#include <deque>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/event.hpp"
#include "awp/core/lease.hpp"

namespace lease_test {

namespace net = boost::asio;
using namespace awp::core;
using namespace std::chrono_literals;

namespace {

net::awaitable<void> sleep_for(std::chrono::milliseconds d) {
    net::steady_timer t(co_await net::this_coro::executor, d);
    co_await t.async_wait(net::use_awaitable);
}

struct result {
    bool ok = true;
    std::string error;
};

// A queue of ints in memory, with knobs for every failure the driver must handle.
struct fake_queue {
    using row_type = int;
    using outcome_type = result;

    std::deque<int> pending;
    std::vector<std::pair<int, result>> written;  // the final transitions, in order
    std::vector<std::pair<int, finish_status>> settled_rows;
    std::vector<std::size_t> lease_rooms;
    std::size_t running = 0, max_running = 0;
    std::chrono::milliseconds work_time{0};
    int lease_failures = 0;                        // the next N lease calls throw
    int finish_failures = 0;                       // the next N finish calls lose the connection
    bool refuse_finish = false;                    // finish raises a domain error (lease lost)
    int throw_on = -1;                             // work() throws for this row
    std::optional<std::chrono::milliseconds> due;  // returned with an empty lease

    net::awaitable<lease_batch<int>> lease(std::size_t room) {
        lease_rooms.push_back(room);
        if (lease_failures > 0) {
            --lease_failures;
            throw pg::connection_error("database down");
        }
        lease_batch<int> b;
        while (!pending.empty() && b.items.size() < room) {
            b.items.push_back(pending.front());
            pending.pop_front();
        }
        if (b.items.empty()) b.next_due = due;
        co_return b;
    }
    net::awaitable<result> work(int& row, std::size_t) {
        max_running = std::max(max_running, ++running);
        if (work_time.count() > 0) co_await sleep_for(work_time);
        --running;
        if (row == throw_on) throw std::runtime_error("boom");
        co_return result{};
    }
    result failed(const int&, std::string what) { return result{false, std::move(what)}; }
    net::awaitable<void> finish(const int& row, const result& out, std::size_t) {
        if (finish_failures > 0) {
            --finish_failures;
            throw pg::connection_error("server closed the connection");
        }
        if (refuse_finish) throw pg::domain_error("AW002", "lease lost");
        written.emplace_back(row, out);
        co_return;
    }
    void settled(const int& row, const result&, finish_status s) {
        settled_rows.emplace_back(row, s);
    }
};

// The same queue with the one-transaction finish-and-lease of sql/0015.
struct combined_queue : fake_queue {
    int combined_calls = 0;
    bool refuse_combined = false;
    net::awaitable<lease_batch<int>> finish_and_lease(const int& row, const result& out,
                                                      std::size_t room) {
        ++combined_calls;
        if (refuse_combined) throw pg::domain_error("AW001", "illegal transition");
        written.emplace_back(row, out);
        co_return co_await lease(room);
    }
};

static_assert(lease_queue<fake_queue>);
static_assert(!combined_lease_queue<fake_queue>);
static_assert(combined_lease_queue<combined_queue>);

queue_options options(std::size_t concurrency, std::size_t batch = 1) {
    queue_options o;
    o.name = "test";
    o.concurrency = concurrency;
    o.batch = batch;
    o.retry.first = 5ms;
    o.retry.cap = 20ms;
    return o;
}

// Runs the driver until `done()` holds (checked every millisecond), then stops it.
template <class Q, class Done>
bool run_until(net::io_context& ioc, queue_driver<Q>& driver, Done done,
               std::chrono::milliseconds limit = 3s) {
    bool returned = false;
    driver.wake();
    net::co_spawn(ioc, driver.run(), [&](std::exception_ptr) { returned = true; });
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            while (!done()) co_await sleep_for(1ms);
            driver.stop();
        },
        net::detached);
    ioc.run_for(limit);
    return returned;
}

}  // namespace

TEST_CASE("the queue driver leases until empty and never exceeds its concurrency", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    q.work_time = 2ms;
    for (int i = 0; i < 20; ++i) q.pending.push_back(i);
    queue_driver<fake_queue> driver(ioc.get_executor(), q, options(3));
    CHECK(run_until(ioc, driver, [&] { return q.written.size() == 20; }));
    CHECK(q.written.size() == 20);
    CHECK(q.max_running == 3);
    CHECK(driver.handled() == 20);
    for (const auto& [row, status] : q.settled_rows) CHECK(status == finish_status::written);
}

TEST_CASE("a batch larger than the concurrency is worked in lease order, one lease per batch",
          "[lease]") {
    net::io_context ioc;
    fake_queue q;
    for (int i = 0; i < 10; ++i) q.pending.push_back(i);
    queue_driver<fake_queue> driver(ioc.get_executor(), q, options(1, 4));
    CHECK(run_until(ioc, driver, [&] { return q.written.size() == 10; }));
    REQUIRE(q.written.size() == 10);
    for (int i = 0; i < 10; ++i) CHECK(q.written[static_cast<std::size_t>(i)].first == i);
    CHECK(q.max_running == 1);
    // 4 + 4 + 2 rows, then the empty lease that ends the round.
    CHECK(q.lease_rooms == std::vector<std::size_t>{4, 4, 4, 4});
}

TEST_CASE("a wake during a lease round is not lost", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    queue_driver<fake_queue> driver(ioc.get_executor(), q, options(1));
    net::co_spawn(ioc, driver.run(), net::detached);
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            driver.wake();  // empty queue: the driver leases nothing and goes back to waiting
            co_await sleep_for(5ms);
            q.pending.push_back(1);  // an item arrives with its notification
            driver.wake();
            co_await sleep_for(20ms);
            driver.stop();
        },
        net::detached);
    ioc.run_for(2s);
    CHECK(q.written.size() == 1);
}

TEST_CASE("a due time the queue reports wakes the driver without a notification", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    q.due = 30ms;  // e.g. a back-off ends in 30 ms
    queue_driver<fake_queue> driver(ioc.get_executor(), q, options(1));
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            co_await sleep_for(10ms);
            q.pending.push_back(5);  // becomes leasable; nobody calls wake()
        },
        net::detached);
    CHECK(run_until(
        ioc, driver, [&] { return !q.written.empty(); }, 1s));
    CHECK(q.written.size() == 1);
}

TEST_CASE("stop lets the rows in hand finish and leases nothing new", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    q.work_time = 30ms;
    for (int i = 0; i < 10; ++i) q.pending.push_back(i);
    queue_driver<fake_queue> driver(ioc.get_executor(), q, options(2));
    bool returned = false;
    driver.wake();
    net::co_spawn(ioc, driver.run(), [&](std::exception_ptr) { returned = true; });
    net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> {
            co_await sleep_for(10ms);  // two rows in flight now
            driver.stop();
        },
        net::detached);
    ioc.run_for(2s);
    CHECK(returned);
    CHECK(q.written.size() == 2);  // the two in flight were finished; eight stay queued
    CHECK(q.pending.size() == 8);
}

TEST_CASE("a failing lease call is retried with back-off instead of spinning", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    q.lease_failures = 3;
    q.pending.push_back(7);
    queue_driver<fake_queue> driver(ioc.get_executor(), q, options(1));
    CHECK(run_until(
        ioc, driver, [&] { return !q.written.empty(); }, 1s));
    CHECK(q.written.size() == 1);
    CHECK(q.lease_rooms.size() >= 4);
    CHECK(q.lease_rooms.size() <= 8);  // paused between failures, not thousands of calls
}

TEST_CASE("a handler that throws finishes its row as failed with the error, never swallowed",
          "[lease]") {
    net::io_context ioc;
    fake_queue q;
    q.throw_on = 2;
    for (int i = 1; i <= 3; ++i) q.pending.push_back(i);
    queue_driver<fake_queue> driver(ioc.get_executor(), q, options(1));
    CHECK(run_until(ioc, driver, [&] { return q.written.size() == 3; }));
    REQUIRE(q.written.size() == 3);
    CHECK(q.written[0].second.ok);
    CHECK_FALSE(q.written[1].second.ok);
    CHECK(q.written[1].second.error == "internal error: boom");
    CHECK(q.written[2].second.ok);  // the queue went on
}

TEST_CASE("a final transition is retried through a lost connection and written once", "[lease]") {
    net::io_context ioc;
    fake_queue q;
    q.finish_failures = 3;
    q.pending.push_back(1);
    queue_driver<fake_queue> driver(ioc.get_executor(), q, options(1));
    CHECK(run_until(ioc, driver, [&] { return !q.settled_rows.empty(); }));
    CHECK(q.written.size() == 1);
    REQUIRE(q.settled_rows.size() == 1);
    CHECK(q.settled_rows[0].second == finish_status::written);
}

TEST_CASE("a refused final transition is not retried, and an unreachable database is given up",
          "[lease]") {
    net::io_context ioc;
    SECTION("refused: the row says what happened") {
        fake_queue q;
        q.refuse_finish = true;
        q.pending.push_back(1);
        queue_driver<fake_queue> driver(ioc.get_executor(), q, options(1));
        CHECK(run_until(ioc, driver, [&] { return !q.settled_rows.empty(); }));
        REQUIRE(q.settled_rows.size() == 1);
        CHECK(q.settled_rows[0].second == finish_status::refused);
        CHECK(q.written.empty());
    }
    SECTION("abandoned after retry.finish_for: the lease expires") {
        fake_queue q;
        q.finish_failures = 1000;
        q.pending.push_back(1);
        auto o = options(1);
        o.retry.finish_for = 60ms;
        queue_driver<fake_queue> driver(ioc.get_executor(), q, o);
        CHECK(run_until(ioc, driver, [&] { return !q.settled_rows.empty(); }));
        REQUIRE(q.settled_rows.size() == 1);
        CHECK(q.settled_rows[0].second == finish_status::abandoned);
        CHECK(q.finish_failures > 900);  // backed off, not spun
    }
}

TEST_CASE("finish_with_next_lease writes each transition with the next lease, the last at stop",
          "[lease]") {
    net::io_context ioc;
    combined_queue q;
    for (int i = 0; i < 5; ++i) q.pending.push_back(i);
    auto o = options(1);
    o.finish_with_next_lease = true;
    queue_driver<combined_queue> driver(ioc.get_executor(), q, o);
    CHECK(run_until(ioc, driver, [&] { return q.written.size() == 5; }));
    CHECK(q.written.size() == 5);
    // Every row's transition rode on the next lease; the last one on the empty lease.
    CHECK(q.combined_calls == 5);
    CHECK(q.settled_rows.size() == 5);

    SECTION("a refused combined call writes the transition alone, then leases alone") {
        net::io_context ioc2;
        combined_queue r;
        r.refuse_combined = true;
        r.pending.push_back(1);
        r.pending.push_back(2);
        queue_driver<combined_queue> d2(ioc2.get_executor(), r, o);
        CHECK(run_until(ioc2, d2, [&] { return r.written.size() == 2; }));
        CHECK(r.written.size() == 2);
        CHECK(r.pending.empty());
    }
}

TEST_CASE("finish_with_next_lease with a concurrency above 1 is refused", "[lease]") {
    net::io_context ioc;
    combined_queue q;
    auto o = options(2);
    o.finish_with_next_lease = true;
    CHECK_THROWS_AS(queue_driver<combined_queue>(ioc.get_executor(), q, o), awp::core::error);
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

}  // namespace lease_test
