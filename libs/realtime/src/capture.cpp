// The replication reader: connect with replication=database, check wal_level, the publication
// and the slot (made when missing, made anew when Postgres invalidated it), START_REPLICATION
// from the confirmed LSN, read CopyData on the socket without blocking the io thread, hand
// transactions to the sink, and confirm what it decided in standby status updates.
#include "awp/realtime/capture.hpp"

#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "awp/realtime/walsender.hpp"

namespace awp::realtime {

namespace pg = core::pg;
namespace log = core::log;
using clock = std::chrono::steady_clock;

namespace {

/// Why a session cannot go on, and how long to wait before the next try.
class session_end : public core::error {
public:
    enum class kind { standby, unavailable, retry };
    session_end(kind k, const std::string& why) : core::error(why), kind_(k) {}
    kind what_kind() const noexcept { return kind_; }

private:
    kind kind_;
};

constexpr const char* kTypeNamesSql =
    "SELECT oid::int8, typname FROM pg_catalog.pg_type WHERE oid = ANY($1::oid[])";

std::string escape(PGconn* c, std::string_view s, bool identifier) {
    char* q = identifier ? PQescapeIdentifier(c, s.data(), s.size())
                         : PQescapeLiteral(c, s.data(), s.size());
    if (!q) throw pg::connection_error("cannot quote a name on the replication connection");
    std::string out(q);
    PQfreemem(q);
    return out;
}

[[noreturn]] void throw_result(PGresult* raw) {
    pg::result keep(raw);
    const auto field = [raw](int code) {
        const char* s = PQresultErrorField(raw, code);
        return std::string(s ? s : "");
    };
    const std::string state = field(PG_DIAG_SQLSTATE);
    if (state.empty()) throw pg::connection_error("the replication connection failed");
    pg::throw_for_sqlstate(state, field(PG_DIAG_MESSAGE_PRIMARY), field(PG_DIAG_MESSAGE_DETAIL),
                           field(PG_DIAG_MESSAGE_HINT));
}

// Reads until libpq has a whole result; throws connection_error when the server went away.
net::awaitable<void> await_not_busy(pg::connection& c) {
    PGconn* raw = c.native();
    while (PQisBusy(raw) == 1) {
        co_await c.async_wait_readable();
        if (PQconsumeInput(raw) == 0) {
            throw pg::connection_error(std::string("replication connection lost: ") +
                                       PQerrorMessage(raw));
        }
    }
}

net::awaitable<void> flush(pg::connection& c) {
    PGconn* raw = c.native();
    for (;;) {
        const int f = PQflush(raw);
        if (f == 0) co_return;
        if (f < 0) {
            throw pg::connection_error(std::string("cannot write to the replication connection: ") +
                                       PQerrorMessage(raw));
        }
        co_await c.async_wait_writable();
    }
}

// One statement in the simple query protocol (a walsender takes no other): its last result, or
// the COPY BOTH result of START_REPLICATION (then the stream begins).
net::awaitable<pg::result> simple(pg::connection& c, const std::string& sql,
                                  bool copy_both = false) {
    PGconn* raw = c.native();
    if (PQsendQuery(raw, sql.c_str()) == 0) {
        throw pg::connection_error(std::string("cannot send to the replication connection: ") +
                                   PQerrorMessage(raw));
    }
    co_await flush(c);
    pg::result last;
    PGresult* failed = nullptr;
    for (;;) {
        co_await await_not_busy(c);
        PGresult* r = PQgetResult(raw);
        if (!r) break;
        const auto st = PQresultStatus(r);
        if (st == PGRES_COPY_BOTH && copy_both && !failed) co_return pg::result(r);
        if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) {
            if (!failed) {
                failed = r;
            } else {
                PQclear(r);
            }
        } else {
            last = pg::result(r);
        }
    }
    if (failed) throw_result(failed);
    if (PQstatus(raw) != CONNECTION_OK) throw pg::connection_error("replication connection lost");
    co_return last;
}

// '{1,2,3}': the oids as one array parameter.
std::string oid_array(const std::vector<std::uint32_t>& oids) {
    std::string out = "{";
    for (std::size_t i = 0; i < oids.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(oids[i]);
    }
    return out + "}";
}

std::string joined(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

}  // namespace

// One streaming session's state, shared by its read and status loops (one strand).
struct capture::session {
    explicit session(pg::connection& c, net::any_io_executor ex) : conn(c), status_timer(ex) {}
    pg::connection& conn;
    net::steady_timer status_timer;
    bool over = false;             // the read loop ended: the status loop stops
    bool status_done = false;      // the status loop has returned
    bool reply_requested = false;  // the server asked for an update now
    bool read_waiting = false;     // the read loop waits for the socket
    bool broken = false;           // a status update could not be written
    std::uint64_t sent_lsn = 0;
    clock::time_point last_sent = clock::now();
};

capture::capture(capture_options opts, sink_fn sink, query_fn query)
    : opts_(std::move(opts)),
      sink_(std::move(sink)),
      query_(std::move(query)),
      assembler_(opts_.max_part_bytes) {
    status_.slot = opts_.slot;
    status_.publication = opts_.publication;
}

capture::~capture() = default;

capture_status capture::status() const {
    std::lock_guard lock(mu_);
    auto s = status_;
    if (s.in_sink) {
        s.sink_wait_s = std::chrono::duration<double>(clock::now() - sink_since_).count();
    }
    return s;
}

void capture::stop() {
    stopping_ = true;
    std::lock_guard lock(mu_);
    if (!executor_) return;  // run() has not started: it sees stopping_ first
    net::post(*executor_, [this] {
        // On the strand: the timers and the connection are used there only.
        if (pause_timer_) pause_timer_->cancel();
        if (stats_timer_) stats_timer_->cancel();
        if (session_) {
            session_->status_timer.cancel();
            session_->conn.cancel_wait();
        }
    });
}

void capture::report(std::string state, std::string reason) {
    {
        std::lock_guard lock(mu_);
        if (status_.state == state && status_.reason == reason) return;
        status_.state = state;
        status_.reason = reason;
    }
    // One line per change of state or reason, not one per retry.
    if (state == "streaming") {
        log::info("realtime: streaming changes",
                  {{"slot", opts_.slot}, {"from_lsn", format_lsn(decided_)}});
    } else if (state == "standby") {
        log::info("realtime: waiting for the replication slot", {{"reason", reason}});
    } else if (state == "unavailable") {
        log::warn("realtime: change capture is off until this is fixed", {{"reason", reason}});
    } else if (state == "connecting" && !reason.empty()) {
        log::warn("realtime: replication connection lost, reconnecting", {{"error", reason}});
    }
}

void capture::poke_status() {
    if (session_) session_->status_timer.cancel();
}

net::awaitable<void> capture::pause(std::chrono::milliseconds d) {
    net::steady_timer t(co_await net::this_coro::executor, d);
    {
        std::lock_guard lock(mu_);
        pause_timer_ = &t;
    }
    boost::system::error_code ec;
    if (!stopping_) co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
    std::lock_guard lock(mu_);
    pause_timer_ = nullptr;
}

net::awaitable<void> capture::run() {
    {
        std::lock_guard lock(mu_);
        executor_ = co_await net::this_coro::executor;
    }
    auto ex = co_await net::this_coro::executor;
    auto stats_done = std::make_shared<bool>(false);
    net::co_spawn(ex, stats_loop(), [stats_done](std::exception_ptr) { *stats_done = true; });
    pg::backoff backoff(std::chrono::milliseconds(100), opts_.retry_cap);
    backoff_ = &backoff;
    while (!stopping_) {
        std::chrono::milliseconds wait{0};
        try {
            co_await serve();
        } catch (const session_end& e) {
            if (e.what_kind() == session_end::kind::standby) {
                report("standby", e.what());
                wait = opts_.standby_poll;
            } else if (e.what_kind() == session_end::kind::unavailable) {
                report("unavailable", e.what());
                wait = opts_.unavailable_poll;
            } else {
                report("connecting", e.what());
                wait = backoff.next();
            }
        } catch (const pg::connection_error& e) {
            const std::string why = e.what();
            // A login without REPLICATION is refused when it connects: nothing a retry mends.
            if (why.find("replication role") != std::string::npos ||
                why.find("REPLICATION attribute") != std::string::npos) {
                report("unavailable",
                       "the login of REALTIME_DATABASE_URL lacks REPLICATION: " + why);
                wait = opts_.unavailable_poll;
            } else {
                report("connecting", why);
                wait = backoff.next();
            }
        } catch (const pg::sql_error& e) {
            // 42704: a publication (or the slot) is missing; 55000: wal_level, an invalidated
            // slot; 42501: no right to replicate. Each needs an operator, not a quick retry.
            const auto& st = e.sqlstate();
            if (st == "55006") {
                report("standby", e.what());
                wait = opts_.standby_poll;
            } else if (st == "42704" || st == "55000" || st == "42501") {
                report("unavailable", e.what());
                wait = opts_.unavailable_poll;
            } else {
                report("connecting", e.what());
                wait = backoff.next();
            }
        } catch (const core::config_error&) {
            // REALTIME_DATABASE_URL does not parse: no retry mends it. libpq's words may quote
            // a piece of the string (a password), so they are not repeated.
            report("unavailable", "REALTIME_DATABASE_URL does not parse as a connection string");
            wait = opts_.unavailable_poll;
        } catch (const pgoutput::decode_error& e) {
            log::error("realtime: a replication message did not decode", {{"error", e.what()}});
            report("connecting", std::string("a message did not decode: ") + e.what());
            wait = backoff.next();
        } catch (const stream_error& e) {
            log::error("realtime: the replication stream broke its order", {{"error", e.what()}});
            report("connecting", std::string("the stream broke its order: ") + e.what());
            wait = backoff.next();
        } catch (const std::exception& e) {
            if (stopping_) break;
            report("connecting", e.what());
            wait = backoff.next();
        }
        if (stopping_) break;
        co_await pause(wait);
    }
    backoff_ = nullptr;
    report("off", "stopped");
    {
        std::lock_guard lock(mu_);
        if (stats_timer_) stats_timer_->cancel();
    }
    net::steady_timer t(ex);
    while (!*stats_done) {  // it uses this object: let it end first
        t.expires_after(std::chrono::milliseconds(5));
        co_await t.async_wait(net::use_awaitable);
    }
}

net::awaitable<void> capture::serve() {
    auto conn = co_await pg::connection::async_connect(pg::dsn_for_replication(opts_.dsn));
    if (stopping_) co_return;
    PGconn* raw = conn.native();
    const auto wal_level = co_await simple(conn, "SHOW wal_level");
    if (wal_level.empty() || wal_level.text(0, 0) != "logical") {
        throw session_end(session_end::kind::unavailable,
                          "wal_level is " +
                              std::string(wal_level.empty() ? "?" : wal_level.text(0, 0)) +
                              ": realtime needs wal_level = logical (a server restart; "
                              "docs/realtime-capture.md)");
    }
    const auto pub =
        co_await simple(conn, "SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = " +
                                  escape(raw, opts_.publication, false));
    if (pub.empty()) {
        throw session_end(session_end::kind::unavailable,
                          "publication " + opts_.publication +
                              " does not exist: awpctl migrate as a superuser makes it "
                              "(sql/0031_realtime.sql)");
    }
    const std::string slot_ident = escape(raw, opts_.slot, true);
    const auto slot = co_await simple(
        conn,
        "SELECT plugin, slot_type, database = current_database() AS here, wal_status, "
        "confirmed_flush_lsn::text, active, active_pid FROM pg_catalog.pg_replication_slots "
        "WHERE slot_name = " +
            escape(raw, opts_.slot, false));
    std::uint64_t confirmed = 0;
    bool make = slot.empty();
    if (!make) {
        if (slot.text(0, 0) != "pgoutput" || slot.text(0, 1) != "logical" ||
            slot.text(0, 2) != "t") {
            throw session_end(session_end::kind::unavailable,
                              "replication slot " + opts_.slot +
                                  " exists for something else (plugin " +
                                  std::string(slot.text(0, 0)) +
                                  ", or another database): name another with REALTIME_SLOT");
        }
        if (slot.text(0, 3) == "lost") {
            // Postgres invalidated it: it held more WAL than max_slot_wal_keep_size allows. What
            // was committed while it was that far behind is gone; a new slot starts from now.
            log::error(
                "realtime: the replication slot was invalidated (it held more WAL than "
                "max_slot_wal_keep_size); changes committed while it was behind are not "
                "delivered; making it anew",
                {{"slot", opts_.slot}, {"confirmed_lsn", std::string(slot.text(0, 4))}});
            co_await simple(conn, "DROP_REPLICATION_SLOT " + slot_ident);
            make = true;
            std::lock_guard lock(mu_);
            ++status_.slots_recreated;
        } else if (slot.text(0, 5) == "t") {
            throw session_end(session_end::kind::standby, "replication slot " + opts_.slot +
                                                              " is in use by another reader (pid " +
                                                              std::string(slot.text(0, 6)) +
                                                              "); taking over when it ends");
        } else {
            confirmed = parse_lsn(slot.text(0, 4)).value_or(0);
        }
    }
    if (make) {
        const auto made = co_await simple(conn, "CREATE_REPLICATION_SLOT " + slot_ident +
                                                    " LOGICAL pgoutput (SNAPSHOT 'nothing')");
        const std::string at = made.empty() ? "" : std::string(made.text(0, 1));
        confirmed = parse_lsn(at).value_or(0);
        log::info("realtime: made the replication slot", {{"slot", opts_.slot}, {"lsn", at}});
    }
    // The slot's confirmed position, or further if this process decided more than it could
    // confirm before the connection went: those transactions are not wanted again.
    co_await stream(conn, std::max(confirmed, decided_));
}

net::awaitable<void> capture::stream(pg::connection& conn, std::uint64_t start_lsn) {
    PGconn* raw = conn.native();
    const std::string sql = "START_REPLICATION SLOT " + escape(raw, opts_.slot, true) +
                            " LOGICAL " + format_lsn(start_lsn) +
                            " (proto_version '1', publication_names " +
                            escape(raw, escape(raw, opts_.publication, true), false) + ")";
    co_await simple(conn, sql, true);
    auto ex = co_await net::this_coro::executor;
    session s(conn, ex);
    s.sent_lsn = start_lsn;
    decided_ = std::max(decided_, start_lsn);
    assembler_.reset();
    {
        std::lock_guard lock(mu_);
        session_ = &s;
        ++status_.connects;
        status_.decided_lsn = decided_;
        status_.confirmed_lsn = start_lsn;
    }
    if (backoff_) backoff_->reset();
    report("streaming", "");
    net::co_spawn(ex, status_loop(s), [&s](std::exception_ptr) { s.status_done = true; });
    std::exception_ptr failure;
    try {
        co_await read_loop(s);
    } catch (...) {
        failure = std::current_exception();
    }
    s.over = true;
    s.status_timer.cancel();
    conn.cancel_wait();  // a status update waiting for the socket
    net::steady_timer t(ex);
    while (!s.status_done) {
        t.expires_after(std::chrono::milliseconds(2));
        co_await t.async_wait(net::use_awaitable);
    }
    if (!failure && !s.broken && decided_ != s.sent_lsn) {
        // Stopping: confirm what was decided, so a restart does not deliver it again.
        try {
            co_await send_status(s, false);
        } catch (const std::exception&) {
        }
    }
    {
        std::lock_guard lock(mu_);
        session_ = nullptr;
    }
    if (failure) std::rethrow_exception(failure);
}

net::awaitable<void> capture::read_loop(session& s) {
    PGconn* raw = s.conn.native();
    while (!stopping_) {
        char* buf = nullptr;
        const int n = PQgetCopyData(raw, &buf, 1);
        if (n == 0) {  // nothing whole yet: wait for the socket without blocking the thread
            s.read_waiting = true;
            boost::system::error_code ec;
            try {
                co_await s.conn.async_wait_readable();
            } catch (const boost::system::system_error& e) {
                ec = e.code();
            }
            s.read_waiting = false;
            if (stopping_) co_return;
            if (ec && ec != net::error::operation_aborted) {
                throw pg::connection_error("replication socket: " + ec.message());
            }
            // Also after a wake-up by the status loop: its flush may have read for us.
            if (PQconsumeInput(raw) == 0) {
                throw pg::connection_error(std::string("replication connection lost: ") +
                                           PQerrorMessage(raw));
            }
            continue;
        }
        if (n == -1) {  // the server ended the stream: why is in the result that follows
            for (PGresult* r = PQgetResult(raw); r; r = PQgetResult(raw)) {
                const auto st = PQresultStatus(r);
                if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) throw_result(r);
                PQclear(r);
            }
            throw pg::connection_error("the server ended the replication stream");
        }
        if (n < 0) {
            throw pg::connection_error(std::string("replication connection lost: ") +
                                       PQerrorMessage(raw));
        }
        const std::unique_ptr<char, void (*)(void*)> hold(buf, &PQfreemem);
        const auto m = walsender::parse(std::string_view(buf, static_cast<std::size_t>(n)));
        if (const auto* k = std::get_if<walsender::keepalive>(&m)) {
            // Between transactions every change up to the server's position was sent and
            // decided: confirming it lets the slot move on past WAL that holds nothing for us
            // (other databases, unpublished work), as Postgres' own subscribers do.
            if (!assembler_.in_transaction() && k->wal_end > decided_) {
                decided_ = k->wal_end;
                std::lock_guard lock(mu_);
                status_.decided_lsn = decided_;
            }
            if (k->reply_requested) {
                s.reply_requested = true;
                poke_status();
            }
            continue;
        }
        const auto& x = std::get<walsender::xlog_data>(m);
        co_await handle(s, assembler_.feed(x.payload));
    }
}

