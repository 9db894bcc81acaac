// awp-bench-embedder: one run of the embedder's numbers on the project cluster: items/s and
// chunks/s indexed (fallback and a MiniLM-L6-shaped random model), POST /embed p50/p99, and
// search_knowledge_items p50/p99 over 100,000 items with the HNSW index beside an exact scan,
// and the idle RSS of the awp-embedder process without a model.
// Needs AWP_PG_ADMIN_DSN (source .awp/cluster.env) and the template database awp_test_template.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/log.hpp"
#include "awp/core/pg.hpp"
#include "awp/embed/bert.hpp"
#include "awp/embed/embedder.hpp"
#include "awp/embed/safetensors.hpp"
#include "awp/http/client.hpp"
#include "config.hpp"
#include "service.hpp"

namespace {

namespace fs = std::filesystem;
namespace embed = awp::embed;
namespace pg = awp::core::pg;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kFirstWordId = 1000;

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
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

struct percentiles {
    double p50 = 0, p99 = 0;
};
percentiles pct(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return {};
    auto at = [&](double q) {
        return v[std::min(v.size() - 1,
                          static_cast<std::size_t>(q * static_cast<double>(v.size())))];
    };
    return {at(0.50), at(0.99)};
}

std::string admin_dsn(const std::string& db) {
    const char* base = std::getenv("AWP_PG_ADMIN_DSN");
    if (!base) {
        std::fprintf(stderr, "AWP_PG_ADMIN_DSN is not set: set -a; . .awp/cluster.env\n");
        std::exit(2);
    }
    return std::string(base) + " dbname=" + db;
}

void fresh_database(const std::string& name) {
    auto c = pg::connection::connect(admin_dsn("postgres"));
    c.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    c.exec("CREATE DATABASE " + name + " TEMPLATE awp_test_template");
}

// Runs an embedder service in-process on its own thread until stop().
struct running_service {
    boost::asio::io_context ioc{1};
    std::unique_ptr<awp::embedder::service> svc;
    std::thread th;
    running_service(awp::embedder::config cfg, std::shared_ptr<embed::embedder> model) {
        svc = std::make_unique<awp::embedder::service>(ioc, std::move(cfg), std::move(model));
        svc->listen();
        th = std::thread([this] { awp::core::daemon::run(ioc, *svc, std::chrono::seconds(30)); });
    }
    void stop() {
        boost::asio::post(ioc, [this] { svc->request_stop(); });
        th.join();
    }
};

// Items with ~`chars` characters of prose each; returns after the insert.
void insert_items(pg::connection& c, int n, int chars, std::mt19937& rng) {
    static const char* kWords[] = {"password", "reset",     "account", "billing", "invoice",
                                   "deploy",   "cluster",   "router",  "network", "backup",
                                   "restore",  "policy",    "meeting", "agenda",  "customer",
                                   "report",   "quarterly", "budget"};
    std::uniform_int_distribution<int> w(0, 17);
    for (int i = 0; i < n; i += 100) {
        std::string sql = "INSERT INTO knowledge_items (title, plain_text, tags) VALUES ";
        pg::params p;
        for (int j = i; j < std::min(n, i + 100); ++j) {
            std::string text;
            while (static_cast<int>(text.size()) < chars) {
                for (int k = 0; k < 12; ++k) {
                    text += kWords[w(rng)];
                    text += ' ';
                }
                text.back() = '.';
                text += (text.size() % 700 < 80) ? "\n\n" : " ";
            }
            if (j > i) sql += ",";
            sql += "($" + std::to_string(p.size() + 1) + ", $" + std::to_string(p.size() + 2) +
                   ", '{bench}')";
            p.emplace_back("Item " + std::to_string(j));
            p.emplace_back(text);
        }
        c.exec(sql, p);
    }
}

void bench_indexing(const std::string& label, std::shared_ptr<embed::embedder> model, int items,
                    int chars) {
    const std::string db = "awp_bench_embedder_idx";
    fresh_database(db);
    auto c = pg::connection::connect(admin_dsn(db));
    std::mt19937 rng(7);
    c.exec("ALTER TABLE knowledge_items DISABLE TRIGGER knowledge_items_notify_insert");
    insert_items(c, items, chars, rng);
    c.exec("ALTER TABLE knowledge_items ENABLE TRIGGER knowledge_items_notify_insert");
    awp::embedder::config cfg;
    cfg.common.database_url = admin_dsn(db);
    cfg.port = 0;
    cfg.batch_size = 16;
    running_service s(cfg, std::move(model));
    const auto start = clock_type::now();
    long done = 0;
    while (done < items && seconds_since(start) < 1800) {
        std::this_thread::sleep_for(100ms);
        done = std::stol(std::string(
            c.exec("SELECT count(*) FROM knowledge_items WHERE embedding_status = 'indexed'")
                .text(0, 0)));
    }
    const double secs = seconds_since(start);
    const long chunks =
        std::stol(std::string(c.exec("SELECT count(*) FROM knowledge_chunks").text(0, 0)));
    s.stop();
    std::printf(
        "indexing %-40s %5ld items, %6ld chunks in %7.2f s: %8.1f items/s, %8.1f chunks/s\n",
        label.c_str(), done, chunks, secs, static_cast<double>(done) / secs,
        static_cast<double>(chunks) / secs);
}

void bench_http(std::shared_ptr<embed::embedder> model, const std::string& label, int n) {
    awp::embedder::config cfg;
    cfg.port = 0;
    cfg.indexing = false;
    running_service s(cfg, std::move(model));
    std::vector<double> ms;
    for (int i = 0; i < n + 20; ++i) {
        awp::http::client_request r;
        r.method = "POST";
        r.url = "http://127.0.0.1:" + std::to_string(s.svc->port()) + "/embed";
        r.header.set("Content-Type", "application/json");
        r.body = "{\"input\":\"How do I reset the password of account " + std::to_string(i) +
                 " after the quarterly billing change?\"}";
        const auto t = clock_type::now();
        auto resp = awp::http::fetch_sync(r);
        if (resp.status != 200) std::fprintf(stderr, "status %u\n", resp.status);
        if (i >= 20) ms.push_back(seconds_since(t) * 1000);
    }
    s.stop();
    const auto p = pct(ms);
    std::printf("POST /embed %-40s p50 %7.2f ms, p99 %7.2f ms (%d requests, one at a time)\n",
                label.c_str(), p.p50, p.p99, n);
}

// Search over `items` vectors shaped like sentence embeddings: 1,000 topic centres, each item its
// centre plus Gaussian noise, unit length. Uniform random vectors are the worst case of any
// approximate index (all distances nearly equal) and say little about real knowledge bases, so
// queries are noisy copies of stored items, as a question about a document would be.
void bench_search(int items, int queries) {
    const std::string db = "awp_bench_embedder_search";
    fresh_database(db);
    auto c = pg::connection::connect(admin_dsn(db));
    c.exec("SET maintenance_work_mem = '512MB'");
    c.exec("ALTER TABLE knowledge_items DISABLE TRIGGER knowledge_items_notify_insert");
    auto t = clock_type::now();
    // Bulk load: the HNSW index of 0003_tables.sql is rebuilt after the insert, same definition.
    c.exec("DROP INDEX knowledge_items_embedding_hnsw");
    c.exec(
        "CREATE TEMP TABLE centre AS SELECT n, (SELECT array_agg(random() - 0.5) "
        "FROM generate_series(1, 384) WHERE n IS NOT NULL) AS v FROM generate_series(0, 999) n");
    for (int i = 0; i < items; i += 10000) {
        c.exec(
            "INSERT INTO knowledge_items (title, plain_text, tags, embedding, embedding_status, "
            "embedding_model, embedding_dimensions) "
            "SELECT 'Item ' || g, 'Text of item ' || g, ARRAY['t' || (g % 10)], "
            "  (SELECT l2_normalize(array_agg(x.v + (random() - 0.5) * 0.6 ORDER BY x.o)::vector) "
            "     FROM centre ce, unnest(ce.v) WITH ORDINALITY AS x(v, o) WHERE ce.n = g % 1000), "
            "  'indexed', 'bench', 384 "
            "FROM generate_series($1::int, $2::int) g",
            {i, std::min(items, i + 10000) - 1});
    }
    c.exec(
        "CREATE INDEX knowledge_items_embedding_hnsw ON knowledge_items USING hnsw "
        "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)");
    c.exec("VACUUM ANALYZE knowledge_items");
    std::printf(
        "search: %d items (1,000 topics) inserted and indexed (HNSW m 16, "
        "ef_construction 64) in %.1f s\n",
        items, seconds_since(t));
    // Queries: stored items plus noise of the same size as an item's distance to its topic.
    auto qr = c.exec(
        "SELECT (SELECT l2_normalize(array_agg(x.v + (random() - 0.5) * 0.3 ORDER BY x.o)::vector) "
        "          FROM unnest(k.embedding::real[]) WITH ORDINALITY AS x(v, o))::text "
        "  FROM knowledge_items k ORDER BY random() LIMIT $1::int",
        {queries});
    std::vector<std::string> qs;
    for (int i = 0; i < qr.size(); ++i) qs.emplace_back(qr.text(i, 0));
    const auto n = static_cast<int>(qs.size());
    // Exact answers first (sequential scan), then HNSW at pgvector's default ef_search and above.
    std::vector<std::vector<std::string>> truth(qs.size());
    struct run {
        const char* label;
        const char* setting;
    };
    const run runs[] = {{"exact scan", "SET LOCAL enable_indexscan = off"},
                        {"HNSW ef_search 40", "SET LOCAL hnsw.ef_search = 40"},
                        {"HNSW ef_search 100", "SET LOCAL hnsw.ef_search = 100"},
                        {"HNSW ef_search 200", "SET LOCAL hnsw.ef_search = 200"}};
    for (const auto& rn : runs) {
        const bool exact = rn.label[0] == 'e';
        std::vector<double> ms;
        int hit = 0, total = 0;
        // A session of its own per run: PL/pgSQL keeps the plan of the function's query for the
        // session, so the exact run's sequential-scan plan would otherwise serve the HNSW runs.
        auto session = pg::connection::connect(admin_dsn(db));
        session.exec("BEGIN");
        session.exec(rn.setting);
        for (int i = 0; i < n + 5; ++i) {
            const auto qi = static_cast<std::size_t>(i % n);
            const auto q0 = clock_type::now();
            auto r = session.exec("SELECT id::text FROM search_knowledge_items($1::vector, 10)",
                                  {qs[qi]});
            if (i >= 5) ms.push_back(seconds_since(q0) * 1000);
            if (i >= n) continue;
            if (exact) {
                for (int x = 0; x < r.size(); ++x) truth[qi].emplace_back(r.text(x, 0));
                continue;
            }
            for (const auto& id : truth[qi]) {
                ++total;
                for (int y = 0; y < r.size(); ++y) hit += r.text(y, 0) == id ? 1 : 0;
            }
        }
        session.exec("COMMIT");
        const auto p = pct(ms);
        if (exact) {
            std::printf("search_knowledge_items (10 of %d) %-20s p50 %8.2f ms, p99 %8.2f ms\n",
                        items, rn.label, p.p50, p.p99);
        } else {
            std::printf(
                "search_knowledge_items (10 of %d) %-20s p50 %8.2f ms, p99 %8.2f ms, "
                "recall@10 %.3f\n",
                items, rn.label, p.p50, p.p99, total ? static_cast<double>(hit) / total : 0.0);
        }
    }
}

double rss_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string key;
    while (in >> key) {
        if (key == "VmRSS:") {
            long kib = 0;
            in >> kib;
            return static_cast<double>(kib) / 1024.0;
        }
        in.ignore(1 << 20, '\n');
    }
    return 0;
}

