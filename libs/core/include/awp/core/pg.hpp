// PostgreSQL through libpq: blocking calls for tools and tests, coroutines on Asio for daemons.
#pragma once

#include <libpq-fe.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "awp/core/error.hpp"

namespace awp::core::pg {

namespace net = boost::asio;

/// The server answered with an error. sqlstate() is the five-character SQLSTATE.
class sql_error : public error {
public:
    sql_error(std::string sqlstate, std::string message, std::string detail = {},
              std::string hint = {})
        : error(message),
          sqlstate_(std::move(sqlstate)),
          primary_(std::move(message)),
          detail_(std::move(detail)),
          hint_(std::move(hint)) {}
    const std::string& sqlstate() const noexcept { return sqlstate_; }
    const std::string& primary() const noexcept { return primary_; }
    const std::string& detail() const noexcept { return detail_; }
    const std::string& hint() const noexcept { return hint_; }

private:
    std::string sqlstate_, primary_, detail_, hint_;
};

/// SQLSTATEs the code branches on get their own type.
class unique_violation : public sql_error {  // 23505
    using sql_error::sql_error;
};
class check_violation : public sql_error {  // 23514
    using sql_error::sql_error;
};
class serialization_failure : public sql_error {  // 40001
    using sql_error::sql_error;
};
class deadlock_detected : public sql_error {  // 40P01
    using sql_error::sql_error;
};
class query_canceled : public sql_error {  // 57014
    using sql_error::sql_error;
};
class insufficient_privilege : public sql_error {  // 42501
    using sql_error::sql_error;
};
/// The awp domain errors our SQL functions raise (SQLSTATE class AW): the one place their codes
/// are spelled in C++. sql/README.md ("Errors") documents them; `integration: every AW code the
/// SQL raises is a domain_code ...` holds the SQL, the README and this list to each other.
enum class domain_code {
    illegal_transition = 1,          ///< AW001: the status is not one the operation accepts
    lease_lost = 2,                  ///< AW002: the lease token no longer matches
    not_found = 3,                   ///< AW003: not found, or not visible to the caller
    invalid_argument = 4,            ///< AW004: bad payload, field, cadence, range, slug ...
    stale_source_hash = 5,           ///< AW005: the knowledge item changed since it was leased
    registration_token_invalid = 6,  ///< AW006: unknown gateway registration token
    registration_token_expired = 7,  ///< AW007
    registration_token_used = 8,     ///< AW008
    no_tenant = 9,                   ///< AW009: the session has no tenant
    operator_required = 10,          ///< AW010: an operator's action, asked by a member
    quota_exceeded = 11,             ///< AW011: a tenant's storage quota would be exceeded
};
/// Every domain_code, in SQLSTATE order.
inline constexpr std::array<domain_code, 11> kDomainCodes = {
    domain_code::illegal_transition,
    domain_code::lease_lost,
    domain_code::not_found,
    domain_code::invalid_argument,
    domain_code::stale_source_hash,
    domain_code::registration_token_invalid,
    domain_code::registration_token_expired,
    domain_code::registration_token_used,
    domain_code::no_tenant,
    domain_code::operator_required,
    domain_code::quota_exceeded};
/// "AW001" ... "AW011".
[[nodiscard]] std::string sqlstate_of(domain_code code);
/// The code of an AW SQLSTATE; nullopt for any other text (an AW code this build does not know).
[[nodiscard]] std::optional<domain_code> domain_code_of(std::string_view sqlstate) noexcept;

/// An awp domain error raised by our SQL functions (SQLSTATE class AW). throw_for_sqlstate
/// throws the subclass of its code below; callers catch the type, never compare the text.
class domain_error : public sql_error {
public:
    domain_error(std::string sqlstate, std::string message, std::string detail = {},
                 std::string hint = {})
        : sql_error(std::move(sqlstate), std::move(message), std::move(detail), std::move(hint)),
          code_(domain_code_of(this->sqlstate())) {}
    /// The code; nullopt for an AW SQLSTATE this build does not know (a newer schema).
    std::optional<domain_code> code() const noexcept { return code_; }

private:
    std::optional<domain_code> code_;
};
class illegal_transition : public domain_error {  // AW001
    using domain_error::domain_error;
};
class lease_lost : public domain_error {  // AW002
    using domain_error::domain_error;
};
class not_found : public domain_error {  // AW003
    using domain_error::domain_error;
};
class invalid_argument : public domain_error {  // AW004
    using domain_error::domain_error;
};
class stale_source_hash : public domain_error {  // AW005
    using domain_error::domain_error;
};
class registration_token_invalid : public domain_error {  // AW006
    using domain_error::domain_error;
};
class registration_token_expired : public domain_error {  // AW007
    using domain_error::domain_error;
};
class registration_token_used : public domain_error {  // AW008
    using domain_error::domain_error;
};
class no_tenant : public domain_error {  // AW009
    using domain_error::domain_error;
};
class operator_required : public domain_error {  // AW010
    using domain_error::domain_error;
};
class quota_exceeded : public domain_error {  // AW011
    using domain_error::domain_error;
};

/// The connection failed or broke (connect refused, server restarted, socket closed).
/// The caller drops the connection and reconnects.
class connection_error : public error {
public:
    using error::error;
};

/// Throws the exception type that belongs to a SQLSTATE. The one place that maps them.
[[noreturn]] void throw_for_sqlstate(std::string sqlstate, std::string message,
                                     std::string detail = {}, std::string hint = {});

/// One query parameter in text format; std::nullopt is SQL NULL.
class param {
public:
    param(std::nullopt_t) {}
    param(std::string v) : value_(std::move(v)) {}
    param(std::string_view v) : value_(std::string(v)) {}
    param(const char* v) : value_(std::string(v)) {}
    param(bool v) : value_(v ? "true" : "false") {}
    template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) param(T v)
        : value_(std::to_string(v)) {}
    param(double v);
    template <class T>
    param(const std::optional<T>& v) {
        if (v) value_ = param(*v).value_;
    }
    const std::optional<std::string>& value() const noexcept { return value_; }

private:
    std::optional<std::string> value_;
};
using params = std::vector<param>;

