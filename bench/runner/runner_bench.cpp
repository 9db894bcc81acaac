// Benchmarks for awp-command-runner (bench/runner/run.sh drives them):
//   protocol N LEASERS  - N commands through the runner's own statements and client path
//                         (lease_and_start_command, then finish_and_lease_command: a command's
//                         completion with the next lease), no-op handler, LEASERS threads
//   latency N           - N commands inserted one at a time while a real runner runs; pickup
//                         latency = started_at - created_at (server clock), p50/p99
//   e2e N               - N commands inserted at once; commands/s until the real runner finished
//   spawn N [PROGRAM]   - cost of N spawns of PROGRAM (default /bin/true) through
//                         core::process::run, one after the other
// Environment: DATABASE_URL, BENCH_GATEWAY (slug), BENCH_GATEWAY_ID, BENCH_LEASE_URL (optional).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "awp/core/pg.hpp"
#include "awp/core/process.hpp"
#include "queue_sql.hpp"

namespace pg = awp::core::pg;
namespace net = boost::asio;
using clk = std::chrono::steady_clock;

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    if (!v) {
        std::fprintf(stderr, "runner_bench: %s is not set\n", name);
        std::exit(2);
    }
    return v;
}

void insert(pg::connection& c, const std::string& gateway_id, int n) {
    c.exec(
        "INSERT INTO agent_commands (tenant_id, gateway_id, action, status) "
        "SELECT g.tenant_id, g.id, 'auth_list', 'pending' FROM gateways g, generate_series(1, $2) "
        "WHERE g.id = $1",
        {gateway_id, n});
}

double seconds_since(clk::time_point t) {
    return std::chrono::duration<double>(clk::now() - t).count();
}

// One leaser: the runner's own statements (queue_sql.hpp) on a pg::session, as prepared
// statements over libpq's non-blocking interface on an io_context, exactly as the runner runs
// them; the handler does nothing.
net::awaitable<void> leaser(std::string dsn, std::string slug, std::string me,
                            std::atomic<int>& done) {
    pg::session db(dsn, me);
    const std::optional<std::string> no_tenant;
    const std::optional<std::string> none;
    const std::optional<int> zero(0);
    // As the runner: the first lease on its own, then each command's completion together with
    // the next lease; the last call completes and finds nothing.
    auto r = co_await db.query_prepared(awp::runner::sql::kLeaseAndStart, 180, slug, me, no_tenant);
    while (!r.empty()) {
        const std::string id(r.text(0, 0)), token(r.text(0, 6));
        r = co_await db.query_prepared(awp::runner::sql::kFinishAndLease, id, token,
                                       std::string("done"), zero, none, none, none, none, 180, slug,
                                       me, no_tenant);
        ++done;
    }
}

int protocol(int n, int leasers) {
    const std::string dsn = env("DATABASE_URL"), slug = env("BENCH_GATEWAY"),
                      gw = env("BENCH_GATEWAY_ID");
    // BENCH_LEASE_URL: the leasers' own login when it differs from the one that fills the queue
    // (the gateway's own login may not insert commands).
    const char* lease_env = std::getenv("BENCH_LEASE_URL");
    const std::string lease_dsn = lease_env && *lease_env ? lease_env : dsn;
    auto c = pg::connection::connect(dsn);
    c.exec("DELETE FROM agent_commands WHERE gateway_id = $1", {gw});
    insert(c, gw, n);
    c.exec("VACUUM ANALYZE agent_commands");
    std::atomic<int> done{0}, failed{0};
    const auto t0 = clk::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < leasers; ++i) {
        threads.emplace_back([&, i] {
            net::io_context io;
            net::co_spawn(io, leaser(lease_dsn, slug, "bench-" + std::to_string(i), done),
                          [&](std::exception_ptr e) {
                              if (!e) return;
                              ++failed;
                              try {
                                  std::rethrow_exception(e);
                              } catch (const std::exception& x) {
                                  std::fprintf(stderr, "leaser: %s\n", x.what());
                              }
                          });
            io.run();
        });
    }
    for (auto& t : threads) t.join();
    const double s = seconds_since(t0);
    std::printf("protocol leasers=%d commands=%d seconds=%.2f per_second=%.0f\n", leasers,
                done.load(), s, done.load() / s);
    return done.load() == n && failed.load() == 0 ? 0 : 1;
}