net::awaitable<void> capture::handle(session&, step st) {
    if (!st.unknown_types.empty()) co_await resolve_types(std::move(st.unknown_types));
    if (!st.truncated.empty()) {
        // The client has no event for it, and a truncate carries no rows to check: said here.
        log::info("realtime: a TRUNCATE is not delivered to subscribers",
                  {{"tables", joined(st.truncated)}});
        std::lock_guard lock(mu_);
        status_.truncates += st.truncated.size();
    }
    if (!st.out) co_return;
    const std::uint64_t lsn = st.out->commit_lsn;
    if (!st.out->changes.empty()) {
        const auto n = st.out->changes.size();
        {
            std::lock_guard lock(mu_);
            status_.in_sink = true;
            sink_since_ = clock::now();
        }
        bool failed = false;
        try {
            co_await sink_(std::move(*st.out));
        } catch (const std::exception& e) {
            // Retrying would stop every later change behind this one: it is reported, counted
            // and passed.
            failed = true;
            log::error("realtime: the sink failed a transaction; its changes are not delivered",
                       {{"lsn", format_lsn(lsn)}, {"changes", n}, {"error", e.what()}});
        }
        std::lock_guard lock(mu_);
        status_.in_sink = false;
        status_.changes += n;
        if (st.final) ++status_.transactions;
        if (failed) ++status_.sink_failures;
    }
    if (st.final && lsn > decided_) {
        decided_ = lsn;
        {
            std::lock_guard lock(mu_);
            status_.decided_lsn = decided_;
        }
        poke_status();
    }
}

