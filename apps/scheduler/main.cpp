// awp-scheduler: every minute boundary, one of the running schedulers spawns due routine items,
// escalates overdue tasks and reaps expired leases.
#include <boost/asio/io_context.hpp>

#include "awp/core/daemon.hpp"
#include "service.hpp"

int main(int argc, char** argv) {
    namespace daemon = awp::core::daemon;
    awp::scheduler::config cfg;
    daemon::cli cli("awp-scheduler",
                    "awp-scheduler: runs the routine schedule, overdue escalation and lease "
                    "reaping once per minute across all schedulers");
    awp::scheduler::add_options(cli, cfg);
    if (auto code = cli.parse(argc, argv, &cfg.common)) return *code;
    boost::asio::io_context ioc(1);
    awp::scheduler::service svc(ioc, cfg);
    return daemon::run(ioc, svc, cfg.common.drain_timeout());
}
