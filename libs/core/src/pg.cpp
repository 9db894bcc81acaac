// libpq wrapper: typed results, SQLSTATE-typed errors, async queries on the connection socket
// (the reconnecting session: pg_session.cpp; connection strings: pg_dsn.cpp).
#include "awp/core/pg.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"

namespace awp::core::pg {
namespace {

net::thread_pool& connect_pool() {
    // Connects (DNS, TLS, auth) are the only blocking libpq calls daemons make.
    static net::thread_pool pool(2);
    return pool;
}

std::string trim_message(const char* msg) {
    std::string s = msg ? msg : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

// Server notices (RAISE NOTICE, "relation already exists, skipping") go to the debug log,
// not raw onto stderr where they would break the one-JSON-object-per-line rule.
void on_notice(void*, const char* message) {
    if (log::enabled(log::level::debug)) {
        log::debug("postgres notice", {{"notice", trim_message(message)}});
    }
}

// Named protocol-level prepared statements for async_exec_prepared, unless DATABASE_PREPARED=off
// (or set_named_statements(false)): see pg.hpp.
std::atomic<int>& named_setting() {
    static std::atomic<int> v{-1};  // -1: not decided yet, from the environment at first use
    return v;
}

// The gateway key every connection made in this process presents (set_default_gateway_key).
struct default_key {
    std::mutex m;
    std::string key;
};
default_key& default_key_setting() {
    static default_key v;
    return v;
}

// Throws the typed error of a failed statement's result (kept alive by the caller's copy).
[[noreturn]] void throw_error_result(result keep) {
    PGresult* raw = keep.native();
    const char* state = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
    const auto field = [raw](int code) {
        const char* s = PQresultErrorField(raw, code);
        return std::string(s ? s : "");
    };
    if (!state) throw connection_error("query failed");
    throw_for_sqlstate(state, field(PG_DIAG_MESSAGE_PRIMARY), field(PG_DIAG_MESSAGE_DETAIL),
                       field(PG_DIAG_MESSAGE_HINT));
}

bool is_connection_sqlstate(std::string_view state) {
    // 08: connection exception; 57P01-57P03: admin/crash shutdown, cannot connect now.
    return state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03";
}

}  // namespace

std::string sqlstate_of(domain_code code) {
    const int n = static_cast<int>(code);
    std::string out = "AW000";
    out[2] = static_cast<char>('0' + n / 100 % 10);
    out[3] = static_cast<char>('0' + n / 10 % 10);
    out[4] = static_cast<char>('0' + n % 10);
    return out;
}

std::optional<domain_code> domain_code_of(std::string_view sqlstate) noexcept {
    if (sqlstate.size() != 5 || !sqlstate.starts_with("AW")) return std::nullopt;
    int n = 0;
    for (const char c : sqlstate.substr(2)) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + (c - '0');
    }
    for (const auto code : kDomainCodes)
        if (static_cast<int>(code) == n) return code;
    return std::nullopt;
}

[[noreturn]] void throw_for_sqlstate(std::string state, std::string message, std::string detail,
                                     std::string hint) {
    if (is_connection_sqlstate(state)) throw connection_error(message);
    if (state == "23505") throw unique_violation(state, message, detail, hint);
    if (state == "23514") throw check_violation(state, message, detail, hint);
    if (state == "40001") throw serialization_failure(state, message, detail, hint);
    if (state == "40P01") throw deadlock_detected(state, message, detail, hint);
    if (state == "57014") throw query_canceled(state, message, detail, hint);
    if (state == "42501") throw insufficient_privilege(state, message, detail, hint);
    if (state.starts_with("AW")) {
        const auto code = domain_code_of(state);
        if (!code) throw domain_error(state, message, detail, hint);
        switch (*code) {
            case domain_code::illegal_transition:
                throw illegal_transition(state, message, detail, hint);
            case domain_code::lease_lost:
                throw lease_lost(state, message, detail, hint);
            case domain_code::not_found:
                throw not_found(state, message, detail, hint);
            case domain_code::invalid_argument:
                throw invalid_argument(state, message, detail, hint);
            case domain_code::stale_source_hash:
                throw stale_source_hash(state, message, detail, hint);
            case domain_code::registration_token_invalid:
                throw registration_token_invalid(state, message, detail, hint);
            case domain_code::registration_token_expired:
                throw registration_token_expired(state, message, detail, hint);
            case domain_code::registration_token_used:
                throw registration_token_used(state, message, detail, hint);
            case domain_code::no_tenant:
                throw no_tenant(state, message, detail, hint);
            case domain_code::operator_required:
                throw operator_required(state, message, detail, hint);
            case domain_code::quota_exceeded:
                throw quota_exceeded(state, message, detail, hint);
        }
        throw domain_error(state, message, detail, hint);
    }
    throw sql_error(std::move(state), std::move(message), std::move(detail), std::move(hint));
}

param::param(double v) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    value_ = std::string(buf, end);
}

