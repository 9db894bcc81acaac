// Dispatcher benchmark driver: `latency` inserts items one at a time and waits for the wake's
// start stamp (insert -> runtime started); `drain` waits until every item is done and reports
// items per second; `rss` prints a process's resident set size.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "awp/core/pg.hpp"

namespace pg = awp::core::pg;
using namespace std::chrono_literals;

namespace {

long long now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

int latency(const std::string& dsn, const std::string& stamps, int samples) {
    auto c = pg::connection::connect(dsn);
    auto agents = c.exec(
        "SELECT id::text, tenant_id::text FROM agents WHERE slug LIKE 'lat-%' ORDER BY slug");
    if (agents.empty()) {
        std::cerr << "no lat-* agents\n";
        return 1;
    }
    std::vector<double> ms;
    for (int i = 0; i < samples; ++i) {
        const int a = i % agents.size();
        const long long t0 = now_ns();
        auto r =
            c.exec("SELECT awp_enqueue_inbox_item($1, $2, 'heartbeat', 'lat-' || $3, 't', 's')",
                   {std::string(agents.text(a, 1)), std::string(agents.text(a, 0)), i});
        const std::string path = stamps + "/" + std::string(r.text(0, 0));
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        long long stamp = 0;
        while (std::chrono::steady_clock::now() < deadline) {
            std::ifstream f(path);
            if (f >> stamp) break;
            std::this_thread::sleep_for(100us);
        }
        if (!stamp) {
            std::cerr << "sample " << i << ": no wake within 5 s\n";
            return 1;
        }
        ms.push_back(static_cast<double>(stamp - t0) / 1e6);
        std::this_thread::sleep_for(2ms);
    }
    std::printf(
        "pickup latency (insert -> runtime started), %d sequential samples: min %.2f ms, "
        "p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
        samples, pct(ms, 0), pct(ms, 0.5), pct(ms, 0.99), pct(ms, 1));
    return 0;
}

int drain(const std::string& dsn, long total, double timeout_s) {
    auto c = pg::connection::connect(dsn);
    const auto t0 = std::chrono::steady_clock::now();
    const auto deadline = t0 + std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    long done = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        done = std::stol(std::string(
            c.exec("SELECT count(*) FROM agent_inbox_items WHERE status = 'done'").text(0, 0)));
        if (done >= total) break;
        std::this_thread::sleep_for(20ms);
    }
    // The exact span: first lease to last completion, from the rows themselves.
    auto r = c.exec(
        "SELECT count(*) FILTER (WHERE status = 'done'), "
        "extract(epoch FROM max(completed_at) - min(leased_at))::float8 FROM agent_inbox_items");
    const long n = std::stol(std::string(r.text(0, 0)));
    const double span = r.get<double>(0, 1);
    std::printf(
        "drain: %ld of %ld items done in %.2f s (first lease -> last completion) = %.0f "
        "items/s\n",
        n, total, span, span > 0 ? static_cast<double>(n) / span : 0.0);
    return n >= total ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> a(argv + 1, argv + argc);
    try {
        if (a.size() == 3 && a[0] == "latency") return latency(a[1], a[2], 300);
        if (a.size() == 4 && a[0] == "drain") return drain(a[1], std::stol(a[2]), std::stod(a[3]));
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "usage: awp-bench-dispatch latency <dsn> <stamp dir> | drain <dsn> <items> "
                 "<timeout s>\n";
    return 2;
}
