// GATEWAY_ID resolved once to the gateway's id and tenant (see gateway.hpp).
#include "awp/core/gateway.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/core/uuid.hpp"

namespace awp::core::gateway {

namespace {

// Outside the coroutine: GCC 12 rejects string-literal temporaries in some coroutine frames.
[[noreturn]] void refuse(const std::string& id_or_slug, const std::string& why) {
    throw config_error("GATEWAY_ID \"" + id_or_slug + "\": " + why);
}

void check_tenant(const std::optional<std::string>& tenant_id) {
    if (tenant_id && !uuid::parse(*tenant_id)) {
        throw config_error("TENANT_ID must be a uuid, got \"" + *tenant_id + "\"");
    }
}

}  // namespace

boost::asio::awaitable<ref> resolve(pg::session& db, const std::string& id_or_slug,
                                    const std::optional<std::string>& tenant_id) {
    check_tenant(tenant_id);
    pg::params p{pg::param(id_or_slug), pg::param(tenant_id)};
    pg::result r;
    try {
        r = co_await db.exec(kResolveSql, std::move(p), true);
    } catch (const pg::sql_error& e) {
        refuse(id_or_slug, e.what());
    }
    if (r.size() != 1) {
        // On a pool login a key the database does not know shows as no gateway at all.
        refuse(id_or_slug, pg::default_gateway_key().empty()
                               ? std::string("not found")
                               : std::string("not found, or GATEWAY_KEY is not the current key of "
                                             "this gateway (awpctl gateway key)"));
    }
    ref out;
    out.id = r.get<std::string>(0, 0);
    out.slug = r.get<std::string>(0, 1);
    out.tenant_id = r.get<std::string>(0, 2);
    co_return out;
}

boost::asio::awaitable<std::optional<ref>> resolve_at_start(
    pg::session& db, const std::string& id_or_slug, const std::optional<std::string>& tenant_id,
    const bool& stopping) {
    auto ex = co_await boost::asio::this_coro::executor;
    for (;;) {
        std::string failure;
        try {
            co_return co_await resolve(db, id_or_slug, tenant_id);
        } catch (const pg::connection_error& e) {
            failure = e.what();
            db.reset();
        }
        log::warn("start-up: cannot look up the gateway, retrying", {{"error", failure}});
        boost::asio::steady_timer t(ex, std::chrono::seconds(1));
        boost::system::error_code ec;
        co_await t.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        if (stopping) co_return std::nullopt;
    }
}

}  // namespace awp::core::gateway