// ---- result ----------------------------------------------------------------------------

int result::column(std::string_view name) const {
    if (r_) {
        for (int i = 0, n = PQnfields(r_.get()); i < n; ++i) {
            if (name == PQfname(r_.get(), i)) return i;
        }
    }
    throw error("result has no column '" + std::string(name) + "'");
}

std::int64_t result::affected() const {
    if (!r_) return 0;
    const char* s = PQcmdTuples(r_.get());
    if (!s || !*s) return 0;
    std::int64_t v = 0;
    std::from_chars(s, s + std::strlen(s), v);
    return v;
}

void result::check_cell(int row, int col) const {
    if (row < 0 || row >= size() || col < 0 || col >= columns()) {
        throw error("result cell (" + std::to_string(row) + ", " + std::to_string(col) +
                    ") is out of range");
    }
}

bool result::is_null(int row, int col) const {
    check_cell(row, col);
    return PQgetisnull(r_.get(), row, col) == 1;
}

std::string_view result::text(int row, int col) const {
    check_cell(row, col);
    return {PQgetvalue(r_.get(), row, col),
            static_cast<std::size_t>(PQgetlength(r_.get(), row, col))};
}

namespace {
template <class T>
T parse_number(std::string_view s, std::string_view col) {
    T v{};
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) {
        throw error("column " + std::string(col) + ": '" + std::string(s) + "' is not a number");
    }
    return v;
}
}  // namespace

template <class T>
T result::get(int row, int col) const {
    if (is_null(row, col)) {
        throw error(std::string("column ") + PQfname(r_.get(), col) + " is NULL");
    }
    const auto s = text(row, col);
    if constexpr (std::is_same_v<T, std::string>) {
        return std::string(s);
    } else if constexpr (std::is_same_v<T, std::string_view>) {
        return s;
    } else if constexpr (std::is_same_v<T, bool>) {
        return s == "t" || s == "true";
    } else {
        return parse_number<T>(s, PQfname(r_.get(), col));
    }
}

template std::string result::get<std::string>(int, int) const;
template std::string_view result::get<std::string_view>(int, int) const;
template bool result::get<bool>(int, int) const;
template int result::get<int>(int, int) const;
template long result::get<long>(int, int) const;
template long long result::get<long long>(int, int) const;
template unsigned result::get<unsigned>(int, int) const;
template unsigned long result::get<unsigned long>(int, int) const;
template double result::get<double>(int, int) const;

// ---- connection ------------------------------------------------------------------------

connection::connection(PGconn* c) : conn_(c, &PQfinish) {}

connection::~connection() { release_socket(); }

connection::connection(connection&& o) noexcept
    : conn_(std::move(o.conn_)),
      socket_(std::move(o.socket_)),
      prepared_(std::move(o.prepared_)),
      statements_(o.statements_),
      gateway_key_(std::move(o.gateway_key_)) {
    o.prepared_.clear();
}

