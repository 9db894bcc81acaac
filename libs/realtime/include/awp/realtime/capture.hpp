// Realtime's change capture: one logical replication connection (replication=database) that
// streams the slot awp_realtime with pgoutput, hands each committed transaction to a sink, and
// confirms to the slot only what the sink has decided. It makes the slot when missing, resumes
// from its confirmed LSN after any reconnect, waits while another process holds the slot and
// takes over when it goes, answers keepalives (and reports every 10 s) even while the sink
// holds it back, and stops reading when the sink does: the slot, not the gateway, holds what
// is not delivered yet, and the cluster's max_slot_wal_keep_size bounds that.
// docs/realtime-capture.md tells the whole story.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/pg.hpp"
#include "awp/realtime/assembler.hpp"
#include "awp/realtime/change.hpp"

namespace awp::realtime {

namespace net = boost::asio;

/// Where delivery is decided (the socket side implements it). When the coroutine returns, each
/// change is queued to every subscriber that may see it or dropped because none may, and the
/// capture may confirm commit_lsn to the slot. A transaction larger than the capture's part
/// size arrives in several calls: every part but the last has commit_lsn 0 (and its changes lsn
/// 0); the slot is confirmed only after the last. While it has not returned, nothing more is
/// read: a sink whose queue is full makes the slot, not the gateway, hold the rest.
using sink_fn = std::function<net::awaitable<void>(transaction)>;

/// One statement on an ordinary connection of the caller's (the gateway's pool): the capture's
/// pg_type lookups and the slot's figures. Throws what the pg layer throws.
using query_fn = std::function<net::awaitable<core::pg::result>(std::string, core::pg::params)>;

struct capture_options {
    /// The login with REPLICATION (REALTIME_DATABASE_URL); replication=database is added.
    std::string dsn;
    std::string slot = "awp_realtime";         // the gateway's: REALTIME_SLOT + _ + instance
    std::string publication = "awp_realtime";  // REALTIME_PUBLICATION
    /// Other readers' slots are `<slot_prefix>_...` in this database (several gateways, each its
    /// own). One found inactive, at one position, for `abandon_after` is dropped (its reader is
    /// gone: it would hold WAL up to the cap for nothing). "" or 0: none is ever dropped.
    std::string slot_prefix;
    std::chrono::milliseconds abandon_after{0};
    /// At most this long between two standby status updates (the server's wal_sender_timeout,
    /// 60 s by default, must be longer).
    std::chrono::milliseconds status_interval{std::chrono::seconds(10)};
    /// A decided transaction is confirmed within this long (updates are coalesced): what a crash
    /// may deliver twice.
    std::chrono::milliseconds confirm_delay{std::chrono::milliseconds(200)};
    /// How often the slot's figures (lag, wal_status) are read for status().
    std::chrono::milliseconds stats_interval{std::chrono::seconds(10)};
    /// How often a process waiting for the slot (held by another) tries to take it.
    std::chrono::milliseconds standby_poll{std::chrono::seconds(2)};
    /// How often a reader that cannot work (wal_level, no publication, no REPLICATION, a slot
    /// of another plugin) looks again.
    std::chrono::milliseconds unavailable_poll{std::chrono::seconds(30)};
    /// Reconnect back-off after Postgres went away: from 100 ms doubling up to this.
    std::chrono::milliseconds retry_cap{std::chrono::seconds(5)};
    /// The most bytes of one transaction held before they go to the sink (assembler.hpp).
    std::size_t max_part_bytes = assembler::kDefaultPartBytes;
};

/// The slot as pg_replication_slots shows it.
struct slot_figures {
    bool exists = false;
    bool active = false;
    std::int64_t active_pid = 0;
    std::string wal_status;                     ///< reserved, extended, unreserved, lost
    std::string confirmed_lsn;                  ///< confirmed_flush_lsn
    std::int64_t lag_bytes = 0;                 ///< WAL written since confirmed_lsn
    std::int64_t retained_bytes = 0;            ///< WAL the slot holds (since restart_lsn)
    std::optional<std::int64_t> safe_wal_size;  ///< bytes left before the cap invalidates it
    std::string max_slot_wal_keep_size;         ///< the server's cap ("-1" = none)
    std::string wal_level;
};

/// The statement behind slot_figures: $1 the slot's name; one row (also when the slot is
/// missing). Readable by any login (pg_replication_slots, pg_current_wal_lsn): awpctl runs it.
extern const char* const kSlotFiguresSql;
/// kSlotFiguresSql's row as figures. Throws core::error for any other shape.
[[nodiscard]] slot_figures slot_figures_from(const core::pg::result& r);
/// The slot's figures read now through `query` (the gateway's pool): for /api/health while the
/// capture is off or elsewhere, and for tests. Throws what `query` throws.
net::awaitable<slot_figures> read_slot_figures(query_fn query, std::string slot);

/// What the capture is doing, for /api/health and the logs.
struct capture_status {
    /// off (REALTIME=off or no URL), connecting, streaming, standby (another process holds the
    /// slot), unavailable (it cannot work until something changes: see reason).
    std::string state = "connecting";
    std::string reason;  ///< why not streaming; "" while streaming
    std::string slot;
    std::string publication;
    std::uint64_t decided_lsn = 0;    ///< every transaction up to here is decided by the sink
    std::uint64_t confirmed_lsn = 0;  ///< the last position sent to the server
    std::uint64_t transactions = 0;   ///< handed to the sink (parts count once)
    std::uint64_t changes = 0;
    std::uint64_t truncates = 0;        ///< tables truncated (reported, not delivered)
    std::uint64_t sink_failures = 0;    ///< transactions whose sink threw (not delivered)
    std::uint64_t connects = 0;         ///< sessions that reached streaming
    std::uint64_t slots_recreated = 0;  ///< lost slots (over the WAL cap) made anew
    std::uint64_t slots_dropped = 0;    ///< other readers' slots dropped as abandoned
    bool in_sink = false;               ///< the sink holds the reader now
    double sink_wait_s = 0;             ///< for how long
    std::optional<slot_figures> figures;
    std::string figures_at;  ///< when figures were read (ISO 8601)
};

/// /api/health's "realtime" object (and awpctl's): the status as JSON, nothing secret in it.
[[nodiscard]] std::string status_json(const capture_status& s);

class capture {
public:
    capture(capture_options opts, sink_fn sink, query_fn query);
    ~capture();
    capture(const capture&) = delete;
    capture& operator=(const capture&) = delete;

