// scale_bench: N simulated gateway hosts on one PostgreSQL, one measurement point per run.
//
// Each simulated host holds what awp-command-runner and awp-inbox-dispatcher hold on a real host
// and drives its two queues with awp's own core::queue_driver:
//   commands  lease_and_start_command, then finish_and_lease_command (the runner's statements,
//             apps/command-runner/queue_sql.hpp), on one lease connection; + 1 idle housekeeping
//             connection; + 1 LISTEN session (direct and edge modes);
//   inbox     the dispatcher's own queue (dispatcher::inbox_queue: its scan of the gateway's
//             agents after a wake-up, its lease statement on a lease connection,
//             complete_inbox_item on one of 2 slot connections, MAX_CONCURRENT = 2), the wake
//             itself left out; + 1 idle housekeeping connection; + 1 LISTEN.
// Writers insert commands and inbox items for random gateways, one row per transaction, as the
// API does (a plain INSERT as a privileged session); the row's payload carries the send time, so
// the pickup latency is "INSERT sent -> the right gateway's lease returned the row".
//
// Wake-up modes (the SQL of relay and edge is created here, in the benchmark's own database):
//   direct  today: per-gateway channels awp_commands_<gw> / awp_inbox_<gw>, one NOTIFY per write
//           (the migrations' statement triggers), 2 LISTEN sessions per gateway;
//   relay   one LISTEN session for the whole database on awp_wake, payload "<gateway id>:c|i";
//           it fans the wake-up out to each gateway over a unix socket pair (one per gateway: the
//           hop a wake daemon's long-lived stream would be); gateways hold no LISTEN session;
//   edge    per-gateway channels and listeners as today, but a write NOTIFYs only when its
//           gateway's queue had been armed (a bench_wake row: the gateway re-arms it when a lease
//           finds the queue empty, then leases once more, so no wake-up is lost).
//   awp-wake the design awp ships (sql/0025, docs/protocols/wake-relay.md): the migrations' own
//           triggers (every per-gateway NOTIFY also raised on awp_wake), a real awp-wake process
//           started here (--wake-bin), and each host's two daemons holding one stream each
//           (http::relay_opener, the gateway's own login as the Basic credentials, which the relay
//           checks by logging in); the hosts have no LISTEN session.
// Logins and where the hosts connect (--login, --pooler): "super" (the superuser over the unix
// socket: direct, relay, edge), "gateway" (each host its own login awp_gw_scale_<k> made by
// awp_gateway_role, under row-level security, as a real host), "shared" (one work login for
// every host, the daemons' DATABASE_URL login), "pool" (one pool login awp_pool_scale for every
// host, made by awp_gateway_pool_role, each host presenting its own gateway's key in every
// transaction, sql/0026: row-level security per gateway, as a hosted host). With --pooler every
// host connection goes through that PgBouncer (transaction mode) and statements are sent unnamed
// (DATABASE_PREPARED=off).
//
// What it does not reproduce: with --login super the hosts bypass row-level security; one agent
// per gateway; the runner's and dispatcher's work (a command run, an agent woken) takes no time;
// in relay mode the hosts have no safety poll of their own (the relay's listener polls and wakes
// every host).
//
// After a warm-up row per queue and gateway, phases: (A) W writers as fast as they can for T
// seconds: write throughput, DB CPU per write, pickup under full load; (B) writers at a fixed total
// rate R for T seconds: pickup p50/p99; (C) the sustained rate: steps of T seconds at fixed rates,
// bisecting between 0 and phase A's rate, a step kept up when every row written in it was picked
// up within 0.5 s of its end (phase A's writers outrun a host that cannot keep up, and the host's
// work then falls after the phase: one gateway is one runner taking commands one at a time and
// one agent taking its items one at a time). Then connections (pg_stat_activity) and backend
// memory (PSS of every server process). Prints one line "RESULT key=value ...".
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/crypto.hpp"
#include "awp/core/json.hpp"
#include "awp/core/lease.hpp"
#include "awp/core/log.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"
#include "awp/http/client.hpp"
#include "awp/http/wake.hpp"
#include "inbox-dispatcher/queue.hpp"
#include "queue_sql.hpp"

namespace net = boost::asio;
namespace core = awp::core;
namespace pg = awp::core::pg;
namespace dispatcher = awp::dispatcher;
using namespace std::chrono_literals;

