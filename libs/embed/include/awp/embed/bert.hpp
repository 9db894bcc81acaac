// The BERT encoder: configuration, fp32 weights, and the forward pass on OpenBLAS.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace awp::embed {

struct bert_config {
    int vocab_size = 30522;
    int hidden_size = 384;
    int num_layers = 6;
    int num_heads = 12;
    int intermediate_size = 1536;
    int max_position_embeddings = 512;
    int type_vocab_size = 2;
    float layer_norm_eps = 1e-12F;
};

enum class pooling_mode { cls, mean };

/// Weights in PyTorch layout: a Linear's weight is [out, in], row-major.
struct bert_layer_weights {
    std::vector<float> qkv_weight;  ///< [3H, H]: query, key, value stacked
    std::vector<float> qkv_bias;    ///< [3H]
    std::vector<float> attention_out_weight, attention_out_bias;  ///< [H, H], [H]
    std::vector<float> attention_norm_gain, attention_norm_bias;  ///< [H]
    std::vector<float> ffn_in_weight, ffn_in_bias;                ///< [I, H], [I]
    std::vector<float> ffn_out_weight, ffn_out_bias;              ///< [H, I], [H]
    std::vector<float> output_norm_gain, output_norm_bias;        ///< [H]
};

struct bert_weights {
    std::vector<float> word_embeddings;                           ///< [V, H]
    std::vector<float> position_embeddings;                       ///< [P, H]
    std::vector<float> token_type_embeddings;                     ///< [types, H]; row 0 is used
    std::vector<float> embedding_norm_gain, embedding_norm_bias;  ///< [H]
    std::vector<bert_layer_weights> layers;

    /// Checks every size against the config; throws awp::embed::error naming the part.
    void validate(const bert_config& config) const;
    std::size_t parameter_count() const;
};

/// Random weights of the right shapes (benchmarks, tests): N(0, 0.05²)-ish, LayerNorm gains ~1.
bert_weights random_bert_weights(const bert_config& config, std::uint64_t seed);

/// Multiply-adds of one sequence of `tokens` tokens, counted as 2 FLOP each (GEMMs only).
double bert_flops(const bert_config& config, int tokens);

/// The forward pass. Sequences of a batch are packed (no padding): dense layers run on all
/// tokens at once, attention per (sequence, head) on that sequence's own rows, which is exactly
/// what a padding mask achieves. Work is split over `threads` threads; OpenBLAS itself is set
/// to one thread, since its threading on the small per-head GEMMs costs more than it gains.
/// Calls are serialised by an internal mutex, so one encoder may be shared between threads.
class bert_encoder {
public:
    bert_encoder(bert_config config, bert_weights weights, int threads);
    ~bert_encoder();
    bert_encoder(bert_encoder&&) noexcept;
    bert_encoder& operator=(bert_encoder&&) noexcept;
    bert_encoder(const bert_encoder&) = delete;
    bert_encoder& operator=(const bert_encoder&) = delete;

    const bert_config& config() const;
    int threads() const;

    /// Last hidden states, one [L_i, H] row-major block per sequence. Ids must already hold
    /// [CLS]/[SEP]; a sequence longer than max_position_embeddings or an id outside the
    /// vocabulary throws.
    std::vector<std::vector<float>> forward(std::span<const std::vector<int>> batch) const;
    /// Pooled (CLS row or mean of the rows), then L2-normalised vectors.
    std::vector<std::vector<float>> embed(std::span<const std::vector<int>> batch,
                                          pooling_mode pooling) const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace awp::embed
