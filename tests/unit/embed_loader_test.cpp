// Model folder loading: every broken folder gives an error that names the file and the problem.
#include <awp/embed/embedder.hpp>
#include <awp/embed/error.hpp>
#include <awp/embed/safetensors.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>

namespace embed_loader_test {

namespace {

namespace fs = std::filesystem;
namespace embed = awp::embed;

const fs::path kFixtures = fs::path(AWP_SOURCE_DIR) / "tests/fixtures/embed";

// A private copy of a fixture model folder, removed at the end of the test.
class model_copy {
public:
    explicit model_copy(const std::string& model) {
        std::random_device rd;
        dir_ = fs::temp_directory_path() / ("awp-embed-test-" + std::to_string(rd()));
        fs::copy(kFixtures / model, dir_, fs::copy_options::recursive);
    }
    ~model_copy() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    model_copy(const model_copy&) = delete;
    model_copy& operator=(const model_copy&) = delete;

    const fs::path& dir() const { return dir_; }
    std::string read(const std::string& file) const {
        std::ifstream in(dir_ / file, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), {}};
    }
    void write(const std::string& file, const std::string& text) const {
        std::ofstream(dir_ / file, std::ios::binary | std::ios::trunc) << text;
    }
    // Replaces `"key": old` by `"key": value` in a JSON file of the folder.
    void set(const std::string& file, const std::string& key, const std::string& value) const {
        const std::regex pattern("\"" + key + "\": [^,\\n}]+");
        const auto text = read(file);
        REQUIRE(std::regex_search(text, pattern));
        write(file, std::regex_replace(text, pattern, "\"" + key + "\": " + value));
    }

private:
    fs::path dir_;
};

// The message of the error load_model throws (fails the test if it loads).
std::string load_error(const fs::path& dir) {
    try {
        embed::load_model(dir, 1);
    } catch (const embed::error& e) {
        return e.what();
    }
    FAIL("load_model accepted a broken folder");
    return {};
}

}  // namespace

TEST_CASE("a missing model folder or file is named in the error", "[embed]") {
    CHECK_THAT(load_error("/nonexistent/awp-model"),
               Catch::Contains("/nonexistent/awp-model") && Catch::Contains("not a directory"));
    for (const std::string file : {"config.json", "model.safetensors", "modules.json"}) {
        model_copy m("tiny-bert-cls");
        fs::remove(m.dir() / file);
        INFO(file);
        if (file == "modules.json") {
            // 1_Pooling/config.json alone still says how to pool; without both it is an error.
            CHECK_NOTHROW(embed::load_model(m.dir(), 1));
            fs::remove_all(m.dir() / "1_Pooling");
            CHECK_THAT(load_error(m.dir()), Catch::Contains("no pooling configuration"));
        } else {
            CHECK_THAT(load_error(m.dir()), Catch::Contains(file) && Catch::Contains("missing"));
        }
    }
    model_copy m("tiny-bert-cls");
    fs::remove(m.dir() / "vocab.txt");
    CHECK_THAT(load_error(m.dir()), Catch::Contains("neither tokenizer.json nor vocab.txt"));
}

TEST_CASE("malformed JSON is reported with the file's name", "[embed]") {
    for (const std::string file :
         {"config.json", "modules.json", "1_Pooling/config.json", "tokenizer.json"}) {
        model_copy m("tiny-bert-mean-f16");
        m.write(file, m.read(file).substr(0, 40));
        INFO(file);
        CHECK_THAT(load_error(m.dir()), Catch::Contains(file) && Catch::Contains("invalid JSON"));
    }
}

TEST_CASE("shapes that disagree with config.json name the tensor", "[embed]") {
    model_copy m("tiny-bert-cls");
    m.set("config.json", "intermediate_size", "100");
    CHECK_THAT(load_error(m.dir()),
               Catch::Contains("model.safetensors") &&
                   Catch::Contains("bert.encoder.layer.0.intermediate.dense.weight") &&
                   Catch::Contains("[192,48]") && Catch::Contains("[100,48]"));

    model_copy fewer("tiny-bert-cls");
    fewer.set("config.json", "num_hidden_layers", "1");
    CHECK_THAT(load_error(fewer.dir()), Catch::Contains("more layers than config.json"));

    model_copy more("tiny-bert-cls");
    more.set("config.json", "num_hidden_layers", "3");
    CHECK_THAT(
        load_error(more.dir()),
        Catch::Contains("missing tensor 'bert.encoder.layer.2.attention.self.query.weight'"));

    model_copy vocab("tiny-bert-cls");
    vocab.set("config.json", "vocab_size", "1000");
    CHECK_THAT(load_error(vocab.dir()), Catch::Contains("vocab.txt") &&
                                            Catch::Contains("more than config.json's vocab_size"));
}

