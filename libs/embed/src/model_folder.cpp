// Loading a Hugging Face / sentence-transformers model folder into a bert_embedder.
#include <awp/embed/bert.hpp>
#include <awp/embed/embedder.hpp>
#include <awp/embed/error.hpp>
#include <awp/embed/model_folder.hpp>
#include <awp/embed/safetensors.hpp>
#include <awp/embed/tokenizer.hpp>

#include <algorithm>
#include <mutex>
#include <optional>

#include "json_file.hpp"

namespace awp::embed {

namespace {

namespace fs = std::filesystem;
using detail::display_name;

// Texts per encoder call: bounds the scratch memory of one call (about 40 KB per token).
constexpr std::size_t kMaxBatchTokens = 16384;

class bert_embedder final : public embedder {
public:
    bert_embedder(std::string name, wordpiece_tokenizer tokenizer, bert_encoder encoder,
                  pooling_mode pooling, int max_tokens)
        : name_(std::move(name)),
          tokenizer_(std::move(tokenizer)),
          encoder_(std::move(encoder)),
          pooling_(pooling),
          max_tokens_(max_tokens) {}

    std::string_view model_name() const override { return name_; }
    int dimensions() const override { return encoder_.config().hidden_size; }
    int max_tokens() const override { return max_tokens_; }
    bool is_fallback() const override { return false; }