connection& connection::operator=(connection&& o) noexcept {
    if (this != &o) {
        release_socket();
        conn_ = std::move(o.conn_);
        socket_ = std::move(o.socket_);
        prepared_ = std::move(o.prepared_);
        statements_ = o.statements_;
        gateway_key_ = std::move(o.gateway_key_);
        o.prepared_.clear();
    }
    return *this;
}

void connection::release_socket() noexcept {
    // The descriptor belongs to libpq: release it before PQfinish closes it.
    if (socket_) {
        boost::system::error_code ec;
        socket_->cancel(ec);
        socket_->release();
        socket_.reset();
    }
}

connection connection::connect(const std::string& dsn) {
    // GSSAPI encryption off unless the DSN or PGGSSENCMODE asks for it: libpq's default
    // ("prefer") loads Kerberos and probes for credentials on every connect, which costs a
    // megabyte of RSS per daemon and a round trip, for a feature awp deployments do not use.
    // Keywords after the expanded DSN override it, so the DSN's own gssencmode still wins.
    const bool gss_default = std::getenv("PGGSSENCMODE") == nullptr;
    const char* keys[] = {"gssencmode", "dbname", nullptr};
    const char* values[] = {"disable", dsn.c_str(), nullptr};
    PGconn* raw = gss_default ? PQconnectdbParams(keys, values, 1) : PQconnectdb(dsn.c_str());
    connection c(raw);
    if (!raw || PQstatus(raw) != CONNECTION_OK) {
        const std::string msg = raw ? trim_message(PQerrorMessage(raw)) : "out of memory";
        throw connection_error("cannot connect to " + log::redact_dsn(dsn) + ": " + msg);
    }
    PQsetnonblocking(raw, 1);
    PQsetNoticeProcessor(raw, &on_notice, nullptr);
    c.gateway_key_ = default_gateway_key();
    return c;
}

namespace {
struct connect_outcome {
    connection conn;
    std::string error;
};

// Runs on the connect pool. It reports failure as a value: GCC 12 double-destroys the captures
// of a coroutine lambda when an exception leaves it across co_spawn (seen under valgrind).
net::awaitable<connect_outcome> connect_on_pool(std::string dsn) {
    connect_outcome out;
    try {
        out.conn = connection::connect(dsn);
    } catch (const connection_error& e) {
        out.error = e.what();
    }
    co_return out;
}
}  // namespace

net::awaitable<connection> connection::async_connect(std::string dsn) {
    // The connect runs on the pool without the caller's cancellation slot (an empty one is
    // bound): a blocking connect cannot be interrupted anyway, and Boost 1.81's co_spawn entry
    // point throws from the pool thread, which terminates the process, when a coroutine that
    // finished without suspending is cancelled (a daemon stopped while its heartbeat was
    // connecting: tests/integration/pg_test.cpp). A cancelled caller still stops at its next
    // co_await after this one.
    connect_outcome out = co_await net::co_spawn(
        connect_pool(), connect_on_pool(std::move(dsn)),
        net::bind_cancellation_slot(net::cancellation_slot(), net::use_awaitable));
    if (!out.error.empty()) throw connection_error(out.error);
    co_return std::move(out.conn);
}

bool connection::is_open() const noexcept {
    return conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
}

int connection::backend_pid() const noexcept { return conn_ ? PQbackendPID(conn_.get()) : 0; }

void connection::throw_connection_error(std::string_view what) {
    std::string msg = conn_ ? trim_message(PQerrorMessage(conn_.get())) : "not connected";
    throw connection_error(std::string(what) + ": " + msg);
}

result connection::check(PGresult* raw, std::string_view sql) {
    result r(raw);
    if (!raw) throw_connection_error("query failed");
    const auto status = PQresultStatus(raw);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
        return r;
    }
    if (!PQresultErrorField(raw, PG_DIAG_SQLSTATE) || PQstatus(conn_.get()) != CONNECTION_OK) {
        throw_connection_error("query failed");
    }
    (void)sql;
    throw_error_result(std::move(r));
}

