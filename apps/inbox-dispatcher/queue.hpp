// The inbox dispatcher's queue, as core::queue_driver drives it: which item to lease next (one
// item per agent at a time, only for agents that are ready, round-robin across agents and oldest
// first), how to wake the agent for it (the runtime CLI, as AGENT_USER, with an allowlisted
// environment) and the item's final transition (complete_inbox_item / fail_inbox_item).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "awp/core/lease.hpp"
#include "awp/core/pg.hpp"
#include "config.hpp"
#include "wake.hpp"

namespace awp::dispatcher {

namespace net = boost::asio;

/// Counters for heartbeats, logs and tests.
struct stats {
    std::uint64_t wakes = 0;
    std::uint64_t completed = 0;
    std::uint64_t failed = 0;
    std::uint64_t scans = 0;
};

/// How a wake ended. `status` is the item's status after the transition (finish() sets it).
struct wake_outcome {
    bool success = false;
    std::string reason;
    mutable std::string status;
};

class inbox_queue {
public:
    using row_type = inbox_item;
    using outcome_type = wake_outcome;

    inbox_queue(const config& cfg, std::vector<std::string> secrets);

    /// The gateway whose items are leased (resolved once by the service).
    void bind(std::string gateway_id) { gateway_id_ = std::move(gateway_id); }
    /// A notification or a rescan: the next lease() looks at the tables first.
    void mark_dirty() noexcept { dirty_ = true; }
    core::pg::session& lease_session() noexcept { return lease_db_; }
    /// Every session it uses: the lease one, then one per slot (a process that hosts several
    /// gateways, as bench/scale does, gives each its own key and opens them up front).
    std::vector<core::pg::session*> sessions() {
        std::vector<core::pg::session*> all{&lease_db_};
        for (auto& s : slot_db_) all.push_back(s.get());
        return all;
    }

    net::awaitable<core::lease_batch<inbox_item>> lease(std::size_t room);
    net::awaitable<wake_outcome> work(inbox_item& item, std::size_t slot);
    wake_outcome failed(const inbox_item&, std::string what) {
        return {false, std::move(what), {}};
    }
    net::awaitable<void> finish(const inbox_item& item, const wake_outcome& out, std::size_t slot);
    void settled(const inbox_item& item, const wake_outcome& out, core::finish_status status);

    const stats& counters() const noexcept { return stats_; }

private:
    struct agent_state {
        double oldest = 0;         // epoch seconds of its oldest waiting item
        std::uint64_t served = 0;  // dispatch sequence of its last wake (0: never)
        long waiting = 0;          // leasable items the last scan saw, less those leased since
        bool has_work = false;
        bool busy = false;
    };

    /// The ready agents with work now, and when the next back-off ends. Throws.
    net::awaitable<void> scan();
    const std::string* pick_agent();
    net::awaitable<std::optional<inbox_item>> lease_for(const std::string& agent_id);
    net::awaitable<std::vector<blocker>> unresolved_blockers(std::size_t slot, std::string task_id);

    const config& cfg_;
    std::vector<std::string> secrets_;  // redacted from failure reasons
    std::string gateway_id_;
    core::pg::session lease_db_;
    std::vector<std::unique_ptr<core::pg::session>> slot_db_;
    std::unordered_map<std::string, agent_state> agents_;
    std::uint64_t serve_seq_ = 0;
    bool dirty_ = true;
    std::optional<std::chrono::steady_clock::time_point> due_at_;
    stats stats_;
};

}  // namespace awp::dispatcher
