// The realtime hub (realtime.hpp): its sockets, the change capture it feeds from (when
// REALTIME_DATABASE_URL is set), the sweep that disconnects sockets whose token expired or was
// signed out, and /api/health's `realtime` object.
#include "realtime.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/rest/error.hpp"
#include "realtime_socket.hpp"

namespace awp::api {

realtime_hub::realtime_hub(gateway& g, net::io_context& ioc, realtime_config cfg)
    : g_(g), ioc_(ioc), cfg_(std::move(cfg)) {}

realtime_hub::~realtime_hub() = default;

void realtime_hub::add(const std::shared_ptr<realtime_socket>& s) {
    std::lock_guard lock(mu_);
    sockets_.insert(s);
}

void realtime_hub::remove(const std::shared_ptr<realtime_socket>& s) {
    {
        std::lock_guard lock(s->mu);
        channels -= s->channels.size();
        s->channels.clear();
    }
    std::lock_guard lock(mu_);
    sockets_.erase(s);
}

void realtime_hub::start() {
    if (!cfg_.enabled) return;
    if (!cfg_.database_url.empty()) {
        realtime::capture_options o;
        o.dsn = cfg_.database_url;
        o.slot = cfg_.slot;
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
        for (const auto& s : sockets) {
            // Every token the socket acts with, as the data API would take it now (expiry with
            // its leeway, sign-out); the verified ones are cached, so this costs a lookup.
            std::vector<std::string> tokens{s->apikey};
            {
                std::lock_guard lock(s->mu);
                for (const auto& [t, ch] : s->channels) tokens.push_back(ch.token);
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
