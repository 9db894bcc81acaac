// WordPiece tokenizer: Hugging Face's BertNormalizer + BertPreTokenizer + WordPiece, step by step.
#include <awp/embed/error.hpp>
#include <awp/embed/tokenizer.hpp>

#include <algorithm>
#include <fstream>
#include <utility>

#include "json_file.hpp"
#include "unicode.hpp"

namespace awp::embed {

namespace {

using detail::display_name;

constexpr const char* kDefaultSpecialTokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

}  // namespace

wordpiece_tokenizer::wordpiece_tokenizer(std::vector<std::string> vocab, tokenizer_options options,
                                         std::vector<std::string> special_tokens)
    : vocab_(std::move(vocab)),
      options_(std::move(options)),
      special_tokens_(std::move(special_tokens)) {
    ids_.reserve(vocab_.size());
    for (std::size_t i = 0; i < vocab_.size(); ++i) ids_.emplace(vocab_[i], static_cast<int>(i));
    unk_id_ = id_of(options_.unk_token);
    cls_id_ = id_of(options_.cls_token);
    sep_id_ = id_of(options_.sep_token);
    if (unk_id_ < 0 || cls_id_ < 0 || sep_id_ < 0) {
        throw error("tokenizer vocabulary lacks " + (unk_id_ < 0   ? options_.unk_token
                                                     : cls_id_ < 0 ? options_.cls_token
                                                                   : options_.sep_token));
    }
    std::erase_if(special_tokens_, [](const std::string& s) { return s.empty(); });
    std::stable_sort(
        special_tokens_.begin(), special_tokens_.end(),
        [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

int wordpiece_tokenizer::id_of(std::string_view token) const {
    const auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
}

wordpiece_tokenizer wordpiece_tokenizer::from_vocab_txt(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw error(display_name(file) + ": missing or unreadable");
    std::vector<std::string> vocab;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        vocab.push_back(line);
    }
    if (vocab.empty()) throw error(display_name(file) + ": empty vocabulary");

    tokenizer_options options;
    const auto config_file = file.parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(config_file)) {
        const auto config = detail::read_json(config_file);
        options.lowercase = detail::get_bool(config, "do_lower_case", config_file).value_or(true);
        // strip_accents: null means "follow lowercase", as in BertTokenizer.
        options.strip_accents =
            detail::get_bool(config, "strip_accents", config_file).value_or(options.lowercase);
        options.handle_chinese_chars =
            detail::get_bool(config, "tokenize_chinese_chars", config_file).value_or(true);
        for (auto [key, target] : {std::pair{"unk_token", &options.unk_token},
                                   std::pair{"cls_token", &options.cls_token},
                                   std::pair{"sep_token", &options.sep_token}}) {
            if (config.IsObject() && config.HasMember(key) && config[key].IsString())
                *target = config[key].GetString();
        }
    }
    std::vector<std::string> specials;
    for (const char* s : kDefaultSpecialTokens) specials.emplace_back(s);
    for (const auto& s : {options.unk_token, options.cls_token, options.sep_token})
        specials.push_back(s);
    std::erase_if(specials, [&](const std::string& s) {
        return std::find(vocab.begin(), vocab.end(), s) == vocab.end();
    });
    try {
        return wordpiece_tokenizer(std::move(vocab), std::move(options), std::move(specials));
    } catch (const error& e) {
        throw error(display_name(file) + ": " + e.what());
    }
}

wordpiece_tokenizer wordpiece_tokenizer::from_tokenizer_json(const std::filesystem::path& file) {
    const auto doc = detail::read_json(file);
    const auto name = display_name(file);
    if (!doc.IsObject()) throw error(name + ": not a JSON object");

    const auto object = [&](const char* key) -> const rapidjson::Value& {
        if (!doc.HasMember(key) || !doc[key].IsObject())
            throw error(name + ": \"" + key + "\" missing or not an object");
        return doc[key];
    };
    const auto& model = object("model");
    if (detail::get_string(model, "type", file).value_or("") != "WordPiece")
        throw error(name + ": model.type must be \"WordPiece\" (a BERT tokenizer)");
    tokenizer_options options;
    options.unk_token = detail::get_string(model, "unk_token", file).value_or("[UNK]");
    options.continuing_subword_prefix =
        detail::get_string(model, "continuing_subword_prefix", file).value_or("##");
    options.max_input_chars_per_word =
        static_cast<int>(detail::get_int(model, "max_input_chars_per_word", file).value_or(100));

    const auto& normalizer = object("normalizer");
    if (detail::get_string(normalizer, "type", file).value_or("") != "BertNormalizer")
        throw error(name + ": normalizer.type must be \"BertNormalizer\"");
    options.clean_text = detail::get_bool(normalizer, "clean_text", file).value_or(true);
    options.handle_chinese_chars =
        detail::get_bool(normalizer, "handle_chinese_chars", file).value_or(true);
    options.lowercase = detail::get_bool(normalizer, "lowercase", file).value_or(true);
    options.strip_accents =
        detail::get_bool(normalizer, "strip_accents", file).value_or(options.lowercase);

    const auto& pre = object("pre_tokenizer");
    if (detail::get_string(pre, "type", file).value_or("") != "BertPreTokenizer")
        throw error(name + ": pre_tokenizer.type must be \"BertPreTokenizer\"");

    if (doc.HasMember("post_processor") && doc["post_processor"].IsObject()) {
        const auto& post = doc["post_processor"];
        const auto type = detail::get_string(post, "type", file).value_or("");
        if (type == "BertProcessing") {
            for (auto [key, target] :
                 {std::pair{"cls", &options.cls_token}, std::pair{"sep", &options.sep_token}}) {
                if (post.HasMember(key) && post[key].IsArray() && !post[key].Empty() &&
                    post[key][0].IsString())
                    *target = post[key][0].GetString();
            }
        } else if (type == "TemplateProcessing" && post.HasMember("single") &&
                   post["single"].IsArray()) {
            // [CLS] $A [SEP]: the first and last special tokens of the single-sequence template.
            std::vector<std::string> specials;
            for (const auto& item : post["single"].GetArray()) {
                if (item.IsObject() && item.HasMember("SpecialToken") &&
                    item["SpecialToken"].HasMember("id") && item["SpecialToken"]["id"].IsString())
                    specials.emplace_back(item["SpecialToken"]["id"].GetString());
            }
            if (specials.size() != 2)
                throw error(name + ": post_processor must frame one sequence as [CLS] $A [SEP]");
            options.cls_token = specials.front();
            options.sep_token = specials.back();
        } else if (!type.empty()) {
            throw error(name + ": unsupported post_processor \"" + type + "\"");
        }
    }

    if (!model.HasMember("vocab") || !model["vocab"].IsObject())
        throw error(name + ": model.vocab missing or not an object");
    const auto& vocab_json = model["vocab"];
    std::vector<std::string> vocab(vocab_json.MemberCount());
    std::vector<bool> seen(vocab.size(), false);
    for (const auto& entry : vocab_json.GetObject()) {
        const std::string token(entry.name.GetString(), entry.name.GetStringLength());
        if (!entry.value.IsInt() || entry.value.GetInt() < 0 ||
            static_cast<std::size_t>(entry.value.GetInt()) >= vocab.size() ||
            seen[static_cast<std::size_t>(entry.value.GetInt())])
            throw error(name + ": model.vocab id of \"" + token +
                        "\" is not a unique id below the vocabulary size");
        const auto id = static_cast<std::size_t>(entry.value.GetInt());
        seen[id] = true;
        vocab[id] = token;
    }

    std::vector<std::string> specials;
    if (doc.HasMember("added_tokens") && doc["added_tokens"].IsArray()) {
        for (const auto& token : doc["added_tokens"].GetArray()) {
            const auto content = detail::get_string(token, "content", file);
            // Tokens with normalized=true would be matched after normalisation; BERT has none.
            if (content && !detail::get_bool(token, "normalized", file).value_or(false))
                specials.push_back(*content);
        }
    }
    try {
        return wordpiece_tokenizer(std::move(vocab), std::move(options), std::move(specials));
    } catch (const error& e) {
        throw error(name + ": " + e.what());
    }
}

template <typename Sink>
bool wordpiece_tokenizer::wordpiece(const std::u32string& word, Sink& sink,
                                    std::string& scratch) const {
    if (word.empty()) return true;
    if (static_cast<long long>(word.size()) > options_.max_input_chars_per_word)
        return sink(unk_id_);
    // Byte offset of every character, so candidates are cut on character boundaries.
    std::string utf8;
    std::vector<std::size_t> offsets;
    offsets.reserve(word.size() + 1);
    for (char32_t c : word) {
        offsets.push_back(utf8.size());
        unicode::append_utf8(utf8, c);
    }
    offsets.push_back(utf8.size());

    std::vector<int> pieces;
    std::size_t start = 0;
    const std::size_t n = word.size();
    while (start < n) {
        int found = -1;
        std::size_t end = n;
        for (; end > start; --end) {
            scratch.clear();
            if (start > 0) scratch += options_.continuing_subword_prefix;
            scratch.append(utf8, offsets[start], offsets[end] - offsets[start]);
            found = id_of(scratch);
            if (found >= 0) break;
        }
        if (found < 0) return sink(unk_id_);  // one unmatched piece makes the whole word [UNK]
        pieces.push_back(found);
        start = end;
    }
    for (int id : pieces) {
        if (!sink(id)) return false;
    }
    return true;
}

template <typename Sink>
void wordpiece_tokenizer::for_each_piece(std::string_view text, Sink&& sink) const {
    std::string scratch;
    std::u32string word;
    // Normalises one stretch of text between special tokens and feeds its words to WordPiece.
    const auto run_segment = [&](std::string_view segment) -> bool {
        const std::u32string raw = unicode::decode_utf8(segment);
        std::u32string text32;
        text32.reserve(raw.size());
        bool ascii = true;
        for (char32_t c : raw) {
            if (options_.clean_text) {
                if (c == 0 || c == 0xFFFD || unicode::is_control(c)) continue;
                if (unicode::is_whitespace(c)) c = U' ';
            }
            if (options_.handle_chinese_chars && unicode::is_chinese_char(c)) {
                text32.push_back(U' ');
                text32.push_back(c);
                text32.push_back(U' ');
            } else {
                text32.push_back(c);
            }
            ascii = ascii && c < 0x80;
        }
        if (options_.strip_accents && !ascii) {
            text32 = unicode::nfd(text32);
            std::erase_if(text32, [](char32_t c) { return unicode::is_nonspacing_mark(c); });
        }
        if (options_.lowercase) {
            std::u32string lower;
            lower.reserve(text32.size());
            for (char32_t c : text32) unicode::append_lowercase(lower, c);
            text32 = std::move(lower);
        }
        // BertPreTokenizer: whitespace separates words, each punctuation character is a word.
        word.clear();
        for (char32_t c : text32) {
            if (unicode::is_whitespace(c)) {
                if (!wordpiece(word, sink, scratch)) return false;
                word.clear();
            } else if (unicode::is_punctuation(c)) {
                if (!wordpiece(word, sink, scratch)) return false;
                word.assign(1, c);
                if (!wordpiece(word, sink, scratch)) return false;
                word.clear();
            } else {
                word.push_back(c);
            }
        }
        return wordpiece(word, sink, scratch);
    };

    // Special tokens are matched verbatim, leftmost and then longest, before normalisation.
    std::size_t pos = 0;
    std::size_t segment_start = 0;
    while (pos < text.size()) {
        const std::string* match = nullptr;
        for (const auto& s : special_tokens_) {
            if (text.compare(pos, s.size(), s) == 0) {
                match = &s;
                break;
            }
        }
        if (match == nullptr) {
            ++pos;
            continue;
        }
        if (!run_segment(text.substr(segment_start, pos - segment_start))) return;
        if (!sink(id_of(*match))) return;
        pos += match->size();
        segment_start = pos;
    }
    run_segment(text.substr(segment_start));
}

encoding wordpiece_tokenizer::encode(std::string_view text, int max_tokens) const {
    if (max_tokens < 2) throw error("tokenizer: max_tokens must be at least 2");
    const auto budget = static_cast<std::size_t>(max_tokens - 2);
    encoding out;
    out.ids.push_back(cls_id_);
    for_each_piece(text, [&](int id) {
        if (out.ids.size() - 1 == budget) {
            out.truncated = true;
            return false;
        }
        out.ids.push_back(id);
        return true;
    });
    out.ids.push_back(sep_id_);
    return out;
}

std::vector<std::string> wordpiece_tokenizer::tokenize(std::string_view text) const {
    std::vector<std::string> out;
    for_each_piece(text, [&](int id) {
        out.push_back(vocab_[static_cast<std::size_t>(id)]);
        return true;
    });
    return out;
}

}  // namespace awp::embed