TEST_CASE("inconsistent or unsupported config.json values are refused", "[embed]") {
    const std::vector<std::tuple<std::string, std::string, std::string>> cases{
        {"num_attention_heads", "5", "not a multiple of num_attention_heads"},
        {"hidden_act", "\"relu\"", "hidden_act \"relu\" is not supported"},
        {"hidden_size", "\"48\"", "\"hidden_size\" must be an integer"},
        {"max_position_embeddings", "-1", "must be a positive integer"},
    };
    for (const auto& [key, value, message] : cases) {
        model_copy m("tiny-bert-cls");
        m.set("config.json", key, value);
        INFO(key);
        CHECK_THAT(load_error(m.dir()), Catch::Contains("config.json") && Catch::Contains(message));
    }
    model_copy m("tiny-bert-mean-f16");
    m.set("sentence_bert_config.json", "max_seq_length", "512");
    CHECK_THAT(load_error(m.dir()), Catch::Contains("sentence_bert_config.json"));
}

TEST_CASE("pooling must be exactly one of cls and mean", "[embed]") {
    model_copy both("tiny-bert-cls");
    both.set("1_Pooling/config.json", "pooling_mode_mean_tokens", "true");
    CHECK_THAT(load_error(both.dir()), Catch::Contains("1_Pooling/config.json") &&
                                           Catch::Contains("exactly one pooling mode"));
    model_copy max("tiny-bert-cls");
    max.set("1_Pooling/config.json", "pooling_mode_cls_token", "false");
    max.set("1_Pooling/config.json", "pooling_mode_max_tokens", "true");
    CHECK_THAT(load_error(max.dir()), Catch::Contains("\"max\" is not supported"));
}

TEST_CASE("a truncated or corrupt safetensors file is refused", "[embed]") {
    model_copy m("tiny-bert-cls");
    const auto data = m.read("model.safetensors");
    m.write("model.safetensors", data.substr(0, data.size() - 100));
    CHECK_THAT(load_error(m.dir()),
               Catch::Contains("model.safetensors") && Catch::Contains("truncated file?"));
    m.write("model.safetensors", data.substr(0, 5));
    CHECK_THAT(load_error(m.dir()), Catch::Contains("not a safetensors file"));
    m.write("model.safetensors", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}");
    CHECK_THAT(load_error(m.dir()), Catch::Contains("header length"));
}

TEST_CASE("weights without the bert. prefix and with old gamma/beta names load", "[embed]") {
    // Rewrite the fp32 fixture under other names; vectors must not change.
    model_copy m("tiny-bert-cls");
    const embed::safetensors_file original(kFixtures / "tiny-bert-cls/model.safetensors");
    std::vector<std::vector<float>> values;
    std::vector<embed::tensor_to_write> tensors;
    for (const auto& [name, info] : original.tensors()) {
        std::string renamed = name.substr(std::string("bert.").size());
        if (renamed.ends_with("LayerNorm.weight"))
            renamed.replace(renamed.size() - 6, 6, "gamma");
        else if (renamed.ends_with("LayerNorm.bias"))
            renamed.replace(renamed.size() - 4, 4, "beta");
        values.push_back(original.to_f32(name));
        tensors.push_back({renamed, info.shape, values.back()});
    }
    // Pointers into `values` must stay valid: re-point after all push_backs.
    for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].values = values[i];
    embed::write_safetensors(m.dir() / "model.safetensors", tensors, embed::stored_type::f32);
    const std::vector<std::string> texts{"Hello, world!", "a longer sentence to embed"};
    const auto want = embed::load_model(kFixtures / "tiny-bert-cls", 1)->embed_batch(texts);
    const auto got = embed::load_model(m.dir(), 1)->embed_batch(texts);
    for (std::size_t i = 0; i < texts.size(); ++i) CHECK(got[i].vector == want[i].vector);
}

TEST_CASE("the model name falls back to the folder name when config has a local path", "[embed]") {
    model_copy m("tiny-bert-cls");
    m.set("config.json", "_name_or_path", "\"/home/me/models/x\"");
    CHECK(embed::load_model(m.dir(), 1)->model_name() == m.dir().filename().string());
}

TEST_CASE("fp16 conversion rounds to nearest even and round-trips", "[embed]") {
    CHECK(embed::float_to_half(1.0F) == 0x3C00);
    CHECK(embed::float_to_half(-2.0F) == 0xC000);
    CHECK(embed::float_to_half(65504.0F) == 0x7BFF);
    CHECK(embed::float_to_half(1e6F) == 0x7C00);
    CHECK(embed::float_to_half(5.960464477539063e-08F) == 0x0001);  // smallest subnormal
    CHECK(embed::float_to_half(1.0F + 1.0F / 2048.0F) == 0x3C00);   // tie: to even
    CHECK(embed::float_to_half(1.0F + 3.0F / 2048.0F) == 0x3C02);   // tie: to even (up)
    for (std::uint32_t h = 0; h < 0x7C00; ++h) {
        const auto half = static_cast<std::uint16_t>(h);
        REQUIRE(embed::float_to_half(embed::half_to_float(half)) == half);
    }
    CHECK(embed::half_to_float(0x3555) == Approx(0.333251953125));
}

}  // namespace embed_loader_test
