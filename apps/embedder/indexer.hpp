// The embedder's indexing queue, as core::queue_driver drives it: knowledge items leased in
// batches (lease_knowledge_items_for_indexing), their text extracted and chunked, embedded off the
// io thread, and each item marked indexed with its chunks in one transaction
// (mark_knowledge_item_indexed) or failed with a back-off (mark_knowledge_item_failed).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "awp/core/lease.hpp"
#include "awp/core/pg.hpp"
#include "awp/embed/embedder.hpp"
#include "config.hpp"

namespace awp::embedder {

namespace net = boost::asio;

/// Knowledge embeddings are vector(384) (sql/0007).
constexpr int kDimensions = 384;

/// pgvector's text form, which is also a JSON array: "[0.1,-0.2,...]".
std::string vector_literal(const std::vector<float>& v);

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

/// What indexing one item produced: its vectors, or why it failed. finish() may turn a refused
/// store into a failure (hence mutable: a retried finish() goes on from there).
struct index_outcome {
    mutable bool indexed = false;
    mutable bool stale = false;  // edited or re-leased meanwhile: the vectors were discarded
    mutable std::string failure;
    std::string model, item_vector, chunks;  // pgvector literal; the chunks as JSON
    std::size_t chunk_count = 0;
    std::chrono::steady_clock::time_point started{};
};

class index_queue {
public:
    using row_type = leased_item;
    using outcome_type = index_outcome;
    /// Embeds texts off the io thread (the service's thread pool).
    using infer_fn = std::function<net::awaitable<std::vector<embed::embedding_result>>(
        std::vector<std::string>)>;

    index_queue(const config& cfg, std::string instance, infer_fn infer, stats& counters);

    net::awaitable<core::lease_batch<leased_item>> lease(std::size_t room);
    net::awaitable<index_outcome> work(leased_item& item, std::size_t slot);
    index_outcome failed(const leased_item&, std::string what) const;
    net::awaitable<void> finish(const leased_item& item, const index_outcome& out,
                                std::size_t slot);
    void settled(const leased_item& item, const index_outcome& out, core::finish_status status);

    /// The database answered the last call (for /healthz).
    bool db_ok() const noexcept { return db_ok_; }
    void set_db_ok(bool ok) noexcept { db_ok_ = ok; }

private:
    const config& cfg_;
    std::string instance_;
    infer_fn infer_;
    stats& stats_;
    core::pg::session db_;
    std::optional<std::string> gateway_id_;  // GATEWAY_ID resolved at the first lease
    bool db_ok_ = false;
};

}  // namespace awp::embedder
