// awp-command-runner: leases its gateway's agent_commands and runs each action
// (docs/command-runner.md).
#include <chrono>

#include <boost/asio/io_context.hpp>

#include "awp/core/daemon.hpp"
#include "config.hpp"
#include "service.hpp"

int main(int argc, char** argv) {
    awp::runner::runner_config cfg;
    if (auto code = awp::runner::load_config(argc, argv, cfg)) return *code;
    const std::chrono::milliseconds drain(static_cast<long>(cfg.drain_timeout_s * 1000));
    boost::asio::io_context ioc;
    awp::runner::runner_service svc(ioc, std::move(cfg));
    return awp::core::daemon::run(ioc, svc, drain);
}
