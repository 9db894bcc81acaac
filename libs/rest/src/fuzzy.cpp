// The closest name for the data API's hints (fuzzy.hpp).
#include "fuzzy.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

namespace awp::rest::detail {

namespace {

/// Lower case, only word characters (letters, digits, '_'), commas and spaces kept (the fuzzy
/// set's normalisation).
std::string normalise(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '_' || c == ',' || c == ' ' || c >= 0x80) {
            out += static_cast<char>(std::tolower(c));
        }
    }
    return out;
}

std::string padded(const std::string& s) { return "-" + s + "-"; }

std::map<std::string, int> grams(const std::string& s, std::size_t n) {
    std::map<std::string, int> g;
    if (s.size() < n) {
        ++g[s];
        return g;
    }
    for (std::size_t i = 0; i + n <= s.size(); ++i) ++g[s.substr(i, n)];
    return g;
}

double cosine(const std::map<std::string, int>& a, const std::map<std::string, int>& b) {
    double dot = 0, na = 0, nb = 0;
    for (const auto& [k, v] : a) {
        na += v * v;
        auto it = b.find(k);
        if (it != b.end()) dot += v * it->second;
    }
    for (const auto& [k, v] : b) nb += v * v;
    return na > 0 && nb > 0 ? dot / (std::sqrt(na) * std::sqrt(nb)) : 0;
}

std::size_t levenshtein(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            cur[j] = std::min(
                {prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

}  // namespace

std::optional<std::string> fuzzy_best(const std::vector<std::string>& names, std::string_view query,
                                      double min_score) {
    const auto q = normalise(query);
    for (std::size_t n = 3; n >= 2; --n) {
        const auto qg = grams(padded(q), n);
        std::vector<std::pair<double, const std::string*>> scored;
        for (const auto& name : names) {
            const double s = cosine(qg, grams(padded(normalise(name)), n));
            if (s > 0) scored.emplace_back(s, &name);
        }
        std::sort(scored.begin(), scored.end(),
                  [](const auto& x, const auto& y) { return x.first > y.first; });
        if (scored.size() > 50) scored.resize(50);
        std::optional<std::string> best;
        double best_score = -1;
        for (const auto& [s, name] : scored) {
            const auto a = normalise(*name);
            const auto len = std::max(a.size(), q.size());
            const double lev =
                len == 0 ? 1.0
                         : 1.0 - static_cast<double>(levenshtein(a, q)) / static_cast<double>(len);
            if (lev >= min_score && lev > best_score) {
                best_score = lev;
                best = *name;
            }
        }
        if (best) return best;
    }
    return std::nullopt;
}

}  // namespace awp::rest::detail
