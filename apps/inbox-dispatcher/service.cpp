// The dispatcher's service: the gateway resolved once, the inbox queue (queue.hpp) on the shared
// lease driver (LISTEN awp_inbox_<gateway> + the safety poll), and the heartbeat.
#include "service.hpp"

#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/channels.hpp"
#include "awp/core/gateway.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"

namespace awp::dispatcher {

namespace log = core::log;
namespace pg = core::pg;
using namespace std::chrono_literals;

namespace {

constexpr const char* kDaemon = "inbox-dispatcher";
constexpr const char* kVersion = "0.1.0";

constexpr const char* kHeartbeatSql = R"(
SELECT h.gateway_status::text FROM public.daemon_heartbeat($1, $2, $3, $4::integer, $5,
  $6::timestamptz, $7::jsonb, $8::uuid) h)";

std::vector<std::string> known_secrets(const std::string& dsn) {
    std::vector<std::string> out;
    if (!dsn.empty()) {
        char* err = nullptr;
        PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
        if (err) PQfreemem(err);
        if (opts) {
            for (PQconninfoOption* o = opts; o->keyword; ++o) {
                if (std::string_view(o->keyword) == "password" && o->val && *o->val) {
                    out.emplace_back(o->val);
                }
            }
            PQconninfoFree(opts);
        }
    }
    if (const char* p = std::getenv("PGPASSWORD"); p && *p) out.emplace_back(p);
    return out;
}

// What escaped a spawned coroutine, logged (never silently dropped).
void log_escaped(const char* what, std::exception_ptr e) {
    if (!e) return;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        log::error(std::string(what) + " ended with an error", {{"error", ex.what()}});
    } catch (...) {
        log::error(std::string(what) + " ended with an unknown error");
    }
}

std::string json_escape(std::string_view s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            o += ' ';
        } else {
            o += c;
        }
    }
    return o;
}

}  // namespace

service::service(net::io_context& ioc, config cfg)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      started_at_(core::now_iso8601_utc()),
      queue_(cfg_, known_secrets(cfg_.common.database_url)),
      heartbeat_db_(cfg_.common.database_url, "heartbeat"),
      heartbeat_done_(ioc.get_executor()),
      heartbeat_timer_(ioc) {}

service::~service() = default;

void service::request_stop() {
    stopping_ = true;
    if (driver_) driver_->stop();
    heartbeat_timer_.cancel();
}

net::awaitable<void> service::sleep_for(std::chrono::milliseconds d) {
    net::steady_timer t(ioc_, d);
    boost::system::error_code ec;
    co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
}

// GATEWAY_ID resolved once (core::gateway): from here on every statement names the id.
net::awaitable<void> service::resolve_gateway() {
    std::optional<std::string> tenant;
    if (!cfg_.tenant_id.empty()) tenant = cfg_.tenant_id;
    for (;;) {
        std::string failure;
        try {
            const auto gw =
                co_await core::gateway::resolve(queue_.lease_session(), cfg_.gateway, tenant);
            gateway_id_ = gw.id;
            gateway_slug_ = gw.slug;
            tenant_id_ = gw.tenant_id;
            co_return;
        } catch (const pg::connection_error& e) {
            failure = e.what();
        }
        queue_.lease_session().reset();
        log::warn("cannot look up the gateway, retrying", {{"error", failure}});
        co_await sleep_for(1s);
        if (stopping_) co_return;
    }
}

net::awaitable<void> service::run() {
    auto ex = co_await net::this_coro::executor;
    co_await resolve_gateway();
    if (stopping_) co_return;
    queue_.bind(gateway_id_);
    const std::string channel = core::channels::inbox(gateway_id_);
    log::info("starting", {{"gateway_id", gateway_id_},
                           {"gateway_slug", gateway_slug_},
                           {"channel", channel},
                           {"runtime", cfg_.runtime},
                           {"max_concurrent", cfg_.max_concurrent},
                           {"lease_seconds", cfg_.effective_lease_seconds()},
                           {"wake_timeout_ms", static_cast<long>(cfg_.wake_timeout().count())}});

    core::queue_options qo;
    qo.name = "inbox";
    qo.concurrency = static_cast<std::size_t>(cfg_.max_concurrent);
    qo.retry.first = 200ms;
    qo.retry.cap = 5s;
    // Until the lease would have run out anyway: then the reaper retries the item.
    qo.retry.finish_for = std::chrono::seconds(cfg_.effective_lease_seconds());
    qo.listen.dsn = cfg_.common.database_url;
    qo.listen.channels = {channel};
    qo.listen.safety_poll = cfg_.common.safety_poll();
    qo.listen.name = "inbox";
    core::queue_hooks hooks;
    hooks.on_notify = [this](const pg::notification&) {
        queue_.mark_dirty();
        return true;
    };
    hooks.on_rescan = [this](core::rescan_reason) {
        if (!ready_) {
            ready_ = true;
            core::daemon::notify_ready();
            log::info("ready", {{"gateway_id", gateway_id_}});
        }
        queue_.mark_dirty();
    };
    driver_ = std::make_unique<core::queue_driver<inbox_queue>>(ex, queue_, qo, std::move(hooks));
    net::co_spawn(ex, heartbeat_loop(), [this](std::exception_ptr e) {
        log_escaped("heartbeat loop", e);
        heartbeat_done_.set();
    });
    if (stopping_) driver_->stop();

    co_await driver_->run();

    heartbeat_timer_.cancel();
    co_await heartbeat_done_.wait();
    const auto& st = queue_.counters();
    log::info("in-flight wakes finished",
              {{"wakes", st.wakes}, {"completed", st.completed}, {"failed", st.failed}});
}

net::awaitable<void> service::heartbeat_loop() {
    bool warned = false;
    while (!stopping_) {
        const std::string meta =
            "{\"in_flight\":" + std::to_string(driver_ ? driver_->in_flight() : 0) +
            ",\"max_concurrent\":" + std::to_string(cfg_.max_concurrent) +
            ",\"wakes\":" + std::to_string(queue_.counters().wakes) +
            ",\"completed\":" + std::to_string(queue_.counters().completed) +
            ",\"failed\":" + std::to_string(queue_.counters().failed) + ",\"runtime\":\"" +
            json_escape(cfg_.runtime) + "\"}";
        std::string failure;
        try {
            co_await heartbeat_db_.query(kHeartbeatSql, gateway_id_, kDaemon, cfg_.common.instance,
                                         static_cast<int>(::getpid()), kVersion, started_at_, meta,
                                         tenant_id_);
            warned = false;
        } catch (const pg::connection_error& e) {
            heartbeat_db_.reset();
            failure = e.what();
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (!failure.empty() && !warned) {
            log::warn("heartbeat failed", {{"error", failure}});
            warned = true;
        }
        if (stopping_) break;
        heartbeat_timer_.expires_after(cfg_.heartbeat());
        boost::system::error_code ec;
        co_await heartbeat_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
}

}  // namespace awp::dispatcher