    /// Runs until stop(), on the caller's executor (one strand: the connection is used by one
    /// coroutine at a time). Never throws for database trouble: it logs, reports and retries.
    net::awaitable<void> run();
    /// Ends run(): a sink call in progress is let finish, what it decided is confirmed.
    /// Safe from any thread.
    void stop();
    /// A snapshot, from any thread.
    [[nodiscard]] capture_status status() const;

private:
    struct session;
    net::awaitable<void> serve();
    net::awaitable<void> stream(core::pg::connection& conn, std::uint64_t start_lsn);
    net::awaitable<void> read_loop(session& s);
    net::awaitable<void> status_loop(session& s);
    net::awaitable<void> send_status(session& s, bool reply_requested);
    net::awaitable<void> handle(session& s, step st);
    net::awaitable<void> resolve_types(std::vector<std::uint32_t> oids);
    net::awaitable<void> stats_loop();
    net::awaitable<void> drop_abandoned();
    net::awaitable<void> pause(std::chrono::milliseconds d);
    void report(std::string state, std::string reason);
    void poke_status();

    capture_options opts_;
    sink_fn sink_;
    query_fn query_;
    assembler assembler_;
    std::atomic<bool> stopping_{false};
    mutable std::mutex mu_;  // status_ and the pointers stop() reaches
    capture_status status_;
    std::chrono::steady_clock::time_point sink_since_;
    std::optional<net::any_io_executor> executor_;  // run()'s, where stop() posts
    core::pg::backoff* backoff_ = nullptr;
    net::steady_timer* pause_timer_ = nullptr;
    net::steady_timer* stats_timer_ = nullptr;
    session* session_ = nullptr;
    std::uint64_t decided_ = 0;  // strand-only copies of the status fields the loops use
    /// Other readers' slots seen inactive: since when, and at which confirmed position.
    std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::string>> idle_;
};

}  // namespace awp::realtime
