// Unicode helpers of the tokenizer and the fallback: UTF-8 decoding, ICU properties, normalisation.
#pragma once

#include <string>
#include <string_view>

namespace awp::embed::unicode {

/// UTF-8 to code points; invalid sequences become U+FFFD (as a Rust String would refuse them).
std::u32string decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t c);
std::string encode_utf8(std::u32string_view text);

/// White_Space property (Rust char::is_whitespace), plus \t \n \r.
bool is_whitespace(char32_t c);
/// Cc, Cf, Co, Cs except \t \n \r, as Hugging Face's BertNormalizer removes them. Unassigned
/// code points (Cn) are kept (they become [UNK]), as the Rust and JS tokenizers both do.
bool is_control(char32_t c);
/// ASCII punctuation (so $ + < = > ^ ` | ~ count) or general category P*.
bool is_punctuation(char32_t c);
/// The CJK ideograph blocks BERT isolates (the same ranges as Google's and Hugging Face's code).
bool is_chinese_char(char32_t c);
bool is_nonspacing_mark(char32_t c);
/// Letters, digits and marks: the characters of a word for the fallback.
bool is_word_char(char32_t c);
/// Full lowercase mapping of one code point (İ gives "i̇", as Rust's char::to_lowercase).
void append_lowercase(std::u32string& out, char32_t c);

/// Canonical decomposition (NFD).
std::u32string nfd(const std::u32string& text);
/// NFKC with case folding (ICU's NFKC_Casefold), used by the fallback.
std::u32string nfkc_casefold(const std::u32string& text);

}  // namespace awp::embed::unicode
