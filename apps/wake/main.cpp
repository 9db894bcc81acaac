// awp-wake: the wake relay. One LISTEN on awp_wake per database; each gateway host's daemons
// hold one stream (GET /v1/wake, the gateway's own login) and get their gateway's wake-ups.
#include <boost/asio/io_context.hpp>

#include "awp/core/daemon.hpp"
#include "relay.hpp"

int main(int argc, char** argv) {
    namespace daemon = awp::core::daemon;
    awp::wake::config cfg;
    daemon::cli cli("awp-wake",
                    "awp-wake: one LISTEN per database for the wake-ups of every gateway, handed "
                    "to each gateway host over its own stream (GET /v1/wake)");
    awp::wake::add_options(cli, cfg);
    if (auto code = cli.parse(argc, argv, &cfg.common)) return *code;
    boost::asio::io_context ioc(1);
    awp::wake::relay svc(ioc, cfg);
    return daemon::run(ioc, svc, cfg.common.drain_timeout());
}