/// A statement result. Rows and columns are zero-based; NULL reads as std::nullopt.
class result {
public:
    result() = default;
    explicit result(PGresult* r) : r_(r, &PQclear) {}

    int size() const noexcept { return r_ ? PQntuples(r_.get()) : 0; }
    bool empty() const noexcept { return size() == 0; }
    int columns() const noexcept { return r_ ? PQnfields(r_.get()) : 0; }
    /// Column index by name; throws error when the column does not exist.
    int column(std::string_view name) const;
    /// Rows affected by INSERT/UPDATE/DELETE (0 for others).
    std::int64_t affected() const;

    bool is_null(int row, int col) const;
    bool is_null(int row, std::string_view col) const { return is_null(row, column(col)); }
    /// Raw text of a field; empty for NULL.
    std::string_view text(int row, int col) const;

    /// Typed read: std::string, std::string_view, bool, integers, double. Throws on NULL.
    template <class T>
    T get(int row, int col) const;
    template <class T>
    T get(int row, std::string_view col) const {
        return get<T>(row, column(col));
    }
    template <class T>
    std::optional<T> get_optional(int row, int col) const {
        if (is_null(row, col)) return std::nullopt;
        return get<T>(row, col);
    }
    template <class T>
    std::optional<T> get_optional(int row, std::string_view col) const {
        return get_optional<T>(row, column(col));
    }

    PGresult* native() const noexcept { return r_.get(); }

private:
    void check_cell(int row, int col) const;
    std::shared_ptr<PGresult> r_;
};

/// A LISTEN notification.
struct notification {
    std::string channel;
    std::string payload;
    int backend_pid = 0;
};

