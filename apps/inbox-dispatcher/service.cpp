// The dispatcher's loop: scan -> pick the next agent (round-robin, oldest first) -> lease ->
// wake -> complete or fail.
#include "service.hpp"

#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/child_env.hpp"
#include "awp/core/error.hpp"
#include "awp/core/gateway.hpp"
#include "awp/core/log.hpp"
#include "awp/core/process.hpp"
#include "awp/core/time.hpp"

namespace awp::dispatcher {

namespace log = core::log;
namespace pg = core::pg;
using namespace std::chrono_literals;

namespace {

constexpr const char* kDaemon = "inbox-dispatcher";
constexpr const char* kVersion = "0.1.0";

// The gateway's ready agents with something to do now (their oldest item's age), and one last
// row with the seconds until the next item becomes leasable (a back-off ends or a lease
// expires). An expired lease makes its agent a candidate: leasing reaps it first.
constexpr const char* kScanSql = R"(
WITH waiting AS (
  SELECT i.agent_id, i.created_at, i.status, i.not_before, i.lease_expires_at
    FROM public.agent_inbox_items i
   WHERE i.gateway_id = $1::uuid AND i.status IN ('pending', 'failed', 'leased')
     AND (i.status = 'leased' OR i.attempts < i.max_attempts))
SELECT w.agent_id::text, extract(epoch FROM min(w.created_at))::float8, NULL::float8
  FROM waiting w JOIN public.agents a ON a.id = w.agent_id
 WHERE a.gateway_id = $1::uuid AND a.status = 'ready'
   AND ((w.status <> 'leased' AND (w.not_before IS NULL OR w.not_before <= now()))
        OR (w.status = 'leased' AND w.lease_expires_at < now()))
 GROUP BY w.agent_id
UNION ALL
SELECT NULL, NULL, extract(epoch FROM min(s.t) - clock_timestamp())::float8 FROM (
  SELECT CASE WHEN w.status = 'leased' THEN w.lease_expires_at ELSE w.not_before END AS t
    FROM waiting w
   WHERE (w.status = 'leased' AND w.lease_expires_at >= now())
      OR (w.status <> 'leased' AND w.not_before > now())) s)";

// Leases the agent's next item only while the agent is ready and on this gateway (checked in
// the same statement, so a pause just before the lease is respected).
constexpr const char* kLeaseSql = R"(
WITH a AS MATERIALIZED (
  SELECT ag.id, ag.model, ag.thinking FROM public.agents ag
   WHERE ag.id = $1::uuid AND ag.gateway_id = $2::uuid AND ag.status = 'ready')
SELECT i.id::text, i.agent_id::text, i.agent_slug, i.event_type::text, coalesce(i.title, ''),
       coalesce(i.summary, ''), i.payload::text, i.task_id::text, i.lease_token::text,
       i.attempts, i.max_attempts, a.model, a.thinking
  FROM a CROSS JOIN LATERAL public.lease_inbox_item(a.id, $3::integer, $4::text) i)";

constexpr const char* kBlockersSql = R"(
SELECT coalesce(r.related_title, r.related_task_id::text), r.related_status::text
  FROM public.get_task_relations($1::uuid) r
 WHERE r.perspective_type = 'blocked_by' AND r.related_status NOT IN ('done', 'cancelled')
 ORDER BY r.related_title)";

constexpr const char* kCompleteSql =
    "SELECT status::text FROM public.complete_inbox_item($1::uuid, $2::uuid)";
constexpr const char* kFailSql =
    "SELECT status::text FROM public.fail_inbox_item($1::uuid, $2, $3::uuid)";

constexpr const char* kHeartbeatSql = R"(
SELECT h.gateway_status::text FROM public.daemon_heartbeat($1, $2, $3, $4::integer, $5,
  $6::timestamptz, $7::jsonb, $8::uuid) h)";

std::vector<std::string> known_secrets(const std::string& dsn) {
    std::vector<std::string> out;
    if (!dsn.empty()) {
        char* err = nullptr;
        PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
        if (err) PQfreemem(err);
        if (opts) {
            for (PQconninfoOption* o = opts; o->keyword; ++o) {
                if (std::string_view(o->keyword) == "password" && o->val && *o->val) {
                    out.emplace_back(o->val);
                }
            }
            PQconninfoFree(opts);
        }
    }
    if (const char* p = std::getenv("PGPASSWORD"); p && *p) out.emplace_back(p);
    return out;
}

