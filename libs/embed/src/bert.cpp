// The BERT encoder forward pass: packed variable-length batches, cblas_sgemm, a fork-join pool.
#include <cblas.h>
#include <awp/embed/bert.hpp>
#include <awp/embed/error.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <string>

#include "math.hpp"
#include "thread_pool.hpp"

namespace awp::embed {

namespace {

std::size_t sz(int v) { return static_cast<std::size_t>(v); }

void check_size(const std::vector<float>& v, std::size_t expected, const std::string& what) {
    if (v.size() != expected)
        throw error("BERT weights: " + what + " has " + std::to_string(v.size()) +
                    " values, expected " + std::to_string(expected));
}

// out[n, out_f] = in[n, in_f] * weight[out_f, in_f]^T + bias
void linear(const float* in, int n, const std::vector<float>& weight,
            const std::vector<float>& bias, int out_f, int in_f, float* out) {
    for (int r = 0; r < n; ++r) std::copy(bias.begin(), bias.end(), out + sz(r) * sz(out_f));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_f, in_f, 1.0F, in, in_f,
                weight.data(), in_f, 1.0F, out, out_f);
}

// The element-wise kernels get an AVX2 clone beside the baseline (SSE2) one, picked at load
// time; -ffp-contract=off (ISO C++ mode) keeps both clones' results identical. Not under the
// sanitizers: the clones' ifunc resolver runs before TSan's runtime exists and crashes.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define AWP_EMBED_KERNEL
#else
#define AWP_EMBED_KERNEL [[gnu::target_clones("avx2", "default")]]
#endif

AWP_EMBED_KERNEL void layer_norm(float* x, int n, const float* gain, const float* bias, float eps) {
    float mean = 0.0F;
    for (int i = 0; i < n; ++i) mean += x[i];
    mean /= static_cast<float>(n);
    float var = 0.0F;
    for (int i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
    var /= static_cast<float>(n);
    const float inv = 1.0F / std::sqrt(var + eps);
    for (int i = 0; i < n; ++i) x[i] = (x[i] - mean) * inv * gain[i] + bias[i];
}

void layer_norm(float* x, int n, const std::vector<float>& gain, const std::vector<float>& bias,
                float eps) {
    layer_norm(x, n, gain.data(), bias.data(), eps);
}

AWP_EMBED_KERNEL void softmax(float* x, int n) {
    float max = x[0];
    for (int i = 1; i < n; ++i) max = std::max(max, x[i]);
    // exp in a loop of its own (no reduction in it), so it vectorises.
    for (int i = 0; i < n; ++i) x[i] = detail::fast_exp(x[i] - max);
    float sum = 0.0F;
    for (int i = 0; i < n; ++i) sum += x[i];
    const float inv = 1.0F / sum;
    for (int i = 0; i < n; ++i) x[i] *= inv;
}

AWP_EMBED_KERNEL void gelu(float* x, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) x[i] = detail::gelu(x[i]);
}

AWP_EMBED_KERNEL void add(float* x, const float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
}

#undef AWP_EMBED_KERNEL

}  // namespace

void bert_weights::validate(const bert_config& c) const {
    const auto h = sz(c.hidden_size);
    const auto inter = sz(c.intermediate_size);
    check_size(word_embeddings, sz(c.vocab_size) * h, "word_embeddings");
    check_size(position_embeddings, sz(c.max_position_embeddings) * h, "position_embeddings");
    check_size(token_type_embeddings, sz(c.type_vocab_size) * h, "token_type_embeddings");
    check_size(embedding_norm_gain, h, "embeddings LayerNorm weight");
    check_size(embedding_norm_bias, h, "embeddings LayerNorm bias");
    if (layers.size() != sz(c.num_layers))
        throw error("BERT weights: " + std::to_string(layers.size()) + " layers, config has " +
                    std::to_string(c.num_layers));
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const auto& l = layers[i];
        const std::string p = "layer " + std::to_string(i) + " ";
        check_size(l.qkv_weight, 3 * h * h, p + "query/key/value weight");
        check_size(l.qkv_bias, 3 * h, p + "query/key/value bias");
        check_size(l.attention_out_weight, h * h, p + "attention output weight");
        check_size(l.attention_out_bias, h, p + "attention output bias");
        check_size(l.attention_norm_gain, h, p + "attention LayerNorm weight");
        check_size(l.attention_norm_bias, h, p + "attention LayerNorm bias");
        check_size(l.ffn_in_weight, inter * h, p + "intermediate weight");
        check_size(l.ffn_in_bias, inter, p + "intermediate bias");
        check_size(l.ffn_out_weight, h * inter, p + "output weight");
        check_size(l.ffn_out_bias, h, p + "output bias");
        check_size(l.output_norm_gain, h, p + "output LayerNorm weight");
        check_size(l.output_norm_bias, h, p + "output LayerNorm bias");
    }
}