namespace {

constexpr const char* kTenant = "00000000-0000-0000-0000-000000000000";
// --login pool: the pool login's password (a throwaway benchmark database's).
constexpr std::string_view kPoolPassword = "scale-bench-pool-password-0123456789";

enum class mode { direct, relay, edge, awp_wake };
enum class login_kind { super, shared, gateway, pool };

struct options {
    std::string conninfo = "host=/tmp port=5432 user=postgres";  // without dbname
    std::string db = "awp_scale_bench";
    std::string template_db = "awp_test_template";
    mode wake = mode::direct;
    std::string mode_name = "direct";
    std::string name;  // the row's name in the table (default mode_name)
    login_kind login = login_kind::super;
    std::string pooler;          // "host=... port=..." of a PgBouncer: hosts connect through it
    std::string pooler_pidfile;  // its pid file: its CPU and memory are measured
    std::string shared_url;      // --login shared: DATABASE_URL, whose login every host uses
    std::string wake_bin;        // awp-wake's binary (mode awp-wake)
    std::string auth_url;        // where awp-wake checks logins (TCP: a password login)
    int wake_port = 18095;
    int gateways = 1;
    double seconds = 5;
    int writers = 4;
    double rate = 50;  // phase B, writes/s over all writers
    int threads = 2;   // io_contexts for the gateways
    int idle_per_gateway = 2;
    int inbox_slots = 2;
    int sustain_steps = 6;     // phase C: rates tried in the search for the sustained rate
    double sustain_lag = 0.5;  // phase C: a step is kept up when its rows are all picked up
                               // within this many seconds of its end
    double ready_timeout = 600;
};

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::int64_t sent_of(std::string_view payload) {
    const auto at = payload.find("\"t\":");
    if (at == std::string_view::npos) return 0;
    return std::strtoll(std::string(payload.substr(at + 4)).c_str(), nullptr, 10);
}

std::atomic<std::uint64_t> g_picked{0};

// Phase C: the pickup latency of every row sent from g_step_t0 on (the current step).
std::atomic<std::int64_t> g_step_t0{std::numeric_limits<std::int64_t>::max()};
std::mutex g_step_m;
std::vector<double> g_step_ms;

// The hosts' safety polls per second since the start (both queues of every host): their peak
// in phases A and B shows whether hosts that started together still poll together.
constexpr std::size_t kPollSeconds = 4096;
std::atomic<std::int64_t> g_poll_t0{0};
std::vector<std::atomic<int>> g_polls(kPollSeconds);
void count_poll(core::rescan_reason why) {
    if (why != core::rescan_reason::safety_poll) return;
    const auto s = static_cast<std::size_t>((now_ns() - g_poll_t0.load()) / 1'000'000'000);
    if (s < kPollSeconds) g_polls[s].fetch_add(1, std::memory_order_relaxed);
}

struct pick {
    std::int64_t sent, got;
};

struct gateway;

struct done_t {};

struct cmd_row {
    std::string id, token;
};

// The runner's queue, as the driver sees it, with the runner's own statements.
class command_queue {
public:
    using row_type = cmd_row;
    using outcome_type = done_t;
    command_queue(gateway& g, const std::string& dsn) : g_(g), db_(dsn, "cmd-lease") {}

    net::awaitable<core::lease_batch<cmd_row>> lease(std::size_t) {
        auto b = rows(co_await db_.query_prepared(awp::runner::sql::kLeaseAndStart, 180, slug(),
                                                  "scale", no_tenant_));
        co_return co_await maybe_arm(std::move(b));
    }
    net::awaitable<done_t> work(cmd_row&, std::size_t) { co_return done_t{}; }
    done_t failed(const cmd_row&, std::string) { return {}; }
    net::awaitable<void> finish(const cmd_row& r, const done_t&, std::size_t) {
        const std::optional<std::string> none;
        co_await db_.query_prepared(awp::runner::sql::kComplete, r.id, 0, "", "", r.token, none);
    }
    net::awaitable<core::lease_batch<cmd_row>> finish_and_lease(const cmd_row& r, const done_t&,
                                                                std::size_t) {
        const std::optional<std::string> none;
        auto b = rows(co_await db_.query_prepared(awp::runner::sql::kFinishAndLease, r.id, r.token,
                                                  "done", 0, none, "", "", none, 180, slug(),
                                                  "scale", no_tenant_));
        co_return co_await maybe_arm(std::move(b));
    }
    void settled(const cmd_row&, const done_t&, core::finish_status) {}

    pg::session& db() { return db_; }

private:
    const std::string& slug() const;
    core::lease_batch<cmd_row> rows(const pg::result& r);
    net::awaitable<core::lease_batch<cmd_row>> maybe_arm(core::lease_batch<cmd_row> b);

    gateway& g_;
    pg::session db_;
    std::optional<std::string> no_tenant_;
};

// The dispatcher's own queue (apps/inbox-dispatcher, dispatcher::inbox_queue): its scan of the
// gateway's agents, its pick, its lease statement and complete_inbox_item on a slot's connection;
// everything but the wake itself, which here succeeds at once.
class inbox_queue {
public:
    using row_type = dispatcher::inbox_item;
    using outcome_type = dispatcher::wake_outcome;
    inbox_queue(gateway& g, const std::string& dsn, int slots)
        : g_(g), cfg_(config_for(dsn, slots)), q_(cfg_, {}) {}

    net::awaitable<core::lease_batch<row_type>> lease(std::size_t room);
    net::awaitable<outcome_type> work(row_type&, std::size_t) {
        co_return outcome_type{true, {}, {}};
    }
    outcome_type failed(const row_type& r, std::string what) {
        return q_.failed(r, std::move(what));
    }
    net::awaitable<void> finish(const row_type& r, const outcome_type& out, std::size_t slot) {
        co_await q_.finish(r, out, slot);
    }
    void settled(const row_type& r, const outcome_type& out, core::finish_status st) {
        q_.settled(r, out, st);
    }

    dispatcher::inbox_queue& real() { return q_; }

private:
    static dispatcher::config config_for(const std::string& dsn, int slots) {
        dispatcher::config c;
        c.common.database_url = dsn;
        c.common.instance = "scale";
        c.max_concurrent = slots;
        c.lease_seconds = 120;
        return c;
    }
    gateway& g_;
    dispatcher::config cfg_;  // before q_, which keeps a reference to it
    dispatcher::inbox_queue q_;
};

struct gateway {
    gateway(net::io_context& io_, const options& o, std::string id_, std::string slug_,
            const std::string& dsn_, pg::login own_, std::string key_)
        : io(io_),
          opt(o),
          id(std::move(id_)),
          slug(std::move(slug_)),
          dsn(dsn_),
          own(std::move(own_)),
          key(std::move(key_)),
          cq(*this, dsn_),
          iq(*this, dsn_, o.inbox_slots),
          relay_end(io_) {
        iq.real().bind(id);
        if (key.empty()) return;  // --login pool: every session presents the gateway's key
        cq.db().set_gateway_key(key);
        for (auto* s : iq.real().sessions()) s->set_gateway_key(key);
    }

    net::io_context& io;
    const options& opt;
    std::string id, slug, dsn;
    pg::login own;    // its stream's credentials (mode awp-wake): its own login, or the pool's
    std::string key;  // --login pool: its gateway's key
    command_queue cq;
    inbox_queue iq;
    std::unique_ptr<core::queue_driver<command_queue>> cd;
    std::unique_ptr<core::queue_driver<inbox_queue>> idr;
    std::vector<pg::connection> idle;
    net::local::stream_protocol::socket relay_end;  // relay mode: the gateway's end of its hop
    std::vector<pick> picks;
    bool cmd_armed = true, inbox_armed = true;  // edge mode, as last known here
    std::atomic<int> connected{0};

    void picked(std::string_view payload) {
        const std::int64_t sent = sent_of(payload), got = now_ns();
        picks.push_back({sent, got});
        if (sent >= g_step_t0.load(std::memory_order_relaxed)) {
            std::lock_guard lock(g_step_m);
            g_step_ms.push_back(static_cast<double>(got - sent) / 1e6);
        }
        g_picked.fetch_add(1, std::memory_order_relaxed);
    }

    net::awaitable<void> arm(pg::session& db, const char* q) {
        co_await db.query_prepared(
            "UPDATE public.bench_wake SET armed = true WHERE gateway_id = $1::uuid AND q = $2", id,
            q);
    }

    void start() {
        core::queue_options c;
        c.name = "commands";
        c.finish_with_next_lease = true;
        core::queue_options i;
        i.name = "inbox";
        i.concurrency = static_cast<std::size_t>(opt.inbox_slots);
        core::queue_hooks ch, ih;
        if (opt.wake != mode::relay) {
            c.listen = {dsn, {core::channels::commands(id)}, 30s, "cmd-listen", {}};
            i.listen = {dsn, {core::channels::inbox(id)}, 30s, "inbox-listen", {}};
            if (opt.wake == mode::awp_wake) {  // each daemon its own stream, as on a real host
                const auto url = "http://127.0.0.1:" + std::to_string(opt.wake_port);
                c.listen.relay = awp::http::relay_opener(url, own, "", key);
                i.listen.relay = awp::http::relay_opener(url, own, "", key);
            }
            const auto cchan = c.listen.channels[0], ichan = i.listen.channels[0];
            ch.on_notify = [this, cchan](const pg::notification& n) {
                if (n.channel != cchan) return false;
                cmd_armed = false;
                return true;
            };
            ih.on_notify = [this, ichan](const pg::notification& n) {
                if (n.channel != ichan) return false;
                inbox_armed = false;
                iq.real().mark_dirty();  // as the dispatcher's service does
                return true;
            };
        }
        ih.on_rescan = [this](core::rescan_reason why) {
            iq.real().mark_dirty();
            count_poll(why);
        };
        ch.on_rescan = count_poll;
        cd = std::make_unique<core::queue_driver<command_queue>>(io.get_executor(), cq, c, ch);
        idr = std::make_unique<core::queue_driver<inbox_queue>>(io.get_executor(), iq, i, ih);
        net::co_spawn(io, connect_all(), net::detached);
    }

    // Opens the connections a host holds besides the listeners: lease ones, slots, idle ones.
    net::awaitable<void> connect_all() {
        co_await cq.db().get();
        for (auto* s : iq.real().sessions()) co_await s->get();
        for (int k = 0; k < opt.idle_per_gateway; ++k) {
            idle.push_back(co_await pg::connection::async_connect(dsn));
        }
        // The drivers start once their connections are open (a pg::session is used by one
        // coroutine at a time); their listeners' first rescan wakes them.
        net::co_spawn(io, cd->run(), net::detached);
        net::co_spawn(io, idr->run(), net::detached);
        if (opt.wake == mode::relay) net::co_spawn(io, relay_reader(), net::detached);
        cd->wake();
        idr->wake();
        connected = 1;
    }

    net::awaitable<void> relay_reader() {
        char buf[256];
        for (;;) {
            boost::system::error_code ec;
            const auto n = co_await relay_end.async_read_some(
                net::buffer(buf), net::redirect_error(net::use_awaitable, ec));
            if (ec) co_return;
            for (std::size_t k = 0; k < n; ++k) {
                if (buf[k] == 'c') cd->wake();
                if (buf[k] == 'i') {
                    iq.real().mark_dirty();
                    idr->wake();
                }
            }
        }
    }
};

const std::string& command_queue::slug() const { return g_.slug; }

core::lease_batch<cmd_row> command_queue::rows(const pg::result& r) {
    core::lease_batch<cmd_row> b;
    for (int k = 0; k < r.size(); ++k) {
        b.items.push_back({r.get<std::string>(k, 0), r.get<std::string>(k, 6)});
        g_.picked(r.text(k, 5));
    }
    return b;
}

// Edge mode: the queue is empty and no wake-up is armed: arm, then look once more (a write
// that committed between the empty lease and the arm did not notify).
net::awaitable<core::lease_batch<cmd_row>> command_queue::maybe_arm(core::lease_batch<cmd_row> b) {
    if (g_.opt.wake != mode::edge || !b.items.empty() || g_.cmd_armed) co_return b;
    co_await g_.arm(db_, "c");
    g_.cmd_armed = true;
    co_return rows(co_await db_.query_prepared(awp::runner::sql::kLeaseAndStart, 180, slug(),
                                               "scale", no_tenant_));
}

net::awaitable<core::lease_batch<inbox_queue::row_type>> inbox_queue::lease(std::size_t room) {
    auto b = co_await q_.lease(room);
    // Edge mode: the queue is empty and no wake-up is armed: arm, then look once more (a write
    // that committed between the empty lease and the arm did not notify).
    if (g_.opt.wake == mode::edge && b.items.empty() && !g_.inbox_armed) {
        co_await g_.arm(q_.lease_session(), "i");
        g_.inbox_armed = true;
        q_.mark_dirty();
        b = co_await q_.lease(room);
    }
    for (const auto& it : b.items) g_.picked(it.payload_json);
    co_return b;
}

// The relay: one LISTEN session for the database; each wake-up goes to its gateway over that
// gateway's socket pair.
struct relay {
    relay(net::io_context& io_, const std::string& dsn_) : io(io_), dsn(dsn_) {}
    net::io_context& io;
    std::string dsn;
    std::unordered_map<std::string, net::local::stream_protocol::socket*> by_id;
    std::vector<std::unique_ptr<net::local::stream_protocol::socket>> ends;
    std::unique_ptr<core::listener> l;
    std::uint64_t received = 0;

    void add(gateway& g) {
        ends.push_back(std::make_unique<net::local::stream_protocol::socket>(io));
        net::local::connect_pair(*ends.back(), g.relay_end);
        by_id[g.id] = ends.back().get();
    }
    static void send(net::local::stream_protocol::socket& s, char c) {
        boost::system::error_code ec;
        s.write_some(net::buffer(&c, 1), ec);  // a socket pair's buffer: never blocks here
    }
    void start() {
        l = std::make_unique<core::listener>(
            core::listener_options{dsn, {"awp_wake"}, 30s, "relay", {}},
            [this](const pg::notification& n) {
                ++received;
                const auto colon = n.payload.rfind(':');
                if (colon == std::string::npos) return;
                const auto it = by_id.find(n.payload.substr(0, colon));
                if (it != by_id.end()) send(*it->second, n.payload[colon + 1]);
            },
            [this](core::rescan_reason) {
                for (auto& e : ends) {
                    send(*e, 'c');
                    send(*e, 'i');
                }
            });
        net::co_spawn(io, l->run(), net::detached);
    }
};

// ---- the database side: CPU and memory of the server's processes ----------------------------

long long read_stat_cpu(int pid, bool with_children, int* ppid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    if (!std::getline(f, s)) return -1;
    const auto close = s.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream in(s.substr(close + 2));
    std::vector<std::string> v;
    std::string t;
    while (in >> t) v.push_back(t);
    // v[0] is field 3 (state): field k is v[k - 3].
    if (v.size() < 15) return -1;
    if (ppid) *ppid = std::atoi(v[1].c_str());
    long long c = std::atoll(v[11].c_str()) + std::atoll(v[12].c_str());
    if (with_children) c += std::atoll(v[13].c_str()) + std::atoll(v[14].c_str());
    return c;
}

std::vector<int> children_of(int parent) {
    std::vector<int> out;
    DIR* d = opendir("/proc");
    if (!d) return out;
    while (auto* e = readdir(d)) {
        const int pid = std::atoi(e->d_name);
        if (pid <= 0) continue;
        int pp = 0;
        if (read_stat_cpu(pid, false, &pp) >= 0 && pp == parent) out.push_back(pid);
    }
    closedir(d);
    return out;
}

// Server CPU in ticks: the postmaster (with what it reaped) and every live child.
long long server_ticks(int postmaster) {
    long long s = read_stat_cpu(postmaster, true, nullptr);
    for (int p : children_of(postmaster)) {
        const long long c = read_stat_cpu(p, false, nullptr);
        if (c > 0) s += c;
    }
    return s;
}

// Busy ticks of the whole machine (every core): user, nice, system, irq, softirq, steal.
long long machine_busy_ticks() {
    std::ifstream f("/proc/stat");
    std::string cpu;
    long long v[8] = {};
    f >> cpu;
    for (auto& x : v) f >> x;
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
}

long long pss_kb(int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("Pss:", 0) == 0) return std::atoll(line.c_str() + 4);
    }
    return 0;
}

