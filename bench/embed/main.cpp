// awp-bench-embed: sentences/s of a MiniLM-shaped model at 32 and 128 tokens, against sgemm's rate.
#include <cblas.h>
#include <awp/embed/bert.hpp>
#include <awp/embed/embedder.hpp>
#include <awp/embed/safetensors.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <time.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
namespace embed = awp::embed;
using clock_type = std::chrono::steady_clock;

constexpr int kFirstWordId = 1000;  // synthetic vocabulary: specials, then "w1000", "w1001", ...

double seconds_since(clock_type::time_point start) {
    return std::chrono::duration<double>(clock_type::now() - start).count();
}

// CPU time of the whole process: unlike wall time it does not grow while other programs run.
double cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct rates {
    double wall = 0.0;  // GFLOP per second
    double cpu = 0.0;   // GFLOP per CPU-second (what one busy core delivers)
};

double rss_mib() {
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
        if (key == "VmRSS:") {
            long kib = 0;
            in >> kib;
            return static_cast<double>(kib) / 1024.0;
        }
        in.ignore(1 << 20, '\n');
    }
    return 0.0;
}

// Best GFLOP/s of C[m,n] += A[m,k] B[n,k]^T, the encoder's GEMM shape, over `threads` threads:
// either row blocks on our threads (what the encoder does) or OpenBLAS's own threading.
rates sgemm_gflops(int threads, bool openblas_threads) {
    const int m = 1024;
    const int n = 1536;
    const int k = 384;
    std::vector<float> a(static_cast<std::size_t>(m) * k, 0.01F);
    std::vector<float> b(static_cast<std::size_t>(n) * k, 0.02F);
    std::vector<float> c(static_cast<std::size_t>(m) * n, 0.0F);
    const auto run = [&] {
        if (openblas_threads) {
            openblas_set_num_threads(threads);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0F, a.data(), k,
                        b.data(), k, 1.0F, c.data(), n);
            return;
        }
        openblas_set_num_threads(1);
        std::vector<std::thread> pool;
        const int rows = (m + threads - 1) / threads;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                const int r0 = t * rows;
                const int r1 = std::min(m, r0 + rows);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, n, k, 1.0F,
                            a.data() + static_cast<std::size_t>(r0) * k, k, b.data(), k, 1.0F,
                            c.data() + static_cast<std::size_t>(r0) * n, n);
            });
        }
        for (auto& t : pool) t.join();
    };
    run();
    double best = 1e30;
    double best_cpu = 1e30;
    for (int rep = 0; rep < 20; ++rep) {
        const auto start = clock_type::now();
        const double cpu = cpu_seconds();
        run();
        best = std::min(best, seconds_since(start));
        best_cpu = std::min(best_cpu, cpu_seconds() - cpu);
    }
    openblas_set_num_threads(1);
    const double gflop = 2.0 * m * n * k / 1e9;
    return {gflop / best, gflop / best_cpu};
}

void write_text(const fs::path& file, const std::string& text) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