std::size_t bert_weights::parameter_count() const {
    std::size_t n = word_embeddings.size() + position_embeddings.size() +
                    token_type_embeddings.size() + embedding_norm_gain.size() +
                    embedding_norm_bias.size();
    for (const auto& l : layers) {
        for (const auto* v :
             {&l.qkv_weight, &l.qkv_bias, &l.attention_out_weight, &l.attention_out_bias,
              &l.attention_norm_gain, &l.attention_norm_bias, &l.ffn_in_weight, &l.ffn_in_bias,
              &l.ffn_out_weight, &l.ffn_out_bias, &l.output_norm_gain, &l.output_norm_bias})
            n += v->size();
    }
    return n;
}

bert_weights random_bert_weights(const bert_config& c, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-0.08F, 0.08F);  // sd ~0.046
    const auto random = [&](std::size_t n, float offset = 0.0F) {
        std::vector<float> v(n);
        for (auto& x : v) x = offset + uniform(rng);
        return v;
    };
    const auto h = sz(c.hidden_size);
    const auto inter = sz(c.intermediate_size);
    bert_weights w;
    w.word_embeddings = random(sz(c.vocab_size) * h);
    w.position_embeddings = random(sz(c.max_position_embeddings) * h);
    w.token_type_embeddings = random(sz(c.type_vocab_size) * h);
    w.embedding_norm_gain = random(h, 1.0F);
    w.embedding_norm_bias = random(h);
    for (int i = 0; i < c.num_layers; ++i) {
        bert_layer_weights l;
        l.qkv_weight = random(3 * h * h);
        l.qkv_bias = random(3 * h);
        l.attention_out_weight = random(h * h);
        l.attention_out_bias = random(h);
        l.attention_norm_gain = random(h, 1.0F);
        l.attention_norm_bias = random(h);
        l.ffn_in_weight = random(inter * h);
        l.ffn_in_bias = random(inter);
        l.ffn_out_weight = random(h * inter);
        l.ffn_out_bias = random(h);
        l.output_norm_gain = random(h, 1.0F);
        l.output_norm_bias = random(h);
        w.layers.push_back(std::move(l));
    }
    return w;
}

double bert_flops(const bert_config& c, int tokens) {
    const double h = c.hidden_size;
    const double inter = c.intermediate_size;
    const double l = tokens;
    // Per token per layer: Q, K, V, O projections 8H², FFN 4HI, scores and weighted sum 4LH.
    return l * c.num_layers * (8.0 * h * h + 4.0 * h * inter + 4.0 * l * h);
}

struct bert_encoder::impl {
    bert_config config;
    bert_weights weights;
    detail::thread_pool pool;
    std::mutex mutex;
    // Scratch, reused between calls (guarded by mutex).
    std::vector<float> x, qkv, context, tmp, ffn;
    std::vector<std::vector<float>> scores;  // one per worker
    std::vector<int> row_ids, row_positions, seq_offsets, seq_lengths;

    impl(bert_config c, bert_weights w, int threads)
        : config(c), weights(std::move(w)), pool(threads) {}

    void run(std::span<const std::vector<int>> batch);
    void dense_rows(int layer, int r0, int r1);
    void attention(int layer, int seq, int head, int worker);
};

