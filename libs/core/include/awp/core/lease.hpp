// The lease protocol's driver, shared by the three queue daemons (the command runner, the inbox
// dispatcher, the embedder; docs/architecture.md). It owns everything a queue has in common:
//   wake-up     LISTEN on the queue's channel (core::listener) + the safety poll + a due time;
//   lease       until the queue is empty or every slot is busy, in batches;
//   retry       one back-off policy for a failed lease and for a final transition that cannot
//               reach the database (figures per queue);
//   finish      the row's final transition, written here and only here, right after the work
//               (or, as an option, in one transaction with the next lease: sql/0015);
//   drain       stop() leases nothing more; run() returns once the rows in hand are finished.
// A queue supplies only what is its own: how to lease, what to do with one row, how to write
// its outcome (the `lease_queue` concept below). A row's lease outlives its work by design: each
// queue leases for its work's own timeout plus a margin (COMMAND_TIMEOUT + 60 s, the wake timeout
// + kill grace + 60 s, EMBEDDER_LEASE_SECONDS), so the driver never extends a lease.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/event.hpp"
#include "awp/core/log.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"

namespace awp::core {

/// One back-off policy for every queue; its figures are per queue.
struct retry_policy {
    /// Pause after a failed lease (the database is likely down), doubled up to `cap`; any
    /// wake-up (the listener's reconnect is one) cuts it short.
    std::chrono::milliseconds first{250};
    std::chrono::milliseconds cap{std::chrono::seconds(5)};
    /// How long a final transition is retried through an outage before the row is left to its
    /// lease's expiry (the queue's reaper then retries or fails it).
    std::chrono::milliseconds finish_for{std::chrono::seconds(60)};
};

struct queue_options {
    std::string name = "queue";
    /// Rows worked at once; slot numbers 0..concurrency-1 are handed to work() and finish().
    std::size_t concurrency = 1;
    /// Rows one lease call may return; more than `concurrency` waits in order for a slot.
    std::size_t batch = 1;
    retry_policy retry;
    /// Wake-up: the queue's channel is channels[0]; other channels reach on_notify only.
    /// No channels: the owner calls wake() itself.
    listener_options listen;
    /// The final transition of the last row and the next lease in one transaction
    /// (finish_and_lease); needs concurrency 1.
    bool finish_with_next_lease = false;
};

/// What one lease call returned.
template <class Item>
struct lease_batch {
    std::vector<Item> items;
    /// Nothing more is leasable now, but something will be in this long (a back-off ends).
    std::optional<std::chrono::milliseconds> next_due;
};

/// How a row's final transition ended.
enum class finish_status {
    written,    // the queue's finish() (or finish_and_lease()) succeeded
    refused,    // the database refused it (lease lost, illegal transition): the row says why
    abandoned,  // the database stayed unreachable for retry.finish_for: the lease will expire
};

/// A queue, as the driver sees it. All calls run on the driver's executor.
///   lease(room)        leases up to `room` rows; throws when the database fails (retried).
///   work(row, slot)    does the job and returns its outcome; writes nothing final. Should it
///                      throw, that is a bug: the driver logs it and finishes the row with
///                      failed(row, what) instead, so the row never waits for its lease.
///   finish(row, outcome, slot)  writes the final transition; pg::connection_error is retried,
///                      any other error is a refusal (logged, never retried).
///   settled(row, outcome, status)  the end of a row: counters, logs, bookkeeping.
template <class Q>
concept lease_queue = requires(Q& q, typename Q::row_type& row, const typename Q::row_type& crow,
                               const typename Q::outcome_type& out, std::size_t n, std::string what,
                               finish_status status) {
    { q.lease(n) } -> std::same_as<net::awaitable<lease_batch<typename Q::row_type>>>;
    { q.work(row, n) } -> std::same_as<net::awaitable<typename Q::outcome_type>>;
    { q.failed(crow, what) } -> std::same_as<typename Q::outcome_type>;
    { q.finish(crow, out, n) } -> std::same_as<net::awaitable<void>>;
    {q.settled(crow, out, status)};
};

/// Optional: the previous row's final transition and the next lease in one transaction. On
/// pg::connection_error the driver keeps the transition and tries again; on any other error it
/// writes the transition alone (finish) and leases alone.
template <class Q>
concept combined_lease_queue = lease_queue<Q> &&
    requires(Q& q, const typename Q::row_type& crow, const typename Q::outcome_type& out,
             std::size_t n) {
    {
        q.finish_and_lease(crow, out, n)
        } -> std::same_as<net::awaitable<lease_batch<typename Q::row_type>>>;
};

/// The one retry loop of every transition a queue writes (the driver's final transitions, the
/// runner's lease extensions and payload patches): attempt() runs until it succeeds; a lost
/// connection (pg::connection_error) is retried with the policy's back-off for
/// policy.finish_for, then given up (the row's lease expiry settles it); any other error is a
/// refusal (lease lost, illegal transition: the row says what happened), logged, not retried.
/// A retry after a commit that did happen is refused by the row's checks, never applied twice.
template <class Attempt>
net::awaitable<finish_status> retry_transition(retry_policy policy, std::string queue,
                                               std::string what, Attempt attempt) {
    auto ex = co_await net::this_coro::executor;
    const auto give_up = std::chrono::steady_clock::now() + policy.finish_for;
    pg::backoff backoff(policy.first, policy.cap);
    for (;;) {
        std::string failure;
        bool broken = false;
        try {
            co_await attempt();
            co_return finish_status::written;
        } catch (const pg::connection_error& e) {
            failure = e.what();
            broken = true;
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (!broken) {
            log::warn("transition refused",
                      {{"queue", queue}, {"transition", what}, {"error", failure}});
            co_return finish_status::refused;
        }
        if (std::chrono::steady_clock::now() >= give_up) {
            log::error("giving up a transition; the row's lease will expire",
                       {{"queue", queue}, {"transition", what}, {"error", failure}});
            co_return finish_status::abandoned;
        }
        const auto wait = backoff.next();
        log::warn("database unavailable during a transition, retrying",
                  {{"queue", queue},
                   {"transition", what},
                   {"error", failure},
                   {"retry_ms", static_cast<long>(wait.count())}});
        net::steady_timer t(ex, wait);
        boost::system::error_code ec;
        co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
}

/// The owner's view of the wake-up: every notification (return true when it concerns the
/// queue: wakes it) and every rescan (after each LISTEN succeeded and each safety poll).
struct queue_hooks {
    std::function<bool(const pg::notification&)> on_notify;
    std::function<void(rescan_reason)> on_rescan;
};

/// Drives one queue on a single-threaded executor.
template <lease_queue Q>
class queue_driver {
public:
    using item = typename Q::row_type;
    using outcome = typename Q::outcome_type;

    queue_driver(const net::any_io_executor& ex, Q& queue, queue_options opts,
                 queue_hooks hooks = {})
        : ex_(ex),
          q_(queue),
          opts_(std::move(opts)),
          hooks_(std::move(hooks)),
          wake_(ex),
          slot_(ex),
          idle_(ex),
          listener_done_(ex),
          slot_busy_(opts_.concurrency == 0 ? 1 : opts_.concurrency, false) {
        if (opts_.concurrency == 0) opts_.concurrency = 1;
        if (opts_.batch == 0) opts_.batch = 1;
        if (opts_.finish_with_next_lease && opts_.concurrency != 1) {
            throw error("queue " + opts_.name + ": finish_with_next_lease needs concurrency 1");
        }
    }

    /// Something may be waiting: a notification, a reconnect or a safety poll.
    void wake() { wake_.set(); }
    /// Stops leasing (and listening); run() returns once the rows in hand are finished.
    void stop() {
        stopping_ = true;
        if (listener_) listener_->stop();
        wake_.set();
        slot_.set();
    }
    std::size_t in_flight() const noexcept { return in_flight_; }
    std::uint64_t handled() const noexcept { return handled_; }

    net::awaitable<void> run() {
        if (!opts_.listen.channels.empty()) start_listener();
        while (!stopping_) {
            if (due_) {
                auto left = *due_ - std::chrono::steady_clock::now();
                if (left < std::chrono::milliseconds(0)) left = std::chrono::milliseconds(0);
                co_await wake_.wait_for(left);
                if (std::chrono::steady_clock::now() >= *due_) due_.reset();
            } else {
                co_await wake_.wait();
            }
            if (stopping_) break;
            co_await drain();
        }
        backlog_.clear();  // leased, never started: their leases expire and they come back
        while (in_flight_ > 0) co_await idle_.wait();
        if constexpr (combined_lease_queue<Q>) {
            if (parked_) co_await finish_parked();
        }
        if (listener_) {
            listener_->stop();
            co_await listener_done_.wait();
        }
    }

private:
    struct finished_row {
        item row;
        outcome out;
    };

    void start_listener() {
        const std::string channel = opts_.listen.channels.front();
        listener_ = std::make_unique<listener>(
            opts_.listen,
            [this, channel](const pg::notification& n) {
                const bool ours = hooks_.on_notify ? hooks_.on_notify(n) : n.channel == channel;
                if (ours) wake_.set();
            },
            [this](rescan_reason why) {
                if (hooks_.on_rescan) hooks_.on_rescan(why);
                wake_.set();
            });
        net::co_spawn(ex_, listener_->run(), [this](std::exception_ptr e) {
            if (e && !stopping_) log_exception("listener ended", e);
            listener_done_.set();
        });
    }

    /// Leases and starts rows until the queue is empty or every slot is busy.
    net::awaitable<void> drain() {
        draining_ = true;
        struct done_draining {
            bool& flag;
            ~done_draining() { flag = false; }
        } guard{draining_};
        pg::backoff backoff(opts_.retry.first, opts_.retry.cap);
        while (!stopping_) {
            if (in_flight_ >= opts_.concurrency) {
                co_await slot_.wait();
                continue;
            }
            if (!backlog_.empty()) {
                start(std::move(backlog_.front()));
                backlog_.pop_front();
                continue;
            }
            lease_batch<item> batch;
            std::string failure;
            try {
                batch = co_await lease_next();
            } catch (const std::exception& e) {
                failure = e.what();
            }
            if (!failure.empty()) {
                const auto wait = backoff.next();
                log::warn("lease failed, retrying",
                          {{"queue", opts_.name},
                           {"error", failure},
                           {"retry_ms", static_cast<long>(wait.count())}});
                co_await wake_.wait_for(wait);
                continue;
            }
            backoff.reset();
            if (batch.next_due) {
                const auto at = std::chrono::steady_clock::now() + *batch.next_due;
                if (!due_ || at < *due_) due_ = at;
            }
            if (batch.items.empty()) co_return;
            for (auto& row : batch.items) backlog_.push_back(std::move(row));
        }
    }

    net::awaitable<lease_batch<item>> lease_next() {
        // A batch, or as many rows as there are free slots when that is more.
        const std::size_t room = std::max(opts_.batch, opts_.concurrency - in_flight_);
        if constexpr (combined_lease_queue<Q>) {
            if (parked_) {
                bool refused = false;
                try {
                    auto batch = co_await q_.finish_and_lease(parked_->row, parked_->out, room);
                    settle(parked_->row, parked_->out, finish_status::written);
                    parked_.reset();
                    co_return batch;
                } catch (const pg::connection_error&) {
                    // Kept for the retry; should the lost call have committed, the retry's
                    // transition is refused and logged as such.
                    throw;
                } catch (const std::exception&) {
                    refused = true;  // one part was refused, so nothing was written
                }
                if (refused) co_await finish_parked();  // each part alone, with its own error
            }
        }
        co_return co_await q_.lease(room);
    }

    net::awaitable<void> finish_parked() {
        finished_row f = std::move(*parked_);
        parked_.reset();
        co_await finish(f.row, f.out, 0);
    }

    void start(item row) {
        std::size_t slot = 0;
        while (slot < slot_busy_.size() && slot_busy_[slot]) ++slot;
        slot_busy_[slot] = true;
        ++in_flight_;
        net::co_spawn(ex_, process(std::move(row), slot), [this, slot](std::exception_ptr e) {
            if (e) log_exception("row handling ended with an error", e);
            slot_busy_[slot] = false;
            --in_flight_;
            ++handled_;
            slot_.set();
            // A finished row may make another leasable (the dispatcher's next item of the same
            // agent): look again unless a lease round is under way anyway.
            if (!draining_) wake_.set();
            if (in_flight_ == 0) idle_.set();
        });
    }

    net::awaitable<void> process(item row, std::size_t slot) {
        std::optional<outcome> out;
        std::string crash;
        try {
            out.emplace(co_await q_.work(row, slot));
        } catch (const std::exception& e) {
            crash = e.what();
        } catch (...) {
            crash = "unknown exception";
        }
        if (!out) {
            // Never swallowed: logged here and written to the row by finish().
            log::error("row handler threw; the row is finished as failed",
                       {{"queue", opts_.name}, {"error", crash}});
            out.emplace(q_.failed(row, "internal error: " + crash));
        }
        if constexpr (combined_lease_queue<Q>) {
            if (opts_.finish_with_next_lease && !stopping_) {
                parked_.emplace(finished_row{std::move(row), std::move(*out)});
                co_return;  // the next lease writes it (lease_next), or run() at the end
            }
        }
        co_await finish(row, *out, slot);
    }

    /// The final transition, retried through an outage for retry.finish_for.
    net::awaitable<void> finish(const item& row, const outcome& out, std::size_t slot) {
        const finish_status status = co_await retry_transition(
            opts_.retry, opts_.name, "final", [&]() { return q_.finish(row, out, slot); });
        settle(row, out, status);
    }

    void settle(const item& row, const outcome& out, finish_status status) {
        try {
            q_.settled(row, out, status);
        } catch (const std::exception& e) {
            log::error("settled() threw", {{"queue", opts_.name}, {"error", e.what()}});
        }
    }

    void log_exception(const char* what, std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            log::error(what, {{"queue", opts_.name}, {"error", ex.what()}});
        } catch (...) {
            log::error(what, {{"queue", opts_.name}, {"error", "unknown exception"}});
        }
    }

    net::any_io_executor ex_;
    Q& q_;
    queue_options opts_;
    queue_hooks hooks_;
    event wake_, slot_, idle_, listener_done_;
    std::unique_ptr<listener> listener_;
    std::vector<bool> slot_busy_;
    std::deque<item> backlog_;
    std::optional<finished_row> parked_;
    std::optional<std::chrono::steady_clock::time_point> due_;
    std::size_t in_flight_ = 0;
    std::uint64_t handled_ = 0;
    bool stopping_ = false;
    bool draining_ = false;
};

}  // namespace awp::core
