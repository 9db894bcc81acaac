// awp-embedder's service: LISTEN on awp_embed (plus the safety poll), lease knowledge items,
// extract and chunk their text, embed on a thread pool, and mark each item indexed with its
// chunks in one transaction (or failed, with back-off); serves POST /embed and GET /healthz.
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
#include "awp/core/notify.hpp"
#include "awp/core/pg.hpp"
#include "awp/embed/embedder.hpp"
#include "awp/http/server.hpp"
#include "config.hpp"

namespace awp::embedder {

namespace net = boost::asio;

/// Counters for /healthz, logs and tests.
struct stats {
    std::uint64_t leased = 0;
    std::uint64_t indexed = 0;
    std::uint64_t chunks = 0;
    std::uint64_t failed = 0;
    std::uint64_t stale = 0;  // edited or re-leased while being indexed: left pending
    std::uint64_t embed_requests = 0;
};

/// One leased item as lease_knowledge_items_for_indexing returned it.
struct leased_item {
    std::string id;
    std::string kind;
    std::string title;
    std::optional<std::string> content;
    std::optional<std::string> plain_text;
    std::vector<std::string> tags;
    std::string source_hash;
    std::string lease_token;
    int attempts = 0;
};

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

    net::awaitable<void> indexing_loop();
    /// Leases one batch and indexes it; returns the items leased, or -1 when the database failed.
    net::awaitable<int> index_batch();
    net::awaitable<void> index_item(leased_item item);
    net::awaitable<void> mark_failed(leased_item item, std::string reason);
    net::awaitable<void> sleep_for(std::chrono::milliseconds d);

    net::io_context& ioc_;
    config cfg_;
    std::shared_ptr<embed::embedder> model_;
    net::thread_pool pool_;
    std::unique_ptr<http::server> server_;
    std::unique_ptr<core::listener> listener_;
    core::pg::session db_;
    std::string instance_;
    std::optional<std::string> gateway_id_;  // GATEWAY_ID resolved at the first lease

    core::event wake_;
    core::event indexing_done_;
    core::event listener_done_;
    core::event server_done_;
    bool stopping_ = false;
    bool ready_ = false;
    bool db_ok_ = false;
    stats stats_;
};

}  // namespace awp::embedder