void bench_idle_rss(const std::string& bin_dir) {
    const std::string db = "awp_bench_embedder_idx";
    const std::string dsn = admin_dsn(db);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::setenv("DATABASE_URL", dsn.c_str(), 1);
        ::setenv("EMBEDDING_MODEL_DIR", "", 1);
        ::setenv("EMBEDDER_PORT", "0", 1);
        const std::string bin = bin_dir + "/awp-embedder";
        ::execl(bin.c_str(), bin.c_str(), "--log-level", "warn", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    std::this_thread::sleep_for(3s);
    const double rss = rss_of(pid);
    ::kill(pid, SIGTERM);
    int st = 0;
    ::waitpid(pid, &st, 0);
    std::printf(
        "awp-embedder idle RSS without a model (fallback, connected, listening): %.1f MiB\n", rss);
}

// Memory with a backlog: 10,000 pending items (3,500 characters each, two chunks) in the
// database, the real awp-embedder process (fallback model) started on them; its RSS is sampled
// every 100 ms while it indexes the first `drain` items, beside its idle RSS on an empty queue.
void bench_backlog(const std::string& bin_dir, int pending, int drain) {
    const std::string db = "awp_bench_embedder_backlog";
    fresh_database(db);
    auto c = pg::connection::connect(admin_dsn(db));
    std::mt19937 rng(5);
    c.exec("ALTER TABLE knowledge_items DISABLE TRIGGER knowledge_items_notify_insert");
    insert_items(c, pending, 3500, rng);
    c.exec("ALTER TABLE knowledge_items ENABLE TRIGGER knowledge_items_notify_insert");
    const std::string dsn = admin_dsn(db);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::setenv("DATABASE_URL", dsn.c_str(), 1);
        ::setenv("EMBEDDING_MODEL_DIR", "", 1);
        ::setenv("EMBEDDER_PORT", "0", 1);
        const std::string bin = bin_dir + "/awp-embedder";
        ::execl(bin.c_str(), bin.c_str(), "--log-level", "warn", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    const auto t0 = clock_type::now();
    double peak = 0, first = 0;
    long done = 0;
    std::vector<double> samples;
    while (seconds_since(t0) < 600) {
        std::this_thread::sleep_for(100ms);
        const double rss = rss_of(pid);
        if (rss <= 0) break;
        samples.push_back(rss);
        peak = std::max(peak, rss);
        if (samples.size() == 20) first = rss;  // after 2 s: connected, first batches in
        if (samples.size() % 10 == 0) {
            auto r =
                c.exec("SELECT count(*) FROM knowledge_items WHERE embedding_status = 'indexed'");
            done = std::atol(std::string(r.text(0, 0)).c_str());
            if (done >= drain) break;
        }
    }
    const double secs = seconds_since(t0);
    const double last = samples.empty() ? 0 : samples.back();
    ::kill(pid, SIGTERM);
    int st = 0;
    ::waitpid(pid, &st, 0);
    std::printf(
        "awp-embedder with %d pending items (fallback): indexed %ld in %.1f s (%.1f items/s); "
        "RSS after 2 s %.1f MiB, at the end %.1f MiB, peak %.1f MiB\n",
        pending, done, secs, static_cast<double>(done) / secs, first, last, peak);
}

}  // namespace

int main(int argc, char** argv) {
    int items = 100000;
    int threads = 2;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--search-items" && i + 1 < argc)
            items = std::atoi(argv[++i]);
        else if (a == "--threads" && i + 1 < argc)
            threads = std::atoi(argv[++i]);
        else if (a == "--only" && i + 1 < argc)
            only = argv[++i];
        else {
            std::fprintf(stderr,
                         "usage: awp-bench-embedder [--search-items N] [--threads N] "
                         "[--only index|http|search|rss|backlog]\n");
            return 2;
        }
    }
    awp::core::log::init("bench-embedder", awp::core::log::level::warn);
    const fs::path bin_dir = fs::canonical("/proc/self/exe").parent_path();
    const fs::path model_dir =
        fs::temp_directory_path() / ("awp-bench-embedder-" + std::to_string(::getpid()));
    embed::bert_config mc;  // MiniLM-L6 shape
    write_model(model_dir, mc);
    std::shared_ptr<embed::embedder> minilm = embed::load_model(model_dir, threads);
    std::shared_ptr<embed::embedder> fallback = embed::make_fallback();
    std::printf("awp-bench-embedder: %d encoder threads, %u hardware threads\n", threads,
                std::thread::hardware_concurrency());
    if (only.empty() || only == "index") {
        bench_indexing("fallback (5,000 chars/item)", fallback, 2000, 5000);
        bench_indexing("MiniLM-L6-shape random (5,000 chars/item)", minilm, 60, 5000);
    }
    if (only.empty() || only == "http") {
        bench_http(fallback, "fallback", 500);
        bench_http(minilm, "MiniLM-L6-shape random", 200);
    }
    if (only.empty() || only == "rss") bench_idle_rss(bin_dir.string());
    if (only.empty() || only == "backlog") bench_backlog(bin_dir.string(), 10000, 2000);
    if (only.empty() || only == "search") bench_search(items, 200);
    fs::remove_all(model_dir);
    return 0;
}
