// A leased command, what running it came to, and the runner's path from one to the other: the
// types and the small interface its parts (executor, auth flows, service) share.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/json.hpp"
#include "awp/core/pg.hpp"

namespace awp::runner {

namespace net = boost::asio;

/// The columns of a leased agent_commands row the runner uses.
struct command_row {
    std::string id;
    std::string tenant_id;
    std::string gateway_id;
    std::string action;
    std::optional<std::string> agent_slug;
    std::string payload = "{}";  // JSON object text
    std::string lease_token;
    /// The row says an operator wrote it (requested_by_operator, set by the database at
    /// insert): a run_shell needs no read of the gateway's policy then. False when unknown.
    bool requested_by_operator = false;
};

/// What running a command came to, as the action code reports it: its outputs and error as they
/// were printed (raw), which of them are JSON, and what else to redact. The action code never
/// scrubs or writes it: settle() (outcome.hpp) is the one place that turns it into what a
/// command's row stores, and the service the one place that writes that.
struct command_outcome {
    enum class kind {
        done,        // complete_command
        failed,      // fail_command
        handed_off,  // an auth flow took the command over and finishes it on its own connection
        lease_lost,  // the lease could not be extended (logged); nothing ran, nothing to write
        abandoned,   // the database stayed away before the action ran (logged); nothing ran,
                     // nothing to write: the lease expiry settles the row
    };
    kind k = kind::done;
    std::optional<int> exit_code;  // done: 0 when unset
    std::string error;             // failed: why (raw; settle() redacts, cuts and cleans it)
    std::string out, err;          // stdout and stderr as printed (raw)
    std::string patch;             // the action's own payload patch (the auth state); "" for none
    bool json_out = false;         // stdout is JSON: stored valid, trimmed by entries
    std::size_t out_limit = 0;     // bytes kept of each output; 0: OUTPUT_LIMIT
    std::vector<std::string> secrets;  // redacted besides the payload's and the synced ones

    static command_outcome success(std::string out = "", std::string err = "",
                                   std::string patch = "") {
        command_outcome o;
        o.out = std::move(out);
        o.err = std::move(err);
        o.patch = std::move(patch);
        return o;
    }
    static command_outcome failure(std::string error, std::optional<int> exit_code = std::nullopt,
                                   std::string out = "", std::string err = "",
                                   std::string patch = "") {
        command_outcome o;
        o.k = kind::failed;
        o.error = std::move(error);
        o.exit_code = exit_code;
        o.out = std::move(out);
        o.err = std::move(err);
        o.patch = std::move(patch);
        return o;
    }
    static command_outcome of(kind k) {
        command_outcome o;
        o.k = k;
        return o;
    }
    /// Nothing of it is written: an auth flow writes its own end, or nothing ran.
    bool writes_nothing() const noexcept { return k != kind::done && k != kind::failed; }
};

/// What the action code may write of a leased command besides its outcome; implemented by the
/// service, over its transition machinery (every call names the command's lease token).
class command_io {
public:
    virtual ~command_io() = default;
    /// Extends the lease when the run may take longer than COMMAND_TIMEOUT + 60 s; false when
    /// the lease was lost (logged).
    virtual net::awaitable<bool> hold_for(core::pg::session& db, const command_row& cmd,
                                          int lease_seconds) = 0;
    /// Merges `patch` into the command's payload while it runs (the auth flow's stage).
    virtual net::awaitable<void> patch_payload(core::pg::session& db, command_row cmd,
                                               std::string patch) = 0;
    /// The command's agent row while the command runs (provision: "provisioning"): `state` a
    /// JSON object of status, error, model, thinking (awp_command_agent_state, sql/0030).
    /// Logged, never thrown, when it cannot be written.
    virtual net::awaitable<void> agent_state(core::pg::session& db, const command_row& cmd,
                                             std::string agent_slug, std::string state) = 0;
    /// Settles a done or failed outcome and writes it (nothing for the other kinds) at once: an
    /// auth flow's end on its own connection. The lease loop's commands are written by the
    /// queue driver, through the same settle.
    virtual net::awaitable<void> write_outcome(core::pg::session& db, command_row cmd,
                                               command_outcome o) = 0;
};

/// {"k": "v", ...} from string pairs (values escaped properly).
inline std::string json_object(const std::vector<std::pair<std::string, std::string>>& kv) {
    core::json::writer j;
    j.w.StartObject();
    for (const auto& [k, v] : kv) j.kv(k, v);
    j.w.EndObject();
    return j.str();
}

/// A pause of the calling coroutine (retries while Postgres is away).
inline net::awaitable<void> sleep_ms(std::chrono::milliseconds d) {
    net::steady_timer t(co_await net::this_coro::executor, d);
    boost::system::error_code ec;
    co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
}

}  // namespace awp::runner
