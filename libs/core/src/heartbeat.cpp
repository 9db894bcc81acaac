// The daemon heartbeat: one statement, one loop (heartbeat.hpp).
#include "awp/core/heartbeat.hpp"

#include <unistd.h>

#include <variant>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"

namespace awp::core::heartbeat {

using namespace net::experimental::awaitable_operators;

// ---- details ----

namespace {
template <class F>
std::string serialised(F&& write) {
    json::writer j;
    write(j.w);
    return j.str();
}
}  // namespace

details& details::add(std::string_view key, std::string_view value) {
    return add_raw(key, serialised([&](auto& w) {
                       w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
                   }));
}

details& details::add(std::string_view key, bool value) {
    return add_raw(key, value ? "true" : "false");
}

details& details::add_int(std::string_view key, std::int64_t value) {
    return add_raw(key, std::to_string(value));
}

details& details::add_uint(std::string_view key, std::uint64_t value) {
    return add_raw(key, std::to_string(value));
}

details& details::add_raw(std::string_view key, std::string value) {
    for (auto& m : members_) {
        if (m.first == key) {
            m.second = std::move(value);
            return *this;
        }
    }
    members_.emplace_back(std::string(key), std::move(value));
    return *this;
}

std::string details::json() const {
    json::writer j;
    j.w.StartObject();
    for (const auto& [k, v] : members_) {
        j.key(k);
        j.raw(v);
    }
    j.w.EndObject();
    return j.str();
}

// ---- beater ----

beater::beater(const net::any_io_executor& ex, pg::session& db, config cfg, details_fn details)
    : db_(db), cfg_(std::move(cfg)), details_(std::move(details)), wake_(ex), stop_timer_(ex) {
    if (cfg_.started_at.empty()) cfg_.started_at = now_iso8601_utc();
}

net::awaitable<outcome> beater::beat() {
    std::string meta = "{}";
    if (details_) {
        heartbeat::details d;
        details_(d);
        meta = d.json();
    }
    // After the first beat the gateway is named by the id it resolved to, whatever happens to
    // the slug later.
    const bool resolved = !gateway_id_.empty();
    std::optional<std::string> tenant = resolved ? std::optional(tenant_id_) : cfg_.tenant_id;
    pg::params p{pg::param(resolved ? gateway_id_ : cfg_.gateway),
                 pg::param(cfg_.daemon),
                 pg::param(cfg_.instance),
                 pg::param(static_cast<int>(::getpid())),
                 pg::param(cfg_.version),
                 pg::param(cfg_.started_at),
                 pg::param(meta),
                 pg::param(tenant)};
    // Idempotent: on a connection broken since the last beat, reconnect and beat again at once.
    auto r = co_await db_.exec(kSql, std::move(p), true);
    outcome out;
    out.gateway_id = r.get<std::string>(0, 0);
    out.tenant_id = r.get<std::string>(0, 1);
    out.gateway_status = r.get<std::string>(0, 2);
    gateway_id_ = out.gateway_id;
    tenant_id_ = out.tenant_id;
    // Counted where the beat lands, so beats() and last_error() never disagree.
    last_error_.clear();
    ++beats_;
    if (on_beat_) on_beat_(out);
    co_return out;
}

net::awaitable<beater::attempt> beater::try_beat() {
    attempt a;
    try {
        co_await beat();
        a.ok = true;
    } catch (const pg::connection_error& e) {
        db_.reset();
        a.error = e.what();
    } catch (const std::exception& e) {
        a.error = e.what();
    }
    if (!a.ok && !stopped_) {  // a beat abandoned by stop() is no failure
        ++failures_;
        last_error_ = a.error;
    }
    co_return a;
}

net::awaitable<void> beater::until_stopped() {
    while (!stopped_) {
        boost::system::error_code ec;
        stop_timer_.expires_at(net::steady_timer::time_point::max());
        co_await stop_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
        // Cancelled because the beat finished first: nothing more to wait for.
        const auto cs = co_await net::this_coro::cancellation_state;
        if (cs.cancelled() != net::cancellation_type::none) co_return;
    }
}

net::awaitable<void> beater::run() {
    bool warned = false;
    while (!stopped_) {
        // A beat races stop(): a beat stuck reconnecting to a database that is away must not
        // hold up the daemon's shutdown.
        auto r = co_await (try_beat() || until_stopped());
        if (r.index() == 1) {
            db_.reset();  // a statement may have been in flight
            break;
        }
        const attempt& a = std::get<0>(r);
        if (!a.ok && !warned) {
            log::warn("heartbeat failed", {{"gateway", cfg_.gateway}, {"error", a.error}});
        }
        warned = !a.ok;
        if (stopped_) break;
        co_await wake_.wait_for(periodic_wait(cfg_.interval));  // spread: core/time.hpp
    }
}

void beater::beat_now() { wake_.set(); }

void beater::stop() {
    stopped_ = true;
    stop_timer_.cancel();
    wake_.set();
}

}  // namespace awp::core::heartbeat
