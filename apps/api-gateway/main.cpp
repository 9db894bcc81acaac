// awp-api-gateway: the spec's HTTP endpoints (see docs/api-gateway.md).
#include <boost/asio/io_context.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "gateway.hpp"

int main(int argc, char** argv) {
    namespace daemon = awp::core::daemon;
    daemon::common_config common;
    awp::api::gateway_config cfg;
    daemon::cli cli("awp-api-gateway", "awp-api-gateway: the HTTP endpoints of the platform");
    cli.add_common(common, false);
    awp::api::add_options(cli, cfg);
    if (auto code = cli.parse(argc, argv, &common)) return *code;
    try {
        awp::api::validate(cfg);
        cfg.drain_timeout = common.drain_timeout();
        boost::asio::io_context ioc(cfg.threads);
        awp::api::gateway gw(ioc, cfg);
        gw.listen();
        return daemon::run(ioc, gw, common.drain_timeout(), cfg.threads);
    } catch (const awp::core::config_error& e) {
        awp::core::log::error("bad configuration", {{"error", e.what()}});
        return daemon::kExitConfig;
    }
}