    std::vector<embedding_result> embed_batch(std::span<const std::string> texts) override {
        std::vector<embedding_result> out(texts.size());
        std::vector<std::vector<int>> ids;
        std::size_t first = 0;
        std::size_t tokens = 0;
        const auto flush = [&](std::size_t end) {
            if (ids.empty()) return;
            auto vectors = encoder_.embed(ids, pooling_);
            for (std::size_t i = 0; i < vectors.size(); ++i)
                out[first + i].vector = std::move(vectors[i]);
            ids.clear();
            tokens = 0;
            first = end;
        };
        for (std::size_t i = 0; i < texts.size(); ++i) {
            auto enc = tokenizer_.encode(texts[i], max_tokens_);
            out[i].model = name_;
            out[i].token_count = static_cast<int>(enc.ids.size());
            out[i].truncated = enc.truncated;
            if (tokens + enc.ids.size() > kMaxBatchTokens) flush(i);
            tokens += enc.ids.size();
            ids.push_back(std::move(enc.ids));
        }
        flush(texts.size());
        return out;
    }

private:
    std::string name_;
    wordpiece_tokenizer tokenizer_;
    bert_encoder encoder_;
    pooling_mode pooling_;
    int max_tokens_;
};

int positive(const rapidjson::Value& doc, const char* key, const fs::path& file,
             std::optional<int> fallback = std::nullopt) {
    const auto v = detail::get_int(doc, key, file);
    if (!v) {
        if (fallback) return *fallback;
        throw error(display_name(file) + ": missing \"" + key + "\"");
    }
    if (*v <= 0 || *v > 1'000'000)
        throw error(display_name(file) + ": \"" + key + "\" must be a positive integer");
    return static_cast<int>(*v);
}

}  // namespace

bert_config read_bert_config(const fs::path& file) {
    const auto doc = detail::read_json(file);
    if (!doc.IsObject()) throw error(display_name(file) + ": not a JSON object");
    bert_config c;
    c.vocab_size = positive(doc, "vocab_size", file);
    c.hidden_size = positive(doc, "hidden_size", file);
    c.num_layers = positive(doc, "num_hidden_layers", file);
    c.num_heads = positive(doc, "num_attention_heads", file);
    c.intermediate_size = positive(doc, "intermediate_size", file);
    c.max_position_embeddings = positive(doc, "max_position_embeddings", file);
    c.type_vocab_size = positive(doc, "type_vocab_size", file, 2);
    c.layer_norm_eps =
        static_cast<float>(detail::get_number(doc, "layer_norm_eps", file).value_or(1e-12));
    if (c.hidden_size % c.num_heads != 0)
        throw error(display_name(file) + ": hidden_size " + std::to_string(c.hidden_size) +
                    " is not a multiple of num_attention_heads " + std::to_string(c.num_heads));
    const auto act = detail::get_string(doc, "hidden_act", file).value_or("gelu");
    if (act != "gelu")
        throw error(display_name(file) + ": hidden_act \"" + act +
                    "\" is not supported (only \"gelu\", the exact erf GELU of BERT)");
    const auto type = detail::get_string(doc, "model_type", file).value_or("bert");
    if (type != "bert")
        throw error(display_name(file) + ": model_type \"" + type + "\" is not \"bert\"");
    if (!(c.layer_norm_eps > 0.0F))
        throw error(display_name(file) + ": layer_norm_eps must be positive");
    return c;
}

namespace {

// The model's name: config's _name_or_path when it is a hub id, else the folder's name.
std::string model_name(const fs::path& dir, const fs::path& config_file) {
    const auto doc = detail::read_json(config_file);
    const auto name = detail::get_string(doc, "_name_or_path", config_file).value_or("");
    if (!name.empty() && name.front() != '/' && name.front() != '.' && name.front() != '~')
        return name;
    auto folder = dir.lexically_normal();
    if (folder.filename().empty()) folder = folder.parent_path();
    return folder.filename().string();
}

}  // namespace

pooling_mode read_pooling(const fs::path& dir) {
    fs::path pooling_dir = dir / "1_Pooling";
    const auto modules_file = dir / "modules.json";
    if (fs::exists(modules_file)) {
        const auto doc = detail::read_json(modules_file);
        if (!doc.IsArray()) throw error(display_name(modules_file) + ": not a JSON array");
        std::optional<fs::path> found;
        for (const auto& m : doc.GetArray()) {
            const auto type = detail::get_string(m, "type", modules_file).value_or("");
            if (type.ends_with(".Pooling"))
                found = dir / detail::get_string(m, "path", modules_file).value_or("1_Pooling");
        }
        if (!found)
            throw error(display_name(modules_file) +
                        ": no sentence_transformers.models.Pooling module");
        pooling_dir = *found;
    } else if (!fs::exists(pooling_dir / "config.json")) {
        throw error(display_name(dir) +
                    ": no pooling configuration (expected modules.json and 1_Pooling/config.json)");
    }
    const auto file = pooling_dir / "config.json";
    const auto doc = detail::read_json(file);
    if (!doc.IsObject()) throw error(display_name(file) + ": not a JSON object");
    // Newer sentence-transformers may also write "pooling_mode": "cls" | "mean" | ...
    std::string mode = detail::get_string(doc, "pooling_mode", file).value_or("");
    std::vector<std::string> modes;
    if (!mode.empty()) modes.push_back(mode);
    for (const auto& [key, name] :
         {std::pair{"pooling_mode_cls_token", "cls"}, std::pair{"pooling_mode_mean_tokens", "mean"},
          std::pair{"pooling_mode_max_tokens", "max"},
          std::pair{"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"},
          std::pair{"pooling_mode_weightedmean_tokens", "weightedmean"},
          std::pair{"pooling_mode_lasttoken", "lasttoken"}}) {
        if (detail::get_bool(doc, key, file).value_or(false) &&
            std::find(modes.begin(), modes.end(), name) == modes.end())
            modes.emplace_back(name);
    }
    if (modes.size() != 1)
        throw error(display_name(file) + ": exactly one pooling mode must be set, found " +
                    std::to_string(modes.size()));
    if (modes[0] == "cls") return pooling_mode::cls;
    if (modes[0] == "mean") return pooling_mode::mean;
    throw error(display_name(file) + ": pooling mode \"" + modes[0] +
                "\" is not supported (cls or mean)");
}

namespace {

std::vector<float> tensor(const safetensors_file& file, const std::string& prefix,
                          const std::string& name, std::vector<std::int64_t> shape,
                          const char* old_name = nullptr) {
    std::string full = prefix + name;
    const tensor_info* t = file.find(full);
    if (t == nullptr && old_name != nullptr) {  // checkpoints from TF days: LayerNorm.gamma/beta
        full = prefix + old_name;
        t = file.find(full);
    }
    const auto where = display_name(file.path());
    if (t == nullptr) throw error(where + ": missing tensor '" + prefix + name + "'");
    if (t->shape != shape) {
        const auto text = [](const std::vector<std::int64_t>& s) {
            std::string out = "[";
            for (std::size_t i = 0; i < s.size(); ++i) {
                if (i > 0) out += ",";
                out += std::to_string(s[i]);
            }
            return out + "]";
        };
        throw error(where + ": tensor '" + full + "' has shape " + text(t->shape) +
                    ", config.json implies " + text(shape));
    }
    return file.to_f32(full);
}

}  // namespace

bert_weights read_bert_weights(const fs::path& file, const bert_config& c) {
    const safetensors_file st(file);
    const std::string prefix = st.find("bert.embeddings.word_embeddings.weight") ? "bert." : "";
    const std::int64_t h = c.hidden_size;
    const std::int64_t inter = c.intermediate_size;
    bert_weights w;
    const std::string e = "embeddings.";
    w.word_embeddings = tensor(st, prefix, e + "word_embeddings.weight", {c.vocab_size, h});
    w.position_embeddings =
        tensor(st, prefix, e + "position_embeddings.weight", {c.max_position_embeddings, h});
    w.token_type_embeddings =
        tensor(st, prefix, e + "token_type_embeddings.weight", {c.type_vocab_size, h});
    w.embedding_norm_gain =
        tensor(st, prefix, e + "LayerNorm.weight", {h}, "embeddings.LayerNorm.gamma");
    w.embedding_norm_bias =
        tensor(st, prefix, e + "LayerNorm.bias", {h}, "embeddings.LayerNorm.beta");
    for (int i = 0; i < c.num_layers; ++i) {
        const std::string p = "encoder.layer." + std::to_string(i) + ".";
        const auto norm = [&](const std::string& base, std::vector<float>& gain,
                              std::vector<float>& bias) {
            gain = tensor(st, prefix, p + base + ".weight", {h}, (p + base + ".gamma").c_str());
            bias = tensor(st, prefix, p + base + ".bias", {h}, (p + base + ".beta").c_str());
        };
        bert_layer_weights l;
        for (const char* part : {"query", "key", "value"}) {
            const std::string base = p + "attention.self." + part;
            const auto weight = tensor(st, prefix, base + ".weight", {h, h});
            const auto bias = tensor(st, prefix, base + ".bias", {h});
            l.qkv_weight.insert(l.qkv_weight.end(), weight.begin(), weight.end());
            l.qkv_bias.insert(l.qkv_bias.end(), bias.begin(), bias.end());
        }
        l.attention_out_weight = tensor(st, prefix, p + "attention.output.dense.weight", {h, h});
        l.attention_out_bias = tensor(st, prefix, p + "attention.output.dense.bias", {h});
        norm("attention.output.LayerNorm", l.attention_norm_gain, l.attention_norm_bias);
        l.ffn_in_weight = tensor(st, prefix, p + "intermediate.dense.weight", {inter, h});
        l.ffn_in_bias = tensor(st, prefix, p + "intermediate.dense.bias", {inter});
        l.ffn_out_weight = tensor(st, prefix, p + "output.dense.weight", {h, inter});
        l.ffn_out_bias = tensor(st, prefix, p + "output.dense.bias", {h});
        norm("output.LayerNorm", l.output_norm_gain, l.output_norm_bias);
        w.layers.push_back(std::move(l));
    }
    const std::string extra = prefix + "encoder.layer." + std::to_string(c.num_layers) + ".";
    for (const auto& [name, info] : st.tensors()) {
        if (name.starts_with(extra))
            throw error(display_name(file) + ": holds more layers than config.json's " +
                        "num_hidden_layers " + std::to_string(c.num_layers));
    }
    return w;
}

std::unique_ptr<embedder> load_model(const fs::path& dir, int threads) {
    if (!fs::is_directory(dir))
        throw error(display_name(dir) + ": model folder does not exist or is not a directory");
    if (threads < 1) throw error("load_model: threads must be at least 1");
    const auto config_file = dir / "config.json";
    const bert_config config = read_bert_config(config_file);

    std::optional<wordpiece_tokenizer> tokenizer;
    if (fs::exists(dir / "tokenizer.json")) {  // what Hugging Face's fast tokenizer reads
        tokenizer = wordpiece_tokenizer::from_tokenizer_json(dir / "tokenizer.json");
    } else if (fs::exists(dir / "vocab.txt")) {
        tokenizer = wordpiece_tokenizer::from_vocab_txt(dir / "vocab.txt");
    } else {
        throw error(display_name(dir) + ": neither tokenizer.json nor vocab.txt");
    }
    if (tokenizer->vocab_size() > config.vocab_size)
        throw error(display_name(dir / (fs::exists(dir / "tokenizer.json") ? "tokenizer.json"
                                                                           : "vocab.txt")) +
                    ": " + std::to_string(tokenizer->vocab_size()) +
                    " tokens, more than config.json's vocab_size " +
                    std::to_string(config.vocab_size));

    const pooling_mode pooling = read_pooling(dir);
    int max_tokens = config.max_position_embeddings;
    const auto st_config = dir / "sentence_bert_config.json";
    if (fs::exists(st_config)) {
        const auto doc = detail::read_json(st_config);
        if (const auto v = detail::get_int(doc, "max_seq_length", st_config)) {
            if (*v < 2 || *v > config.max_position_embeddings)
                throw error(display_name(st_config) + ": max_seq_length " + std::to_string(*v) +
                            " is not within 2..max_position_embeddings (" +
                            std::to_string(config.max_position_embeddings) + ")");
            max_tokens = static_cast<int>(*v);
        }
    }

    const auto weights_file = dir / "model.safetensors";
    if (!fs::exists(weights_file))
        throw error(display_name(weights_file) + ": missing (only safetensors weights are read)");
    bert_weights weights = read_bert_weights(weights_file, config);
    return std::make_unique<bert_embedder>(model_name(dir, config_file), std::move(*tokenizer),
                                           bert_encoder(config, std::move(weights), threads),
                                           pooling, max_tokens);
}

}  // namespace awp::embed