namespace {
struct param_arrays {
    std::vector<const char*> values;
    explicit param_arrays(const params& p) {
        values.reserve(p.size());
        for (const auto& x : p) values.push_back(x.value() ? x.value()->c_str() : nullptr);
    }
    int count() const { return static_cast<int>(values.size()); }
};
}  // namespace

result connection::exec(std::string_view sql, const params& p) {
    if (!conn_) throw connection_error("query on a closed connection");
    if (presents_key_next()) {
        std::vector<pipelined> one{{std::string(sql), p}};
        return exec_pipeline(std::move(one)).back();
    }
    const std::string text(sql);
    param_arrays a(p);
    return check(PQexecParams(conn_.get(), text.c_str(), a.count(), nullptr, a.values.data(),
                              nullptr, nullptr, 0),
                 sql);
}

void connection::exec_script(std::string_view sql) {
    if (!conn_) throw connection_error("query on a closed connection");
    const std::string text(sql);
    // PQexec runs every statement and returns the last result; the first error stops it.
    check(PQexec(conn_.get(), text.c_str()), sql);
}

net::posix::stream_descriptor& connection::socket(const net::any_io_executor& ex) {
    const int fd = PQsocket(conn_.get());
    if (fd < 0) throw_connection_error("no socket");
    // Rebound only for another socket or another io_context: a pooled connection serves one
    // request (strand) after another, and registering its descriptor with epoll again for each
    // one cost two epoll_ctl calls per statement. Completions still run on the awaiting
    // coroutine's own executor (use_awaitable), whichever executor the descriptor was made on.
    const auto& mine =
        socket_ ? &net::query(socket_->get_executor(), net::execution::context) : nullptr;
    if (!socket_ || socket_->native_handle() != fd ||
        mine != &net::query(ex, net::execution::context)) {
        release_socket();
        socket_ = std::make_unique<net::posix::stream_descriptor>(ex, fd);
    }
    return *socket_;
}

net::awaitable<result> connection::async_exec(std::string sql, params p) {
    if (!conn_) throw connection_error("query on a closed connection");
    if (presents_key_next()) {
        std::vector<pipelined> one(1);
        one[0].sql = std::move(sql);
        one[0].p = std::move(p);
        auto r = co_await run_pipeline(std::move(one), std::vector<std::string>(), nullptr);
        co_return std::move(r.back());
    }
    param_arrays a(p);
    if (PQsendQueryParams(conn_.get(), sql.c_str(), a.count(), nullptr, a.values.data(), nullptr,
                          nullptr, 0) == 0) {
        throw_connection_error("cannot send query");
    }
    co_return co_await async_finish();
}

net::awaitable<std::string> connection::async_prepare(const std::string& sql, int n_params) {
    auto it = prepared_.find(sql);
    if (it != prepared_.end()) co_return it->second;
    std::string name = "awp_" + std::to_string(++statements_);
    if (PQsendPrepare(conn_.get(), name.c_str(), sql.c_str(), n_params, nullptr) == 0) {
        throw_connection_error("cannot send query");
    }
    co_await async_finish();  // a statement that does not parse is not remembered
    prepared_.emplace(sql, name);
    co_return name;
}

