// "Perhaps you meant ..." for the data API's errors: the closest name of a list, scored as
// PostgREST's fuzzy set does (character n-gram cosine similarity of sizes 3 then 2, the best
// candidates rescored by Levenshtein distance). Internal to awp::rest.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace awp::rest::detail {

/// The best match of `query` among `names` scoring at least `min_score` (0..1), if any.
[[nodiscard]] std::optional<std::string> fuzzy_best(const std::vector<std::string>& names,
                                                    std::string_view query, double min_score);

}  // namespace awp::rest::detail
