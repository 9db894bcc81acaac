// The realtime hub (realtime.hpp): its sockets, the change capture it feeds from (when
// REALTIME_DATABASE_URL is set), the sweep that disconnects sockets whose token expired or was
// signed out, and /api/health's `realtime` object.
#include "realtime.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <algorithm>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/realtime/walsender.hpp"
#include "awp/rest/error.hpp"
#include "realtime_socket.hpp"

namespace awp::api {

realtime_hub::realtime_hub(gateway& g, net::io_context& ioc, realtime_config cfg)
    : g_(g),
      ioc_(ioc),
      cfg_(std::move(cfg)),
      slot_(slot_name(cfg_, g.config().port)),
      policies_([this](std::string search_path, std::vector<pg::connection::pipelined> stmts)
                    -> net::awaitable<std::vector<pg::result>> {
          // The catalog as the gateway's own login reads it, on its pool.
          pg::params p;
          p.emplace_back(std::move(search_path));
          pg::connection::pipelined setup{"SELECT set_config('search_path', $1, true)",
                                          std::move(p)};
          auto t = co_await g_.db().begin_own(std::move(setup));
          co_return co_await t.run(std::move(stmts), false);
      }) {}

realtime_hub::~realtime_hub() = default;

void realtime_hub::add(const std::shared_ptr<realtime_socket>& s) {
    std::lock_guard lock(mu_);
    sockets_.insert(s);
    ++per_address_[s->address];
}

void realtime_hub::remove(const std::shared_ptr<realtime_socket>& s) {
    {
        std::lock_guard lock(s->mu);
        channels -= s->channels.size();
        s->channels.clear();
    }
    std::lock_guard lock(mu_);
    if (sockets_.erase(s) == 0) return;
    auto drop = [](auto& counts, const std::string& k) {
        auto it = counts.find(k);
        if (it != counts.end() && --it->second == 0) counts.erase(it);
    };
    drop(per_address_, s->address);
    if (!s->user.empty()) drop(per_user_, s->user);
}

std::size_t realtime_hub::sockets_of_address(const std::string& address) const {
    std::lock_guard lock(mu_);
    auto it = per_address_.find(address);
    return it == per_address_.end() ? 0 : it->second;
}

bool realtime_hub::claim_user(const std::shared_ptr<realtime_socket>& s, const std::string& user) {
    std::lock_guard lock(mu_);
    if (!s->user.empty()) return true;  // it counts against its first user already
    auto& n = per_user_[user];
    if (cfg_.max_sockets_per_user > 0 && n >= cfg_.max_sockets_per_user) {
        if (n == 0) per_user_.erase(user);
        return false;
    }
    ++n;
    s->user = user;
    return true;
}

std::string realtime_hub::slot_name(const realtime_config& cfg, unsigned short api_port) {
    auto valid = [](const std::string& v) {
        return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        });
    };
    if (!valid(cfg.slot)) {
        throw core::config_error("REALTIME_SLOT must be lower-case letters, digits and _");
    }
    std::string instance = cfg.instance;
    if (instance.empty()) {
        // Stable for a gateway that comes back on the same host and port, distinct between
        // gateways: the host name and API_PORT, hashed (a host name may hold anything).
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
        const auto digest =
            core::crypto::sha256_hex(std::string(host) + ":" + std::to_string(api_port));
        instance = digest.substr(0, 12);
    }
    if (!valid(instance)) {
        throw core::config_error("REALTIME_INSTANCE must be lower-case letters, digits and _");
    }
    auto name = cfg.slot + "_" + instance;
    if (name.size() > 63) {
        throw core::config_error(
            "REALTIME_SLOT and REALTIME_INSTANCE make a slot name above 63 "
            "bytes: " +
            name);
    }
    return name;
}

void realtime_hub::start() {
    if (!cfg_.enabled) return;
    if (!cfg_.database_url.empty()) {
        realtime::capture_options o;
        o.dsn = cfg_.database_url;
        o.slot = slot_;
        o.slot_prefix = cfg_.slot;
        o.abandon_after = std::chrono::milliseconds(static_cast<long>(cfg_.slot_abandon_s * 1000));
        o.publication = cfg_.publication;
        auto sink = [this](realtime::transaction tx) { return deliver(std::move(tx)); };
        auto query = [this](std::string sql, pg::params p) -> net::awaitable<pg::result> {
            pg::connection::pipelined setup{"SELECT set_config('search_path', 'pg_catalog', true)",
                                            {}};
            auto t = co_await g_.db().begin_own(std::move(setup));
            co_return co_await t.exec_and_commit(std::move(sql), std::move(p));
        };
        capture_ = std::make_unique<realtime::capture>(std::move(o), sink, query);
        *capture_done_ = false;
        net::co_spawn(net::make_strand(ioc_), capture_->run(),
                      [done = capture_done_](const std::exception_ptr& e) {
                          *done = true;
                          if (!e) return;
                          try {
                              std::rethrow_exception(e);
                          } catch (const std::exception& x) {
                              core::log::error("realtime capture ended", {{"error", x.what()}});
                          }
                      });
    } else {
        core::log::info(
            "realtime: no REALTIME_DATABASE_URL, channels are served but no changes "
            "are captured");
    }
    sweep_timer_ = std::make_unique<net::steady_timer>(ioc_);
    *sweep_done_ = false;
    net::co_spawn(ioc_, sweep(), [done = sweep_done_](const std::exception_ptr& e) {
        *done = true;
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            core::log::error("realtime token sweep ended", {{"error", x.what()}});
        }
    });
}

void realtime_hub::stop() {
    stopping_ = true;
    if (capture_) capture_->stop();
    if (sweep_timer_) net::post(ioc_, [this] { sweep_timer_->cancel(); });
}

