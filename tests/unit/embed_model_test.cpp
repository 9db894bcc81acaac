// The BERT forward pass vs a PyTorch reference (both pooling modes, fp32 and fp16 safetensors).
#include <rapidjson/document.h>
#include <awp/embed/bert.hpp>
#include <awp/embed/embedder.hpp>
#include <awp/embed/error.hpp>
#include <awp/embed/model_folder.hpp>
#include <awp/embed/tokenizer.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace embed_model_test {

namespace {

namespace fs = std::filesystem;
namespace embed = awp::embed;

const fs::path kFixtures = fs::path(AWP_SOURCE_DIR) / "tests/fixtures/embed";
// The bound; the measured difference is about 1e-6 (see docs/embeddings.md).
constexpr double kTolerance = 1e-4;

struct reference_text {
    std::string text;
    std::vector<int> ids;
    bool truncated = false;
    std::vector<float> pooled;
    std::vector<std::vector<float>> hidden;  // first two texts only
};

struct reference {
    std::string pooling;
    int max_tokens = 0;
    std::vector<reference_text> texts;
};

std::vector<float> floats(const rapidjson::Value& v) {
    std::vector<float> out;
    for (const auto& x : v.GetArray()) out.push_back(static_cast<float>(x.GetDouble()));
    return out;
}

reference load_reference(const std::string& model) {
    std::ifstream in(kFixtures / (model + ".expected.json"), std::ios::binary);
    REQUIRE(in);
    std::stringstream text;
    text << in.rdbuf();
    rapidjson::Document doc;
    doc.Parse(text.str().c_str());
    REQUIRE_FALSE(doc.HasParseError());
    reference ref;
    ref.pooling = doc["pooling"].GetString();
    ref.max_tokens = doc["max_tokens"].GetInt();
    for (const auto& t : doc["texts"].GetArray()) {
        reference_text r;
        r.text.assign(t["text"].GetString(), t["text"].GetStringLength());
        for (const auto& id : t["ids"].GetArray()) r.ids.push_back(id.GetInt());
        r.truncated = t["truncated"].GetBool();
        r.pooled = floats(t["pooled"]);
        if (t.HasMember("hidden"))
            for (const auto& row : t["hidden"].GetArray()) r.hidden.push_back(floats(row));
        ref.texts.push_back(std::move(r));
    }
    return ref;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double d = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i)
        d = std::max(d, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    return d;
}

std::vector<std::string> texts_of(const reference& ref) {
    std::vector<std::string> out;
    for (const auto& t : ref.texts) out.push_back(t.text);
    return out;
}

}  // namespace

TEST_CASE("pooled vectors match torch for CLS pooling with fp32 weights and vocab.txt", "[embed]") {
    const auto ref = load_reference("tiny-bert-cls");
    REQUIRE(ref.pooling == "cls");
    const auto model = embed::load_model(kFixtures / "tiny-bert-cls", 2);
    CHECK(model->model_name() == "awp-test/tiny-bert-cls");
    CHECK(model->dimensions() == 48);
    CHECK(model->max_tokens() == 64);
    CHECK_FALSE(model->is_fallback());
    const auto results = model->embed_batch(texts_of(ref));
    REQUIRE(results.size() == ref.texts.size());
    for (std::size_t i = 0; i < results.size(); ++i) {
        INFO("text " << i << ": " << ref.texts[i].text);
        CHECK(results[i].model == "awp-test/tiny-bert-cls");
        CHECK(results[i].token_count == static_cast<int>(ref.texts[i].ids.size()));
        CHECK(results[i].truncated == ref.texts[i].truncated);
        CHECK(max_abs_diff(results[i].vector, ref.texts[i].pooled) <= kTolerance);
    }
    CHECK(std::any_of(ref.texts.begin(), ref.texts.end(), [](auto& t) { return t.truncated; }));
}

TEST_CASE("pooled vectors match torch for mean pooling with fp16 weights and tokenizer.json",
          "[embed]") {
    const auto ref = load_reference("tiny-bert-mean-f16");
    REQUIRE(ref.pooling == "mean");
    const auto model = embed::load_model(kFixtures / "tiny-bert-mean-f16", 1);
    CHECK(model->max_tokens() == 24);  // sentence_bert_config.json's max_seq_length
    const auto results = model->embed_batch(texts_of(ref));
    REQUIRE(results.size() == ref.texts.size());
    for (std::size_t i = 0; i < results.size(); ++i) {
        INFO("text " << i << ": " << ref.texts[i].text);
        CHECK(results[i].token_count == static_cast<int>(ref.texts[i].ids.size()));
        CHECK(results[i].truncated == ref.texts[i].truncated);
        CHECK(max_abs_diff(results[i].vector, ref.texts[i].pooled) <= kTolerance);
    }
}