int latency(int n) {
    const std::string gw = env("BENCH_GATEWAY_ID");
    auto c = pg::connection::connect(env("DATABASE_URL"));
    std::vector<double> ms;
    for (int i = 0; i < n; ++i) {
        const std::string id(
            c.exec("INSERT INTO agent_commands (tenant_id, gateway_id, action, status) "
                   "SELECT tenant_id, id, 'auth_list', 'pending' FROM gateways WHERE id = $1 "
                   "RETURNING id::text",
                   {gw})
                .text(0, 0));
        const auto deadline = clk::now() + std::chrono::seconds(10);
        for (;;) {
            auto r = c.exec(
                "SELECT status::text, extract(epoch FROM started_at - created_at) * 1000 "
                "FROM agent_commands WHERE id = $1",
                {id});
            const std::string st(r.text(0, 0));
            if (st == "done" || st == "failed") {
                ms.push_back(std::stod(std::string(r.text(0, 1))));
                break;
            }
            if (clk::now() > deadline) {
                std::fprintf(stderr, "latency: command %s not finished within 10 s\n", id.c_str());
                return 1;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(500));
        }
    }
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double p) {
        return ms[std::min(ms.size() - 1,
                           static_cast<std::size_t>(p * static_cast<double>(ms.size())))];
    };
    std::printf("latency commands=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", n, pct(0.50),
                pct(0.99), ms.back());
    return 0;
}

int e2e(int n) {
    const std::string gw = env("BENCH_GATEWAY_ID");
    auto c = pg::connection::connect(env("DATABASE_URL"));
    const auto t0 = clk::now();
    insert(c, gw, n);
    // The commands not yet ended, counted on the queue's two partial indexes (pending; leased
    // or running), not by a scan of every command: the poll must not cost the server what the
    // runner is measured by (a scan of N rows 50 times a second did).
    for (;;) {
        const long left = std::stol(std::string(
            c.exec("SELECT (SELECT count(*) FROM agent_commands WHERE gateway_id = $1 AND "
                   "status = 'pending') + (SELECT count(*) FROM agent_commands WHERE "
                   "gateway_id = $1 AND status IN ('leased', 'running'))",
                   {gw})
                .text(0, 0)));
        if (left == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double s = seconds_since(t0);
    std::printf("e2e commands=%d seconds=%.2f per_second=%.0f\n", n, s, n / s);
    return 0;
}

int spawn(int n, std::string program) {
    awp::core::process::spawn_options o;
    o.argv = {std::move(program)};
    const auto t0 = clk::now();
    for (int i = 0; i < n; ++i) {
        if (!awp::core::process::run(o).success()) return 1;
    }
    const double s = seconds_since(t0);
    std::printf("spawn count=%d seconds=%.2f per_second=%.0f\n", n, s, n / s);
    return 0;
}

// The same spawns through process::async_run on an io_context, one after another, as the runner
// runs a command's process: what the asynchronous path adds to a spawn.
int async_spawn(int n, std::string program) {
    net::io_context io;
    int failed = 0;
    const auto t0 = clk::now();
    net::co_spawn(
        io,
        [&]() -> net::awaitable<void> {
            awp::core::process::spawn_options o;
            o.argv = {program};
            for (int i = 0; i < n; ++i) {
                if (!(co_await awp::core::process::async_run(o)).success()) ++failed;
            }
        },
        net::detached);
    io.run();
    const double s = seconds_since(t0);
    std::printf("async_spawn count=%d seconds=%.2f per_second=%.0f\n", n, s, n / s);
    return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr,
                     "usage: runner_bench protocol N LEASERS | latency N | e2e N | spawn N "
                     "[PROGRAM] | async_spawn N [PROGRAM]\n");
        return 2;
    }
    const std::string mode = argv[1];
    const int n = std::atoi(argv[2]);
    try {
        if (mode == "protocol") return protocol(n, argc > 3 ? std::atoi(argv[3]) : 1);
        if (mode == "latency") return latency(n);
        if (mode == "e2e") return e2e(n);
        if (mode == "spawn") return spawn(n, argc > 3 ? argv[3] : "/bin/true");
        if (mode == "async_spawn") return async_spawn(n, argc > 3 ? argv[3] : "/bin/true");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "runner_bench: %s\n", e.what());
        return 1;
    }
    return 2;
}