net::awaitable<void> capture::resolve_types(std::vector<std::uint32_t> oids) {
    const std::string array = oid_array(oids);
    // Throws when the database cannot answer: the session ends and starts again from the slot.
    // Not a braced list inside the co_await: GCC 12 cannot keep its backing array in a coroutine
    // frame ("array used as initializer").
    pg::params p;
    p.emplace_back(array);
    const auto r = co_await query_(kTypeNamesSql, std::move(p));
    for (int i = 0; i < r.size(); ++i) {
        const auto oid = r.get<long long>(i, 0);
        assembler_.set_type_name(static_cast<std::uint32_t>(oid), r.get<std::string>(i, 1));
        oids.erase(std::remove(oids.begin(), oids.end(), static_cast<std::uint32_t>(oid)),
                   oids.end());
    }
    // A type dropped since: Postgres' own name for a value of no known type.
    for (const auto oid : oids) assembler_.set_type_name(oid, "unknown");
}

net::awaitable<void> capture::status_loop(session& s) {
    try {
        while (!s.over && !stopping_) {
            const auto now = clock::now();
            auto due = s.last_sent + opts_.status_interval;
            if (decided_ != s.sent_lsn) due = std::min(due, s.last_sent + opts_.confirm_delay);
            if (s.reply_requested) due = now;
            if (now >= due) {
                co_await send_status(s, false);
                if (s.broken) co_return;
                continue;
            }
            s.status_timer.expires_at(due);
            boost::system::error_code ec;
            co_await s.status_timer.async_wait(net::redirect_error(net::use_awaitable, ec));
        }
    } catch (const std::exception&) {
        s.broken = true;  // the read loop finds the connection gone at its next read
    }
}