void bert_encoder::impl::dense_rows(int layer, int r0, int r1) {
    const int h = config.hidden_size;
    const int inter = config.intermediate_size;
    const int n = r1 - r0;
    float* xr = x.data() + sz(r0) * sz(h);
    if (layer < 0) {  // embeddings
        for (int r = r0; r < r1; ++r) {
            float* row = x.data() + sz(r) * sz(h);
            const float* word = weights.word_embeddings.data() + sz(row_ids[sz(r)]) * sz(h);
            const float* pos =
                weights.position_embeddings.data() + sz(row_positions[sz(r)]) * sz(h);
            const float* type = weights.token_type_embeddings.data();
            for (int i = 0; i < h; ++i) row[i] = word[i] + pos[i] + type[i];
            layer_norm(row, h, weights.embedding_norm_gain, weights.embedding_norm_bias,
                       config.layer_norm_eps);
        }
    } else {
        const auto& l = weights.layers[sz(layer)];
        float* tr = tmp.data() + sz(r0) * sz(h);
        float* fr = ffn.data() + sz(r0) * sz(inter);
        linear(context.data() + sz(r0) * sz(h), n, l.attention_out_weight, l.attention_out_bias, h,
               h, tr);
        add(tr, xr, sz(n) * sz(h));
        for (int r = 0; r < n; ++r)
            layer_norm(tr + sz(r) * sz(h), h, l.attention_norm_gain, l.attention_norm_bias,
                       config.layer_norm_eps);
        linear(tr, n, l.ffn_in_weight, l.ffn_in_bias, inter, h, fr);
        gelu(fr, sz(n) * sz(inter));
        linear(fr, n, l.ffn_out_weight, l.ffn_out_bias, h, inter, xr);
        add(xr, tr, sz(n) * sz(h));
        for (int r = 0; r < n; ++r)
            layer_norm(xr + sz(r) * sz(h), h, l.output_norm_gain, l.output_norm_bias,
                       config.layer_norm_eps);
    }
    // The next layer's fused query/key/value projection of the same rows.
    if (layer + 1 < config.num_layers) {
        const auto& next = weights.layers[sz(layer + 1)];
        linear(xr, n, next.qkv_weight, next.qkv_bias, 3 * h, h, qkv.data() + sz(r0) * 3 * sz(h));
    }
}

void bert_encoder::impl::attention(int layer, int seq, int head, int worker) {
    (void)layer;
    const int h = config.hidden_size;
    const int d = h / config.num_heads;
    const int len = seq_lengths[sz(seq)];
    const int start = seq_offsets[sz(seq)];
    const float* q = qkv.data() + sz(start) * 3 * sz(h) + sz(head) * sz(d);
    const float* k = q + h;
    const float* v = q + 2 * h;
    auto& s = scores[sz(worker)];
    s.resize(sz(len) * sz(len));
    const float scale = 1.0F / std::sqrt(static_cast<float>(d));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, d, scale, q, 3 * h, k, 3 * h,
                0.0F, s.data(), len);
    for (int r = 0; r < len; ++r) softmax(s.data() + sz(r) * sz(len), len);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, len, d, len, 1.0F, s.data(), len, v,
                3 * h, 0.0F, context.data() + sz(start) * sz(h) + sz(head) * sz(d), h);
}

