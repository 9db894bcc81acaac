// The scheduler's ticks: claim (a row and a transaction-level lock), run the three maintenance
// functions, log.
#include "service.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"

namespace awp::scheduler {

namespace log = core::log;
namespace pg = core::pg;
using namespace std::chrono_literals;

namespace {

constexpr const char* kDaemon = "scheduler";
constexpr const char* kVersion = "0.1.0";
// Advisory lock space of the scheduler, transaction-level only: (kLockClass, tick mod 2^31-1)
// marks a tick being run, (kLockClass, -1) serialises the work of the ticks.
constexpr int kLockClass = 0x61777073;  // "awps"
constexpr int kWorkKey = -1;

int tick_key(std::int64_t n) { return static_cast<int>(n % 2147483647); }

}  // namespace

void add_options(core::daemon::cli& cli, config& c) {
    cli.add_common(c.common);
    auto& app = cli.app();
    app.add_option("--tick-interval", c.tick_interval_s,
                   "Seconds between ticks; ticks fall on multiples of it since the epoch "
                   "(60: every minute boundary; shorter only for tests)")
        ->envname("TICK_INTERVAL")
        ->check(CLI::Range(0.2, 3600.0))
        ->capture_default_str();
    app.add_option("--gateway", c.gateway,
                   "Gateway (id or slug) the heartbeat is filed under, resolved once")
        ->envname("GATEWAY_ID")
        ->capture_default_str();
    app.add_option("--tenant-id", c.tenant_id,
                   "Tenant of that gateway (optional: it must belong to it)")
        ->envname("TENANT_ID");
    app.add_option("--heartbeat-interval", c.heartbeat_s, "Seconds between heartbeats")
        ->envname("HEARTBEAT_INTERVAL")
        ->check(CLI::Range(0.1, 3600.0))
        ->capture_default_str();
}

service::service(net::io_context& ioc, config cfg)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      db_(cfg_.common.database_url, "tick"),
      heartbeat_db_(cfg_.common.database_url, "heartbeat"),
      heartbeat_(
          ioc.get_executor(), heartbeat_db_,
          {.gateway = cfg_.gateway,
           .tenant_id = cfg_.tenant_id.empty() ? std::nullopt : std::optional(cfg_.tenant_id),
           .daemon = kDaemon,
           .instance = cfg_.common.instance,
           .version = kVersion,
           .started_at = {},
           .interval = cfg_.heartbeat()},
          [this](core::heartbeat::details& d) {
              d.add("last_tick", last_tick_)
                  .add("ticks_run", ticks_run_)
                  .add("ticks_skipped", ticks_skipped_);
          }),
      tick_timer_(ioc),
      heartbeat_done_(ioc.get_executor()) {}

void service::request_stop() {
    stopping_ = true;
    tick_timer_.cancel();
    heartbeat_.stop();
}

std::int64_t service::tick_of(std::chrono::system_clock::time_point t) const {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    return ms / cfg_.tick_interval().count();
}

std::chrono::system_clock::time_point service::start_of(std::int64_t n) const {
    return std::chrono::system_clock::time_point(
        std::chrono::milliseconds(n * cfg_.tick_interval().count()));
}

net::awaitable<tick_counts> service::run_tick(std::int64_t n) {
    tick_counts out;
    out.tick = n;
    pg::connection* c = co_await db_.get();
    if (last_tick_ == n) co_return out;  // already ran it

    // The claim, inside the tick's own transaction (nothing of it outlives the transaction,
    // so DATABASE_URL may point at a transaction-pooling PgBouncer): a tick another scheduler
    // is running now (its transaction-level lock) or has run (its row in scheduler_ticks,
    // committed with its work) is skipped. The row keeps a scheduler whose clock runs late from
    // running a tick again after another one finished it.
    co_await c->async_exec("BEGIN");
    auto claim = co_await c->async_query(
        "SELECT pg_try_advisory_xact_lock($1::int, $2::int) AND NOT EXISTS (SELECT 1 FROM "
        "public.scheduler_ticks WHERE tick = $3::bigint)",
        kLockClass, tick_key(n), n);
    if (claim.get<bool>(0, 0)) {
        claim = co_await c->async_query(
            "INSERT INTO public.scheduler_ticks (tick, instance) VALUES ($1::bigint, $2) "
            "ON CONFLICT (tick) DO NOTHING RETURNING true",
            n, cfg_.common.instance);
    }
    if (claim.empty() || !claim.get<bool>(0, 0)) {
        co_await c->async_exec("ROLLBACK");
        co_return out;
    }
    // The work itself never runs in two schedulers at once (a catch-up tick of one beside the
    // current tick of another): the tick is ours, so wait for the other to finish.
    co_await c->async_exec("SET LOCAL lock_timeout = '60s'");
    co_await c->async_query("SELECT pg_advisory_xact_lock($1::int, $2::int)", kLockClass, kWorkKey);
    co_await c->async_exec(
        "DELETE FROM public.scheduler_ticks WHERE ran_at < now() - interval '1 day'");
    out.ran = true;
    struct step {
        const char* name;
        const char* sql;
    };
    const step steps[] = {
        {"spawn_routine_schedule_items", "SELECT public.spawn_routine_schedule_items()"},
        {"spawn_due_task_instances", "SELECT public.spawn_due_task_instances()"},
        {"escalate_overdue_tasks", "SELECT public.escalate_overdue_tasks()"},
        {"reap_expired_leases",
         "SELECT commands_requeued, commands_failed, inbox_retried, inbox_dead_lettered, "
         "knowledge_released FROM public.reap_expired_leases()"},
    };
    for (const auto& s : steps) {
        co_await c->async_exec("SAVEPOINT tick_step");
        std::string failure;
        pg::result r;
        try {
            r = co_await c->async_exec(s.sql);
        } catch (const pg::connection_error&) {
            throw;
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (!failure.empty()) {
            // One broken step must not stop the others.
            co_await c->async_exec("ROLLBACK TO SAVEPOINT tick_step");
            log::error("tick step failed",
                       {{"tick", out.tick}, {"step", s.name}, {"error", failure}});
            out.errors += (out.errors.empty() ? "" : ",") + std::string(s.name);
            continue;
        }
        co_await c->async_exec("RELEASE SAVEPOINT tick_step");
        if (r.empty()) continue;
        const std::string_view name = s.name;
        if (name == "spawn_routine_schedule_items") {
            out.routine_items = r.get_optional<int>(0, 0).value_or(0);
        } else if (name == "spawn_due_task_instances") {
            out.task_instances = r.get_optional<int>(0, 0).value_or(0);
        } else if (name == "escalate_overdue_tasks") {
            out.overdue_missed = r.get_optional<int>(0, 0).value_or(0);
        } else {
            out.commands_requeued = r.get_optional<int>(0, 0).value_or(0);
            out.commands_failed = r.get_optional<int>(0, 1).value_or(0);
            out.inbox_retried = r.get_optional<int>(0, 2).value_or(0);
            out.inbox_dead_lettered = r.get_optional<int>(0, 3).value_or(0);
            out.knowledge_released = r.get_optional<int>(0, 4).value_or(0);
        }
    }
    co_await c->async_exec("COMMIT");
    last_tick_ = n;
    co_return out;
}

net::awaitable<void> service::run() {
    auto ex = co_await net::this_coro::executor;
    co_await db_.get();
    log::info("ready", {{"tick_interval_ms", static_cast<long>(cfg_.tick_interval().count())}});
    core::daemon::notify_ready();
    net::co_spawn(ex, heartbeat_.run(), [this](std::exception_ptr e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& err) {
                log::error("heartbeat loop ended with an error", {{"error", err.what()}});
            }
        }
        heartbeat_done_.set();
    });

