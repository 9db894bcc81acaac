// The embedding API daemons use: a loaded BERT sentence model or the named lexical fallback.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace awp::embed {

/// One text's vector. `model` travels with every vector so a store never mixes models silently.
struct embedding_result {
    std::vector<float> vector;  ///< dimensions() floats, L2 norm 1
    std::string model;          ///< e.g. "BAAI/bge-small-en-v1.5" or "awp-hash-384-v1"
    int token_count = 0;        ///< tokens fed to the model (words for the fallback)
    bool truncated = false;     ///< the text was longer than max_tokens() and was cut
};

/// A sentence embedder. embed_batch() is thread-safe: calls from several threads are serialised
/// by the implementation, since one call already keeps every configured thread busy.
class embedder {
public:
    virtual ~embedder() = default;
    virtual std::string_view model_name() const = 0;
    virtual int dimensions() const = 0;
    virtual int max_tokens() const = 0;
    /// True for the lexical fallback: callers report "degraded" and never label it as a model.
    virtual bool is_fallback() const = 0;
    virtual std::vector<embedding_result> embed_batch(std::span<const std::string> texts) = 0;
};

/// Loads a Hugging Face / sentence-transformers model folder (config.json, model.safetensors,
/// tokenizer.json or vocab.txt, modules.json / 1_Pooling/config.json). `threads` worker threads
/// run the encoder. Throws awp::embed::error naming the file at fault.
std::unique_ptr<embedder> load_model(const std::filesystem::path& dir, int threads);

inline constexpr std::string_view kFallbackModelName = "awp-hash-384-v1";
inline constexpr int kFallbackDimensions = 384;

/// The lexical fallback (signed feature hashing of words, word pairs and character 3-5-grams).
std::unique_ptr<embedder> make_fallback();

}  // namespace awp::embed
