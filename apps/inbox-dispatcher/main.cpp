// awp-inbox-dispatcher: wakes the agents of one gateway for their inbox items, one item per
// agent at a time, and completes or fails each item with the wake's outcome.
#include <iostream>

#include <boost/asio/io_context.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/error.hpp"
#include "awp/runtime/openclaw.hpp"
#include "config.hpp"
#include "service.hpp"

int main(int argc, char** argv) {
    namespace daemon = awp::core::daemon;
    awp::dispatcher::config cfg;
    daemon::cli cli("awp-inbox-dispatcher",
                    "awp-inbox-dispatcher: leases the inbox items of the agents on this gateway "
                    "and wakes each agent through the agent runtime CLI");
    awp::dispatcher::add_options(cli, cfg);
    if (auto code = cli.parse(argc, argv, &cfg.common)) return *code;
    try {
        cfg.validate();
        // The runtime's version decides the wake's argv; an unsupported one stops here (78).
        cfg.cli = awp::runtime::cli::detect(cfg.runtime);
        cfg.agent_user = awp::core::identity::agent_user(cfg.agent_user_name);
        if (cfg.agent_user && !cfg.state_dir.empty()) {
            awp::core::identity::check_layout(*cfg.agent_user, "OPENCLAW_STATE_DIR", cfg.state_dir,
                                              {});
        }
    } catch (const awp::core::config_error& e) {
        std::cerr << "awp-inbox-dispatcher: " << e.what() << "\n";
        return daemon::kExitConfig;
    }
    boost::asio::io_context ioc(1);
    awp::dispatcher::service svc(ioc, cfg);
    return daemon::run(ioc, svc, cfg.common.drain_timeout());
}
