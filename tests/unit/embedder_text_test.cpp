// Unit tests of the embedder's text extraction and chunking.
#include <catch2/catch.hpp>

#include <string>

#include "text.hpp"

namespace embedder_text_test {

using namespace awp::embedder;

namespace {

// The code-point slice [start, end) of s.
std::string cp_slice(const std::string& s, std::size_t start, std::size_t end) {
    std::string out;
    std::size_t cp = 0;
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const std::size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
        if (cp >= start && cp < end) out.append(s, i, len);
        i += len;
        ++cp;
    }
    return out;
}

std::string sentence(int i) {
    return "Sentence number " + std::to_string(i) + " talks about résumé parsing, naïve café. ";
}

}  // namespace

TEST_CASE("nested rich-text documents yield their text, blocks and heading sections",
          "[embedder]") {
    const std::string doc = R"({"type":"doc","content":[
      {"type":"heading","attrs":{"level":1},"content":[{"type":"text","text":"Install"}]},
      {"type":"paragraph","content":[{"type":"text","text":"Run the "},
        {"type":"text","marks":[{"type":"bold"}],"text":"installer"},
        {"type":"text","text":" first."},{"type":"hardBreak"},{"type":"text","text":"Then reboot."}]},
      {"type":"heading","attrs":{"level":2},"content":[{"type":"text","text":"On Linux"}]},
      {"type":"bulletList","content":[
        {"type":"listItem","content":[{"type":"paragraph","content":[{"type":"text","text":"apt install awp"}]}]},
        {"type":"listItem","content":[{"type":"paragraph","content":[
          {"type":"text","text":"see "},{"type":"mention","attrs":{"id":"u1","label":"@ops"}}]}]}]},
      {"type":"heading","attrs":{"level":1},"content":[{"type":"text","text":"Usage"}]},
      {"type":"blockquote","content":[{"type":"paragraph","content":[{"type":"text","text":"Quoted tip"}]}]},
      {"type":"image","attrs":{"src":"x.png","alt":"not text"}}
    ]})";
    const auto body = extract_rich_text(doc);
    CHECK(body.text ==
          "Install\n\nRun the installer first.\nThen reboot.\n\nOn Linux\n\napt install "
          "awp\n\nsee @ops\n\nUsage\n\nQuoted tip");
    REQUIRE(body.sections.size() == 3);
    CHECK(body.sections[0].path == std::vector<std::string>{"Install"});
    CHECK(body.sections[1].path == std::vector<std::string>{"Install", "On Linux"});
    CHECK(body.sections[2].path == std::vector<std::string>{"Usage"});
    CHECK(cp_slice(body.text, body.sections[1].offset, body.sections[1].offset + 8) == "On Linux");

    // Content stored as a JSON string holding JSON, and Slate-style children.
    const auto nested = extract_rich_text(R"("{\"children\":[{\"type\":\"paragraph\",)"
                                          R"(\"children\":[{\"text\":\"slate text\"}]}]}")");
    CHECK(nested.text == "slate text");
    // Scalars that are not text are dropped; invalid JSON is taken as text.
    CHECK(extract_rich_text(R"({"type":"doc","attrs":{"id":7}})").text.empty());
    CHECK(extract_rich_text("not json at all").text == "not json at all");
}

TEST_CASE("item text is title, tags and body, plain_text wins over content", "[embedder]") {
    CHECK(item_text("  Title ", {"a", " ", "b"}, "\nBody\n") == "Title\n\na, b\n\nBody");
    CHECK(item_text("T", {}, "") == "T");
    const auto b = item_body(std::string("# H\nplain"), std::string(R"({"text":"rich"})"));
    CHECK(b.text == "# H\nplain");
    REQUIRE(b.sections.size() == 1);
    CHECK(b.sections[0].path == std::vector<std::string>{"H"});
    CHECK(item_body(std::string("   "), std::string(R"({"text":"rich"})")).text == "rich");
    CHECK(item_body(std::nullopt, std::nullopt).text.empty());
    CHECK(parse_text_array(R"({a,"b c","d\"e",NULL})") ==
          std::vector<std::string>{"a", "b c", "d\"e"});
    CHECK(parse_text_array("{}").empty());
}