void bert_encoder::impl::run(std::span<const std::vector<int>> batch) {
    const int h = config.hidden_size;
    int total = 0;
    seq_offsets.clear();
    seq_lengths.clear();
    row_ids.clear();
    row_positions.clear();
    for (std::size_t b = 0; b < batch.size(); ++b) {
        const auto& ids = batch[b];
        if (ids.empty()) throw error("BERT encoder: sequence " + std::to_string(b) + " is empty");
        if (ids.size() > sz(config.max_position_embeddings))
            throw error("BERT encoder: sequence " + std::to_string(b) + " has " +
                        std::to_string(ids.size()) + " tokens, max_position_embeddings is " +
                        std::to_string(config.max_position_embeddings));
        seq_offsets.push_back(total);
        seq_lengths.push_back(static_cast<int>(ids.size()));
        for (std::size_t p = 0; p < ids.size(); ++p) {
            if (ids[p] < 0 || ids[p] >= config.vocab_size)
                throw error("BERT encoder: token id " + std::to_string(ids[p]) +
                            " outside the vocabulary of " + std::to_string(config.vocab_size));
            row_ids.push_back(ids[p]);
            row_positions.push_back(static_cast<int>(p));
        }
        total += static_cast<int>(ids.size());
    }
    if (total == 0) return;
    x.resize(sz(total) * sz(h));
    qkv.resize(sz(total) * 3 * sz(h));
    context.resize(sz(total) * sz(h));
    tmp.resize(sz(total) * sz(h));
    ffn.resize(sz(total) * sz(config.intermediate_size));
    scores.resize(sz(pool.size()));

    // Row blocks: at least one per thread, and up to four per thread while blocks keep >= 256
    // rows (GEMMs that large run near peak). Several blocks per thread let the dynamic schedule
    // even out a thread that the OS pauses on a busy machine.
    constexpr int kMinChunkRows = 256;
    const int chunks =
        std::min(total, std::clamp(total / kMinChunkRows, pool.size(), 4 * pool.size()));
    const int per_chunk = (total + chunks - 1) / chunks;
    const auto rows = [&](int layer) {
        pool.run(chunks, [&](int chunk, int) {
            const int r0 = chunk * per_chunk;
            const int r1 = std::min(total, r0 + per_chunk);
            if (r0 < r1) dense_rows(layer, r0, r1);
        });
    };
    const int heads = config.num_heads;
    const int sequences = static_cast<int>(batch.size());
    rows(-1);
    for (int layer = 0; layer < config.num_layers; ++layer) {
        pool.run(sequences * heads, [&](int task, int worker) {
            attention(layer, task / heads, task % heads, worker);
        });
        rows(layer);
    }
}

bert_encoder::bert_encoder(bert_config config, bert_weights weights, int threads) {
    if (config.hidden_size <= 0 || config.num_heads <= 0 ||
        config.hidden_size % config.num_heads != 0)
        throw error("BERT config: hidden_size must be a positive multiple of num_attention_heads");
    if (threads < 1) throw error("BERT encoder: threads must be at least 1");
    weights.validate(config);
    // Parallelism is ours (row blocks, heads); OpenBLAS threads on top would oversubscribe.
    openblas_set_num_threads(1);
    impl_ = std::make_unique<impl>(config, std::move(weights), threads);
}

bert_encoder::~bert_encoder() = default;
bert_encoder::bert_encoder(bert_encoder&&) noexcept = default;
bert_encoder& bert_encoder::operator=(bert_encoder&&) noexcept = default;

const bert_config& bert_encoder::config() const { return impl_->config; }

int bert_encoder::threads() const { return impl_->pool.size(); }

std::vector<std::vector<float>> bert_encoder::forward(
    std::span<const std::vector<int>> batch) const {
    std::lock_guard lock(impl_->mutex);
    impl_->run(batch);
    const auto h = sz(impl_->config.hidden_size);
    std::vector<std::vector<float>> out;
    out.reserve(batch.size());
    for (std::size_t b = 0; b < batch.size(); ++b) {
        const auto* begin = impl_->x.data() + sz(impl_->seq_offsets[b]) * h;
        out.emplace_back(begin, begin + sz(impl_->seq_lengths[b]) * h);
    }
    return out;
}

std::vector<std::vector<float>> bert_encoder::embed(std::span<const std::vector<int>> batch,
                                                    pooling_mode pooling) const {
    std::lock_guard lock(impl_->mutex);
    impl_->run(batch);
    const auto h = sz(impl_->config.hidden_size);
    std::vector<std::vector<float>> out;
    out.reserve(batch.size());
    for (std::size_t b = 0; b < batch.size(); ++b) {
        const float* rows = impl_->x.data() + sz(impl_->seq_offsets[b]) * h;
        const auto len = sz(impl_->seq_lengths[b]);
        std::vector<double> sum(h, 0.0);
        const std::size_t used = pooling == pooling_mode::cls ? 1 : len;
        for (std::size_t r = 0; r < used; ++r)
            for (std::size_t i = 0; i < h; ++i) sum[i] += rows[r * h + i];
        double norm = 0.0;
        for (double& v : sum) {
            v /= static_cast<double>(used);
            norm += v * v;
        }
        norm = std::max(std::sqrt(norm), 1e-12);  // torch.nn.functional.normalize's eps
        std::vector<float> vec(h);
        for (std::size_t i = 0; i < h; ++i) vec[i] = static_cast<float>(sum[i] / norm);
        out.push_back(std::move(vec));
    }
    return out;
}

}  // namespace awp::embed
