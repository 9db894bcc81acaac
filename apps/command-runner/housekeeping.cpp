// Heartbeat and secrets sync of the runner (housekeeping.hpp).
#include "housekeeping.hpp"

#include <boost/asio/this_coro.hpp>

#include "awp/core/heartbeat.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "command.hpp"
#include "secrets.hpp"

namespace awp::runner {

namespace pg = core::pg;
namespace log = core::log;

namespace {
constexpr const char* kDaemon = "command-runner";
}  // namespace

housekeeping::housekeeping(const net::any_io_executor& ex, const runner_config& cfg,
                           std::function<std::size_t()> auth_flows)
    : cfg_(cfg),
      auth_flows_(std::move(auth_flows)),
      secrets_key_(secrets_key(cfg.hosted_secrets_key, cfg.service_role_key)),
      started_at_(core::now_iso8601_utc()),
      db_(cfg.database_url, "runner-housekeeping"),
      wake_(ex) {}

void housekeeping::set_gateway(std::string id, std::string slug, std::string tenant_id) {
    gateway_id_ = std::move(id);
    slug_ = std::move(slug);
    tenant_id_ = std::move(tenant_id);
}

net::awaitable<void> housekeeping::heartbeat(pg::session& db) {
    // Daemon-only row (users can read it, not write it): the sync state, and the address other
    // api-gateways proxy this gateway's agents to. The beat itself is core::heartbeat's; its
    // timing is the housekeeping loop's (each safety poll, and at once when the sync state
    // changes), on the connection the secrets sync also uses.
    core::heartbeat::config hc;
    hc.gateway = gateway_id_;
    hc.tenant_id = tenant_id_;
    hc.daemon = kDaemon;
    hc.instance = cfg_.instance;
    hc.started_at = started_at_;
    core::heartbeat::beater b(
        co_await net::this_coro::executor, db, std::move(hc), [this](core::heartbeat::details& d) {
            d.add("runtime_mode", to_string(cfg_.mode))
                .add("auth_flows", std::to_string(auth_flows_ ? auth_flows_() : 0))
                .add("secrets_sync", secrets_key_.empty()     ? "off"
                                     : secrets_error_.empty() ? "ok"
                                                              : "failed");
            if (!secrets_error_.empty()) d.add("secrets_error", secrets_error_);
            if (!cfg_.gateway_api_url.empty()) d.add("api_url", cfg_.gateway_api_url);
        });
    const auto beat = co_await b.beat();
    if (beat.gateway_status == "hibernating")
        log::debug("gateway is hibernating; commands still run", {{"gateway", slug_}});
}

net::awaitable<std::string> housekeeping::sync(pg::session& db) {
    if (secrets_key_.empty() || gateway_id_.empty()) co_return "";
    pg::connection* c = co_await db.get();
    std::string failure;
    try {
        sync_result r = co_await sync_secrets(*c, gateway_id_, cfg_.secrets_dir, secrets_key_);
        secrets_.replace(std::move(r.values));
        last_sync_ = std::chrono::steady_clock::now();
    } catch (const pg::connection_error& e) {
        failure = e.what();
        db.reset();
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) log::warn("secrets sync failed", {{"error", failure}});
    if (failure.empty() && !secrets_error_.empty()) log::info("secrets sync works again");
    if (failure != secrets_error_) {
        // A changed sync state reaches the heartbeat row now, not at the next safety poll.
        heartbeat_soon();
    }
    secrets_error_ = failure;
    co_return failure;
}

net::awaitable<void> housekeeping::first_sync(pg::session& db) {
    co_await sync(db);
    secrets_due_ = false;
}

void housekeeping::heartbeat_soon() {
    heartbeat_due_ = true;
    wake_.set();
}

void housekeeping::sync_soon() {
    secrets_due_ = true;
    wake_.set();
}

void housekeeping::stop() {
    stopping_ = true;
    wake_.set();
}

net::awaitable<void> housekeeping::run() {
    while (!stopping_) {
        co_await wake_.wait();
        if (stopping_) break;
        if (heartbeat_due_) {
            heartbeat_due_ = false;
            std::string failure;
            try {
                co_await heartbeat(db_);
            } catch (const pg::connection_error& e) {
                failure = e.what();
                db_.reset();
            } catch (const std::exception& e) {
                failure = e.what();
            }
            if (!failure.empty()) log::warn("heartbeat failed", {{"error", failure}});
        }
        const auto since = std::chrono::steady_clock::now() - last_sync_;
        if (secrets_due_ || since >= std::chrono::duration<double>(cfg_.secrets_interval_s)) {
            secrets_due_ = false;
            co_await sync(db_);
        }
    }
    done_ = true;
}

}  // namespace awp::runner
