// Daemon life cycle: configuration through CLI11 and the environment, systemd notifications,
// SIGTERM drains within a deadline and a second SIGTERM exits at once.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>

#include <CLI/CLI.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

namespace awp::core::daemon {

namespace net = boost::asio;

inline constexpr int kExitConfig = 78;  // EX_CONFIG: systemd's RestartPreventExitStatus

/// Where a queue daemon's wake-ups come from (add_wake): direct LISTEN on database_url (else
/// DATABASE_URL, which may then be a transaction pooler), or the wake relay's stream when url is
/// set (docs/protocols/wake-relay.md).
struct wake_options {
    std::string database_url;  // WAKE_DATABASE_URL
    std::string url;           // WAKE_URL: http(s)://awp-wake:8095
    std::string ca_file;       // WAKE_CA_FILE: PEM bundle for an https WAKE_URL

    /// Where LISTEN connects: WAKE_DATABASE_URL, else `database_url` (DATABASE_URL).
    const std::string& listen_dsn(const std::string& fallback) const noexcept {
        return database_url.empty() ? fallback : database_url;
    }
};

/// Options every daemon has.
struct common_config {
    std::string database_url;  // DATABASE_URL; empty means libpq's PG* variables
    std::string log_level = "info";
    double drain_timeout_s = 20;  // SIGTERM: time allowed to finish in-flight work
    double safety_poll_s = 30;    // re-scan the tables this often even without a NOTIFY
    std::string instance;         // identity in leases and heartbeats (default host:daemon:pid)
    std::string database_prepared = "on";  // DATABASE_PREPARED: off behind a transaction pooler
    wake_options wake;                     // add_wake
    std::string gateway_key;       // GATEWAY_KEY: a gateway key, for a pool login (add_gateway_key)
    std::string gateway_key_file;  // GATEWAY_KEY_FILE: the same, read from a file

    std::chrono::milliseconds drain_timeout() const;
    std::chrono::milliseconds safety_poll() const;
};

/// A daemon's command line: options with environment names, --print-config with secrets
/// redacted, and the exit codes systemd expects.
class cli {
public:
    cli(std::string daemon, std::string description);
    CLI::App& app() noexcept { return app_; }
    /// Adds --database-url (and --database-prepared), --log-level, --drain-timeout,
    /// --safety-poll, --instance.
    void add_common(common_config& c, bool with_database = true);
    /// Adds --wake-database-url and, with `relay`, --wake-url and --wake-ca-file (daemons that
    /// wait on a queue; the relay carries the per-gateway channels only).
    void add_wake(common_config& c, bool relay = true);
    /// Adds --gateway-key (GATEWAY_KEY) and --gateway-key-file (GATEWAY_KEY_FILE), for the
    /// daemons of a gateway host: with a key, every connection the process makes presents it at
    /// the start of each transaction (pg::set_default_gateway_key), so DATABASE_URL may be a
    /// shared pool login (docs/security.md, "Gateway keys"). parse() refuses a malformed key.
    void add_gateway_key(common_config& c);
    /// Marks an option whose value must never be printed.
    CLI::Option* secret(CLI::Option* opt);
    /// Parses; returns an exit code when the program should stop now (0 after --help or
    /// --print-config, 78 for bad options), std::nullopt to go on. Initialises logging.
    std::optional<int> parse(int argc, char** argv, common_config* c = nullptr);
    /// The effective configuration as "name = value" lines, secrets as "***".
    std::string effective_config() const;
    const std::string& daemon() const noexcept { return daemon_; }

private:
    std::string daemon_;
    CLI::App app_;
    bool print_config_ = false;
    std::set<const CLI::Option*> secrets_;
};

/// What a daemon's service does: run() works until request_stop(), then finishes in-flight
/// work and returns.
class service {
public:
    virtual ~service() = default;
    virtual net::awaitable<void> run() = 0;
    virtual void request_stop() = 0;
};

/// Runs the service on `ioc` with `threads` threads until it returns or the drain deadline
/// passes after SIGTERM/SIGINT. Returns the process exit code (0 after a clean drain).
int run(net::io_context& ioc, service& svc, std::chrono::milliseconds drain_timeout,
        int threads = 1);

/// sd_notify wrappers; no-ops without NOTIFY_SOCKET.
void notify_ready();
void notify_stopping();
void notify_status(const std::string& status);

/// host:daemon:pid, the default identity of a daemon instance.
std::string default_instance(const std::string& daemon);

}  // namespace awp::core::daemon