net::awaitable<result> connection::async_exec_prepared(std::string sql, params p) {
    if (!conn_) throw connection_error("query on a closed connection");
    // Behind a transaction pooler: an unnamed statement, parsed and planned with each call.
    if (!named_statements()) co_return co_await async_exec(std::move(sql), std::move(p));
    for (int attempt = 0;; ++attempt) {
        const std::string name = co_await async_prepare(sql, static_cast<int>(p.size()));
        try {
            if (presents_key_next()) {
                std::vector<pipelined> one(1);
                one[0].sql = sql;
                one[0].p = p;
                std::vector<std::string> names(1, name);
                auto r = co_await run_pipeline(std::move(one), std::move(names), nullptr);
                co_return std::move(r.back());
            }
            param_arrays a(p);
            if (PQsendQueryPrepared(conn_.get(), name.c_str(), a.count(), a.values.data(), nullptr,
                                    nullptr, 0) == 0) {
                throw_connection_error("cannot send query");
            }
            co_return co_await async_finish();
        } catch (const sql_error& e) {
            // A migration changed what the statement returns ("cached plan must not change
            // result type"): prepare it afresh, once. Outside a transaction this is safe; the
            // failed execution did nothing.
            if (attempt > 0 || e.sqlstate() != "0A000" ||
                PQtransactionStatus(conn_.get()) != PQTRANS_IDLE)
                throw;
        }
        prepared_.erase(sql);
        co_await async_exec("DEALLOCATE " + name);
    }
}

net::awaitable<result> connection::async_finish() {
    auto ex = co_await net::this_coro::executor;
    PGconn* c = conn_.get();
    for (;;) {  // flush the request; large parameters may need several writes
        const int f = PQflush(c);
        if (f == 0) break;
        if (f < 0) throw_connection_error("cannot send query");
        co_await socket(ex).async_wait(net::posix::stream_descriptor::wait_write,
                                       net::use_awaitable);
        if (PQconsumeInput(c) == 0) throw_connection_error("connection lost");
    }
    std::optional<result> first_error;
    result last;
    for (;;) {
        while (PQisBusy(c) == 1) {
            boost::system::error_code ec;
            co_await socket(ex).async_wait(net::posix::stream_descriptor::wait_read,
                                           net::redirect_error(net::use_awaitable, ec));
            if (ec == net::error::operation_aborted) {
                // Cancelled mid-statement: the protocol state is unknown, so close it.
                release_socket();
                conn_.reset();
                throw boost::system::system_error(ec);
            }
            if (PQconsumeInput(c) == 0) throw_connection_error("connection lost");
        }
        PGresult* raw = PQgetResult(c);
        if (!raw) break;
        const auto st = PQresultStatus(raw);
        if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) {
            if (!first_error)
                first_error.emplace(raw);
            else
                PQclear(raw);
        } else {
            last = result(raw);
        }
    }
    if (PQstatus(c) != CONNECTION_OK) throw_connection_error("connection lost");
    if (first_error) throw_error_result(*first_error);
    co_return last;
}

bool connection::presents_key_next() const noexcept {
    return !gateway_key_.empty() && conn_ && PQtransactionStatus(conn_.get()) == PQTRANS_IDLE;
}

namespace {
// Collects one pipeline's results up to its Sync: each statement's result in order, the first
// error kept to be thrown once the Sync is read (the connection is then idle and usable).
// Written once for the blocking and the asynchronous reader.
class pipeline_reader {
public:
    explicit pipeline_reader(std::size_t statements) : out_(statements) {}
    /// Takes what PQgetResult returned; true once the Sync was read.
    bool take(PGconn* c, PGresult* raw) {
        if (!raw) {  // the end of one statement's results
            if (PQstatus(c) != CONNECTION_OK || ++at_ > out_.size()) lost_ = true;
            return lost_;
        }
        const auto st = PQresultStatus(raw);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(raw);
            return true;
        }
        if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) {
            if (!first_error_)
                first_error_.emplace(raw);
            else
                PQclear(raw);
            if (PQstatus(c) != CONNECTION_OK) lost_ = true;
            return lost_;
        }
        if (st == PGRES_PIPELINE_ABORTED) {
            PQclear(raw);  // skipped after an earlier statement's error
        } else if (at_ < out_.size()) {
            out_[at_] = result(raw);
            ++completed_;
        } else {
            PQclear(raw);
        }
        return false;
    }
    bool lost() const noexcept { return lost_; }
    std::size_t completed() const noexcept { return completed_; }
    /// Throws the first statement's error, else hands the results over.
    std::vector<result> finish() {
        if (first_error_) throw_error_result(*first_error_);
        return std::move(out_);
    }

