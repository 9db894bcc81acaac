// awp-embedder: indexes knowledge items (chunks and 384-dimensional vectors) as they become
// pending, and serves POST /embed and GET /healthz.
#include <iostream>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/embed/embedder.hpp"
#include "config.hpp"
#include "service.hpp"

int main(int argc, char** argv) {
    namespace daemon = awp::core::daemon;
    awp::embedder::config cfg;
    daemon::cli cli("awp-embedder",
                    "awp-embedder: leases knowledge items pending embedding, chunks them, embeds "
                    "them (384 dimensions) and marks them indexed; serves POST /embed and "
                    "GET /healthz");
    awp::embedder::add_options(cli, cfg);
    if (auto code = cli.parse(argc, argv, &cfg.common)) return *code;
    try {
        cfg.validate();
        std::shared_ptr<awp::embed::embedder> model;
        if (cfg.model_dir.empty()) {
            model = awp::embed::make_fallback();
        } else {
            awp::core::log::info("loading model", {{"dir", cfg.model_dir}});
            model = awp::embed::load_model(cfg.model_dir, cfg.effective_threads());
        }
        boost::asio::io_context ioc(1);
        awp::embedder::service svc(ioc, cfg, model);
        svc.listen();
        return daemon::run(ioc, svc, cfg.common.drain_timeout());
    } catch (const awp::core::config_error& e) {
        awp::core::log::error("bad configuration", {{"error", e.what()}});
        std::cerr << "awp-embedder: " << e.what() << "\n";
        return daemon::kExitConfig;
    }
}