/// One libpq connection. Move-only. Used by one coroutine or thread at a time.
class connection {
public:
    connection() = default;
    ~connection();
    connection(connection&&) noexcept;
    connection& operator=(connection&&) noexcept;
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    /// Blocking connect. Throws connection_error with libpq's message (password redacted).
    static connection connect(const std::string& dsn);
    /// Connects on a worker thread so the io thread never blocks on DNS or the handshake.
    static net::awaitable<connection> async_connect(std::string dsn);

    bool is_open() const noexcept;
    PGconn* native() const noexcept { return conn_.get(); }
    int backend_pid() const noexcept;

    /// Blocking statement with $n parameters (text format). Throws sql_error / connection_error.
    result exec(std::string_view sql, const params& p = {});
    /// Blocking multi-statement script without parameters (migrations).
    void exec_script(std::string_view sql);

    /// The same on the connection's socket without blocking the calling io thread.
    net::awaitable<result> async_exec(std::string sql, params p = {});
    /// async_exec with the parameters as arguments: `co_await c.async_query(sql, id, 5)`.
    /// Prefer it inside coroutines: GCC 12 miscompiles a braced parameter list written inside
    /// a co_await expression ("array used as initializer").
    template <class... A>
    net::awaitable<result> async_query(std::string sql, A&&... args) {
        return async_exec(std::move(sql), params{param(std::forward<A>(args))...});
    }
    /// async_exec as a named prepared statement: parsed and planned once per connection (the
    /// first call prepares it, one extra round trip), then only bound and executed. For the
    /// statements a daemon runs over and over (lease, start, complete). Not for ad-hoc SQL:
    /// each distinct text stays prepared until the connection closes. Behind a transaction-
    /// pooling PgBouncer older than 1.21 named statements do not work: with
    /// named_statements() off (DATABASE_PREPARED=off) this is async_exec, an unnamed statement
    /// (docs/operations.md, "Through PgBouncer").
    net::awaitable<result> async_exec_prepared(std::string sql, params p = {});
    /// async_exec_prepared with the parameters as arguments (see async_query).
    template <class... A>
    net::awaitable<result> async_query_prepared(std::string sql, A&&... args) {
        return async_exec_prepared(std::move(sql), params{param(std::forward<A>(args))...});
    }
    /// Statements prepared on this connection so far.
    std::size_t prepared_count() const noexcept { return prepared_.size(); }

    /// One statement of a pipeline (async_pipeline).
    struct pipelined {
        std::string sql;
        params p;
    };
    /// Sends the statements in one libpq pipeline closed by one Sync: one round trip for all
    /// of them. Without a BEGIN among them they run as one implicit transaction, committed at
    /// the Sync, rolled back as a whole when one fails (the later ones are then skipped), so
    /// set_config(..., true) lasts exactly until the Sync. Returns each statement's result in
    /// order; throws the first statement error once everything up to the Sync was read (the
    /// connection is then idle and usable), or connection_error. `completed`, when given,
    /// counts the statements whose results arrived: 0 after a connection_error means the
    /// server ran none of them to the end.
    net::awaitable<std::vector<result>> async_pipeline(std::vector<pipelined> statements,
                                                       std::size_t* completed = nullptr);

    /// The same, blocking (tools and tests).
    std::vector<result> exec_pipeline(std::vector<pipelined> statements);

    /// Presents `key`, a gateway key (awpk_..., sql/0026), at the start of every transaction
    /// this connection runs from now on: when no transaction is open, each statement and
    /// pipeline (and so each BEGIN) goes out behind `SELECT public.awp_present_gateway_key(key)`
    /// in the same pipeline, one round trip and one implicit transaction, so a transaction-
    /// pooling PgBouncer keeps both on one server connection. Inside a BEGIN ... COMMIT the key
    /// presented with the BEGIN holds. For a pool login (awpctl gateway pool-login): with it the
    /// transaction acts as the key's gateway; without one, or with a key the database does not
    /// know (wrong, rotated, of a deleted gateway), the login sees nothing and every queue RPC
    /// answers AW003. Empty: no key. Connections start with default_gateway_key().
    void set_gateway_key(std::string key) { gateway_key_ = std::move(key); }
    const std::string& gateway_key() const noexcept { return gateway_key_; }

