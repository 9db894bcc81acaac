// The revocations of one database in this process's memory (sessions.hpp, revocation_watch):
// read whole at start, when LISTEN (re)connects and at least every safety poll, and row by row
// as NOTIFY awp_session_revoked names them (sql/0032). The notification's payload is only a hint:
// the row is read from the table, so a NOTIFY anyone sends cannot revoke (or keep alive) a session.
#include <algorithm>
#include <charconv>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "sessions.hpp"

namespace awp::api {

const char* const kRevocationColumns =
    "session_id::text, user_id::text, "
    "ceil(extract(epoch FROM issued_before))::bigint AS issued_before, "
    "ceil(extract(epoch FROM expires_at))::bigint AS expires_at";

namespace {

constexpr std::size_t kMaxIdsPerNotify = 64;
constexpr std::size_t kPruneEvery = 1024;  // applied rows between two drops of expired ones

/// The ids of a notification's payload ("17" or "17,18"); junk yields none.
std::vector<long long> ids_of(std::string_view payload) {
    std::vector<long long> out;
    while (!payload.empty() && out.size() < kMaxIdsPerNotify) {
        const auto comma = payload.find(',');
        const auto part = payload.substr(0, comma);
        long long v = 0;
        auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
        if (ec == std::errc() && end == part.data() + part.size() && v > 0) out.push_back(v);
        if (comma == std::string_view::npos) break;
        payload.remove_prefix(comma + 1);
    }
    return out;
}

}  // namespace

revocation_watch::revocation_watch(net::io_context& ioc, db_pool& pool, session_db db,
                                   std::string listen_dsn, std::chrono::milliseconds safety_poll)
    : ioc_(ioc),
      pool_(pool),
      db_(std::move(db)),
      listen_dsn_(std::move(listen_dsn)),
      safety_poll_(safety_poll) {}

void revocation_watch::spawn(const char* what, net::awaitable<void> body) {
    // Counted, so stop() can wait for it; the handler keeps the watch alive until it has run.
    ++running_;
    net::co_spawn(ioc_, std::move(body),
                  [self = shared_from_this(), what](const std::exception_ptr& e) {
                      if (e) {
                          try {
                              std::rethrow_exception(e);
                          } catch (const std::exception& x) {
                              core::log::error(what, {{"error", x.what()}});
                          }
                      }
                      --self->running_;
                  });
}

principal revocation_watch::service() const {
    principal p;
    p.who = principal::kind::service;
    p.workspace_id = db_.workspace_id;
    p.workspace_url = db_.url;
    return p;
}

void revocation_watch::start() {
    if (stopping_) return;  // stopped before it started (its pool closed at once)
    core::listener_options o;
    o.dsn = listen_dsn_;
    o.channels = {std::string(core::channels::kSessionRevoked)};
    o.name = db_.workspace_id.empty() ? "sessions" : "sessions:" + db_.workspace_id;
    o.safety_poll = safety_poll_;
    std::weak_ptr<revocation_watch> weak = weak_from_this();
    listener_ = std::make_unique<core::listener>(
        o,
        [weak](const pg::notification& n) {
            if (auto self = weak.lock()) self->on_notify(n);
        },
        [weak](core::rescan_reason why) {
            // After every LISTEN (notifications sent while away are lost) the whole table; on
            // the safety poll too, dropping expired rows on the way.
            if (auto self = weak.lock())
                self->request_reload(why == core::rescan_reason::safety_poll);
        });
    spawn("session revocation listener ended", listen_loop(shared_from_this()));
    // The first read does not wait for LISTEN (its connect reads again), and while LISTEN is
    // away the table is read every safety poll all the same.
    poll_timer_ = std::make_unique<net::steady_timer>(ioc_);
    request_reload(false);
    spawn("session revocation poll ended", poll_loop(shared_from_this()));
}

// Each coroutine of the watch holds it (`self`) until it ends; they are member functions taking
// their arguments by value, never lambdas (docs/coroutines.md).
net::awaitable<void> revocation_watch::listen_loop(std::shared_ptr<revocation_watch> self) {
    co_await self->listener_->run();
}

net::awaitable<void> revocation_watch::poll_loop(std::shared_ptr<revocation_watch> /*self*/) {
    while (!stopping_) {
        poll_timer_->expires_after(core::periodic_wait(safety_poll_));
        co_await poll_timer_->async_wait(net::as_tuple(net::use_awaitable));
        if (stopping_) break;
        const auto since = std::chrono::steady_clock::now() - last_read_.load();
        if (since > safety_poll_) request_reload(true);
    }
}

void revocation_watch::stop() {
    stopping_ = true;
    auto self = shared_from_this();
    net::post(ioc_, [self] {
        if (self->listener_) self->listener_->stop();
        if (self->poll_timer_) self->poll_timer_->cancel();
    });
}

session_state revocation_watch::check(std::string_view session_id, std::string_view user_id,
                                      long long iat) const {
    if (!loaded_) return session_state::unknown;
    std::shared_lock lock(mu_);
    if (!session_id.empty()) {
        // Expired entries are still refused here: the token's own exp refuses them anyway.
        return sessions_.find(session_id) != sessions_.end() ? session_state::revoked
                                                             : session_state::live;
    }
    if (user_id.empty() || users_.empty()) return session_state::live;
    auto it = users_.find(user_id);
    // A token of no session, issued at or before the user's revocation (no iat: any time).
    return it != users_.end() && iat <= it->second ? session_state::revoked : session_state::live;
}

std::vector<revocation> revocations_of(const pg::result& rows) {
    std::vector<revocation> out;
    out.reserve(static_cast<std::size_t>(rows.size()));
    for (int i = 0; i < rows.size(); ++i) {
        revocation r;
        r.session_id = rows.get_optional<std::string>(i, "session_id").value_or("");
        r.user_id = rows.get<std::string>(i, "user_id");
        r.issued_before = rows.get_optional<long long>(i, "issued_before").value_or(0);
        r.expires_at = rows.get<long long>(i, "expires_at");
        out.push_back(std::move(r));
    }
    return out;
}

namespace {

void add(id_map& sessions, id_map& users, const revocation& r) {
    if (!r.session_id.empty()) {
        auto& e = sessions[r.session_id];
        e = std::max(e, r.expires_at);
    } else if (!r.user_id.empty()) {
        auto& e = users[r.user_id];
        e = std::max(e, r.issued_before);
    }
}

}  // namespace

void revocation_watch::apply(const std::vector<revocation>& rows) {
    if (rows.empty()) return;
    const auto now = core::now_unix_s();
    std::unique_lock lock(mu_);
    for (const auto& r : rows) {
        if (r.expires_at < now) continue;
        add(sessions_, users_, r);
        // A whole read in flight may have started before this row committed: kept for it.
        if (reading_) since_read_.push_back(r);
    }
    applied_ += rows.size();
    if (applied_ >= kPruneEvery) {
        applied_ = 0;
        std::erase_if(sessions_, [&](const auto& kv) { return kv.second < now; });
    }
}

void revocation_watch::replace(const std::vector<revocation>& rows) {
    id_map sessions, users;
    for (const auto& r : rows) add(sessions, users, r);
    {
        std::unique_lock lock(mu_);
        for (const auto& r : since_read_) add(sessions, users, r);
        since_read_.clear();
        reading_ = false;
        sessions_ = std::move(sessions);
        users_ = std::move(users);
        applied_ = 0;
    }
    loaded_ = true;
}

void revocation_watch::request_reload(bool prune) {
    {
        std::lock_guard lock(work_mu_);
        prune_ = prune_ || prune;
        if (reloading_) {
            reload_again_ = true;
            return;
        }
        reloading_ = true;
    }
    spawn("session revocations reload failed", reload_loop(shared_from_this()));
}

net::awaitable<void> revocation_watch::reload_loop(std::shared_ptr<revocation_watch> /*self*/) {
    net::steady_timer wait(ioc_);
    for (int attempt = 0; !stopping_;) {
        bool prune = false;
        {
            std::lock_guard lock(work_mu_);
            prune = prune_;
            prune_ = false;
            reload_again_ = false;
        }
        std::string failure;
        std::optional<http::http_error> told;
        try {
            co_await reload(prune);
        } catch (const http::http_error& e) {
            failure = e.what();
            told = e;
        } catch (const std::exception& e) {
            failure = e.what();
        }
        {
            std::lock_guard lock(failure_mu_);
            failure_ = std::move(told);
        }
        tried_ = true;
        if (failure.empty()) {
            attempt = 0;
            std::lock_guard lock(work_mu_);
            if (!reload_again_) {
                reloading_ = false;
                co_return;
            }
            continue;
        }
        // Until loaded, tokens of this database are refused (503): try again soon.
        if (attempt++ % 30 == 0) {
            core::log::warn("cannot read signed-out sessions yet; retrying",
                            {{"workspace_id", db_.workspace_id}, {"error", failure}});
        }
        wait.expires_after(std::chrono::seconds(1));
        co_await wait.async_wait(net::as_tuple(net::use_awaitable));
    }
    std::lock_guard lock(work_mu_);
    reloading_ = false;
}

net::awaitable<void> revocation_watch::reload(bool prune) {
    {
        std::unique_lock lock(mu_);
        reading_ = true;
        since_read_.clear();
    }
    // The first read opens a workspace's pool (a request needs it); later ones keep out of its
    // use count and never reopen it, so a database that fails cannot push others out.
    auto t = co_await pool_.begin(service(), tried_.load());
    if (prune) {
        // Rows no token can need any more: any process may drop them.
        co_await t.query("DELETE FROM public.app_token_revocations WHERE expires_at < now()");
    }
    const auto sql = std::string("SELECT ") + kRevocationColumns +
                     " FROM public.app_token_revocations WHERE expires_at > now()";
    auto rows = co_await t.query_and_commit(sql);
    // Whole: what was notified while this read ran is in it too (LISTEN came first).
    const bool first = !loaded_;
    replace(revocations_of(rows));
    last_read_ = std::chrono::steady_clock::now();
    if (first) {
        core::log::info("signed-out sessions loaded",
                        {{"workspace_id", db_.workspace_id}, {"count", rows.size()}});
    }
}

void revocation_watch::on_notify(const pg::notification& n) {
    auto ids = ids_of(n.payload);
    if (ids.empty()) return;
    bool flood = false;
    {
        std::lock_guard lock(work_mu_);
        pending_.insert(pending_.end(), ids.begin(), ids.end());
        if (pending_.size() > 10'000) {  // read the whole table once instead
            pending_.clear();
            flood = true;
        } else if (fetching_) {
            return;
        } else {
            fetching_ = true;
        }
    }
    if (flood) {
        request_reload(false);
        return;
    }
    spawn("session revocation read failed", fetch_loop(shared_from_this()));
}

net::awaitable<void> revocation_watch::fetch_loop(std::shared_ptr<revocation_watch> /*self*/) {
    while (!stopping_) {
        std::vector<long long> ids;
        {
            std::lock_guard lock(work_mu_);
            ids.swap(pending_);
            if (ids.empty()) {
                fetching_ = false;
                co_return;
            }
        }
        std::string list = "{";
        for (std::size_t i = 0; i < ids.size(); ++i) {
            list += (i ? "," : "") + std::to_string(ids[i]);
        }
        list += "}";
        bool failed = false;
        try {
            auto t = co_await pool_.begin(service(), true);
            const auto sql = std::string("SELECT ") + kRevocationColumns +
                             " FROM public.app_token_revocations WHERE id = ANY($1::bigint[])";
            auto rows = co_await t.query_and_commit(sql, list);
            apply(revocations_of(rows));
        } catch (const std::exception& e) {
            core::log::warn("cannot read a signed-out session; reading them all",
                            {{"workspace_id", db_.workspace_id}, {"error", e.what()}});
            failed = true;
        }
        if (failed) request_reload(false);  // retried until it reads
    }
    std::lock_guard lock(work_mu_);
    fetching_ = false;
}

std::optional<http::http_error> revocation_watch::failure() const {
    std::lock_guard lock(failure_mu_);
    return failure_;
}

net::awaitable<bool> revocation_watch::wait_loaded(std::chrono::milliseconds limit) {
    net::steady_timer wait(ioc_);
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!loaded_ && !tried_ && !stopping_ && std::chrono::steady_clock::now() < end) {
        wait.expires_after(std::chrono::milliseconds(10));
        co_await wait.async_wait(net::as_tuple(net::use_awaitable));
    }
    co_return loaded_.load();
}

net::awaitable<void> revocation_watch::wait_stopped(std::chrono::milliseconds limit) {
    net::steady_timer wait(ioc_);
    const auto end = std::chrono::steady_clock::now() + limit;
    while (running_ > 0 && std::chrono::steady_clock::now() < end) {
        wait.expires_after(std::chrono::milliseconds(10));
        co_await wait.async_wait(net::as_tuple(net::use_awaitable));
    }
}

}  // namespace awp::api
