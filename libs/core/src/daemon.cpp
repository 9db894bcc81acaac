// Daemon life cycle: CLI11 configuration, sd_notify, signal-driven drain.
#include "awp/core/daemon.hpp"

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/core/pg.hpp"

namespace awp::core::daemon {

std::chrono::milliseconds common_config::drain_timeout() const {
    return std::chrono::milliseconds(static_cast<long>(drain_timeout_s * 1000));
}
std::chrono::milliseconds common_config::safety_poll() const {
    return std::chrono::milliseconds(static_cast<long>(safety_poll_s * 1000));
}

std::string default_instance(const std::string& daemon) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return std::string(host) + ":" + daemon + ":" + std::to_string(getpid());
}

cli::cli(std::string daemon, std::string description)
    : daemon_(std::move(daemon)), app_(std::move(description), daemon_) {
    app_.add_flag("--print-config", print_config_,
                  "Print the effective configuration (secrets redacted) and exit");
    app_.set_version_flag("--version", std::string("awp 0.1.0"));
}

CLI::Option* cli::secret(CLI::Option* opt) {
    secrets_.insert(opt);
    return opt;
}

void cli::add_common(common_config& c, bool with_database) {
    if (with_database) {
        secret(app_.add_option("--database-url", c.database_url,
                               "Postgres connection string (else libpq's PG* variables)")
                   ->envname("DATABASE_URL"));
        app_.add_option("--database-prepared", c.database_prepared,
                        "Hot statements as named prepared statements (on), or unnamed (off: for "
                        "a transaction-pooling PgBouncer before 1.21 in DATABASE_URL)")
            ->envname("DATABASE_PREPARED")
            ->check(CLI::IsMember({"on", "off"}))
            ->capture_default_str();
    }
    app_.add_option("--log-level", c.log_level, "debug, info, warn or error")
        ->envname("LOG_LEVEL")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
        ->capture_default_str();
    app_.add_option("--drain-timeout", c.drain_timeout_s,
                    "Seconds to finish in-flight work after SIGTERM")
        ->envname("DRAIN_TIMEOUT")
        ->check(CLI::Range(0.0, 3600.0))
        ->capture_default_str();
    app_.add_option("--safety-poll", c.safety_poll_s,
                    "Seconds between table re-scans when no NOTIFY arrives")
        ->envname("SAFETY_POLL")
        ->check(CLI::Range(0.05, 86400.0))
        ->capture_default_str();
    app_.add_option("--instance", c.instance, "Identity in leases and heartbeats (host:daemon:pid)")
        ->envname("AWP_INSTANCE");
}

void cli::add_wake(common_config& c, bool relay) {
    secret(app_.add_option("--wake-database-url", c.wake.database_url,
                           "Postgres connection string for LISTEN, a direct session (default: "
                           "DATABASE_URL; set it when DATABASE_URL is a transaction pooler)")
               ->envname("WAKE_DATABASE_URL"));
    if (!relay) return;
    app_.add_option("--wake-url", c.wake.url,
                    "Take wake-ups from the awp-wake relay at this http(s) URL instead of LISTEN "
                    "(the login is DATABASE_URL's)")
        ->envname("WAKE_URL")
        ->check([](const std::string& v) -> std::string {
            if (v.empty() || v.rfind("http://", 0) == 0 || v.rfind("https://", 0) == 0) return {};
            return "WAKE_URL must be an http:// or https:// URL";
        });
    app_.add_option("--wake-ca-file", c.wake.ca_file,
                    "PEM bundle to trust for an https WAKE_URL (default: the system store)")
        ->envname("WAKE_CA_FILE");
}

void cli::add_gateway_key(common_config& c) {
    secret(app_.add_option("--gateway-key", c.gateway_key,
                           "This gateway's key (awpctl gateway key), presented in every "
                           "transaction: DATABASE_URL may then be a shared pool login")
               ->envname("GATEWAY_KEY"));
    app_.add_option("--gateway-key-file", c.gateway_key_file,
                    "A file holding the gateway key (instead of GATEWAY_KEY)")
        ->envname("GATEWAY_KEY_FILE");
}

namespace {
// GATEWAY_KEY or the file GATEWAY_KEY_FILE names, checked for its shape; throws config_error.
std::string read_gateway_key(const common_config& c) {
    if (c.gateway_key_file.empty()) {
        if (!c.gateway_key.empty() && !pg::is_gateway_key(c.gateway_key)) {
            throw config_error(
                "GATEWAY_KEY is not a gateway key (awpk_<32 hex>_<43 base64url characters>; "
                "awpctl gateway key prints one)");
        }
        return c.gateway_key;
    }
    if (!c.gateway_key.empty()) {
        throw config_error("set GATEWAY_KEY or GATEWAY_KEY_FILE, not both");
    }
    std::ifstream in(c.gateway_key_file);
    std::string key;
    if (!in || !std::getline(in, key)) {
        throw config_error("GATEWAY_KEY_FILE: cannot read " + c.gateway_key_file);
    }
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
    if (!pg::is_gateway_key(key)) {
        throw config_error("GATEWAY_KEY_FILE " + c.gateway_key_file +
                           " holds no gateway key (awpk_<32 hex>_<43 base64url characters>)");
    }
    return key;
}
}  // namespace

