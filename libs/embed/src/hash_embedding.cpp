// The lexical fallback awp-hash-384-v1: signed feature hashing of words, word pairs, char n-grams.
#include <awp/embed/embedder.hpp>
#include <awp/embed/hash_embedding.hpp>

#include <cmath>
#include <map>

#include "unicode.hpp"

namespace awp::embed {

namespace {

// Weights of the feature kinds: whole words count most, fragments least.
constexpr double kWordWeight = 1.0;
constexpr double kPairWeight = 0.5;
constexpr double kGramWeight = 0.25;
constexpr int kMinGram = 3;
constexpr int kMaxGram = 5;
constexpr int kHashes = 2;  // each feature lands in two buckets: fewer harmful collisions
// Bounds the work on huge inputs; the text beyond is ignored and reported as truncated.
constexpr std::size_t kMaxWords = 8192;

class hash_embedder final : public embedder {
public:
    std::string_view model_name() const override { return kFallbackModelName; }
    int dimensions() const override { return kFallbackDimensions; }
    int max_tokens() const override { return static_cast<int>(kMaxWords); }
    bool is_fallback() const override { return true; }
    std::vector<embedding_result> embed_batch(std::span<const std::string> texts) override {
        std::vector<embedding_result> out;
        out.reserve(texts.size());
        for (const auto& text : texts) {
            embedding_result r;
            r.vector = hash_embedding(text, &r.token_count, &r.truncated);
            r.model = std::string(kFallbackModelName);
            out.push_back(std::move(r));
        }
        return out;
    }
};

}  // namespace

std::uint64_t stable_hash(std::string_view bytes, std::uint64_t seed) {
    std::uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (char c : bytes) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ULL;
    }
    h += 0x9e3779b97f4a7c15ULL;
    h = (h ^ (h >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27U)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 31U);
}

std::vector<std::string> hash_words(std::string_view text) {
    const std::u32string folded = unicode::nfkc_casefold(unicode::decode_utf8(text));
    std::vector<std::string> words;
    std::u32string word;
    const auto flush = [&] {
        if (!word.empty()) words.push_back(unicode::encode_utf8(word));
        word.clear();
    };
    for (char32_t c : folded) {
        if (unicode::is_chinese_char(c)) {
            flush();
            word.push_back(c);
            flush();
        } else if (unicode::is_word_char(c)) {
            word.push_back(c);
        } else {
            flush();
        }
    }
    flush();
    return words;
}

std::vector<float> hash_embedding(std::string_view text, int* word_count, bool* truncated) {
    std::vector<std::string> words = hash_words(text);
    const bool cut = words.size() > kMaxWords;
    if (cut) words.resize(kMaxWords);
    if (word_count != nullptr) *word_count = static_cast<int>(words.size());
    if (truncated != nullptr) *truncated = cut;

    // Term frequencies per feature; the kind prefix keeps "w:ab" and a fragment "ab" apart.
    std::map<std::string, std::pair<double, int>> features;
    std::string key;
    const auto add = [&](double weight) {
        auto& f = features[key];
        f.first = weight;
        ++f.second;
    };
    for (std::size_t i = 0; i < words.size(); ++i) {
        key.assign("w:").append(words[i]);
        add(kWordWeight);
        if (i + 1 < words.size()) {
            key.assign("p:").append(words[i]).append(" ").append(words[i + 1]);
            add(kPairWeight);
        }
        std::u32string framed = unicode::decode_utf8(words[i]);
        framed.insert(framed.begin(), U'<');
        framed.push_back(U'>');
        for (int n = kMinGram; n <= kMaxGram; ++n) {
            const auto len = static_cast<std::size_t>(n);
            for (std::size_t s = 0; s + len <= framed.size(); ++s) {
                key.assign("c:");
                for (std::size_t k = s; k < s + len; ++k) unicode::append_utf8(key, framed[k]);
                add(kGramWeight);
            }
        }
    }
    if (features.empty()) {  // empty text: one fixed direction
        key.assign("e:");
        add(kWordWeight);
    }

    std::vector<double> v(static_cast<std::size_t>(kFallbackDimensions), 0.0);
    for (const auto& [feature, f] : features) {
        const double value = f.first * (1.0 + std::log(static_cast<double>(f.second)));
        for (int k = 0; k < kHashes; ++k) {
            const std::uint64_t h = stable_hash(feature, static_cast<std::uint64_t>(k));
            const auto bucket = static_cast<std::size_t>((h >> 1U) % kFallbackDimensions);
            v[bucket] += (h & 1U) ? -value : value;
        }
    }
    double norm = 0.0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    std::vector<float> out(v.size());
    // Collisions can cancel to zero only in theory; keep the unit norm promise anyway.
    if (norm == 0.0) {
        out[0] = 1.0F;
        return out;
    }
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i] / norm);
    return out;
}

std::unique_ptr<embedder> make_fallback() { return std::make_unique<hash_embedder>(); }

}  // namespace awp::embed