// What escaped a spawned coroutine, logged (never silently dropped).
void log_escaped(const char* what, std::exception_ptr e) {
    if (!e) return;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        log::error(std::string(what) + " ended with an error", {{"error", ex.what()}});
    } catch (...) {
        log::error(std::string(what) + " ended with an unknown error");
    }
}

std::string json_escape(std::string_view s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            o += ' ';
        } else {
            o += c;
        }
    }
    return o;
}

}  // namespace

service::service(net::io_context& ioc, config cfg)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      started_at_(core::now_iso8601_utc()),
      secrets_(known_secrets(cfg_.common.database_url)),
      lease_db_(cfg_.common.database_url, "lease"),
      heartbeat_db_(cfg_.common.database_url, "heartbeat"),
      wake_(ioc.get_executor()),
      idle_(ioc.get_executor()),
      listener_done_(ioc.get_executor()),
      heartbeat_done_(ioc.get_executor()),
      heartbeat_timer_(ioc) {
    const auto n = static_cast<std::size_t>(cfg_.max_concurrent);
    for (std::size_t i = 0; i < n; ++i) {
        slot_db_.push_back(
            std::make_unique<pg::session>(cfg_.common.database_url, "wake-" + std::to_string(i)));
    }
    slot_busy_.assign(n, false);
}

service::~service() = default;

void service::request_stop() {
    stopping_ = true;
    if (listener_) listener_->stop();
    heartbeat_timer_.cancel();
    wake_.set();
}

net::awaitable<void> service::sleep_for(std::chrono::milliseconds d) {
    net::steady_timer t(ioc_, d);
    boost::system::error_code ec;
    co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
}

// GATEWAY_ID resolved once (core::gateway): from here on every statement names the id.
net::awaitable<void> service::resolve_gateway() {
    std::optional<std::string> tenant;
    if (!cfg_.tenant_id.empty()) tenant = cfg_.tenant_id;
    for (;;) {
        std::string failure;
        try {
            const auto gw = co_await core::gateway::resolve(lease_db_, cfg_.gateway, tenant);
            gateway_id_ = gw.id;
            gateway_slug_ = gw.slug;
            tenant_id_ = gw.tenant_id;
            co_return;
        } catch (const pg::connection_error& e) {
            failure = e.what();
        }
        lease_db_.reset();
        log::warn("cannot look up the gateway, retrying", {{"error", failure}});
        co_await sleep_for(1s);
        if (stopping_) co_return;
    }
}

net::awaitable<void> service::run() {
    auto ex = co_await net::this_coro::executor;
    co_await resolve_gateway();
    if (stopping_) co_return;
    const std::string channel = core::channels::inbox(gateway_id_);
    log::info("starting", {{"gateway_id", gateway_id_},
                           {"gateway_slug", gateway_slug_},
                           {"channel", channel},
                           {"runtime", cfg_.runtime},
                           {"max_concurrent", cfg_.max_concurrent},
                           {"lease_seconds", cfg_.effective_lease_seconds()},
                           {"wake_timeout_ms", static_cast<long>(cfg_.wake_timeout().count())}});

    core::listener_options lo;
    lo.dsn = cfg_.common.database_url;
    lo.channels = {channel};
    lo.safety_poll = cfg_.common.safety_poll();
    lo.name = "inbox";
    listener_ = std::make_unique<core::listener>(
        lo,
        [this](const pg::notification&) {
            dirty_ = true;
            wake_.set();
        },
        [this](core::rescan_reason) {
            if (!ready_) {
                ready_ = true;
                core::daemon::notify_ready();
                log::info("ready", {{"gateway_id", gateway_id_}});
            }
            dirty_ = true;
            wake_.set();
        });
    net::co_spawn(ex, listener_->run(), [this](std::exception_ptr e) {
        log_escaped("listener", e);
        listener_done_.set();
    });
    net::co_spawn(ex, heartbeat_loop(), [this](std::exception_ptr e) {
        log_escaped("heartbeat loop", e);
        heartbeat_done_.set();
    });
    if (stopping_) listener_->stop();

    co_await dispatch_loop();

    listener_->stop();
    heartbeat_timer_.cancel();
    co_await listener_done_.wait();
    co_await heartbeat_done_.wait();
    log::info(
        "in-flight wakes finished",
        {{"wakes", stats_.wakes}, {"completed", stats_.completed}, {"failed", stats_.failed}});
}

