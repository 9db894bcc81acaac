// What the embedder reads from a knowledge item: its text (title, tags, body from plain_text or
// rich-text JSON), the section headings and pages inside the body, and the chunks cut from it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace awp::embedder {

/// A heading starts a section at `offset` (code points into the body); `path` is the list of
/// enclosing headings, outermost first.
struct section_mark {
    std::size_t offset = 0;
    std::vector<std::string> path;
};

/// The body of an item as the embedder sees it. Pages are separated by form feeds ('\f'),
/// as pdftotext writes them and as rich-text "page" nodes are rendered.
struct body_text {
    std::string text;
    std::vector<section_mark> sections;
};

/// Text of a rich-text JSON document (ProseMirror/Tiptap `content`, Slate `children`, or any
/// JSON with "text" strings): text nodes joined inline, blocks separated by a blank line,
/// hard breaks as newlines, headings recorded as sections. A JSON string holding JSON is parsed
/// once more; any other scalar is its own text. Invalid JSON yields the input unchanged.
body_text extract_rich_text(std::string_view json);

/// Sections of plain text: Markdown ATX headings ("# Title", "## Part") at line starts.
std::vector<section_mark> markdown_sections(std::string_view text);

/// The item's body: plain_text when it has non-blank text (exact, not trimmed, so chunk offsets
/// cut plain_text itself), else the text extracted from `content`.
body_text item_body(const std::optional<std::string>& plain_text,
                    const std::optional<std::string>& content_json);

/// The text the item vector is made from: title, tags (comma-separated) and body, the blank
/// parts left out, joined by blank lines.
std::string item_text(std::string_view title, const std::vector<std::string>& tags,
                      std::string_view body);

struct chunk_options {
    std::size_t size = 3500;    // target length in characters (code points)
    std::size_t overlap = 500;  // characters the next chunk repeats
    std::size_t max_chunks = 500;
};

struct chunk {
    int index = 0;
    std::string content;  // exactly body[char_start, char_end) in code points
    std::size_t char_start = 0;
    std::size_t char_end = 0;
    std::optional<int> page_number;  // 1-based, when the body has form-feed pages
    std::vector<std::string> section_path;
};

struct chunking {
    std::vector<chunk> chunks;
    bool truncated = false;         // max_chunks reached before the end of the body
    std::size_t covered_until = 0;  // code point where the last chunk ends
    std::size_t length = 0;         // body length in code points
};

/// Cuts the body into overlapping chunks, preferring a paragraph break, then a sentence end,
/// then a line break, then a space within the last half of each window; a chunk never starts or
/// ends with whitespace and never splits a UTF-8 sequence. Offsets are code points.
chunking make_chunks(const body_text& body, const chunk_options& o = {});

/// Splits "{a,b}" Postgres text[] output into its elements (quotes and escapes handled).
std::vector<std::string> parse_text_array(std::string_view literal);

/// Length in code points of UTF-8 text.
std::size_t utf8_length(std::string_view s);

}  // namespace awp::embedder