private:
    std::vector<result> out_;
    std::optional<result> first_error_;
    std::size_t at_ = 0;
    std::size_t completed_ = 0;
    bool lost_ = false;
};

// Writes a pipeline's statement count to the caller's `completed` when it goes out of scope,
// without the gateway key's statement the connection put in front.
struct report_completed {
    std::size_t* out;
    const pipeline_reader* reader = nullptr;
    std::size_t hidden = 0;
    ~report_completed() {
        if (out && reader) *out = reader->completed() > hidden ? reader->completed() - hidden : 0;
    }
};
}  // namespace

void connection::send_pipeline(std::vector<pipelined>& statements, std::vector<std::string>& names,
                               bool with_key, const std::string& key_name) {
    PGconn* c = conn_.get();
    if (with_key) {
        statements.insert(statements.begin(),
                          pipelined{std::string(kPresentGatewayKeySql), {gateway_key_}});
        names.insert(names.begin(), key_name);
    }
    names.resize(statements.size());
    if (PQenterPipelineMode(c) == 0) throw_connection_error("cannot enter pipeline mode");
    for (std::size_t i = 0; i < statements.size(); ++i) {
        param_arrays a(statements[i].p);
        const int sent = names[i].empty()
                             ? PQsendQueryParams(c, statements[i].sql.c_str(), a.count(), nullptr,
                                                 a.values.data(), nullptr, nullptr, 0)
                             : PQsendQueryPrepared(c, names[i].c_str(), a.count(), a.values.data(),
                                                   nullptr, nullptr, 0);
        if (sent == 0) throw_connection_error("cannot send query");
    }
    if (PQpipelineSync(c) == 0) throw_connection_error("cannot send query");
}

std::vector<result> connection::exec_pipeline(std::vector<pipelined> statements) {
    if (!conn_) throw connection_error("query on a closed connection");
    const bool with_key = presents_key_next();
    std::vector<std::string> names;
    send_pipeline(statements, names, with_key, {});
    PGconn* c = conn_.get();
    pipeline_reader reader(statements.size());
    for (;;) {  // PQgetResult flushes and waits: this is the blocking reader
        if (reader.take(c, PQgetResult(c))) break;
    }
    if (reader.lost() || PQexitPipelineMode(c) == 0 || PQstatus(c) != CONNECTION_OK) {
        throw_connection_error("connection lost");
    }
    auto out = reader.finish();
    if (with_key) out.erase(out.begin());
    return out;
}

net::awaitable<std::vector<result>> connection::async_pipeline(std::vector<pipelined> statements,
                                                               std::size_t* completed) {
    co_return co_await run_pipeline(std::move(statements), std::vector<std::string>(), completed);
}

net::awaitable<std::vector<result>> connection::run_pipeline(std::vector<pipelined> statements,
                                                             std::vector<std::string> names,
                                                             std::size_t* completed) {
    if (!conn_) throw connection_error("query on a closed connection");
    if (completed) *completed = 0;
    const bool with_key = presents_key_next();
    // The key's statement is a named one too where hot statements are (one Parse per connection).
    std::string key_name;
    if (with_key && named_statements()) {
        key_name = co_await async_prepare(std::string(kPresentGatewayKeySql), 1);
    }
    send_pipeline(statements, names, with_key, key_name);
    PGconn* c = conn_.get();
    auto ex = co_await net::this_coro::executor;
    for (;;) {  // flush, as async_finish does
        const int f = PQflush(c);
        if (f == 0) break;
        if (f < 0) throw_connection_error("cannot send query");
        co_await socket(ex).async_wait(net::posix::stream_descriptor::wait_write,
                                       net::use_awaitable);
        if (PQconsumeInput(c) == 0) throw_connection_error("connection lost");
    }
    // Each statement's results end with a null PGresult; the Sync's is PGRES_PIPELINE_SYNC.
    pipeline_reader reader(statements.size());
    report_completed report{completed, &reader, with_key ? 1u : 0u};
    for (;;) {
        while (PQisBusy(c) == 1) {
            boost::system::error_code ec;
            co_await socket(ex).async_wait(net::posix::stream_descriptor::wait_read,
                                           net::redirect_error(net::use_awaitable, ec));
            if (ec == net::error::operation_aborted) {
                release_socket();  // cancelled mid-pipeline: the protocol state is unknown
                conn_.reset();
                throw boost::system::system_error(ec);
            }
            if (PQconsumeInput(c) == 0) throw_connection_error("connection lost");
        }
        if (reader.take(c, PQgetResult(c))) break;
    }
    if (reader.lost() || PQexitPipelineMode(c) == 0 || PQstatus(c) != CONNECTION_OK) {
        throw_connection_error("connection lost");
    }
    auto out = reader.finish();
    if (with_key) out.erase(out.begin());
    co_return out;
}