std::optional<int> cli::parse(int argc, char** argv, common_config* c) {
    try {
        app_.parse(argc, argv);
    } catch (const CLI::Success& e) {
        return app_.exit(e);
    } catch (const CLI::ParseError& e) {
        app_.exit(e);
        return kExitConfig;
    }
    try {
        log::init(daemon_, c ? log::parse_level(c->log_level) : log::level::info);
    } catch (const config_error& e) {
        std::cerr << daemon_ << ": " << e.what() << "\n";
        return kExitConfig;
    }
    if (c && c->instance.empty()) c->instance = default_instance(daemon_);
    if (c) pg::set_named_statements(c->database_prepared != "off");
    if (c) {
        try {
            c->gateway_key = read_gateway_key(*c);
        } catch (const config_error& e) {
            log::error("bad configuration", {{"error", std::string(e.what())}});
            return kExitConfig;
        }
        pg::set_default_gateway_key(c->gateway_key);
    }
    if (print_config_) {
        std::cout << effective_config();
        return 0;
    }
    return std::nullopt;
}

std::string cli::effective_config() const {
    std::ostringstream out;
    for (const CLI::Option* opt : app_.get_options()) {
        const std::string name = opt->get_name(false, true);
        if (name.empty() || name.find("--help") != std::string::npos || name == "--print-config" ||
            name == "--version") {
            continue;
        }
        std::string value;
        if (secrets_.count(opt)) {
            value = opt->count() > 0 || !opt->get_default_str().empty() ? "***" : "";
        } else if (opt->count() > 0) {
            const auto& res = opt->results();
            for (std::size_t i = 0; i < res.size(); ++i) value += (i ? "," : "") + res[i];
        } else {
            value = opt->get_default_str();
        }
        std::string env = opt->get_envname();
        out << name << " = " << value << (env.empty() ? "" : "   (env " + env + ")") << "\n";
    }
    return out.str();
}

namespace {
// The sd_notify protocol: one datagram to $NOTIFY_SOCKET (a path, or "@name" for the abstract
// namespace). Written out here so the daemons do not link libsystemd and what it pulls in.
void sd_notify_message(const std::string& message) {
    const char* path = std::getenv("NOTIFY_SOCKET");
    if (path == nullptr || (path[0] != '/' && path[0] != '@')) return;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::size_t len = std::strlen(path);
    if (len >= sizeof(addr.sun_path)) return;
    std::memcpy(addr.sun_path, path, len);
    if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
    (void)::sendto(fd, message.data(), message.size(), MSG_NOSIGNAL,
                   reinterpret_cast<const sockaddr*>(&addr), size);
    ::close(fd);
}
}  // namespace

void notify_ready() { sd_notify_message("READY=1"); }
void notify_stopping() { sd_notify_message("STOPPING=1"); }
void notify_status(const std::string& status) { sd_notify_message("STATUS=" + status); }

int run(net::io_context& ioc, service& svc, std::chrono::milliseconds drain_timeout, int threads) {
    std::signal(SIGPIPE, SIG_IGN);
    // What a daemon starts (a shell command, an agent, the runtime CLI) may run as the daemon's
    // own user; it must still not read the daemon's memory, environment or credentials. Not
    // dumpable: /proc/<pid>/environ, mem and fd belong to root and ptrace is refused, even to
    // the same user (a child's execve makes it dumpable again). docs/security.md.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    std::atomic<int> exit_code{0};
    std::atomic<bool> stopping{false};
    net::signal_set signals(ioc, SIGTERM, SIGINT);
    net::steady_timer deadline(ioc);

    std::function<void(const boost::system::error_code&, int)> on_signal =
        [&](const boost::system::error_code& ec, int sig) {
            if (ec) return;
            if (stopping.exchange(true)) {
                // Second signal: the operator wants it gone now, in-flight work or not.
                log::warn("second signal, exiting at once", {{"signal", sig}});
                std::_Exit(1);
            }
            notify_stopping();
            log::info("stopping: draining in-flight work",
                      {{"signal", sig}, {"drain_timeout_ms", drain_timeout.count()}});
            svc.request_stop();
            deadline.expires_after(drain_timeout);
            deadline.async_wait([&](const boost::system::error_code& e) {
                if (e) return;
                log::error("drain deadline passed, exiting with work in flight");
                exit_code = 1;
                ioc.stop();
            });
            signals.async_wait(on_signal);
        };
    signals.async_wait(on_signal);

    net::co_spawn(ioc, svc.run(), [&](std::exception_ptr e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const config_error& ce) {
                log::error("bad configuration", {{"error", ce.what()}});
                exit_code = kExitConfig;
            } catch (const std::exception& ex) {
                log::error("service failed", {{"error", ex.what()}});
                exit_code = 1;
            }
        } else if (!stopping) {
            log::error("service ended without being asked to stop");
            exit_code = 1;
        } else {
            log::info("stopped cleanly");
        }
        signals.cancel();
        deadline.cancel();
        ioc.stop();
    });

    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i) pool.emplace_back([&ioc] { ioc.run(); });
    ioc.run();
    for (auto& t : pool) t.join();
    return exit_code.load();
}

}  // namespace awp::core::daemon
