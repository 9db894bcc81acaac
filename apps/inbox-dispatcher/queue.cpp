// The inbox dispatcher's queue (queue.hpp): scan -> pick the next agent (round-robin, oldest
// first) -> lease -> wake -> complete or fail; core::queue_driver drives it.
#include "queue.hpp"

#include <algorithm>
#include <cmath>

#include "awp/core/child_env.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/core/process.hpp"

namespace awp::dispatcher {

namespace log = core::log;
namespace pg = core::pg;
using namespace std::chrono_literals;

namespace {

// The gateway's ready agents with something to do now (their oldest item's age and how many
// items are leasable), and one last row with the seconds until the next item becomes leasable (a
// back-off ends or a lease expires): awp_inbox_scan (sql/functions/inbox.sql), a function so that
// the server connection keeps its plan (through PgBouncer a statement is planned every time).
constexpr const char* kScanSql =
    "SELECT agent_id::text, oldest, due_in, waiting FROM public.awp_inbox_scan($1::uuid)";

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

}  // namespace

inbox_queue::inbox_queue(const config& cfg, std::vector<std::string> secrets)
    : cfg_(cfg), secrets_(std::move(secrets)), lease_db_(cfg.common.database_url, "lease") {
    for (int i = 0; i < cfg_.max_concurrent; ++i) {
        slot_db_.push_back(
            std::make_unique<pg::session>(cfg_.common.database_url, "wake-" + std::to_string(i)));
    }
}

net::awaitable<core::lease_batch<inbox_item>> inbox_queue::lease(std::size_t room) {
    if (due_at_ && std::chrono::steady_clock::now() >= *due_at_) dirty_ = true;  // a back-off ended
    if (dirty_) {
        dirty_ = false;
        try {
            co_await scan();
        } catch (...) {
            dirty_ = true;
            throw;
        }
    }
    core::lease_batch<inbox_item> batch;
    while (batch.items.size() < room) {
        const std::string* picked = pick_agent();
        if (!picked) break;
        const std::string agent_id = *picked;
        std::optional<inbox_item> item;
        std::string refused;
        try {
            item = co_await lease_for(agent_id);
        } catch (const pg::connection_error&) {
            dirty_ = true;
            if (batch.items.empty()) throw;  // retried by the driver
            break;                           // keep what was leased
        } catch (const std::exception& e) {
            refused = e.what();
        }
        auto& a = agents_[agent_id];
        if (!refused.empty())
            log::warn("lease refused", {{"agent_id", agent_id}, {"error", refused}});
        if (!item) {
            a.has_work = false;
            a.waiting = 0;
            continue;
        }
        if (a.waiting > 0) --a.waiting;
        a.busy = true;
        a.served = ++serve_seq_;
        ++stats_.wakes;
        batch.items.push_back(std::move(*item));
    }
    if (due_at_) {
        batch.next_due = std::chrono::duration_cast<std::chrono::milliseconds>(
            *due_at_ - std::chrono::steady_clock::now());
    }
    co_return batch;
}

net::awaitable<void> inbox_queue::scan() {
    // A failure throws: the driver retries the lease with its back-off, and dirty_ stays set.
    const pg::result r = co_await lease_db_.query_prepared(kScanSql, gateway_id_);
    ++stats_.scans;
    for (auto& [id, a] : agents_) {
        if (!a.busy) a.has_work = false;
        a.waiting = 0;
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
        a.waiting = r.get<long>(i, 3);
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
        due_at_ = std::chrono::steady_clock::now() + std::max(ms, 5ms);
    } else {
        due_at_.reset();
    }
}

const std::string* inbox_queue::pick_agent() {
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

net::awaitable<std::optional<inbox_item>> inbox_queue::lease_for(const std::string& agent_id) {
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

net::awaitable<std::vector<blocker>> inbox_queue::unresolved_blockers(std::size_t slot,
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

net::awaitable<wake_outcome> inbox_queue::work(inbox_item& item, std::size_t slot) {
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
    co_return wake_outcome{success, std::move(reason), {}};
}

net::awaitable<void> inbox_queue::finish(const inbox_item& item, const wake_outcome& out,
                                         std::size_t slot) {
    // A lost connection is retried by the driver until the lease would have run out anyway;
    // after that the reaper counts the attempt as failed and the item is retried.
    pg::result r;
    if (out.success) {
        r = co_await slot_db_[slot]->query_prepared(kCompleteSql, item.id, item.lease_token);
    } else {
        r = co_await slot_db_[slot]->query_prepared(kFailSql, item.id, out.reason,
                                                    item.lease_token);
    }
    out.status = r.empty() ? std::string("?") : r.get<std::string>(0, 0);
}

void inbox_queue::settled(const inbox_item& item, const wake_outcome& out,
                          core::finish_status status) {
    if (auto it = agents_.find(item.agent_id); it != agents_.end()) {
        // More only if the last scan saw more than this agent has been given since: an item
        // that came later brought a wake-up, which scans again before the next lease.
        it->second.busy = false;
        it->second.has_work = it->second.waiting > 0;
    }
    // A failed wake leaves its item in a back-off that no NOTIFY announces when it ends: scan
    // again before the next lease, so that the timer for its end is set.
    if (!out.success) dirty_ = true;
    if (status != core::finish_status::written) return;  // the driver logged why
    ++(out.success ? stats_.completed : stats_.failed);
    log::info(out.success ? "item completed" : "item failed", {{"item_id", item.id},
                                                               {"agent", item.agent_slug},
                                                               {"status", out.status},
                                                               {"attempt", item.attempts},
                                                               {"reason", out.reason}});
}

}  // namespace awp::dispatcher