net::awaitable<void> service::dispatch_loop() {
    while (!stopping_) {
        if (dirty_ && ready_) {
            dirty_ = false;
            co_await scan();
        }
        if (ready_) co_await fill_slots();
        if (stopping_) break;
        if (next_due_) {
            auto left = *next_due_ - std::chrono::steady_clock::now();
            if (left < 0ms) left = 0ms;
            const bool woken = co_await wake_.wait_for(left);
            if (!woken || std::chrono::steady_clock::now() >= *next_due_) {
                next_due_.reset();
                dirty_ = true;
            }
        } else {
            co_await wake_.wait();
        }
    }
    while (in_flight_ > 0) co_await idle_.wait();
}

net::awaitable<void> service::scan() {
    std::string failure;
    pg::result r;
    try {
        r = co_await lease_db_.query_prepared(kScanSql, gateway_id_);
    } catch (const pg::connection_error& e) {
        lease_db_.reset();
        failure = e.what();
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) {
        log::warn("scan failed, retrying", {{"error", failure}});
        dirty_ = true;
        next_due_ = std::chrono::steady_clock::now() + 1s;
        co_return;
    }
    ++stats_.scans;
    for (auto& [id, a] : agents_) {
        if (!a.busy) a.has_work = false;
    }
    std::optional<double> due_in;
    for (int i = 0; i < r.size(); ++i) {
        if (r.is_null(i, 0)) {
            if (!r.is_null(i, 2)) due_in = r.get<double>(i, 2);
            continue;
        }
        auto& a = agents_[r.get<std::string>(i, 0)];
        a.oldest = r.get<double>(i, 1);
        a.has_work = true;
    }
    // Forget idle agents without work so the map stays the size of the active set.
    for (auto it = agents_.begin(); it != agents_.end();) {
        if (!it->second.has_work && !it->second.busy && it->second.served == 0) {
            it = agents_.erase(it);
        } else {
            ++it;
        }
    }
    if (due_in) {
        // A little late rather than early: the item must be leasable when we look.
        const auto ms =
            std::chrono::milliseconds(static_cast<long>(std::ceil(*due_in * 1000))) + 5ms;
        const auto at = std::chrono::steady_clock::now() + std::max(ms, 5ms);
        if (!next_due_ || at < *next_due_) next_due_ = at;
    }
}

const std::string* service::pick_agent() {
    const std::string* best = nullptr;
    const agent_state* b = nullptr;
    for (const auto& [id, a] : agents_) {
        if (!a.has_work || a.busy) continue;
        if (!b || a.served < b->served || (a.served == b->served && a.oldest < b->oldest)) {
            best = &id;
            b = &a;
        }
    }
    return best;
}