TEST_CASE("the model folder's tokenizer gives the ids Hugging Face gave torch", "[embed]") {
    for (const auto& [model, tokenizer] :
         {std::pair{"tiny-bert-cls", embed::wordpiece_tokenizer::from_vocab_txt(
                                         kFixtures / "tiny-bert-cls/vocab.txt")},
          std::pair{"tiny-bert-mean-f16", embed::wordpiece_tokenizer::from_tokenizer_json(
                                              kFixtures / "tiny-bert-mean-f16/tokenizer.json")}}) {
        const auto ref = load_reference(model);
        for (const auto& t : ref.texts) {
            const auto enc = tokenizer.encode(t.text, ref.max_tokens);
            CHECK(enc.ids == t.ids);
            CHECK(enc.truncated == t.truncated);
        }
    }
}

TEST_CASE("last hidden states match torch, whatever the thread count", "[embed]") {
    for (const std::string model : {"tiny-bert-cls", "tiny-bert-mean-f16"}) {
        const auto ref = load_reference(model);
        const auto dir = kFixtures / model;
        const auto config = embed::read_bert_config(dir / "config.json");
        for (int threads : {1, 2, 3}) {
            const embed::bert_encoder encoder(
                config, embed::read_bert_weights(dir / "model.safetensors", config), threads);
            const std::vector<std::vector<int>> batch{ref.texts[0].ids, ref.texts[1].ids};
            const auto hidden = encoder.forward(batch);
            REQUIRE(hidden.size() == 2);
            for (std::size_t s = 0; s < 2; ++s) {
                const auto& rows = ref.texts[s].hidden;
                REQUIRE(hidden[s].size() == rows.size() * 48);
                for (std::size_t r = 0; r < rows.size(); ++r) {
                    const std::vector<float> row(
                        hidden[s].begin() + static_cast<long>(r * 48),
                        hidden[s].begin() + static_cast<long>(r * 48 + 48));
                    INFO(model << " threads " << threads << " sequence " << s << " row " << r);
                    CHECK(max_abs_diff(row, rows[r]) <= kTolerance);
                }
            }
        }
    }
}

TEST_CASE("a text's vector does not depend on the batch it is embedded in", "[embed]") {
    const auto ref = load_reference("tiny-bert-mean-f16");
    const auto model = embed::load_model(kFixtures / "tiny-bert-mean-f16", 2);
    const auto texts = texts_of(ref);
    const auto batch = model->embed_batch(texts);
    for (std::size_t i = 0; i < texts.size(); ++i) {
        const auto alone = model->embed_batch(std::span(&texts[i], 1));
        CHECK(max_abs_diff(alone[0].vector, batch[i].vector) <= 1e-5);
    }
    CHECK(model->embed_batch({}).empty());
}

TEST_CASE("embedding vectors have unit L2 norm", "[embed]") {
    const auto model = embed::load_model(kFixtures / "tiny-bert-cls", 2);
    const std::vector<std::string> texts{"", "a", "The quick brown fox.", std::string(5000, 'x')};
    for (const auto& r : model->embed_batch(texts)) {
        double norm = 0.0;
        for (float v : r.vector) norm += static_cast<double>(v) * v;
        CHECK(std::sqrt(norm) == Approx(1.0).epsilon(1e-5));
    }
}

TEST_CASE("the encoder rejects ids it cannot embed", "[embed]") {
    embed::bert_config c;
    c.vocab_size = 10;
    c.hidden_size = 8;
    c.num_layers = 1;
    c.num_heads = 2;
    c.intermediate_size = 16;
    c.max_position_embeddings = 4;
    const embed::bert_encoder encoder(c, embed::random_bert_weights(c, 1), 2);
    CHECK_THROWS_AS(encoder.forward(std::vector<std::vector<int>>{{1, 10}}), embed::error);
    CHECK_THROWS_AS(encoder.forward(std::vector<std::vector<int>>{{1, 2, 3, 4, 5}}), embed::error);
    CHECK_THROWS_AS(encoder.forward(std::vector<std::vector<int>>{{}}), embed::error);
    CHECK(encoder.forward(std::vector<std::vector<int>>{{1, 2, 3, 4}, {5}}).size() == 2);
}

TEST_CASE("FLOP count of a MiniLM-shaped sentence is the documented 2.87 GFLOP", "[embed]") {
    const embed::bert_config minilm;  // defaults: 6 layers, 384 hidden, 12 heads, 1536 FFN
    CHECK(embed::bert_flops(minilm, 128) == Approx(2.87e9).epsilon(0.01));
}

TEST_CASE("embed_batch may be called from several threads at once", "[embed]") {
    const auto ref = load_reference("tiny-bert-cls");
    const auto model = embed::load_model(kFixtures / "tiny-bert-cls", 2);
    const auto texts = texts_of(ref);
    const auto want = model->embed_batch(texts);
    std::vector<std::vector<embed::embedding_result>> got(4);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < got.size(); ++t) {
        threads.emplace_back([&, t] {
            for (int rep = 0; rep < 5; ++rep) got[t] = model->embed_batch(texts);
        });
    }
    for (auto& t : threads) t.join();
    for (const auto& results : got) {
        REQUIRE(results.size() == want.size());
        for (std::size_t i = 0; i < want.size(); ++i) CHECK(results[i].vector == want[i].vector);
    }
}

}  // namespace embed_model_test
