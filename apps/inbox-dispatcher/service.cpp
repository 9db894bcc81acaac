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
#include "awp/core/heartbeat.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "awp/http/wake.hpp"

namespace awp::dispatcher {

namespace log = core::log;
namespace pg = core::pg;
using namespace std::chrono_literals;

namespace {

constexpr const char* kDaemon = "inbox-dispatcher";
constexpr const char* kVersion = "0.1.0";

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

}  // namespace

service::service(net::io_context& ioc, config cfg)
    : ioc_(ioc),
      cfg_(std::move(cfg)),
      started_at_(core::now_iso8601_utc()),
      queue_(cfg_, known_secrets(cfg_.common.database_url)),
      heartbeat_db_(cfg_.common.database_url, "heartbeat"),
      heartbeat_done_(ioc.get_executor()) {}

service::~service() = default;

void service::request_stop() {
    stopping_ = true;
    if (driver_) driver_->stop();
    if (beater_) beater_->stop();
}

// GATEWAY_ID resolved once (core::gateway): from here on every statement names the id.
net::awaitable<void> service::resolve_gateway() {
    std::optional<std::string> tenant;
    if (!cfg_.tenant_id.empty()) tenant = cfg_.tenant_id;
    const auto gw = co_await core::gateway::resolve_at_start(queue_.lease_session(), cfg_.gateway,
                                                             tenant, stopping_);
    if (!gw) co_return;
    gateway_id_ = gw->id;
    gateway_slug_ = gw->slug;
    tenant_id_ = gw->tenant_id;
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
    http::use_wake_source(qo.listen, cfg_.common.wake, cfg_.common.database_url);
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
    core::heartbeat::config hc;
    hc.gateway = gateway_id_;
    hc.tenant_id = tenant_id_;
    hc.daemon = kDaemon;
    hc.instance = cfg_.common.instance;
    hc.version = kVersion;
    hc.started_at = started_at_;
    hc.interval = cfg_.heartbeat();
    beater_ = std::make_unique<core::heartbeat::beater>(
        ex, heartbeat_db_, std::move(hc), [this](core::heartbeat::details& d) {
            const auto& st = queue_.counters();
            d.add("in_flight", driver_->in_flight())
                .add("max_concurrent", cfg_.max_concurrent)
                .add("wakes", st.wakes)
                .add("completed", st.completed)
                .add("failed", st.failed)
                .add("runtime", cfg_.runtime);
        });
    net::co_spawn(ex, beater_->run(), [this](std::exception_ptr e) {
        log_escaped("heartbeat", e);
        heartbeat_done_.set();
    });
    if (stopping_) driver_->stop();

    co_await driver_->run();

    beater_->stop();
    co_await heartbeat_done_.wait();
    const auto& st = queue_.counters();
    log::info("in-flight wakes finished",
              {{"wakes", st.wakes}, {"completed", st.completed}, {"failed", st.failed}});
}

}  // namespace awp::dispatcher