net::awaitable<void> service::fill_slots() {
    while (!stopping_ && in_flight_ < slot_db_.size()) {
        const std::string* picked = pick_agent();
        if (!picked) co_return;
        const std::string agent_id = *picked;
        std::optional<inbox_item> item;
        std::string failure;
        bool broken = false;
        try {
            item = co_await lease(agent_id);
        } catch (const pg::connection_error& e) {
            lease_db_.reset();
            failure = e.what();
            broken = true;
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (broken) {
            log::warn("lease failed, retrying", {{"agent_id", agent_id}, {"error", failure}});
            dirty_ = true;
            next_due_ = std::chrono::steady_clock::now() + 1s;
            co_return;
        }
        auto it = agents_.find(agent_id);
        if (it == agents_.end()) continue;
        if (!failure.empty()) {
            log::warn("lease refused", {{"agent_id", agent_id}, {"error", failure}});
            it->second.has_work = false;
            continue;
        }
        if (!item) {
            it->second.has_work = false;
            continue;
        }
        it->second.busy = true;
        it->second.served = ++serve_seq_;
        std::size_t slot = 0;
        while (slot < slot_busy_.size() && slot_busy_[slot]) ++slot;
        slot_busy_[slot] = true;
        ++in_flight_;
        ++stats_.wakes;
        net::co_spawn(ioc_, handle(slot, std::move(*item)),
                      [this, slot, agent_id](std::exception_ptr e) {
                          if (e) {
                              try {
                                  std::rethrow_exception(e);
                              } catch (const std::exception& ex) {
                                  log::error("wake handler failed",
                                             {{"agent_id", agent_id}, {"error", ex.what()}});
                              }
                          }
                          finished(slot, agent_id);
                      });
    }
}

void service::finished(std::size_t slot, const std::string& agent_id) {
    slot_busy_[slot] = false;
    --in_flight_;
    if (auto it = agents_.find(agent_id); it != agents_.end()) {
        it->second.busy = false;
        it->second.has_work = true;  // maybe more: the next lease tells
    }
    if (in_flight_ == 0) idle_.set();
    wake_.set();
}

net::awaitable<std::optional<inbox_item>> service::lease(std::string agent_id) {
    auto r = co_await lease_db_.query_prepared(
        kLeaseSql, agent_id, gateway_id_, cfg_.effective_lease_seconds(), cfg_.common.instance);
    if (r.empty()) co_return std::nullopt;
    inbox_item it;
    it.id = r.get<std::string>(0, 0);
    it.agent_id = r.get<std::string>(0, 1);
    it.agent_slug = r.get<std::string>(0, 2);
    it.event_type = r.get<std::string>(0, 3);
    it.title = r.get<std::string>(0, 4);
    it.summary = r.get<std::string>(0, 5);
    it.payload_json = r.get<std::string>(0, 6);
    it.task_id = r.get_optional<std::string>(0, 7);
    it.lease_token = r.get<std::string>(0, 8);
    it.attempts = r.get<int>(0, 9);
    it.max_attempts = r.get<int>(0, 10);
    it.model = r.get_optional<std::string>(0, 11);
    it.thinking = r.get_optional<std::string>(0, 12);
    co_return it;
}

net::awaitable<std::vector<blocker>> service::unresolved_blockers(std::size_t slot,
                                                                  std::string task_id) {
    std::vector<blocker> out;
    std::string failure;
    try {
        auto r = co_await slot_db_[slot]->query_prepared(kBlockersSql, task_id);
        for (int i = 0; i < r.size(); ++i) {
            out.push_back({r.get<std::string>(i, 0), r.get<std::string>(i, 1)});
        }
    } catch (const pg::connection_error& e) {
        slot_db_[slot]->reset();
        failure = e.what();
    } catch (const std::exception& e) {
        failure = e.what();
    }
    // The wake goes ahead without the note: a missing hint is better than no wake.
    if (!failure.empty())
        log::warn("cannot read the task's blockers", {{"task_id", task_id}, {"error", failure}});
    co_return out;
}

net::awaitable<void> service::handle(std::size_t slot, inbox_item item) {
    std::vector<blocker> blockers;
    if (wants_blockers(item)) blockers = co_await unresolved_blockers(slot, *item.task_id);
    const std::string message = build_message(item, blockers);

    core::process::spawn_options opts;
    std::string refused;
    try {
        opts.argv = build_argv(cfg_.cli, item, message);
    } catch (const core::error& e) {
        refused = e.what();
    }
    opts.timeout = cfg_.wake_timeout();
    opts.kill_grace = cfg_.kill_grace();
    opts.max_output = 8 * 1024;
    opts.env = {{"AWP_INBOX_ITEM_ID", item.id},
                {"AWP_AGENT_ID", item.agent_id},
                {"AWP_AGENT_SLUG", item.agent_slug},
                {"AWP_INBOX_EVENT_TYPE", item.event_type}};
    if (!cfg_.state_dir.empty()) opts.env["OPENCLAW_STATE_DIR"] = cfg_.state_dir;
    core::child_env::apply(opts);   // an allowlist: none of the daemon's secrets
    opts.run_as = cfg_.agent_user;  // AGENT_USER: it cannot read the dispatcher's files
    log::info("wake started", {{"item_id", item.id},
                               {"agent", item.agent_slug},
                               {"event_type", item.event_type},
                               {"attempt", item.attempts},
                               {"max_attempts", item.max_attempts},
                               {"blockers", static_cast<std::uint64_t>(blockers.size())}});

    bool success = false;
    std::string reason;
    std::optional<core::process::process_result> result;
    if (!refused.empty()) {
        reason = "cannot wake the agent: " + refused;
    } else {
        try {
            result = co_await core::process::async_run(std::move(opts));
        } catch (const core::process::spawn_error& e) {
            reason = std::string("cannot start the agent runtime: ") + e.what();
        }
    }
    if (result) {
        success = result->success();
        if (!success) reason = failure_reason(*result, cfg_.wake_timeout(), secrets_);
        log::info("wake ended", {{"item_id", item.id},
                                 {"agent", item.agent_slug},
                                 {"exit_code", result->exit_code},
                                 {"signal", result->term_signal},
                                 {"timed_out", result->timed_out},
                                 {"duration_ms", static_cast<long>(result->duration.count())}});
    }
    co_await transition(slot, std::move(item), success, std::move(reason));
}

net::awaitable<void> service::transition(std::size_t slot, inbox_item item, bool success,
                                         std::string reason) {
    // Retry through a Postgres restart until the lease would have run out anyway; after that
    // the reaper counts the attempt as failed and the item is retried.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.effective_lease_seconds());
    pg::backoff backoff(200ms, 5s);
    for (;;) {
        std::string failure;
        bool broken = false;
        std::optional<std::string> status;
        try {
            pg::result r;
            if (success) {
                r = co_await slot_db_[slot]->query_prepared(kCompleteSql, item.id,
                                                            item.lease_token);
            } else {
                r = co_await slot_db_[slot]->query_prepared(kFailSql, item.id, reason,
                                                            item.lease_token);
            }
            status = r.empty() ? std::string("?") : r.get<std::string>(0, 0);
        } catch (const pg::connection_error& e) {
            slot_db_[slot]->reset();
            failure = e.what();
            broken = true;
        } catch (const pg::domain_error& e) {
            failure = e.what();
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (status) {
            if (success) {
                ++stats_.completed;
            } else {
                ++stats_.failed;
            }
            log::info(success ? "item completed" : "item failed", {{"item_id", item.id},
                                                                   {"agent", item.agent_slug},
                                                                   {"status", *status},
                                                                   {"attempt", item.attempts},
                                                                   {"reason", reason}});
            co_return;
        }
        if (!broken) {
            // Lease lost (expired and taken over) or an illegal transition: the row says what
            // happened; never overwrite it.
            log::warn("cannot record the wake's outcome",
                      {{"item_id", item.id}, {"success", success}, {"error", failure}});
            co_return;
        }
        if (std::chrono::steady_clock::now() >= give_up) {
            log::error(
                "giving up recording the wake's outcome; the lease expires and the item is retried",
                {{"item_id", item.id}, {"error", failure}});
            co_return;
        }
        const auto wait = backoff.next();
        log::warn("database unavailable, retrying the item's transition",
                  {{"item_id", item.id},
                   {"error", failure},
                   {"retry_ms", static_cast<long>(wait.count())}});
        co_await sleep_for(wait);
    }
}

net::awaitable<void> service::heartbeat_loop() {
    bool warned = false;
    while (!stopping_) {
        const std::string meta = "{\"in_flight\":" + std::to_string(in_flight_) +
                                 ",\"max_concurrent\":" + std::to_string(cfg_.max_concurrent) +
                                 ",\"wakes\":" + std::to_string(stats_.wakes) +
                                 ",\"completed\":" + std::to_string(stats_.completed) +
                                 ",\"failed\":" + std::to_string(stats_.failed) +
                                 ",\"runtime\":\"" + json_escape(cfg_.runtime) + "\"}";
        std::string failure;
        try {
            co_await heartbeat_db_.query(kHeartbeatSql, gateway_id_, kDaemon, cfg_.common.instance,
                                         static_cast<int>(::getpid()), kVersion, started_at_, meta,
                                         tenant_id_);
            warned = false;
        } catch (const pg::connection_error& e) {
            heartbeat_db_.reset();
            failure = e.what();
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (!failure.empty() && !warned) {
            log::warn("heartbeat failed", {{"error", failure}});
            warned = true;
        }
        if (stopping_) break;
        heartbeat_timer_.expires_after(cfg_.heartbeat());
        boost::system::error_code ec;
        co_await heartbeat_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
}

}  // namespace awp::dispatcher
