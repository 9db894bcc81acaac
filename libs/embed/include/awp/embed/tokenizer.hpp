// WordPiece tokenizer that gives the same ids as Hugging Face's BertTokenizer(Fast).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace awp::embed {

/// The BertNormalizer / WordPiece settings of tokenizer.json (defaults: an uncased BERT).
struct tokenizer_options {
    bool clean_text = true;            ///< drop control characters, map whitespace to ' '
    bool handle_chinese_chars = true;  ///< every CJK ideograph becomes its own word
    bool strip_accents = true;         ///< NFD, then drop nonspacing marks (Mn)
    bool lowercase = true;
    int max_input_chars_per_word = 100;  ///< longer words become [UNK]
    std::string continuing_subword_prefix = "##";
    std::string unk_token = "[UNK]";
    std::string cls_token = "[CLS]";
    std::string sep_token = "[SEP]";
};

/// Token ids of one text: [CLS] pieces... [SEP].
struct encoding {
    std::vector<int> ids;
    bool truncated = false;
};

class wordpiece_tokenizer {
public:
    /// `vocab[i]` is the token of id i. `special_tokens` are matched verbatim in the raw text
    /// before normalisation (Hugging Face's added tokens: "[CLS]", "[MASK]", ...).
    wordpiece_tokenizer(std::vector<std::string> vocab, tokenizer_options options,
                        std::vector<std::string> special_tokens);

    /// vocab.txt (one token per line), with the settings of a sibling tokenizer_config.json if any.
    static wordpiece_tokenizer from_vocab_txt(const std::filesystem::path& file);
    /// A Hugging Face tokenizer.json with a BertNormalizer, BertPreTokenizer and WordPiece model.
    static wordpiece_tokenizer from_tokenizer_json(const std::filesystem::path& file);

    /// [CLS] + pieces + [SEP], cut like Hugging Face's truncation to at most max_tokens ids.
    encoding encode(std::string_view text, int max_tokens) const;
    /// The word pieces of a text, without [CLS]/[SEP] (for tests and debugging).
    std::vector<std::string> tokenize(std::string_view text) const;

    int vocab_size() const { return static_cast<int>(vocab_.size()); }
    /// Id of a token, or -1.
    int id_of(std::string_view token) const;
    const tokenizer_options& options() const { return options_; }

private:
    struct string_hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept {
            return std::hash<std::string_view>{}(s);
        }
    };
    // Calls sink(id, piece) for each piece; stops early when sink returns false.
    template <typename Sink>
    void for_each_piece(std::string_view text, Sink&& sink) const;
    template <typename Sink>
    bool wordpiece(const std::u32string& word, Sink& sink, std::string& scratch) const;

    std::vector<std::string> vocab_;
    std::unordered_map<std::string, int, string_hash, std::equal_to<>> ids_;
    tokenizer_options options_;
    std::vector<std::string> special_tokens_;  // longest first: leftmost-longest matching
    int unk_id_ = -1;
    int cls_id_ = -1;
    int sep_id_ = -1;
};

}  // namespace awp::embed