net::awaitable<void> capture::send_status(session& s, bool reply_requested) {
    const std::uint64_t lsn = decided_;
    const auto msg = walsender::status_update(lsn, walsender::pg_now(), reply_requested);
    PGconn* raw = s.conn.native();
    for (;;) {
        const int r = PQputCopyData(raw, msg.data(), static_cast<int>(msg.size()));
        if (r == 1) break;
        if (r < 0) {
            s.broken = true;
            co_return;
        }
        co_await s.conn.async_wait_writable();  // libpq's buffer is full: the socket first
    }
    co_await flush(s.conn);
    s.sent_lsn = lsn;
    s.last_sent = clock::now();
    s.reply_requested = false;
    {
        std::lock_guard lock(mu_);
        status_.confirmed_lsn = lsn;
    }
    // Writing may have read the server's bytes into libpq: the read loop looks again.
    if (s.read_waiting) s.conn.cancel_wait();
}

net::awaitable<void> capture::stats_loop() {
    auto ex = co_await net::this_coro::executor;
    net::steady_timer t(ex);
    {
        std::lock_guard lock(mu_);
        stats_timer_ = &t;
    }
    while (!stopping_) {
        try {
            auto f = co_await read_slot_figures(query_, opts_.slot);
            std::lock_guard lock(mu_);
            status_.figures = std::move(f);
            status_.figures_at = core::now_iso8601_utc();
        } catch (const std::exception& e) {
            // The figures go stale (figures_at says since when); the capture reports its own
            // connection's trouble.
            log::debug("realtime: cannot read the slot's figures", {{"error", e.what()}});
        }
        try {
            co_await drop_abandoned();
        } catch (const std::exception& e) {
            log::debug("realtime: cannot look for abandoned slots", {{"error", e.what()}});
        }
        if (stopping_) break;
        t.expires_after(opts_.stats_interval);
        boost::system::error_code ec;
        co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    std::lock_guard lock(mu_);
    stats_timer_ = nullptr;
}

namespace {

// Other readers' slots of the prefix, in this database.
constexpr const char* kPeersSql = R"SQL(
SELECT slot_name::text, active, coalesce(confirmed_flush_lsn::text, ''), coalesce(wal_status, '')
  FROM pg_catalog.pg_replication_slots
 WHERE database = current_database() AND slot_type = 'logical' AND plugin = 'pgoutput'
   AND left(slot_name::text, length($1) + 1) = $1 || '_' AND slot_name::text <> $2
)SQL";

// Dropped only when still inactive, in one statement: a reader taking it meanwhile makes
// pg_drop_replication_slot fail (55006), not succeed.
constexpr const char* kDropPeerSql = R"SQL(
SELECT pg_catalog.pg_drop_replication_slot(slot_name)
  FROM pg_catalog.pg_replication_slots
 WHERE slot_name = $1 AND NOT active AND database = current_database()
)SQL";