double pct(std::vector<double>& v, double q) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    std::size_t k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    if (k > 0) --k;
    return v[std::min(k, v.size() - 1)];
}

// ---- writers ---------------------------------------------------------------------------------

struct target {
    std::string gateway, agent;
};

struct writer_stats {
    std::atomic<std::uint64_t> writes{0};
    std::atomic<std::uint64_t> errors{0};
    std::vector<double> commit_ms;  // INSERT sent -> committed (the writers' io_context only)
    std::vector<pick> acks;         // (sent, committed) per row
};

net::awaitable<void> writer(std::string dsn, const std::vector<target>& targets, int index,
                            std::int64_t until_ns, double rate, writer_stats& st) {
    pg::connection c = co_await pg::connection::async_connect(dsn);
    std::mt19937_64 rng(static_cast<std::uint64_t>(index) * 7919 +
                        static_cast<std::uint64_t>(now_ns()));
    std::uniform_int_distribution<std::size_t> pick_gw(0, targets.size() - 1);
    const std::int64_t step = rate > 0 ? static_cast<std::int64_t>(1e9 / rate) : 0;
    std::int64_t next = now_ns();
    std::uint64_t seq = 0;
    auto ex = co_await net::this_coro::executor;
    const std::string key = "w" + std::to_string(index) + "-" + std::to_string(now_ns()) + "-";
    while (now_ns() < until_ns) {
        if (step > 0) {
            const std::int64_t wait = next - now_ns();
            if (wait > 0) {
                net::steady_timer t(ex, std::chrono::nanoseconds(wait));
                co_await t.async_wait(net::use_awaitable);
            }
            next += step;
            if (now_ns() >= until_ns) break;
        }
        const auto& t = targets[pick_gw(rng)];
        const std::int64_t sent = now_ns();
        try {
            if (rng() & 1) {
                co_await c.async_query_prepared(
                    "INSERT INTO public.agent_commands (tenant_id, gateway_id, action, status, "
                    "payload) VALUES ($1::uuid, $2::uuid, 'auth_list', 'pending', "
                    "jsonb_build_object('t', $3::bigint))",
                    kTenant, t.gateway, sent);
            } else {
                co_await c.async_query_prepared(
                    "INSERT INTO public.agent_inbox_items (tenant_id, agent_id, event_type, "
                    "dedup_key, payload) VALUES ($1::uuid, $2::uuid, 'heartbeat', $3, "
                    "jsonb_build_object('t', $4::bigint))",
                    kTenant, t.agent, key + std::to_string(++seq), sent);
            }
            st.writes.fetch_add(1, std::memory_order_relaxed);
            const std::int64_t ack = now_ns();
            st.commit_ms.push_back(static_cast<double>(ack - sent) / 1e6);
            st.acks.push_back({sent, ack});
        } catch (const std::exception& e) {
            if (st.errors.fetch_add(1) < 5) std::cerr << "writer: " << e.what() << "\n";
        }
    }
}

