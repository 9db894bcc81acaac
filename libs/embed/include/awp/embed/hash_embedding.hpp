// The lexical fallback's scheme (awp-hash-384-v1), exposed for tests and for documentation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace awp::embed {

/// The words the fallback sees: NFKC + case folding, runs of letters, digits and marks; each
/// CJK ideograph is a word of its own.
std::vector<std::string> hash_words(std::string_view text);

/// 64-bit FNV-1a of the bytes, then the splitmix64 finaliser: fixed across builds and platforms
/// (std::hash is neither).
std::uint64_t stable_hash(std::string_view bytes, std::uint64_t seed);

/// The 384-dimensional, L2-normalised vector. `word_count` receives the number of words used.
/// Version 1 is frozen: any change to the scheme must get a new name.
std::vector<float> hash_embedding(std::string_view text, int* word_count = nullptr,
                                  bool* truncated = nullptr);

}  // namespace awp::embed