// A MiniLM-L6-shaped model folder with random fp32 weights and a synthetic vocabulary.
void write_model(const fs::path& dir, const embed::bert_config& c) {
    fs::create_directories(dir / "1_Pooling");
    const auto w = embed::random_bert_weights(c, 42);
    std::vector<embed::tensor_to_write> t;
    const std::int64_t h = c.hidden_size;
    const std::int64_t inter = c.intermediate_size;
    const auto add = [&](std::string name, std::vector<std::int64_t> shape, const float* data) {
        std::size_t count = 1;
        for (auto d : shape) count *= static_cast<std::size_t>(d);
        t.push_back({std::move(name), std::move(shape), std::span<const float>(data, count)});
    };
    add("embeddings.word_embeddings.weight", {c.vocab_size, h}, w.word_embeddings.data());
    add("embeddings.position_embeddings.weight", {c.max_position_embeddings, h},
        w.position_embeddings.data());
    add("embeddings.token_type_embeddings.weight", {c.type_vocab_size, h},
        w.token_type_embeddings.data());
    add("embeddings.LayerNorm.weight", {h}, w.embedding_norm_gain.data());
    add("embeddings.LayerNorm.bias", {h}, w.embedding_norm_bias.data());
    for (int i = 0; i < c.num_layers; ++i) {
        const auto& l = w.layers[static_cast<std::size_t>(i)];
        const std::string p = "encoder.layer." + std::to_string(i) + ".";
        const char* parts[] = {"query", "key", "value"};
        for (std::size_t q = 0; q < 3; ++q) {
            add(p + "attention.self." + parts[q] + ".weight", {h, h},
                l.qkv_weight.data() + q * static_cast<std::size_t>(h * h));
            add(p + "attention.self." + parts[q] + ".bias", {h},
                l.qkv_bias.data() + q * static_cast<std::size_t>(h));
        }
        add(p + "attention.output.dense.weight", {h, h}, l.attention_out_weight.data());
        add(p + "attention.output.dense.bias", {h}, l.attention_out_bias.data());
        add(p + "attention.output.LayerNorm.weight", {h}, l.attention_norm_gain.data());
        add(p + "attention.output.LayerNorm.bias", {h}, l.attention_norm_bias.data());
        add(p + "intermediate.dense.weight", {inter, h}, l.ffn_in_weight.data());
        add(p + "intermediate.dense.bias", {inter}, l.ffn_in_bias.data());
        add(p + "output.dense.weight", {h, inter}, l.ffn_out_weight.data());
        add(p + "output.dense.bias", {h}, l.ffn_out_bias.data());
        add(p + "output.LayerNorm.weight", {h}, l.output_norm_gain.data());
        add(p + "output.LayerNorm.bias", {h}, l.output_norm_bias.data());
    }
    embed::write_safetensors(dir / "model.safetensors", t, embed::stored_type::f32);
    write_text(
        dir / "config.json",
        "{\"_name_or_path\": \"awp-bench/minilm-l6-shape-random\", \"model_type\": "
        "\"bert\", \"vocab_size\": " +
            std::to_string(c.vocab_size) + ", \"hidden_size\": " + std::to_string(c.hidden_size) +
            ", \"num_hidden_layers\": " + std::to_string(c.num_layers) +
            ", \"num_attention_heads\": " + std::to_string(c.num_heads) +
            ", \"intermediate_size\": " + std::to_string(c.intermediate_size) +
            ", \"max_position_embeddings\": " + std::to_string(c.max_position_embeddings) +
            ", \"type_vocab_size\": 2, \"layer_norm_eps\": 1e-12, \"hidden_act\": \"gelu\"}");
    write_text(dir / "modules.json",
               "[{\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": "
               "\"sentence_transformers.models.Pooling\"}]");
    write_text(dir / "1_Pooling/config.json",
               "{\"word_embedding_dimension\": 384, \"pooling_mode_mean_tokens\": true}");
    std::string vocab;
    for (int i = 0; i < c.vocab_size; ++i) {
        switch (i) {
            case 0:
                vocab += "[PAD]\n";
                break;
            case 100:
                vocab += "[UNK]\n";
                break;
            case 101:
                vocab += "[CLS]\n";
                break;
            case 102:
                vocab += "[SEP]\n";
                break;
            case 103:
                vocab += "[MASK]\n";
                break;
            default:
                vocab += (i < kFirstWordId ? "[unused" : "w") + std::to_string(i) + "\n";
        }
    }
    write_text(dir / "vocab.txt", vocab);
}

