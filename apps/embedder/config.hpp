// awp-embedder's configuration: every option has an environment name; checked once.
#pragma once

#include <chrono>
#include <string>

#include "awp/core/daemon.hpp"

namespace awp::embedder {

struct config {
    core::daemon::common_config common;
    std::string bind = "127.0.0.1";  // EMBEDDER_BIND
    int port = 8088;                 // EMBEDDER_PORT (0: any free port, logged)
    std::string model_dir;           // EMBEDDING_MODEL_DIR; empty: the lexical fallback
    int threads = 0;                 // EMBEDDER_THREADS; 0: hardware threads, at most 4
    std::string token;               // EMBEDDER_TOKEN: bearer token for POST /embed (secret)
    std::string gateway;             // GATEWAY_ID: index only this gateway's tenant
    bool indexing = true;            // EMBEDDER_INDEXING: false serves HTTP only
    int batch_size = 8;              // EMBEDDER_BATCH_SIZE: items per lease
    int embed_batch = 32;            // EMBEDDER_EMBED_BATCH: texts per inference call
    int lease_seconds = 300;         // EMBEDDER_LEASE_SECONDS
    int chunk_chars = 3500;          // EMBEDDER_CHUNK_CHARS
    int chunk_overlap = 500;         // EMBEDDER_CHUNK_OVERLAP
    int max_chunks = 500;            // EMBEDDER_MAX_CHUNKS
    int max_body = 256 * 1024;       // EMBEDDER_MAX_BODY: bytes of a POST /embed body
    int inference_delay_ms = 0;      // EMBEDDER_INFERENCE_DELAY_MS: tests only

    int effective_threads() const;
    std::chrono::milliseconds inference_delay() const {
        return std::chrono::milliseconds(inference_delay_ms);
    }
    /// Throws core::config_error when options contradict each other.
    void validate() const;
};

/// Registers the embedder's options (and the common ones) on the command line.
void add_options(core::daemon::cli& cli, config& c);

}  // namespace awp::embedder
