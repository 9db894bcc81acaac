// The approximate string match behind PostgREST's "Perhaps you meant ..." hints: the algorithm
// of the fuzzyset package PostgREST uses (n-gram cosine similarity to shortlist, normalised
// Levenshtein distance to rank). Ties between equal scores are broken by insertion order here,
// by hash order there, so with two equally close names the suggestion may differ.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace awp::rest::detail {

class fuzzy_set {
public:
    fuzzy_set() = default;
    explicit fuzzy_set(const std::vector<std::string>& values) {
        for (const auto& v : values) add(v);
    }
    /// Adds a value (case-insensitively unique: a second "Foo" after "foo" is ignored).
    void add(std::string_view value);
    /// Every value scoring at least `min_score` against `query`, best first; an exact
    /// (case-insensitive) match alone with score 1.
    [[nodiscard]] std::vector<std::pair<double, std::string>> get(std::string_view query,
                                                                  double min_score = 0.33) const;
    /// The best value scoring at least `min_score`, if any.
    [[nodiscard]] std::optional<std::string> get_one(std::string_view query,
                                                     double min_score = 0.33) const;
    [[nodiscard]] std::size_t size() const noexcept { return exact_.size(); }

private:
    struct item {
        double magnitude = 0;
        std::u32string key;  // the lowercased value
    };
    // per gram size (2 and 3): the items, and each gram's (item index, count) list
    struct grams {
        std::vector<item> items;
        std::map<std::u32string, std::vector<std::pair<std::size_t, int>>> index;
    };
    grams by_size_[2];
    std::map<std::u32string, std::string> exact_;  // lowercased key → the value as added
};

/// 1 - levenshtein(a, b) / max(|a|, |b|), over code points (1 for two empty strings).
[[nodiscard]] double levenshtein_similarity(std::u32string_view a, std::u32string_view b);

}  // namespace awp::rest::detail
