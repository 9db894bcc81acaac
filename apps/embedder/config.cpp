// Options of awp-embedder.
#include "config.hpp"

#include <algorithm>
#include <thread>

#include "awp/core/error.hpp"

namespace awp::embedder {

int config::effective_threads() const {
    if (threads > 0) return threads;
    return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1U, 4U));
}

void config::validate() const {
    if (bind.empty()) throw core::config_error("EMBEDDER_BIND must not be empty");
    if (chunk_overlap * 2 > chunk_chars) {
        throw core::config_error("EMBEDDER_CHUNK_OVERLAP (" + std::to_string(chunk_overlap) +
                                 ") must be at most half of EMBEDDER_CHUNK_CHARS (" +
                                 std::to_string(chunk_chars) + ")");
    }
    if (token.find_first_of(" \t\r\n") != std::string::npos) {
        throw core::config_error("EMBEDDER_TOKEN must not contain whitespace");
    }
}

void add_options(core::daemon::cli& cli, config& c) {
    cli.add_common(c.common);
    cli.add_wake(c.common, /*relay=*/false);  // awp_embed is not a per-gateway channel
    cli.add_gateway_key(c.common);
    auto& app = cli.app();
    app.add_option("--bind", c.bind, "Address of the HTTP server (POST /embed, GET /healthz)")
        ->envname("EMBEDDER_BIND")
        ->capture_default_str();
    app.add_option("--port", c.port, "Port of the HTTP server (0: any free port)")
        ->envname("EMBEDDER_PORT")
        ->check(CLI::Range(0, 65535))
        ->capture_default_str();
    app.add_option("--model-dir", c.model_dir,
                   "Sentence model folder (config.json, model.safetensors, vocab.txt or "
                   "tokenizer.json); empty: the lexical fallback awp-hash-384-v1")
        ->envname("EMBEDDING_MODEL_DIR");
    app.add_option("--threads", c.threads, "Encoder threads (0: hardware threads, at most 4)")
        ->envname("EMBEDDER_THREADS")
        ->check(CLI::Range(0, 256))
        ->capture_default_str();
    cli.secret(
        app.add_option("--token", c.token, "Bearer token POST /embed requires (empty: no token)")
            ->envname("EMBEDDER_TOKEN"));
    app.add_option("--gateway", c.gateway,
                   "Index only the items of this gateway's tenant (id or slug; empty: all)")
        ->envname("GATEWAY_ID");
    app.add_option("--indexing", c.indexing, "Lease and index knowledge items (false: HTTP only)")
        ->envname("EMBEDDER_INDEXING")
        ->capture_default_str();
    app.add_option("--batch-size", c.batch_size, "Knowledge items leased at a time")
        ->envname("EMBEDDER_BATCH_SIZE")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--embed-batch", c.embed_batch, "Texts per inference call")
        ->envname("EMBEDDER_EMBED_BATCH")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    app.add_option("--lease-seconds", c.lease_seconds, "Lease length of an item being indexed")
        ->envname("EMBEDDER_LEASE_SECONDS")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    app.add_option("--chunk-chars", c.chunk_chars, "Target chunk length in characters")
        ->envname("EMBEDDER_CHUNK_CHARS")
        ->check(CLI::Range(100, 100000))
        ->capture_default_str();
    app.add_option("--chunk-overlap", c.chunk_overlap, "Characters a chunk repeats of the previous")
        ->envname("EMBEDDER_CHUNK_OVERLAP")
        ->check(CLI::Range(0, 50000))
        ->capture_default_str();
    app.add_option("--max-chunks", c.max_chunks, "Chunks per item at most")
        ->envname("EMBEDDER_MAX_CHUNKS")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();
    app.add_option("--max-body", c.max_body, "Largest POST /embed body in bytes (larger: 413)")
        ->envname("EMBEDDER_MAX_BODY")
        ->check(CLI::Range(64, 16 * 1024 * 1024))
        ->capture_default_str();
    app.add_option("--inference-delay-ms", c.inference_delay_ms,
                   "Testing only: sleep this long before each inference call")
        ->envname("EMBEDDER_INFERENCE_DELAY_MS")
        ->check(CLI::Range(0, 600000))
        ->capture_default_str();
}

}  // namespace awp::embedder