struct phase_result {
    double seconds = 0;
    std::uint64_t writes = 0;
    std::int64_t t0 = 0, t1 = 0;
    long long ticks = 0;
    long long client_ticks = 0;  // this process: the writers and every simulated host
    double commit_p50 = 0, commit_p99 = 0;
    std::vector<pick> acks;
};

phase_result run_writers(const options& o, const std::string& dsn,
                         const std::vector<target>& targets, double rate_total) {
    net::io_context io;
    writer_stats st;
    phase_result r;
    r.t0 = now_ns();
    const std::int64_t until = r.t0 + static_cast<std::int64_t>(o.seconds * 1e9);
    for (int w = 0; w < o.writers; ++w) {
        net::co_spawn(io, writer(dsn, targets, w, until, rate_total / o.writers, st),
                      [](std::exception_ptr e) {
                          if (e) {
                              try {
                                  std::rethrow_exception(e);
                              } catch (const std::exception& ex) {
                                  std::cerr << "writer ended: " << ex.what() << "\n";
                              }
                          }
                      });
    }
    io.run();
    r.t1 = now_ns();
    r.writes = st.writes;
    r.commit_p50 = pct(st.commit_ms, 0.5);
    r.commit_p99 = pct(st.commit_ms, 0.99);
    r.acks = std::move(st.acks);
    r.seconds = static_cast<double>(r.t1 - r.t0) / 1e9;
    return r;
}

constexpr const char* kNotifiedSql =
    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.bench_notified";

long long db_value(const std::string& dsn, const char* sql) {
    auto c = pg::connection::connect(dsn);
    return c.exec(sql).get<long long>(0, 0);
}

// ---- awp-wake, started per point (its login cache and its LISTEN belong to this database) -----

pid_t g_wake_pid = 0;

void stop_wake() {
    if (g_wake_pid > 0) {
        ::kill(g_wake_pid, SIGKILL);
        ::waitpid(g_wake_pid, nullptr, 0);
        g_wake_pid = 0;
    }
}

[[noreturn]] void fail(const std::string& what) {
    std::cerr << what << "\n";
    stop_wake();
    std::cout.flush();
    std::_Exit(1);
}

pid_t start_wake(const options& o, const std::string& listen_dsn) {
    const pid_t pid = ::fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) {
        ::setenv("DATABASE_URL", listen_dsn.c_str(), 1);
        ::setenv("AUTH_DATABASE_URL", o.auth_url.c_str(), 1);
        ::setenv("WAKE_BIND", "127.0.0.1", 1);
        ::setenv("WAKE_PORT", std::to_string(o.wake_port).c_str(), 1);
        ::setenv("LOG_LEVEL", "warn", 1);
        ::execl(o.wake_bin.c_str(), o.wake_bin.c_str(), static_cast<char*>(nullptr));
        std::perror("exec awp-wake");
        std::_Exit(127);
    }
    return pid;
}

// awp-wake's /healthz: the number of open streams, -1 while it is not listening or not up.
long wake_streams(int port) {
    try {
        awp::http::client_request r;
        r.url = "http://127.0.0.1:" + std::to_string(port) + "/healthz";
        r.timeout = std::chrono::seconds(5);
        const auto res = awp::http::fetch_sync(std::move(r));
        const auto doc = core::json::try_parse(res.body, core::json::kSmall);
        if (res.status != 200 || !doc || !doc->IsObject() || !doc->HasMember("streams") ||
            !(*doc)["streams"].IsInt64())
            return -1;
        return static_cast<long>((*doc)["streams"].GetInt64());
    } catch (const std::exception&) {
        return -1;  // not up yet
    }
}

int read_pidfile(const std::string& path) {
    std::ifstream f(path);
    int pid = 0;
    f >> pid;
    return pid;
}