TEST_CASE("chunk offsets cut the exact text, at sentence boundaries, with overlap", "[embedder]") {
    std::string text = "# Guide\n\n";
    for (int i = 0; i < 400; ++i) {
        text += sentence(i);
        if (i % 7 == 6) text += "\n\n";
        if (i == 200) text += "\n\n## Second part\n\n";
    }
    body_text body{text, markdown_sections(text)};
    const auto ch = make_chunks(body);
    REQUIRE(ch.chunks.size() >= 8);
    CHECK_FALSE(ch.truncated);
    CHECK(ch.length == utf8_length(text));
    std::size_t prev_end = 0;
    for (std::size_t i = 0; i < ch.chunks.size(); ++i) {
        const auto& c = ch.chunks[i];
        INFO("chunk " << i);
        CHECK(c.index == static_cast<int>(i));
        CHECK(c.content == cp_slice(text, c.char_start, c.char_end));
        CHECK(utf8_length(c.content) == c.char_end - c.char_start);
        CHECK(c.char_end - c.char_start <= 3500);
        CHECK(c.char_end - c.char_start >= 1750);
        CHECK_FALSE(c.page_number.has_value());
        if (i + 1 < ch.chunks.size()) {
            // Cut after a sentence end or a paragraph, never inside a word.
            const char last = c.content.back();
            CHECK((last == '.' || last == '\n'));
        }
        if (i > 0) {
            CHECK(c.char_start < prev_end);              // overlaps the previous chunk
            CHECK(prev_end - c.char_start <= 500);       // by at most the overlap
            CHECK(c.content.rfind("Sentence", 0) == 0);  // and starts at a sentence
        }
        prev_end = c.char_end;
    }
    CHECK(ch.chunks.back().char_end == utf8_length(text) - 1);  // trailing space trimmed
    CHECK(ch.chunks.front().section_path == std::vector<std::string>{"Guide"});
    CHECK(ch.chunks.back().section_path == std::vector<std::string>{"Guide", "Second part"});
}

TEST_CASE("chunking caps the count, reports truncation and numbers pages", "[embedder]") {
    std::string text;
    for (int page = 0; page < 3; ++page) {
        if (page) text += "\f";
        for (int i = 0; i < 60; ++i) text += sentence(i);
    }
    body_text body{text, {}};
    chunk_options o;
    o.size = 1000;
    o.overlap = 100;
    auto ch = make_chunks(body, o);
    REQUIRE(ch.chunks.size() > 3);
    CHECK(ch.chunks.front().page_number == 1);
    CHECK(ch.chunks.back().page_number == 3);
    for (const auto& c : ch.chunks) CHECK(c.content == cp_slice(text, c.char_start, c.char_end));

    o.max_chunks = 3;
    ch = make_chunks(body, o);
    CHECK(ch.chunks.size() == 3);
    CHECK(ch.truncated);
    CHECK(ch.covered_until < ch.length);

    // No boundary at all: hard cuts, still exact, never splitting a UTF-8 sequence.
    std::string dense;
    for (int i = 0; i < 3000; ++i) dense += "é";
    o = chunk_options{};
    o.size = 1000;
    o.overlap = 100;
    ch = make_chunks(body_text{dense, {}}, o);
    REQUIRE(ch.chunks.size() == 4);
    for (const auto& c : ch.chunks) {
        CHECK(c.content == cp_slice(dense, c.char_start, c.char_end));
        CHECK(c.char_end - c.char_start <= 1000);
    }
    CHECK(make_chunks(body_text{" \n\t ", {}}, o).chunks.empty());
}

}  // namespace embedder_text_test