void log_dropped(const std::string& slot, const std::string& lsn, const std::string& why) {
    log::warn("realtime: dropped another gateway's replication slot, abandoned",
              {{"slot", slot}, {"confirmed_lsn", lsn}, {"why", why}});
}

}  // namespace

net::awaitable<void> capture::drop_abandoned() {
    if (opts_.slot_prefix.empty() || opts_.abandon_after.count() <= 0) co_return;
    pg::params p;
    p.emplace_back(opts_.slot_prefix);
    p.emplace_back(opts_.slot);
    const auto r = co_await query_(kPeersSql, std::move(p));
    const auto now = clock::now();
    decltype(idle_) seen;
    std::vector<std::pair<std::string, std::string>> drop;  // slot, why
    for (int i = 0; i < r.size(); ++i) {
        const auto name = r.get<std::string>(i, 0);
        if (r.get<bool>(i, 1)) continue;  // read by its gateway
        const auto lsn = r.get<std::string>(i, 2);
        auto it = idle_.find(name);
        // Inactive at the same position since it was first seen so: a reader that came and went
        // meanwhile moved it.
        const auto since = it != idle_.end() && it->second.second == lsn ? it->second.first : now;
        seen[name] = {since, lsn};
        if (r.get<std::string>(i, 3) == "lost") {
            drop.emplace_back(name, "invalidated (it held more WAL than max_slot_wal_keep_size)");
        } else if (now - since >= opts_.abandon_after) {
            drop.emplace_back(
                name,
                "inactive for " +
                    std::to_string(
                        std::chrono::duration_cast<std::chrono::seconds>(now - since).count()) +
                    " s");
        }
    }
    idle_ = std::move(seen);
    if (drop.empty()) co_return;
    // The REPLICATION login may drop slots; the pool's login may not.
    auto conn = co_await pg::connection::async_connect(opts_.dsn);
    for (const auto& [name, why] : drop) {
        pg::params dp;
        dp.emplace_back(name);
        try {
            const auto d = co_await conn.async_exec(kDropPeerSql, std::move(dp));
            if (d.size() == 1) {
                log_dropped(name, idle_[name].second, why);
                std::lock_guard lock(mu_);
                ++status_.slots_dropped;
            }
        } catch (const pg::sql_error& e) {
            log::debug("realtime: an abandoned slot was not dropped",
                       {{"slot", name}, {"error", e.what()}});
        }
        idle_.erase(name);
    }
}