net::awaitable<void> realtime_hub::wait_stopped(std::chrono::milliseconds limit) {
    net::steady_timer wait(ioc_);
    const auto end = std::chrono::steady_clock::now() + limit;
    while ((!*capture_done_ || !*sweep_done_) && std::chrono::steady_clock::now() < end) {
        wait.expires_after(std::chrono::milliseconds(10));
        co_await wait.async_wait(net::use_awaitable);
    }
}

net::awaitable<void> realtime_hub::sweep() {
    const auto every = std::chrono::milliseconds(static_cast<long>(cfg_.token_check_s * 1000));
    while (!stopping_) {
        sweep_timer_->expires_after(every);
        (void)co_await sweep_timer_->async_wait(net::as_tuple(net::use_awaitable));
        if (stopping_) break;
        std::vector<std::shared_ptr<realtime_socket>> sockets;
        {
            std::lock_guard lock(mu_);
            sockets.assign(sockets_.begin(), sockets_.end());
        }
        const auto now_ms = realtime_now_ms();
        const auto heartbeat_ms = static_cast<std::int64_t>(cfg_.heartbeat_timeout_s * 1000);
        for (const auto& s : sockets) {
            // A client that sends no Phoenix message (realtime-js heartbeats every 25 s) is gone
            // or not a client: answering the websocket's pings does not keep a socket.
            if (now_ms - s->last_message_ms.load() > heartbeat_ms && s->ws->is_open()) {
                s->ws->close_now(http::close_code::policy,
                                 "no heartbeat for " +
                                     std::to_string(static_cast<int>(cfg_.heartbeat_timeout_s)) +
                                     " s");
                continue;
            }
            // Every token the socket acts with, as the data API would take it now (expiry with
            // its leeway, sign-out); the verified ones are cached, so this costs a lookup.
            std::vector<std::string> tokens{s->key->token};
            {
                std::lock_guard lock(s->mu);
                for (const auto& [t, ch] : s->channels) {
                    if (ch.as != s->key) tokens.push_back(ch.as->token);
                }
            }
            std::optional<std::string> why;
            for (const auto& t : tokens) {
                if (t.empty()) continue;
                request r;
                r.header.set("authorization", "Bearer " + t);
                try {
                    (void)g_.data_api_principal(r);
                } catch (const rest::api_error& e) {
                    why = e.message();
                    break;
                }
            }
            if (!why) continue;
            std::vector<std::pair<std::string, std::string>> joined;
            {
                std::lock_guard lock(s->mu);
                for (const auto& [t, ch] : s->channels) joined.emplace_back(t, ch.join_ref);
            }
            core::json::writer j;
            j.w.StartObject();
            j.kv("message", *why);
            j.kv("status", "error");
            j.kv("extension", "system");
            j.w.EndObject();
            for (const auto& [topic, join_ref] : joined) {
                s->push(join_ref, "", topic, "system", j.str(), true, false);
            }
            s->ws->close(http::close_code::policy, "token refused: " + *why);
        }
    }
}

void realtime_hub::record_lag(std::int64_t commit_time) {
    // Another host's clock may run ahead of this one's: a negative lag counts as none.
    const std::int64_t lag = std::max<std::int64_t>(0, realtime::walsender::pg_now() - commit_time);
    std::lock_guard lock(lag_mu_);
    if (lag_us_.size() < kLagWindow) {
        lag_us_.push_back(lag);
    } else {
        lag_us_[lag_next_] = lag;
    }
    lag_next_ = (lag_next_ + 1) % kLagWindow;
}

std::string realtime_hub::public_health_json() const {
    core::json::writer j;
    j.w.StartObject();
    j.key("enabled");
    j.w.Bool(cfg_.enabled);
    j.key("capture");
    j.w.StartObject();
    j.kv("state", capture_ ? capture_->status().state : std::string("off"));
    j.w.EndObject();
    j.w.EndObject();
    return j.str();
}

std::string realtime_hub::health_json() const {
    core::json::writer j;
    j.w.StartObject();
    j.key("enabled");
    j.w.Bool(cfg_.enabled);
    std::size_t sockets = 0;
    {
        std::lock_guard lock(mu_);
        sockets = sockets_.size();
    }
    j.key("sockets");
    j.w.Uint64(sockets);
    j.key("channels");
    j.w.Uint64(channels.load());
    j.key("delivered");
    j.w.Uint64(delivered.load());
    j.key("visibility_checks");
    j.w.Uint64(checks.load());
    j.key("commit_waits");
    j.w.Uint64(commit_waits.load());
    {
        std::vector<std::int64_t> lags;
        {
            std::lock_guard lock(lag_mu_);
            lags = lag_us_;
        }
        std::sort(lags.begin(), lags.end());
        const auto at = [&](std::size_t pct) {
            return static_cast<double>(lags[std::min(lags.size() - 1, lags.size() * pct / 100)]) /
                   1000.0;
        };
        // Commit -> queued to the sockets, of the last transactions delivered (ms).
        j.key("lag_ms");
        j.w.StartObject();
        j.key("transactions");
        j.w.Uint64(lags.size());
        if (!lags.empty()) {
            j.key("p50");
            j.w.Double(at(50));
            j.key("p99");
            j.w.Double(at(99));
            j.key("max");
            j.w.Double(static_cast<double>(lags.back()) / 1000.0);
        }
        j.w.EndObject();
    }
    j.key("capture");
    if (capture_) {
        j.raw(realtime::status_json(capture_->status()));
    } else {
        realtime::capture_status off;
        off.state = "off";
        off.reason = cfg_.enabled ? "REALTIME_DATABASE_URL is not set" : "REALTIME=off";
        j.raw(realtime::status_json(off));
    }
    j.w.EndObject();
    return j.str();
}

}  // namespace awp::api
