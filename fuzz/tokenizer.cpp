// The embedder's WordPiece tokenizer on any text (what knowledge items and /embed inputs hold),
// with the test vocabulary: normalisation, accents, CJK, control characters, truncation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "awp/embed/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const auto tok = awp::embed::wordpiece_tokenizer::from_vocab_txt(
        AWP_SOURCE_DIR "/tests/fixtures/embed/tiny-vocab.txt");
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto e = tok.encode(text, 64);
    if (e.ids.size() > 64) __builtin_trap();
    (void)tok.encode(text, 2);
    return 0;
}
