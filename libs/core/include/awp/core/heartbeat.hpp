// The daemon heartbeat, written once: the statement that files a daemon's row in
// daemon_heartbeats (public.daemon_heartbeat, sql/0010) and a beater that runs it every interval
// on a pg::session, with the daemon's own details in the row's meta, riding out a database that
// goes away, and stopping at once when asked.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/event.hpp"
#include "awp/core/pg.hpp"

namespace awp::core::heartbeat {

namespace net = boost::asio;

/// $1 gateway (id or slug), $2 daemon ([a-z][a-z0-9_-]*), $3 instance, $4 pid, $5 version,
/// $6 started_at (NULL: kept, or now() for a new pid), $7 meta (a JSON object; NULL keeps the
/// stored one), $8 tenant id or NULL. Refreshes gateways.last_seen_at (provisioning -> ready).
/// One row: the gateway's id, tenant and status. AW003 for an unknown gateway, AW004 for a bad
/// daemon name or meta.
inline constexpr const char* kSql =
    "SELECT gateway_id::text, tenant_id::text, gateway_status::text FROM "
    "public.daemon_heartbeat(p_gateway_slug => $1, p_daemon => $2, p_instance => $3, "
    "p_pid => $4::integer, p_version => $5, p_started_at => $6::timestamptz, "
    "p_meta => $7::jsonb, p_tenant_id => $8::uuid)";

/// Who beats, for which gateway, how often.
struct config {
    /// GATEWAY_ID: the gateway's id or slug. Resolved by the first beat that reaches the
    /// database; from then on the beater files under the id it answered (a rename or a
    /// gateway registered later under the slug changes nothing).
    std::string gateway;
    std::optional<std::string> tenant_id;  ///< TENANT_ID: the gateway must belong to it
    std::string daemon;                    ///< "scheduler", "command-runner", ...
    std::string instance = "default";      ///< AWP_INSTANCE
    std::string version = "0.1.0";
    std::string started_at;  ///< ISO 8601; empty: when the beater was made
    std::chrono::milliseconds interval{30000};
};

/// The daemon's own part of the row (meta): a flat JSON object, keys in the order added.
class details {
public:
    details& add(std::string_view key, std::string_view value);
    details& add(std::string_view key, const std::string& value) {
        return add(key, std::string_view(value));
    }
    details& add(std::string_view key, const char* value) {
        return add(key, std::string_view(value));
    }
    details& add(std::string_view key, bool value);
    template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) details& add(std::string_view key,
                                                                             T value) {
        if constexpr (std::is_signed_v<T>) {
            return add_int(key, static_cast<std::int64_t>(value));
        } else {
            return add_uint(key, static_cast<std::uint64_t>(value));
        }
    }
    /// The JSON object text.
    [[nodiscard]] std::string json() const;

private:
    details& add_int(std::string_view key, std::int64_t value);
    details& add_uint(std::string_view key, std::uint64_t value);
    details& add_raw(std::string_view key, std::string value);
    std::vector<std::pair<std::string, std::string>> members_;  // key, serialised value
};

/// Fills the details of the next beat; called just before each one.
using details_fn = std::function<void(details&)>;

/// What the database answered to a beat.
struct outcome {
    std::string gateway_id;
    std::string tenant_id;
    std::string gateway_status;  ///< provisioning, ready, hibernating, ...
};

/// Beats on `db` every interval until stop(). The session is the beater's alone while run()
/// runs (give it its own: a beat must not wait behind the daemon's work, nor the work behind
/// a reconnecting beat). Single-threaded: every call on the session's executor.
class beater {
public:
    beater(const net::any_io_executor& ex, pg::session& db, config cfg, details_fn details = {});

    /// The loop: a beat at once, then one per interval (or sooner after beat_now()), until
    /// stop(). A failed beat (database away, unknown gateway) is logged once per failure streak
    /// ("heartbeat failed") and retried at the next interval; a broken connection is reopened.
    /// Never throws.
    net::awaitable<void> run();

    /// One beat now, outside run() (start-up checks, or a daemon that keeps its own loop).
    /// Throws as pg does: pg::connection_error (after one reconnect and retry),
    /// pg::not_found for an unknown gateway, ...
    net::awaitable<outcome> beat();

    /// run() beats now rather than at the end of the interval (a state worth showing changed).
    void beat_now();
    /// run() returns promptly, a beat or a reconnect in progress abandoned. Idempotent.
    void stop();

    /// Called after every beat that reached the database (e.g. log a hibernating gateway).
    void on_beat(std::function<void(const outcome&)> f) { on_beat_ = std::move(f); }

    /// The gateway's id and tenant, once a beat resolved them; empty before.
    const std::string& gateway_id() const noexcept { return gateway_id_; }
    const std::string& tenant_id() const noexcept { return tenant_id_; }
    std::uint64_t beats() const noexcept { return beats_; }
    std::uint64_t failures() const noexcept { return failures_; }
    /// The error of the last beat, empty when it succeeded.
    const std::string& last_error() const noexcept { return last_error_; }

private:
    struct attempt {
        bool ok = false;
        std::string error;
    };
    net::awaitable<attempt> try_beat();
    net::awaitable<void> until_stopped();

    pg::session& db_;
    config cfg_;
    details_fn details_;
    std::function<void(const outcome&)> on_beat_;
    std::string gateway_id_, tenant_id_;
    std::uint64_t beats_ = 0, failures_ = 0;
    std::string last_error_;
    bool stopped_ = false;
    event wake_;
    net::steady_timer stop_timer_;
};

}  // namespace awp::core::heartbeat