    /// Reads what the socket has and returns the notifications received, in order.
    /// Throws connection_error when the connection broke.
    std::vector<notification> drain_notifications();
    /// Waits until the socket is readable (a notification or the server closing it).
    net::awaitable<void> async_wait_readable();
    /// Waits until the socket takes more bytes (a flush libpq could not finish: a COPY stream's
    /// writer, realtime's replication reader).
    net::awaitable<void> async_wait_writable();
    /// Cancels a pending async_wait_readable.
    void cancel_wait();

    /// "channel" as a quoted SQL identifier.
    std::string quote_identifier(std::string_view ident) const;

private:
    explicit connection(PGconn* c);
    net::posix::stream_descriptor& socket(const net::any_io_executor& ex);
    void release_socket() noexcept;
    [[noreturn]] void throw_connection_error(std::string_view what);
    result check(PGresult* r, std::string_view sql);
    /// Flushes a sent request and reads its results: the last one, or throws the first error.
    net::awaitable<result> async_finish();
    /// The name `sql` is prepared under on this connection, preparing it first if needed.
    net::awaitable<std::string> async_prepare(const std::string& sql, int n_params);
    /// Whether the next statement goes out behind the gateway key (a key, no open transaction).
    bool presents_key_next() const noexcept;
    /// Sends `statements` (each named in `names`, else unnamed) in pipeline mode with one
    /// Sync, the gateway key's statement first when `with_key`.
    void send_pipeline(std::vector<pipelined>& statements, std::vector<std::string>& names,
                       bool with_key, const std::string& key_name);
    net::awaitable<std::vector<result>> run_pipeline(std::vector<pipelined> statements,
                                                     std::vector<std::string> names,
                                                     std::size_t* completed);

    std::unique_ptr<PGconn, void (*)(PGconn*)> conn_{nullptr, &PQfinish};
    std::unique_ptr<net::posix::stream_descriptor> socket_;
    std::unordered_map<std::string, std::string> prepared_;  // SQL text -> statement name
    unsigned statements_ = 0;                                // names: awp_1, awp_2, ...
    std::string gateway_key_;                                // set_gateway_key
};

/// The statement a connection with a gateway key puts in front of each transaction.
inline constexpr std::string_view kPresentGatewayKeySql =
    "SELECT public.awp_present_gateway_key($1)";
/// Whether `key` has a gateway key's shape: awpk_<gateway id, 32 lowercase hex>_<43 base64url>.
[[nodiscard]] bool is_gateway_key(std::string_view key) noexcept;
/// The gateway key every connection made from now on in this process presents
/// (connection::set_gateway_key): the gateway host daemons' GATEWAY_KEY. Empty: none.
void set_default_gateway_key(std::string key);
[[nodiscard]] std::string default_gateway_key();

/// Whether async_exec_prepared (and session::query_prepared) use named protocol-level prepared
/// statements. On by default; DATABASE_PREPARED=off in the environment, or
/// set_named_statements(false) (the daemons' --database-prepared off), sends those statements
/// unnamed, parsed and planned with every call: what a transaction-pooling PgBouncer before 1.21
/// can carry, at ~10 % of the runner's queue throughput (bench/runner/RESULTS.md). Process-wide.
void set_named_statements(bool on) noexcept;
[[nodiscard]] bool named_statements() noexcept;

/// Capped exponential back-off with jitter for reconnect loops.
class backoff {
public:
    explicit backoff(std::chrono::milliseconds first = std::chrono::milliseconds(100),
                     std::chrono::milliseconds cap = std::chrono::seconds(5))
        : first_(first), cap_(cap), next_(first) {}
    std::chrono::milliseconds next();
    void reset() noexcept { next_ = first_; }

private:
    std::chrono::milliseconds first_, cap_, next_;
};