std::vector<notification> connection::drain_notifications() {
    std::vector<notification> out;
    if (!conn_) throw connection_error("notifications on a closed connection");
    if (PQconsumeInput(conn_.get()) == 0 || PQstatus(conn_.get()) != CONNECTION_OK) {
        throw_connection_error("connection lost");
    }
    // One read can carry many notifications: take them all.
    while (PGnotify* n = PQnotifies(conn_.get())) {
        out.push_back({n->relname ? n->relname : "", n->extra ? n->extra : "", n->be_pid});
        PQfreemem(n);
    }
    return out;
}

net::awaitable<void> connection::async_wait_readable() {
    auto ex = co_await net::this_coro::executor;
    co_await socket(ex).async_wait(net::posix::stream_descriptor::wait_read, net::use_awaitable);
}

net::awaitable<void> connection::async_wait_writable() {
    auto ex = co_await net::this_coro::executor;
    co_await socket(ex).async_wait(net::posix::stream_descriptor::wait_write, net::use_awaitable);
}

void connection::cancel_wait() {
    if (socket_) {
        boost::system::error_code ec;
        socket_->cancel(ec);
    }
}

std::string connection::quote_identifier(std::string_view ident) const {
    if (!conn_) throw connection_error("quote on a closed connection");
    char* q = PQescapeIdentifier(conn_.get(), ident.data(), ident.size());
    if (!q) throw error("cannot quote identifier");
    std::string s(q);
    PQfreemem(q);
    return s;
}

void set_named_statements(bool on) noexcept { named_setting().store(on ? 1 : 0); }

bool is_gateway_key(std::string_view key) noexcept {
    constexpr std::string_view kPrefix = "awpk_";
    if (key.size() != kPrefix.size() + 32 + 1 + 43 || !key.starts_with(kPrefix)) return false;
    const auto hex = key.substr(kPrefix.size(), 32);
    const auto secret = key.substr(kPrefix.size() + 33);
    const bool hex_ok = std::all_of(hex.begin(), hex.end(), [](char ch) {
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
    });
    const bool secret_ok = std::all_of(secret.begin(), secret.end(), [](char ch) {
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
               ch == '-' || ch == '_';
    });
    return hex_ok && key[kPrefix.size() + 32] == '_' && secret_ok;
}

void set_default_gateway_key(std::string key) {
    auto& d = default_key_setting();
    std::lock_guard lock(d.m);
    d.key = std::move(key);
}

std::string default_gateway_key() {
    auto& d = default_key_setting();
    std::lock_guard lock(d.m);
    return d.key;
}

bool named_statements() noexcept {
    int v = named_setting().load();
    if (v < 0) {
        const char* env = std::getenv("DATABASE_PREPARED");
        v = env && std::string_view(env) == "off" ? 0 : 1;
        int expected = -1;
        if (!named_setting().compare_exchange_strong(expected, v)) v = expected;
    }
    return v == 1;
}

}  // namespace awp::core::pg
