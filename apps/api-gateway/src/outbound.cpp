// The gateway's side of the outbound policy (awp/http/outbound.hpp): the operator's allow list
// and the database ports the gateway knows of (its own DSN and every workspace's).
#include "awp/core/pg.hpp"
#include "gateway.hpp"
#include "registry.hpp"

namespace awp::api {

http::outbound_check gateway::outbound_check(http::outbound_scope scope,
                                             std::vector<net::ip::address> own) const {
    // 5432 always: a database on another host of the network listens there by default.
    std::vector<std::uint16_t> ports = {5432};
    const auto add = [&ports](const std::string& dsn) {
        for (auto p : pg::dsn_ports(dsn)) ports.push_back(p);
    };
    add(cfg_.database_url);
    try {
        for (const auto& w : registry_->snapshot()->all) {
            if (is_postgres_url(w.url)) add(w.url);
        }
    } catch (const registry_error&) {
        // A corrupt registry is reported by the routes that read it; its ports stay unknown.
    }
    http::outbound_check c;
    c.policy = http::outbound_policy(cfg_.outbound_allow, std::move(ports));
    c.scope = scope;
    c.own = std::move(own);
    return c;
}

}  // namespace awp::api
