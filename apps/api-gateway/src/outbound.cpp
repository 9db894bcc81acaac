// The gateway's side of the outbound policy (awp/http/outbound.hpp): the operator's allow list
// and the database ports the gateway knows of (its own DSN and every workspace's).
#include "gateway.hpp"
#include "registry.hpp"

namespace awp::api {

http::outbound_check gateway::outbound_check(http::outbound_scope scope,
                                             std::vector<net::ip::address> own) const {
    std::vector<std::string> dsns = {cfg_.database_url};
    try {
        for (const auto& w : registry_->snapshot()->all) {
            if (is_postgres_url(w.url)) dsns.push_back(w.url);
        }
    } catch (const registry_error&) {
        // A corrupt registry is reported by the routes that read it; its ports stay unknown.
    }
    http::outbound_check c;
    c.policy = http::outbound_policy(cfg_.outbound_allow, http::database_ports(dsns));
    c.scope = scope;
    c.own = std::move(own);
    return c;
}

}  // namespace awp::api
