// awp-scheduler: placeholder until its issue (#5) lands: connects, reports ready, stops on SIGTERM.
#include <boost/asio/io_context.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/placeholder_service.hpp"

int main(int argc, char** argv) {
    namespace daemon = awp::core::daemon;
    daemon::common_config common;
    daemon::cli cli("awp-scheduler",
                    "awp-scheduler (placeholder: it only connects to Postgres, reports ready and "
                    "stops cleanly; its real work lands with issue #5)");
    cli.add_common(common);
    if (auto code = cli.parse(argc, argv, &common)) return *code;
    boost::asio::io_context ioc;
    daemon::placeholder_service svc(ioc, common.database_url);
    return daemon::run(ioc, svc, common.drain_timeout());
}
