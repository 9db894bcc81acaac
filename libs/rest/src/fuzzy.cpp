// The fuzzy set behind PostgREST's "Perhaps you meant ..." hints (fuzzy.hpp).
#include "fuzzy.hpp"

#include <algorithm>
#include <cmath>

namespace awp::rest::detail {

namespace {

// UTF-8 → code points, lowercased (ASCII letters; names here are identifiers). A byte that
// does not start a valid sequence stands for itself, so nothing is lost or throws.
std::u32string lower_code_points(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        std::size_t len = b < 0x80           ? 1
                          : (b >> 5) == 0x6  ? 2
                          : (b >> 4) == 0xe  ? 3
                          : (b >> 3) == 0x1e ? 4
                                             : 0;
        char32_t cp = 0;
        if (len == 0 || i + len > s.size()) {
            cp = b;
            len = 1;
        } else if (len == 1) {
            cp = b;
        } else {
            cp = b & (0x7f >> len);
            for (std::size_t k = 1; k < len; ++k) {
                cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
            }
        }
        if (cp >= U'A' && cp <= U'Z') cp += U'a' - U'A';
        out.push_back(cp);
        i += len;
    }
    return out;
}

// The fuzzyset package's normalisation before cutting grams: letters, digits, white space and
// commas stay (anything beyond ASCII counts as a letter), the rest goes ('_', '(', '.').
std::u32string normalized(const std::u32string& s) {
    std::u32string out;
    for (char32_t c : s) {
        const bool alnum = (c >= U'a' && c <= U'z') || (c >= U'0' && c <= U'9') || c >= 0x80;
        const bool space = c == U' ' || (c >= U'\t' && c <= U'\r');
        if (alnum || space || c == U',') out.push_back(c);
    }
    return out;
}

// The n-grams of "-<normalized>-" and how often each occurs.
std::map<std::u32string, int> gram_counts(const std::u32string& key, std::size_t n) {
    const std::u32string s = U"-" + normalized(key) + U"-";
    std::map<std::u32string, int> counts;
    for (std::size_t i = 0; i + n <= s.size(); ++i) ++counts[s.substr(i, n)];
    return counts;
}

double magnitude(const std::map<std::u32string, int>& counts) {
    double sum = 0;
    for (const auto& [gram, c] : counts) sum += static_cast<double>(c) * c;
    return std::sqrt(sum);
}

}  // namespace

double levenshtein_similarity(std::u32string_view a, std::u32string_view b) {
    const std::size_t longest = std::max(a.size(), b.size());
    if (longest == 0) return 1.0;
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] =
                std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return 1.0 - static_cast<double>(row[b.size()]) / static_cast<double>(longest);
}

void fuzzy_set::add(std::string_view value) {
    auto key = lower_code_points(value);
    if (exact_.contains(key)) return;
    for (std::size_t n = 2; n <= 3; ++n) {
        auto& g = by_size_[n - 2];
        const auto counts = gram_counts(key, n);
        const std::size_t index = g.items.size();
        g.items.push_back({magnitude(counts), key});
        for (const auto& [gram, c] : counts) g.index[gram].emplace_back(index, c);
    }
    exact_.emplace(std::move(key), std::string(value));
}

std::vector<std::pair<double, std::string>> fuzzy_set::get(std::string_view query,
                                                           double min_score) const {
    const auto key = lower_code_points(query);
    if (auto it = exact_.find(key); it != exact_.end()) return {{1.0, it->second}};
    // Trigrams first; bigrams only when trigrams found nothing good enough.
    for (std::size_t n = 3; n >= 2; --n) {
        const auto& g = by_size_[n - 2];
        const auto counts = gram_counts(key, n);
        const double query_magnitude = magnitude(counts);
        std::map<std::size_t, int> dot;
        for (const auto& [gram, c] : counts) {
            auto it = g.index.find(gram);
            if (it == g.index.end()) continue;
            for (const auto& [index, count] : it->second) dot[index] += c * count;
        }
        std::vector<std::pair<double, std::size_t>> scored;
        for (const auto& [index, d] : dot) {
            scored.emplace_back(d / (query_magnitude * g.items[index].magnitude), index);
        }
        auto by_score = [](const auto& a, const auto& b) { return a.first > b.first; };
        std::stable_sort(scored.begin(), scored.end(), by_score);
        // The cosine only shortlists: the 50 best are ranked again by edit distance.
        if (scored.size() > 50) scored.resize(50);
        for (auto& [score, index] : scored) {
            score = levenshtein_similarity(key, g.items[index].key);
        }
        std::stable_sort(scored.begin(), scored.end(), by_score);
        std::vector<std::pair<double, std::string>> out;
        for (const auto& [score, index] : scored) {
            if (score >= min_score) out.emplace_back(score, exact_.at(g.items[index].key));
        }
        if (!out.empty()) return out;
        if (n == 2) break;
    }
    return {};
}

std::optional<std::string> fuzzy_set::get_one(std::string_view query, double min_score) const {
    auto all = get(query, min_score);
    if (all.empty()) return std::nullopt;
    return std::move(all.front().second);
}

}  // namespace awp::rest::detail