    // The first tick runs at once: after downtime, whatever came due meanwhile fires now (once:
    // spawn_routine_schedule_items moves each routine past now()), not at the next boundary.
    std::int64_t n = tick_of(std::chrono::system_clock::now());
    bool first = true;
    while (!stopping_) {
        const auto t0 = std::chrono::steady_clock::now();
        std::string failure;
        bool broken = false;
        tick_counts counts;
        try {
            counts = co_await run_tick(n);
        } catch (const pg::connection_error& e) {
            failure = e.what();
            broken = true;
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (broken) {
            db_.reset();  // the tick's transaction, claim included, went with the connection
        } else if (!failure.empty()) {
            // Leave no aborted transaction behind for the next tick.
            try {
                co_await db_.exec("ROLLBACK");
            } catch (const std::exception&) {
                db_.reset();
            }
        }
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
        if (!failure.empty()) {
            log::warn("tick failed", {{"tick", n}, {"error", failure}});
        } else if (counts.ran) {
            ++ticks_run_;
            log::info("tick", {{"tick", n},
                               {"catch_up", first},
                               {"routine_items", counts.routine_items},
                               {"overdue_missed", counts.overdue_missed},
                               {"task_instances", counts.task_instances},
                               {"commands_requeued", counts.commands_requeued},
                               {"commands_failed", counts.commands_failed},
                               {"inbox_retried", counts.inbox_retried},
                               {"inbox_dead_lettered", counts.inbox_dead_lettered},
                               {"knowledge_released", counts.knowledge_released},
                               {"errors", counts.errors},
                               {"duration_ms", static_cast<long>(ms)}});
        } else {
            ++ticks_skipped_;
            log::info("tick skipped: another scheduler has it", {{"tick", n}});
        }
        first = false;

        // Sleep to the next boundary. Ticks missed while this process was suspended or the
        // database was down are not replayed one by one: the next tick catches up.
        const std::int64_t next = std::max(n + 1, tick_of(std::chrono::system_clock::now()) + 1);
        const auto wait = start_of(next) - std::chrono::system_clock::now();
        tick_timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::max(wait, std::chrono::system_clock::duration::zero())));
        boost::system::error_code ec;
        co_await tick_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
        n = std::max(next, tick_of(std::chrono::system_clock::now()));
    }
    heartbeat_.stop();
    co_await heartbeat_done_.wait();
}

}  // namespace awp::scheduler