// The slot's figures: one row whether or not the slot exists (the settings matter either way).
const char* const kSlotFiguresSql = R"SQL(
SELECT current_setting('wal_level') AS wal_level,
       current_setting('max_slot_wal_keep_size') AS keep,
       s.slot_name IS NOT NULL AS present,
       coalesce(s.active, false) AS active,
       s.active_pid,
       s.wal_status,
       s.confirmed_flush_lsn::text AS confirmed,
       pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)::int8
         AS lag,
       pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn)::int8
         AS retained,
       s.safe_wal_size
  FROM (SELECT 1) AS one
  LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1
)SQL";

slot_figures slot_figures_from(const pg::result& r) {
    if (r.size() != 1) throw core::error("the slot's figures: expected one row");
    slot_figures f;
    f.wal_level = r.get<std::string>(0, "wal_level");
    f.max_slot_wal_keep_size = r.get<std::string>(0, "keep");
    f.exists = r.get<bool>(0, "present");
    f.active = r.get<bool>(0, "active");
    f.active_pid = r.get_optional<long long>(0, "active_pid").value_or(0);
    f.wal_status = r.get_optional<std::string>(0, "wal_status").value_or("");
    f.confirmed_lsn = r.get_optional<std::string>(0, "confirmed").value_or("");
    f.lag_bytes = r.get_optional<long long>(0, "lag").value_or(0);
    f.retained_bytes = r.get_optional<long long>(0, "retained").value_or(0);
    if (auto safe = r.get_optional<long long>(0, "safe_wal_size")) f.safe_wal_size = *safe;
    return f;
}