void usage() {
    std::cerr << "usage: scale_bench --conninfo 'host=... port=... user=postgres' --mode "
                 "direct|relay|edge|awp-wake --gateways N [--seconds T] [--writers W] [--rate R] "
                 "[--threads K] [--idle-per-gateway I] [--db NAME] [--template NAME] [--name NAME] "
                 "[--login super|shared|gateway|pool] [--pooler 'host=... port=...'] "
                 "[--pooler-pidfile FILE] [--wake-bin PATH] [--auth-url URL] [--wake-port P] "
                 "[--sustain-steps S]\n";
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    for (int k = 1; k < argc; ++k) {
        const std::string a = argv[k];
        auto val = [&]() -> std::string {
            if (k + 1 >= argc) {
                usage();
                std::exit(2);
            }
            return argv[++k];
        };
        if (a == "--conninfo")
            o.conninfo = val();
        else if (a == "--mode")
            o.mode_name = val();
        else if (a == "--gateways")
            o.gateways = std::stoi(val());
        else if (a == "--seconds")
            o.seconds = std::stod(val());
        else if (a == "--writers")
            o.writers = std::stoi(val());
        else if (a == "--rate")
            o.rate = std::stod(val());
        else if (a == "--threads")
            o.threads = std::stoi(val());
        else if (a == "--idle-per-gateway")
            o.idle_per_gateway = std::stoi(val());
        else if (a == "--db")
            o.db = val();
        else if (a == "--template")
            o.template_db = val();
        else if (a == "--name")
            o.name = val();
        else if (a == "--login") {
            const auto l = val();
            if (l == "super")
                o.login = login_kind::super;
            else if (l == "shared")
                o.login = login_kind::shared;
            else if (l == "gateway")
                o.login = login_kind::gateway;
            else if (l == "pool")
                o.login = login_kind::pool;
            else {
                usage();
                return 2;
            }
        } else if (a == "--pooler")
            o.pooler = val();
        else if (a == "--pooler-pidfile")
            o.pooler_pidfile = val();
        else if (a == "--wake-bin")
            o.wake_bin = val();
        else if (a == "--auth-url")
            o.auth_url = val();
        else if (a == "--wake-port")
            o.wake_port = std::stoi(val());
        else if (a == "--sustain-steps")
            o.sustain_steps = std::stoi(val());
        else {
            usage();
            return 2;
        }
    }
    if (o.mode_name == "direct")
        o.wake = mode::direct;
    else if (o.mode_name == "relay")
        o.wake = mode::relay;
    else if (o.mode_name == "edge")
        o.wake = mode::edge;
    else if (o.mode_name == "awp-wake")
        o.wake = mode::awp_wake;
    else {
        usage();
        return 2;
    }
    if (o.name.empty()) o.name = o.mode_name;
    // From the environment, not the command line (where every local user could read its password).
    if (const char* u = std::getenv("DATABASE_URL")) o.shared_url = u;
    if ((o.wake == mode::awp_wake && (o.wake_bin.empty() || o.auth_url.empty())) ||
        (o.login == login_kind::shared && o.shared_url.empty()) ||
        (!o.pooler.empty() && o.login == login_kind::super)) {
        // The pooler looks logins up (auth_query) and never admits a superuser.
        usage();
        return 2;
    }
    // Through a transaction pooler: no protocol-level named statements (DATABASE_PREPARED=off).
    if (!o.pooler.empty()) pg::set_named_statements(false);
    core::log::init("scale_bench", core::log::level::error);
    const std::string admin_dsn = o.conninfo + " dbname=postgres";
    const std::string dsn = o.conninfo + " dbname=" + o.db;

    // ---- a fresh database from the migrated template, the mode's wake-up SQL, N gateways ----
    auto admin = pg::connection::connect(admin_dsn);
    admin.exec("DROP DATABASE IF EXISTS " + o.db + " WITH (FORCE)");
    admin.exec("CREATE DATABASE " + o.db + " TEMPLATE " + o.template_db);
    const int postmaster = [&] {
        int pp = 0;
        read_stat_cpu(admin.backend_pid(), false, &pp);
        return pp;
    }();
    std::vector<target> targets;
    std::vector<std::string> slugs;
    std::vector<pg::login> logins;  // each gateway's own
    std::vector<std::string> keys;  // --login pool: each gateway's key
    {
        auto c = pg::connection::connect(dsn);
        if (o.wake == mode::relay) {
            c.exec_script(R"(
ALTER TABLE public.agent_commands DISABLE TRIGGER agent_commands_notify_insert;
ALTER TABLE public.agent_inbox_items DISABLE TRIGGER agent_inbox_items_notify_insert;
CREATE FUNCTION public.bench_relay_notify() RETURNS trigger LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
  r record;
  q text := CASE TG_TABLE_NAME WHEN 'agent_commands' THEN 'c' ELSE 'i' END;
BEGIN
  FOR r IN SELECT DISTINCT n.gateway_id FROM new_rows n
            WHERE n.gateway_id IS NOT NULL AND n.status::text IN ('pending', 'failed') LOOP
    PERFORM pg_notify('awp_wake', r.gateway_id::text || ':' || q);
  END LOOP;
  RETURN NULL;
END $$;
CREATE TRIGGER bench_commands_wake AFTER INSERT ON public.agent_commands
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.bench_relay_notify();
CREATE TRIGGER bench_inbox_wake AFTER INSERT ON public.agent_inbox_items
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.bench_relay_notify();
)");
        } else if (o.wake == mode::edge) {
            c.exec_script(R"(
ALTER TABLE public.agent_commands DISABLE TRIGGER agent_commands_notify_insert;
ALTER TABLE public.agent_inbox_items DISABLE TRIGGER agent_inbox_items_notify_insert;
CREATE SEQUENCE public.bench_notified;
CREATE TABLE public.bench_wake (gateway_id uuid NOT NULL, q text NOT NULL,
                                armed boolean NOT NULL DEFAULT true, PRIMARY KEY (gateway_id, q));
CREATE FUNCTION public.bench_edge_notify() RETURNS trigger LANGUAGE plpgsql SET search_path = '' AS $$
DECLARE
  r record;
  v_q text := CASE TG_TABLE_NAME WHEN 'agent_commands' THEN 'c' ELSE 'i' END;
  v_armed boolean;
BEGIN
  FOR r IN SELECT DISTINCT n.gateway_id FROM new_rows n
            WHERE n.gateway_id IS NOT NULL AND n.status::text IN ('pending', 'failed') LOOP
    -- FOR UPDATE whatever the flag says: a re-arm waits for this write's commit, so the
    -- gateway's look after re-arming sees this row (a plain UPDATE ... WHERE armed would not
    -- lock a disarmed row, and the wake-up could be lost).
    SELECT w.armed INTO v_armed FROM public.bench_wake w
     WHERE w.gateway_id = r.gateway_id AND w.q = v_q FOR UPDATE;
    IF v_armed THEN
      UPDATE public.bench_wake w SET armed = false WHERE w.gateway_id = r.gateway_id AND w.q = v_q;
      PERFORM nextval('public.bench_notified');
      PERFORM pg_notify(CASE v_q WHEN 'c' THEN 'awp_commands_' ELSE 'awp_inbox_' END
                        || replace(r.gateway_id::text, '-', ''), '');
    END IF;
  END LOOP;
  RETURN NULL;
END $$;
CREATE TRIGGER bench_commands_wake AFTER INSERT ON public.agent_commands
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.bench_edge_notify();
CREATE TRIGGER bench_inbox_wake AFTER INSERT ON public.agent_inbox_items
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.bench_edge_notify();
)");
        }
        const auto g = c.exec(
            "WITH g AS (INSERT INTO public.gateways (tenant_id, slug, label, status) "
            "SELECT $1::uuid, 'scale-' || n, 'scale ' || n, 'ready' FROM generate_series(1, $2) n "
            "RETURNING id, slug, tenant_id) "
            "INSERT INTO public.agents (tenant_id, name, slug, gateway_id) "
            "SELECT tenant_id, 'agent ' || slug, 'a-' || slug, id FROM g "
            "RETURNING gateway_id::text, id::text, substr(slug, 3)",
            {kTenant, o.gateways});
        for (int k = 0; k < g.size(); ++k) {
            targets.push_back({g.get<std::string>(k, 0), g.get<std::string>(k, 1)});
            slugs.push_back(g.get<std::string>(k, 2));
        }
        // Each gateway's own login (sql/0023), as awpctl gateway credential makes it: for the
        // hosts' connections (--login gateway) and their streams (mode awp-wake). The role names
        // are fixed, so a later point re-keys the same roles to its new gateways.
        if (o.login == login_kind::gateway ||
            (o.wake == mode::awp_wake && o.login != login_kind::pool)) {
            for (int k = 0; k < g.size(); ++k) {
                const auto role = "awp_gw_scale_" + std::to_string(k + 1);
                const auto pw = "scale-bench-password-" + std::to_string(k + 1) + "-0123456789";
                c.exec("SELECT 1 FROM public.awp_gateway_role($1, $2, $3)",
                       {targets[static_cast<std::size_t>(k)].gateway, pw, role});
                logins.push_back({role, pw});
            }
        }
        // One pool login for every host and a key per gateway (awpctl gateway pool-login and
        // awpctl gateway key do the same); only the secret's hash reaches the database.
        if (o.login == login_kind::pool) {
            c.exec("SELECT public.awp_gateway_pool_role($1, 'awp_pool_scale')",
                   {std::string(kPoolPassword)});
            for (int k = 0; k < g.size(); ++k) {
                const auto& id = targets[static_cast<std::size_t>(k)].gateway;
                const auto secret = core::crypto::base64url_encode(core::crypto::random_bytes(32));
                c.exec("SELECT 1 FROM public.awp_gateway_key($1, sha256(convert_to($2, 'UTF8')))",
                       {id, secret});
                std::string hex = id;
                hex.erase(std::remove(hex.begin(), hex.end(), '-'), hex.end());
                keys.push_back("awpk_" + hex + "_" + secret);
            }
        }
        if (o.wake == mode::edge) {
            c.exec(
                "INSERT INTO public.bench_wake (gateway_id, q) SELECT g.id, q FROM "
                "public.gateways g, (VALUES ('c'), ('i')) v(q) WHERE g.slug LIKE 'scale-%'");
        }
        c.exec("VACUUM ANALYZE");
        c.exec("CHECKPOINT");
    }

    // ---- the simulated hosts ----
    const int nthreads = std::max(1, o.threads);
    std::vector<std::unique_ptr<net::io_context>> ios;
    std::vector<net::executor_work_guard<net::io_context::executor_type>> guards;
    for (int k = 0; k < nthreads + 1; ++k) {  // the last one runs the relay
        ios.push_back(std::make_unique<net::io_context>(1));
        guards.push_back(net::make_work_guard(*ios.back()));
    }
    // Where and as whom each host connects.
    const std::string host_base = (o.pooler.empty() ? o.conninfo : o.pooler) + " dbname=" + o.db;
    const pg::login shared = o.login == login_kind::shared ? pg::dsn_login(o.shared_url)
                             : o.login == login_kind::pool
                                 ? pg::login{"awp_pool_scale", std::string(kPoolPassword)}
                                 : pg::login{};
    std::vector<std::unique_ptr<gateway>> gws;
    for (std::size_t k = 0; k < targets.size(); ++k) {
        const pg::login own = o.login == login_kind::pool ? shared
                              : k < logins.size()         ? logins[k]
                                                          : pg::login{};
        const std::string host_dsn = o.login == login_kind::super ? dsn
                                     : o.login == login_kind::shared || o.login == login_kind::pool
                                         ? pg::dsn_with_login(host_base, shared)
                                         : pg::dsn_with_login(host_base, own);
        gws.push_back(std::make_unique<gateway>(*ios[k % static_cast<std::size_t>(nthreads)], o,
                                                targets[k].gateway, slugs[k], host_dsn, own,
                                                k < keys.size() ? keys[k] : ""));
    }
    int wake_pid = 0;
    if (o.wake == mode::awp_wake) {
        wake_pid = g_wake_pid = start_wake(o, dsn);
        const auto t = now_ns();
        while (wake_streams(o.wake_port) < 0) {
            if (static_cast<double>(now_ns() - t) / 1e9 > 30) fail("awp-wake did not come up");
            std::this_thread::sleep_for(100ms);
        }
    }
    const int pooler_pid = o.pooler_pidfile.empty() ? 0 : read_pidfile(o.pooler_pidfile);
    std::unique_ptr<relay> rl;
    if (o.wake == mode::relay) {
        rl = std::make_unique<relay>(*ios.back(), dsn);
        for (auto& g : gws) rl->add(*g);
    }
    const auto t_setup = now_ns();
    g_poll_t0.store(t_setup);
    for (auto& g : gws) net::post(g->io, [gp = g.get()] { gp->start(); });
    if (rl) net::post(*ios.back(), [&] { rl->start(); });
    std::vector<std::thread> threads;
    for (auto& io : ios) threads.emplace_back([p = io.get()] { p->run(); });

    // Ready: every connection open, every listener (or the relay) listening.
    // Through a pooler the server connections are the pooler's: only the hosts' own count.
    const bool own_listen = o.wake == mode::direct || o.wake == mode::edge;
    const int per_gw = 2 + o.inbox_slots + o.idle_per_gateway + (own_listen ? 2 : 0);
    const long expected =
        o.pooler.empty() ? static_cast<long>(per_gw) * o.gateways + (own_listen ? 0 : 1) : 1;
    long conns = 0, listeners = 0, streams = 0;
    for (;;) {
        const auto r = admin.exec(
            "SELECT count(*), count(*) FILTER (WHERE query LIKE 'LISTEN%') FROM pg_stat_activity "
            "WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
            {o.db});
        conns = r.get<long>(0, 0);
        listeners = r.get<long>(0, 1);
        int ready = 0;
        for (auto& g : gws) ready += g->connected.load();
        const long want_listeners = own_listen ? 2L * o.gateways : 1;
        if (o.wake == mode::awp_wake) streams = wake_streams(o.wake_port);
        const bool streams_ok = o.wake != mode::awp_wake || streams >= 2L * o.gateways;
        if (conns >= expected && listeners >= want_listeners && ready == o.gateways && streams_ok)
            break;
        if (static_cast<double>(now_ns() - t_setup) / 1e9 > o.ready_timeout) {
            fail("not ready after " + std::to_string(o.ready_timeout) + " s: " +
                 std::to_string(conns) + " of " + std::to_string(expected) + " connections, " +
                 std::to_string(listeners) + " listeners, " + std::to_string(ready) +
                 " hosts connected, " + std::to_string(streams) + " streams");
        }
        std::this_thread::sleep_for(500ms);
    }
    // Warm-up: one command and one inbox item per gateway, so that every backend has prepared
    // its statements and compiled the PL/pgSQL it runs (a host's backends live for hours; a
    // cold one costs a few ms on its first row, which at N = 1,000 would be most rows measured).
    {
        auto c = pg::connection::connect(dsn);
        const std::uint64_t before = g_picked.load();
        c.exec(
            "INSERT INTO public.agent_commands (tenant_id, gateway_id, action, status, payload) "
            "SELECT tenant_id, id, 'auth_list', 'pending', '{\"t\": 0}' FROM public.gateways "
            "WHERE slug LIKE 'scale-%'");
        c.exec(
            "INSERT INTO public.agent_inbox_items (tenant_id, agent_id, event_type, dedup_key, "
            "payload) SELECT tenant_id, id, 'heartbeat', 'warm-' || id, '{\"t\": 0}' FROM "
            "public.agents WHERE slug LIKE 'a-scale-%'");
        const auto t = now_ns();
        while (g_picked.load() < before + 2 * static_cast<std::uint64_t>(o.gateways) &&
               static_cast<double>(now_ns() - t) / 1e9 < 120) {
            std::this_thread::sleep_for(20ms);
        }
    }
    const double setup_s = static_cast<double>(now_ns() - t_setup) / 1e9;
    long long notified0 = 0;  // edge mode: the warm-up's notifications, not counted
    if (o.wake == mode::edge) notified0 = db_value(dsn, kNotifiedSql);
    std::this_thread::sleep_for(2s);
    const auto all =
        admin.exec("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'");
    const long all_conns = all.get<long>(0, 0);

    // ---- phase A: writers at full speed ----
    const auto drain = [&](std::uint64_t want, double max_s) {
        const auto t = now_ns();
        while (g_picked.load() < want && static_cast<double>(now_ns() - t) / 1e9 < max_s) {
            std::this_thread::sleep_for(5ms);
        }
        return static_cast<double>(now_ns() - t) / 1e9;
    };
    // The server's CPU is counted until the rows written are picked up and finished (drained):
    // per write, it is the insert, its wake-up and its lease and final transition.
    const std::uint64_t before_a = g_picked.load();
    // awp-wake's and PgBouncer's own CPU (outside the server and this process).
    const auto aux_ticks = [&](int pid) {
        return pid > 0 ? read_stat_cpu(pid, false, nullptr) : 0;
    };
    // Transactions of this database (every host's, the writers'), from its statistics: each
    // backend reports when it has been idle a second, so they are read after such a pause.
    constexpr const char* kXactsSql =
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1";
    const long long xacts0 = admin.exec(kXactsSql, {o.db}).get<long long>(0, 0);
    long long ticks0 = server_ticks(postmaster);
    long long self0 = read_stat_cpu(getpid(), false, nullptr);
    long long wake0 = aux_ticks(wake_pid), pool0 = aux_ticks(pooler_pid);
    const long long busy0 = machine_busy_ticks();
    const auto wall0 = now_ns();
    phase_result a = run_writers(o, dsn, targets, 0);
    const double drain_a = drain(before_a + a.writes, 60);
    std::this_thread::sleep_for(200ms);  // the last finish_and_lease / complete
    a.ticks = server_ticks(postmaster) - ticks0;
    a.client_ticks = read_stat_cpu(getpid(), false, nullptr) - self0;
    const long long wake_ticks_a = aux_ticks(wake_pid) - wake0;
    const long long pool_ticks_a = aux_ticks(pooler_pid) - pool0;
    // CPU taken by anything else on the (shared) machine during phase A, % of all cores.
    const double other_pct =
        100.0 *
        static_cast<double>(machine_busy_ticks() - busy0 - a.ticks - a.client_ticks - wake_ticks_a -
                            pool_ticks_a) /
        (static_cast<double>(now_ns() - wall0) / 1e9 * static_cast<double>(sysconf(_SC_CLK_TCK)) *
         static_cast<double>(std::thread::hardware_concurrency()));
    const std::uint64_t after_a = g_picked.load();
    std::this_thread::sleep_for(1500ms);
    const long long xacts_a = admin.exec(kXactsSql, {o.db}).get<long long>(0, 0) - xacts0;

    // ---- phase B: a steady stream at R writes/s ----
    const std::uint64_t before_b = g_picked.load();
    ticks0 = server_ticks(postmaster);
    self0 = read_stat_cpu(getpid(), false, nullptr);
    phase_result b = run_writers(o, dsn, targets, o.rate);
    const double drain_b = drain(before_b + b.writes, 30);
    std::this_thread::sleep_for(200ms);
    b.ticks = server_ticks(postmaster) - ticks0;
    b.client_ticks = read_stat_cpu(getpid(), false, nullptr) - self0;
    const std::uint64_t after_b = g_picked.load();
    int poll_peak = 0;
    for (auto k = static_cast<std::size_t>((a.t0 - t_setup) / 1'000'000'000);
         k <= static_cast<std::size_t>((b.t1 - t_setup) / 1'000'000'000) && k < kPollSeconds; ++k)
        poll_peak = std::max(poll_peak, g_polls[k].load());

    // Edge mode: how many writes notified (the others found their gateway's wake-up disarmed).
    long long notified = -1;
    if (o.wake == mode::edge) {
        notified = db_value(dsn, kNotifiedSql) - notified0;
    }

    // ---- phase C: the sustained rate ----
    // Phase A's writers outrun a host that cannot keep up (one gateway: one runner leasing
    // commands one at a time, one agent's items one at a time), and its work then falls after
    // the phase. Here every step offers a fixed rate for T seconds and counts as kept up when
    // every row written in it was picked up within sustain_lag seconds of its end: the
    // highest such rate is what the whole system (writers, database, hosts) sustains. The
    // search bisects between 0 and phase A's rate (writers at full speed cannot do more);
    // before each step the backlog of the previous one is drained.
    std::uint64_t written = before_b + b.writes;
    double lo = 0, hi = static_cast<double>(a.writes) / a.seconds;
    double sustained = 0, sustained_p50 = NAN, sustained_p99 = NAN, sustained_cpu = NAN;
    std::string steps;
    for (int k = 0; k < o.sustain_steps && hi > 0; ++k) {
        // The first step tries phase A's rate itself; then the middle of what is left.
        const double r = k == 0 ? hi : (lo + hi) / 2;
        drain(written, 60);
        {
            std::lock_guard lock(g_step_m);
            g_step_ms.clear();
        }
        g_step_t0.store(now_ns());
        const long long step_ticks0 = server_ticks(postmaster);
        const phase_result c = run_writers(o, dsn, targets, r);
        const double lag = drain(written + c.writes, 60);
        const long long step_ticks = server_ticks(postmaster) - step_ticks0;
        written += c.writes;
        g_step_t0.store(std::numeric_limits<std::int64_t>::max());
        std::vector<double> ms;
        {
            std::lock_guard lock(g_step_m);
            ms.swap(g_step_ms);
        }
        const double achieved = static_cast<double>(c.writes) / c.seconds;
        const bool kept = lag <= o.sustain_lag && achieved >= 0.95 * r;
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s%.0f:%s:%.2f", steps.empty() ? "" : ",", r,
                      kept ? "kept" : "lagged", lag);
        steps += buf;
        if (kept && achieved > sustained) {
            sustained = achieved;
            sustained_p50 = pct(ms, 0.5);
            sustained_p99 = pct(ms, 0.99);
            // The database's CPU per write with every row taken as it comes (no backlog).
            sustained_cpu = c.writes ? static_cast<double>(step_ticks) * 1e3 /
                                           static_cast<double>(sysconf(_SC_CLK_TCK)) /
                                           static_cast<double>(c.writes)
                                     : NAN;
        }
        if (k == 0 && kept) break;  // the writers themselves are the limit
        (kept ? lo : hi) = r;
    }

    // ---- memory: every server process's PSS; the backends of this database ----
    long long pss_all = 0, pss_db = 0;
    int nproc_all = 0;
    for (int p : children_of(postmaster)) {
        pss_all += pss_kb(p);
        ++nproc_all;
    }
    pss_all += pss_kb(postmaster);
    const double wake_mib = wake_pid > 0 ? static_cast<double>(pss_kb(wake_pid)) / 1024.0 : 0;
    const double pool_mib = pooler_pid > 0 ? static_cast<double>(pss_kb(pooler_pid)) / 1024.0 : 0;
    const auto pids = admin.exec(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
        {o.db});
    for (int k = 0; k < pids.size(); ++k) pss_db += pss_kb(pids.get<int>(k, 0));

    // Pickup samples, by phase (all gateway threads are still running; picks are only read for
    // rows sent before this point, so take a consistent copy on each gateway's own thread).
    // Two figures per row: from the INSERT sent (its own commit included), and from its commit
    // (the writer got the commit's answer) to the pickup; the wake-up may reach the gateway
    // before the writer reads its answer: that counts as 0.
    std::unordered_map<std::int64_t, std::int64_t> ack_of;
    for (const auto* ph : {&a, &b})
        for (const auto& p : ph->acks) ack_of[p.sent] = p.got;
    std::vector<double> lat_a, lat_b, wake_a, wake_b;
    {
        std::mutex m;
        std::atomic<int> left{static_cast<int>(gws.size())};
        for (auto& g : gws) {
            net::post(g->io, [&, gp = g.get()] {
                std::lock_guard lock(m);
                for (const auto& p : gp->picks) {
                    const double ms = static_cast<double>(p.got - p.sent) / 1e6;
                    const auto it = ack_of.find(p.sent);
                    const double wk =
                        it == ack_of.end()
                            ? NAN
                            : std::max(0.0, static_cast<double>(p.got - it->second) / 1e6);
                    if (p.sent >= a.t0 && p.sent < a.t1) {
                        lat_a.push_back(ms);
                        if (!std::isnan(wk)) wake_a.push_back(wk);
                    }
                    if (p.sent >= b.t0 && p.sent < b.t1) {
                        lat_b.push_back(ms);
                        if (!std::isnan(wk)) wake_b.push_back(wk);
                    }
                }
                --left;
            });
        }
        while (left.load() > 0) std::this_thread::sleep_for(5ms);
    }
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double tps = static_cast<double>(a.writes) / a.seconds;
    // CPU ticks of a phase as milliseconds per write of that phase.
    const auto per_write = [&](const phase_result& ph, long long ticks) {
        return ph.writes ? static_cast<double>(ticks) * 1e3 / hz / static_cast<double>(ph.writes)
                         : NAN;
    };
    const double cpu_ms_a = per_write(a, a.ticks), cpu_ms_b = per_write(b, b.ticks);
    const double client_ms_a = per_write(a, a.client_ticks);
    const double client_ms_b = per_write(b, b.client_ticks);
    const std::size_t na = lat_a.size(), nb = lat_b.size();
    const double a50 = pct(lat_a, 0.5), a99 = pct(lat_a, 0.99);
    const double b50 = pct(lat_b, 0.5), b99 = pct(lat_b, 0.99);
    const double bmax = lat_b.empty() ? NAN : lat_b.back();
    const double wa50 = pct(wake_a, 0.5), wa99 = pct(wake_a, 0.99);
    const double wb50 = pct(wake_b, 0.5), wb99 = pct(wake_b, 0.99);
    std::printf(
        "RESULT mode=%s n=%d wake_p50_ms=%.2f wake_p99_ms=%.2f loaded_wake_p50_ms=%.2f "
        "loaded_wake_p99_ms=%.2f tps=%.0f writes_a=%llu picked_a=%zu cpu_ms_per_write=%.3f "
        "loaded_p50_ms=%.2f loaded_p99_ms=%.2f rate=%.0f writes_b=%llu picked_b=%zu "
        "p50_ms=%.2f p99_ms=%.2f max_ms=%.2f cpu_ms_per_write_b=%.3f conns_db=%ld conns_all=%ld "
        "commit_p50_ms=%.2f commit_p99_ms=%.2f loaded_commit_p50_ms=%.2f listeners=%ld "
        "mem_mib=%.1f mem_db_mib=%.1f server_procs=%d setup_s=%.1f drain_a_s=%.2f drain_b_s=%.2f "
        "edge_notifies=%lld client_cpu_ms_per_write=%.3f "
        "client_cpu_ms_per_write_b=%.3f other_cpu_pct=%.0f wake_cpu_ms_per_write=%.3f "
        "wake_mib=%.1f pooler_cpu_ms_per_write=%.3f pooler_mib=%.1f login=%s pooled=%d "
        "streams=%ld xacts_per_write=%.2f sustained_tps=%.0f sustained_p50_ms=%.2f "
        "sustained_p99_ms=%.2f sustain_steps=%s poll_peak_per_s=%d "
        "sustained_cpu_ms_per_write=%.3f\n",
        o.name.c_str(), o.gateways, wb50, wb99, wa50, wa99, tps,
        static_cast<unsigned long long>(a.writes), na, cpu_ms_a, a50, a99, o.rate,
        static_cast<unsigned long long>(b.writes), nb, b50, b99, bmax, cpu_ms_b, conns, all_conns,
        b.commit_p50, b.commit_p99, a.commit_p50, listeners, static_cast<double>(pss_all) / 1024.0,
        static_cast<double>(pss_db) / 1024.0, nproc_all + 1, setup_s, drain_a, drain_b, notified,
        client_ms_a, client_ms_b, other_pct, per_write(a, wake_ticks_a), wake_mib,
        per_write(a, pool_ticks_a), pool_mib,
        o.login == login_kind::super    ? "super"
        : o.login == login_kind::shared ? "shared"
        : o.login == login_kind::pool   ? "pool"
                                        : "gateway",
        o.pooler.empty() ? 0 : 1, streams,
        a.writes ? static_cast<double>(xacts_a) / static_cast<double>(a.writes) : NAN, sustained,
        sustained_p50, sustained_p99, steps.empty() ? "-" : steps.c_str(), poll_peak,
        sustained_cpu);
    (void)after_a;
    (void)after_b;
    std::fflush(stdout);
    stop_wake();
    // The hosts are not wound down one by one: the process ends and every socket with it; the
    // next point (or run.sh) drops the database WITH (FORCE).
    std::_Exit(0);
}
