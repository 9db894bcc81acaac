// Sessions of both faces of the gateway, /api/auth/* (api_auth.cpp) and /auth/v1 (gotrue.cpp):
// one model, one module (docs/security.md, "Sessions"). A session is a row of app_sessions in
// the database of the workspace it was issued for, and every access token of it carries its id
// (session_id). Here it is issued, refreshed and ended, and here every request asks, from
// memory, whether its token's session (or user) has been revoked: each database's
// app_token_revocations, read when this process starts watching it and after every reconnect,
// kept current by LISTEN awp_session_revoked (sql/0032), so a session ended through any gateway
// process, awpctl or an operator's SQL is refused by every process within a second and a
// restart forgets nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/error.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"
#include "awp/http/message.hpp"
#include "gateway.hpp"

namespace awp::api {

/// The face a session was started through (app_sessions.via). Both issue the same sessions;
/// an /api session has no refresh token and its access token lasts API_SESSION_TTL.
enum class session_face { api, auth_v1 };

/// The database a session lives in: the gateway's own (workspace_id ""), or a registered
/// workspace's (its id and DSN).
struct session_db {
    std::string workspace_id;
    std::string url;
};

/// What a sign-in records of its client (app_sessions.ip, user_agent).
struct client_meta {
    std::string remote;
    std::string user_agent;
};
/// The request's: its peer address and its User-Agent (printable ASCII, at most 512 bytes).
[[nodiscard]] client_meta client_of(const request& r);

/// A session just started or refreshed: its first (or next) tokens and its user as the database
/// holds it at that moment (the claims come from this row, never from an older token).
struct session_grant {
    std::string session_id;
    app_user user;
    long long auth_time = 0;   ///< when the session signed in (unix s)
    long long expires_at = 0;  ///< the access token's exp
    std::string access_token;
    std::string refresh_token;  ///< /auth/v1 only
};

/// Why a refresh token was refused (GoTrue's error codes, gotrue.cpp says them).
enum class refresh_refusal { not_found, already_used, session_expired, user_banned };
class refresh_refused : public core::error {
public:
    explicit refresh_refused(refresh_refusal why) : core::error("refresh refused"), why_(why) {}
    [[nodiscard]] refresh_refusal why() const noexcept { return why_; }

private:
    refresh_refusal why_;
};

/// Which of a user's sessions a sign-out ends: the caller's, all others, all.
enum class revoke_scope { local, others, global };

/// What the revocation check says of a token.
enum class session_state {
    live,     ///< neither its session nor (for a token of no session) its user was revoked
    revoked,  ///< refuse it: signed out, or its user disabled, moved or removed
    unknown,  ///< its database's revocations are not loaded yet: refuse it for now (503)
};

/// Ids to expiries, looked up by string_view (the request path allocates nothing).
struct id_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
        return std::hash<std::string_view>{}(s);
    }
};
using id_map = std::unordered_map<std::string, long long, id_hash, std::equal_to<>>;

/// One row of app_token_revocations as a process keeps it.
struct revocation {
    std::string session_id;  ///< a session ended ("" = the user's tokens of no session)
    std::string user_id;
    long long issued_before = 0;  ///< tokens of no session with iat <= this (unix s)
    long long expires_at = 0;     ///< no token it refuses is valid after this (unix s)
};
/// The columns every read of app_token_revocations selects (revocations_of reads them).
extern const char* const kRevocationColumns;
[[nodiscard]] std::vector<revocation> revocations_of(const pg::result& rows);

/// One database's revocations as this process knows them, and the LISTEN that keeps them
/// current (revocations.cpp).
class revocation_watch : public std::enable_shared_from_this<revocation_watch> {
public:
    revocation_watch(net::io_context& ioc, db_pool& pool, session_db db, std::string listen_dsn,
                     std::chrono::milliseconds safety_poll);
    void start();
    void stop();
    /// From memory only: the request path's check.
    [[nodiscard]] session_state check(std::string_view session_id, std::string_view user_id,
                                      long long iat) const;
    /// More revocations (a NOTIFY's rows; this process's own, at once, not waiting for their
    /// NOTIFY).
    void apply(const std::vector<revocation>& rows);
    /// Every live revocation of the database (a whole read): from now on it is loaded.
    void replace(const std::vector<revocation>& rows);
    [[nodiscard]] bool loaded() const noexcept { return loaded_; }
    /// While not loaded: why the last read failed, when the database said it the way a request
    /// on it would hear it (502 database_unreachable, workspace_role_unsafe, ...).
    [[nodiscard]] std::optional<http::http_error> failure() const;
    /// Until loaded (true), or the first read failed, or `limit` passed (false).
    net::awaitable<bool> wait_loaded(std::chrono::milliseconds limit);
    /// After stop(): until its coroutines ended (at most `limit`).
    net::awaitable<void> wait_stopped(std::chrono::milliseconds limit);
    [[nodiscard]] const session_db& db() const noexcept { return db_; }

private:
    void spawn(const char* what, net::awaitable<void> body);
    void request_reload(bool prune);
    net::awaitable<void> reload_loop(std::shared_ptr<revocation_watch> self);
    net::awaitable<void> reload(bool prune);
    void on_notify(const pg::notification& n);
    net::awaitable<void> fetch_loop(std::shared_ptr<revocation_watch> self);
    net::awaitable<void> poll_loop(std::shared_ptr<revocation_watch> self);
    net::awaitable<void> listen_loop(std::shared_ptr<revocation_watch> self);
    [[nodiscard]] principal service() const;

    net::io_context& ioc_;
    db_pool& pool_;
    session_db db_;
    std::string listen_dsn_;
    std::chrono::milliseconds safety_poll_;
    std::unique_ptr<core::listener> listener_;
    std::unique_ptr<net::steady_timer> poll_timer_;
    std::atomic<std::chrono::steady_clock::time_point> last_read_{};