net::awaitable<slot_figures> read_slot_figures(query_fn query, std::string slot) {
    // Not a braced list inside the co_await (GCC 12, see resolve_types).
    pg::params p;
    p.emplace_back(std::move(slot));
    const auto r = co_await query(kSlotFiguresSql, std::move(p));
    co_return slot_figures_from(r);
}

std::string status_json(const capture_status& s) {
    core::json::writer j;
    j.w.StartObject();
    j.kv("state", s.state);
    if (s.reason.empty()) {
        j.key("reason");
        j.w.Null();
    } else {
        j.kv("reason", s.reason);
    }
    j.kv("slot", s.slot);
    j.kv("publication", s.publication);
    j.kv("decided_lsn", format_lsn(s.decided_lsn));
    j.kv("confirmed_lsn", format_lsn(s.confirmed_lsn));
    j.key("transactions");
    j.w.Uint64(s.transactions);
    j.key("changes");
    j.w.Uint64(s.changes);
    j.key("truncates");
    j.w.Uint64(s.truncates);
    j.key("sink_failures");
    j.w.Uint64(s.sink_failures);
    j.key("connects");
    j.w.Uint64(s.connects);
    j.key("slots_recreated");
    j.w.Uint64(s.slots_recreated);
    j.key("slots_dropped");
    j.w.Uint64(s.slots_dropped);
    j.key("in_sink");
    j.w.Bool(s.in_sink);
    j.key("sink_wait_s");
    j.w.Double(s.sink_wait_s);
    j.key("slot_status");
    if (!s.figures) {
        j.w.Null();
    } else {
        const auto& f = *s.figures;
        j.w.StartObject();
        j.key("exists");
        j.w.Bool(f.exists);
        j.key("active");
        j.w.Bool(f.active);
        j.kv("wal_status", f.wal_status);
        j.kv("confirmed_lsn", f.confirmed_lsn);
        j.key("lag_bytes");
        j.w.Int64(f.lag_bytes);
        j.key("retained_bytes");
        j.w.Int64(f.retained_bytes);
        j.key("safe_wal_size");
        if (f.safe_wal_size) {
            j.w.Int64(*f.safe_wal_size);
        } else {
            j.w.Null();
        }
        j.kv("max_slot_wal_keep_size", f.max_slot_wal_keep_size);
        j.kv("wal_level", f.wal_level);
        j.kv("read_at", s.figures_at);
        j.w.EndObject();
    }
    j.w.EndObject();
    return j.str();
}

}  // namespace awp::realtime