/// A connection that reconnects by itself: get() returns an open connection (never null),
/// retrying with back-off until it succeeds or the coroutine is cancelled.
class session {
public:
    explicit session(std::string dsn, std::string name = "db")
        : dsn_(std::move(dsn)), name_(name) {}
    net::awaitable<connection*> get();
    /// Marks the connection broken after a connection_error so the next get() reconnects.
    void reset() noexcept { conn_ = connection(); }
    /// Runs one statement; on a broken connection reconnects and retries once when the
    /// statement is idempotent (retry = true), else rethrows connection_error.
    net::awaitable<result> exec(std::string sql, params p = {}, bool retry = false,
                                bool prepared = false);
    /// exec with the parameters as arguments, not retried (see connection::async_query).
    template <class... A>
    net::awaitable<result> query(std::string sql, A&&... args) {
        return exec(std::move(sql), params{param(std::forward<A>(args))...}, false);
    }
    /// query as a prepared statement (connection::async_exec_prepared): for hot statements.
    template <class... A>
    net::awaitable<result> query_prepared(std::string sql, A&&... args) {
        return exec(std::move(sql), params{param(std::forward<A>(args))...}, false, true);
    }
    const std::string& dsn() const noexcept { return dsn_; }
    /// The gateway key this session's connections present instead of default_gateway_key(),
    /// from its next connect on: for a process acting for several gateways (bench/scale).
    void set_gateway_key(std::string key) { gateway_key_ = std::move(key); }

private:
    std::string dsn_;
    std::string name_;
    connection conn_;
    backoff backoff_;
    std::optional<std::string> gateway_key_;
};

/// Blocking transaction guard: rolls back unless commit() was called.
class transaction {
public:
    explicit transaction(connection& c);
    ~transaction();
    transaction(const transaction&) = delete;
    transaction& operator=(const transaction&) = delete;
    void commit();

private:
    connection& c_;
    bool done_ = false;
};

/// The TCP ports a DSN (URI or key=value) connects to: every port of a multi-host "port" list,
/// else PGPORT, else 5432. Empty for a DSN libpq cannot parse.
[[nodiscard]] std::vector<std::uint16_t> dsn_ports(const std::string& dsn);

/// The login a connection string uses.
struct login {
    std::string user;
    std::string password;
};
/// The user and password of `dsn`, else of PGUSER / PGPASSWORD (empty when neither says).
[[nodiscard]] login dsn_login(const std::string& dsn);
/// `dsn` (a URL or key=value string) as a key=value string whose user and password are `l`'s.
/// Throws config_error when `dsn` does not parse.
[[nodiscard]] std::string dsn_with_login(const std::string& dsn, const login& l);
/// `dsn` with TCP keepalives (30 s idle, then 3 probes 10 s apart) unless it sets its own: a
/// session that only waits (LISTEN) notices a silently dead server within about a minute instead
/// of the kernel's two hours. A `dsn` that does not parse is returned as it is (libpq reports it).
[[nodiscard]] std::string dsn_with_keepalives(const std::string& dsn);

/// `dsn` for a logical replication connection: replication=database (the walsender's protocol,
/// where only the simple query protocol works) and TCP keepalives as dsn_with_keepalives sets
/// them. Throws config_error when `dsn` does not parse.
[[nodiscard]] std::string dsn_for_replication(const std::string& dsn);

/// Runs fn(conn) inside BEGIN/COMMIT on an async connection; ROLLBACK when fn throws.
template <class F>
net::awaitable<void> async_transaction(connection& c, F fn) {
    co_await c.async_exec("BEGIN");
    std::exception_ptr failure;
    try {
        co_await fn(c);
        co_await c.async_exec("COMMIT");
        co_return;
    } catch (const connection_error&) {
        throw;
    } catch (...) {
        failure = std::current_exception();
    }
    co_await c.async_exec("ROLLBACK");
    std::rethrow_exception(failure);
}

}  // namespace awp::core::pg