    mutable std::shared_mutex mu_;
    id_map sessions_;                     // session id -> expires (unix s)
    id_map users_;                        // user id -> issued_before (unix s)
    std::size_t applied_ = 0;             // since the last prune
    bool reading_ = false;                // a whole read (reload) is in flight
    std::vector<revocation> since_read_;  // applied while it was: kept by its replace()
    std::atomic<bool> loaded_{false};
    std::atomic<bool> tried_{false};  // a first read ended, one way or the other
    std::atomic<bool> stopping_{false};
    mutable std::mutex failure_mu_;
    std::optional<http::http_error> failure_;

    std::mutex work_mu_;
    bool reloading_ = false, reload_again_ = false, prune_ = false;
    bool fetching_ = false;
    std::vector<long long> pending_;  // revocation ids notified, not yet read
    std::atomic<int> running_{0};     // coroutines in flight
};

/// The session module: both faces call it; it calls neither.
class session_store {
public:
    struct options {
        std::string jwt_secret;
        double api_ttl_s = 8 * 3600;           ///< API_SESSION_TTL: an /api session's token
        double jwt_expiry_s = 3600;            ///< API_JWT_EXPIRY: an /auth/v1 access token
        double refresh_reuse_interval_s = 10;  ///< API_REFRESH_REUSE_INTERVAL
        std::string listen_dsn;  ///< the own database's LISTEN (AWP_API_WAKE_DATABASE_URL, else the
                                 ///< api DSN)
        std::chrono::milliseconds safety_poll{std::chrono::seconds(10)};
    };
    session_store(net::io_context& ioc, db_pool& pool, options o);
    ~session_store();
    session_store(const session_store&) = delete;
    session_store& operator=(const session_store&) = delete;

    // ---- the check, on every request: a memory lookup ----
    /// Of a verified user token (p.workspace_id its workspace, "" the own database).
    [[nodiscard]] session_state check(const principal& p) const;
    /// When check() says unknown: why the database cannot be read, as a request on it would be
    /// told (nullopt: its first read is still under way).
    [[nodiscard]] std::optional<http::http_error> unknown_because(const principal& p) const;

    // ---- issue, refresh, end ----
    /// A new session of `user_id` in `db` (its row, for /auth/v1 its first refresh token, the
    /// user's last sign-in) and its first access token. The user is read in the same statement
    /// and must not be disabled: nullopt when it is (or is gone). `issuer` is /auth/v1's iss.
    net::awaitable<std::optional<session_grant>> issue(session_db db, std::string user_id,
                                                       session_face face, client_meta m,
                                                       std::string issuer);
    /// The refresh-token grant of /auth/v1 (the own database): rotation, the reuse interval's
    /// sealed child, the whole session ended on a reuse after it. Throws refresh_refused.
    net::awaitable<session_grant> refresh(std::string presented, std::string issuer);
    /// Ends sessions of `user_id` in `db`: scope local the one session (`session_id`), others
    /// all but it, global all. In this process at once; in the others through the database.
    /// Returns how many sessions ended.
    net::awaitable<std::size_t> revoke(session_db db, std::string user_id, std::string session_id,
                                       revoke_scope scope, std::string reason);
    /// After a statement of transaction `t` that may have ended sessions by a trigger (a new
    /// password, an operator's change of a user): commits, then applies what it ended.
    net::awaitable<void> commit_ended(db_pool::tx& t, const session_db& db, std::string user_id);

    // ---- the databases watched ----
    /// The own database's watch ("") or a workspace's (null while it is not watched).
    [[nodiscard]] std::shared_ptr<revocation_watch> watch_of(const std::string& workspace_id) const;
    /// Starts watching the own database.
    void start();
    /// The registered workspaces now (id -> DSN, "" for none): those that left or changed
    /// their url stop being watched. `generation` is the registry snapshot's.
    void retain(std::uint64_t generation, const std::map<std::string, std::string>& live);
    [[nodiscard]] std::uint64_t retained_generation() const noexcept { return generation_; }
    /// Until the revocations of `workspace_id` ("" the own database) are loaded or their first
    /// read failed, at most `limit`: a registered workspace's watch starts here when it is not
    /// running. True when loaded (or the workspace has no database to watch).
    net::awaitable<bool> wait_ready(std::string workspace_id, std::chrono::milliseconds limit);
    /// A workspace's pool closed: its watch stops (wait_ready starts it again).
    void deactivate(const std::string& workspace_id);
    /// Registered workspaces with a database that are not watched now (the router then makes
    /// sure a request's workspace is, before its handler runs).
    [[nodiscard]] std::size_t idle_workspaces() const noexcept { return idle_; }
    /// Until the own database is loaded, at most `limit`.
    net::awaitable<void> wait_all_ready(std::chrono::milliseconds limit);
    void stop();
    net::awaitable<void> wait_stopped(std::chrono::milliseconds limit);

private:
    [[nodiscard]] std::string token_for(const session_db& db, session_face face,
                                        const session_grant& g, long long now,
                                        const std::string& issuer) const;

    net::io_context& ioc_;
    db_pool& pool_;
    options o_;
    std::shared_ptr<revocation_watch> own_;
    mutable std::shared_mutex mu_;
    void update_idle();  // under mu_
    struct watched {
        std::string url;                      // its DSN ("" or a platform URL: nothing to watch)
        std::shared_ptr<revocation_watch> w;  // null while not watched
    };
    std::map<std::string, watched> workspaces_;
    std::vector<std::shared_ptr<revocation_watch>> stopped_;  // waited for at the end
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<std::size_t> idle_{0};
};

}  // namespace awp::api