// Texts that tokenize to exactly `tokens` ids ([CLS], tokens - 2 words, [SEP]).
std::vector<std::string> texts(int count, int tokens, std::mt19937& rng) {
    std::uniform_int_distribution<int> word(kFirstWordId, 30000);
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
        std::string s;
        for (int k = 0; k < tokens - 2; ++k) s += "w" + std::to_string(word(rng)) + " ";
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    int threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
    fs::path model_dir;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--threads" && i + 1 < argc) {
            threads = std::max(1, std::atoi(argv[++i]));
        } else if (arg == "--model" && i + 1 < argc) {
            model_dir = argv[++i];
        } else {
            std::fprintf(stderr,
                         "usage: awp-bench-embed [--threads N] [--model DIR]\n"
                         "  Without --model, a MiniLM-L6-shaped random model is written to a "
                         "temp folder.\n");
            return 2;
        }
    }
    std::printf("awp-bench-embed: %d threads, OpenBLAS %s\n", threads, openblas_get_config());

    double load[3] = {0, 0, 0};
    if (::getloadavg(load, 3) > 0 && load[0] > std::thread::hardware_concurrency() - 0.5) {
        std::printf(
            "note: load average %.1f on %u cores: other programs share the CPUs, so wall "
            "figures understate; the CPU-time columns do not depend on the load\n",
            load[0], std::thread::hardware_concurrency());
    }
    const rates ours = sgemm_gflops(threads, false);
    const rates blas = sgemm_gflops(threads, true);
    const double rate = std::max(ours.wall, blas.wall);
    const double rate_cpu = std::max(ours.cpu, blas.cpu);
    std::printf(
        "sgemm 1024x1536x384: %.1f GFLOP/s (row blocks on %d threads), %.1f GFLOP/s "
        "(OpenBLAS threads); limit uses %.1f GFLOP/s, and %.1f GFLOP per CPU-second\n",
        ours.wall, threads, blas.wall, rate, rate_cpu);

    embed::bert_config config;  // MiniLM-L6: 6 layers, 384 hidden, 12 heads, 1536 FFN
    fs::path temp;
    if (model_dir.empty()) {
        temp = fs::temp_directory_path() / ("awp-bench-embed-" + std::to_string(::getpid()));
        const auto start = clock_type::now();
        write_model(temp, config);
        std::printf("wrote random MiniLM-shaped model (%.1f MB fp32) in %.2f s\n",
                    static_cast<double>(fs::file_size(temp / "model.safetensors")) / 1e6,
                    seconds_since(start));
        model_dir = temp;
    }
    // Writing the model left freed heap pages resident; give them back so the delta is the model.
    ::malloc_trim(0);
    const double rss_before = rss_mib();
    auto start = clock_type::now();
    const auto model = embed::load_model(model_dir, threads);
    const double load_seconds = seconds_since(start);
    const double rss_after = rss_mib();
    if (!temp.empty()) fs::remove_all(temp);
    std::printf("loaded %s in %.2f s: RSS %.1f MB -> %.1f MB (+%.1f MB for the model)\n",
                std::string(model->model_name()).c_str(), load_seconds, rss_before, rss_after,
                rss_after - rss_before);

    std::mt19937 rng(7);
    std::printf("\n%6s %5s %9s %11s %14s %12s %8s %11s %9s\n", "tokens", "batch", "ms/batch",
                "sentences/s", "GFLOP/sentence", "limit sent/s", "% limit", "CPU ms/batch",
                "% CPU");
    for (const auto& [tokens, batch] : {std::pair{32, 32}, std::pair{128, 8}}) {
        if (tokens > model->max_tokens()) continue;
        const auto input = texts(batch, tokens, rng);
        model->embed_batch(input);  // warm-up: scratch buffers, page faults
        double best = 1e30;
        double best_cpu = 1e30;
        const auto until = clock_type::now() + std::chrono::seconds(4);
        for (int rep = 0; rep < 3 || clock_type::now() < until; ++rep) {
            start = clock_type::now();
            const double cpu = cpu_seconds();
            const auto out = model->embed_batch(input);
            best = std::min(best, seconds_since(start));
            best_cpu = std::min(best_cpu, cpu_seconds() - cpu);
            if (out.size() != input.size() || out[0].token_count != tokens) {
                std::fprintf(stderr, "unexpected token count %d\n", out[0].token_count);
                return 1;
            }
        }
        const double per_second = batch / best;
        const double flops = embed::bert_flops(config, tokens);
        const double limit = rate * 1e9 / flops;
        // % CPU: GFLOP per CPU-second of the encoder against sgemm's, i.e. the efficiency the
        // code reaches on the cores it gets, whatever else runs.
        const double cpu_efficiency = flops * batch / best_cpu / 1e9 / rate_cpu;
        std::printf("%6d %5d %9.1f %11.1f %14.3f %12.1f %7.1f%% %11.1f %8.1f%%\n", tokens, batch,
                    best * 1e3, per_second, flops / 1e9, limit, 100.0 * per_second / limit,
                    best_cpu * 1e3, 100.0 * cpu_efficiency);
    }
    return 0;
}
