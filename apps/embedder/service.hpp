// awp-embedder's service: the indexing queue (indexer.hpp: lease knowledge items, chunk, embed on
// a thread pool, mark indexed or failed) driven by the shared lease driver (core::queue_driver:
// LISTEN on awp_embed + the safety poll, drain on stop); serves POST /embed and GET /healthz.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/event.hpp"
#include "awp/core/lease.hpp"
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"
#include "awp/embed/embedder.hpp"
#include "awp/http/server.hpp"
#include "config.hpp"
#include "indexer.hpp"

namespace awp::embedder {

namespace net = boost::asio;

class service : public core::daemon::service {
public:
    service(net::io_context& ioc, config cfg, std::shared_ptr<embed::embedder> model);
    ~service() override;

    /// Binds the HTTP server; throws core::config_error when the address is unusable.
    void listen();
    unsigned short port() const;

    net::awaitable<void> run() override;
    void request_stop() override;

    const stats& counters() const noexcept { return stats_; }

private:
    net::awaitable<http::response> embed_handler(http::request req);
    net::awaitable<http::response> healthz_handler(http::request req);
    net::awaitable<std::vector<embed::embedding_result>> infer(std::vector<std::string> texts);

    net::awaitable<void> sleep_for(std::chrono::milliseconds d);

    net::io_context& ioc_;
    config cfg_;
    std::shared_ptr<embed::embedder> model_;
    net::thread_pool pool_;
    std::unique_ptr<http::server> server_;
    stats stats_;
    index_queue queue_;
    std::unique_ptr<core::queue_driver<index_queue>> driver_;

    core::event wake_;  // without indexing: the stop
    core::event server_done_;
    bool stopping_ = false;
    bool ready_ = false;
};

}  // namespace awp::embedder
