// Text extraction from knowledge items and chunking with exact code-point offsets.
#include "text.hpp"

#include <algorithm>
#include <cstdint>

#include <rapidjson/document.h>

#include "awp/core/json.hpp"

namespace awp::embedder {

namespace {

// Decodes one UTF-8 sequence at `pos` and advances; invalid bytes read as U+FFFD, one byte each.
char32_t decode(std::string_view s, std::size_t& pos) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    if (b0 < 0x80) {
        ++pos;
        return b0;
    }
    int len = 0;
    char32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
        len = 2;
        cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3;
        cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4;
        cp = b0 & 0x07;
    } else {
        ++pos;
        return 0xFFFD;
    }
    if (pos + static_cast<std::size_t>(len) > s.size()) {
        ++pos;
        return 0xFFFD;
    }
    for (int i = 1; i < len; ++i) {
        const auto b = static_cast<unsigned char>(s[pos + static_cast<std::size_t>(i)]);
        if ((b & 0xC0) != 0x80) {
            ++pos;
            return 0xFFFD;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    pos += static_cast<std::size_t>(len);
    return cp;
}

bool is_space(char32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == 0xA0 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x3000 ||
           c == 0x202F || c == 0x205F;
}

bool is_sentence_end(char32_t c) {
    return c == '.' || c == '!' || c == '?' || c == 0x3002 || c == 0xFF01 || c == 0xFF1F ||
           c == 0x2026;
}

bool is_closing(char32_t c) {
    return c == '"' || c == '\'' || c == ')' || c == ']' || c == 0x201D || c == 0x2019;
}

std::string_view trim(std::string_view s) {
    const auto ws = " \t\r\n\f\v";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

// Builds the body of a rich-text document: blocks separated by a blank line (a form feed
// between pages), headings as sections.
class rich_text_builder {
public:
    body_text take() && { return std::move(out_); }

    void node(const rapidjson::Value& v) {
        if (v.IsArray()) {
            container(v);
        } else if (v.IsObject()) {
            object(v);
        } else if (v.IsString()) {
            block(std::string_view(v.GetString(), v.GetStringLength()), 0);
        } else if (v.IsNumber() || v.IsBool()) {
            block(scalar(v), 0);
        }
    }

private:
    static std::string scalar(const rapidjson::Value& v) {
        if (v.IsBool()) return v.GetBool() ? "true" : "false";
        if (v.IsInt64()) return std::to_string(v.GetInt64());
        if (v.IsUint64()) return std::to_string(v.GetUint64());
        if (v.IsDouble()) {
            std::string s = std::to_string(v.GetDouble());
            while (!s.empty() && s.back() == '0') s.pop_back();
            if (!s.empty() && s.back() == '.') s.pop_back();
            return s;
        }
        return {};
    }

    static std::string_view type_of(const rapidjson::Value& v) {
        if (!v.IsObject()) return {};
        auto it = v.FindMember("type");
        if (it == v.MemberEnd() || !it->value.IsString()) return {};
        return {it->value.GetString(), it->value.GetStringLength()};
    }

    static const rapidjson::Value* children_of(const rapidjson::Value& v) {
        for (const char* key : {"content", "children"}) {
            auto it = v.FindMember(key);
            if (it != v.MemberEnd() && it->value.IsArray()) return &it->value;
        }
        return nullptr;
    }

    static bool is_inline(const rapidjson::Value& v) {
        if (v.IsString()) return true;
        if (!v.IsObject()) return false;
        auto t = v.FindMember("text");
        if (t != v.MemberEnd() && t->value.IsString() && !children_of(v)) return true;
        const auto type = type_of(v);
        return type == "hardBreak" || type == "hard_break" || type == "mention" ||
               type == "emoji" || type == "link" || type == "hashtag" || type == "inlineCode";
    }

    // Heading level of a heading node, 0 for any other node.
    static int heading_level(const rapidjson::Value& v) {
        const auto type = type_of(v);
        int level = 0;
        if (type == "heading" || type == "header" || type == "title") {
            level = 1;
            const rapidjson::Value* l = nullptr;
            auto attrs = v.FindMember("attrs");
            if (attrs != v.MemberEnd() && attrs->value.IsObject()) {
                auto it = attrs->value.FindMember("level");
                if (it != attrs->value.MemberEnd()) l = &it->value;
            }
            if (!l) {
                auto it = v.FindMember("level");
                if (it != v.MemberEnd()) l = &it->value;
            }
            if (l && l->IsInt()) level = std::clamp(l->GetInt(), 1, 6);
        } else if (type.size() == 2 && type[0] == 'h' && type[1] >= '1' && type[1] <= '6') {
            level = type[1] - '0';
        } else if (type.starts_with("heading-") || type.starts_with("heading_")) {
            static constexpr std::string_view kWords[] = {"one",  "two",  "three",
                                                          "four", "five", "six"};
            for (int i = 0; i < 6; ++i) {
                if (type.substr(8) == kWords[i]) level = i + 1;
            }
        }
        return level;
    }

    void inline_text(const rapidjson::Value& v, std::string& acc) {
        if (v.IsString()) {
            acc.append(v.GetString(), v.GetStringLength());
            return;
        }
        if (!v.IsObject()) return;
        const auto type = type_of(v);
        if (type == "hardBreak" || type == "hard_break") {
            acc += '\n';
            return;
        }
        auto t = v.FindMember("text");
        if (t != v.MemberEnd() && t->value.IsString()) {
            acc.append(t->value.GetString(), t->value.GetStringLength());
            return;
        }
        if (const auto* kids = children_of(v)) {
            for (const auto& k : kids->GetArray()) inline_text(k, acc);
            return;
        }
        auto attrs = v.FindMember("attrs");
        if (attrs != v.MemberEnd() && attrs->value.IsObject()) {
            for (const char* key : {"label", "text", "id"}) {
                auto a = attrs->value.FindMember(key);
                if (a != attrs->value.MemberEnd() && a->value.IsString()) {
                    acc.append(a->value.GetString(), a->value.GetStringLength());
                    return;
                }
            }
        }
    }

    void block(std::string_view text, int heading) {
        const auto t = trim(text);
        if (t.empty()) return;
        if (!out_.text.empty()) {
            const std::string_view sep = page_break_ ? "\n\f\n" : "\n\n";
            out_.text += sep;
            length_ += sep.size();
        }
        page_break_ = false;
        if (heading > 0) {
            while (!headings_.empty() && headings_.back().first >= heading) headings_.pop_back();
            headings_.emplace_back(heading, std::string(t));
            section_mark m;
            m.offset = length_;
            for (const auto& h : headings_) m.path.push_back(h.second);
            out_.sections.push_back(std::move(m));
        }
        out_.text += t;
        length_ += utf8_length(t);
    }

    void container(const rapidjson::Value& arr) {
        std::string run;
        bool in_run = false;
        for (const auto& k : arr.GetArray()) {
            if (is_inline(k)) {
                inline_text(k, run);
                in_run = true;
                continue;
            }
            if (in_run) {
                block(run, 0);
                run.clear();
                in_run = false;
            }
            node(k);
        }
        if (in_run) block(run, 0);
    }

    void object(const rapidjson::Value& v) {
        const auto type = type_of(v);
        if (type == "pageBreak" || type == "page_break") {
            if (!out_.text.empty()) page_break_ = true;
            return;
        }
        if (type == "page" && !out_.text.empty()) page_break_ = true;
        if (is_inline(v)) {
            std::string s;
            inline_text(v, s);
            block(s, 0);
            return;
        }
        const int level = heading_level(v);
        if (const auto* kids = children_of(v)) {
            const bool all_inline =
                std::all_of(kids->Begin(), kids->End(), [](const auto& k) { return is_inline(k); });
            if (all_inline || level > 0) {
                std::string s;
                for (const auto& k : kids->GetArray()) inline_text(k, s);
                block(s, level);
            } else {
                container(*kids);
            }
            return;
        }
        // Any other JSON: its title first, then every nested object or array; other scalars
        // (type names, attributes, ids) are not text.
        auto title = v.FindMember("title");
        if (title != v.MemberEnd() && title->value.IsString()) {
            block(std::string_view(title->value.GetString(), title->value.GetStringLength()), 0);
        }
        for (const auto& m : v.GetObject()) {
            if (m.value.IsObject() || m.value.IsArray()) node(m.value);
        }
    }

    body_text out_;
    std::size_t length_ = 0;
    bool page_break_ = false;
    std::vector<std::pair<int, std::string>> headings_;
};

}  // namespace

std::size_t utf8_length(std::string_view s) {
    std::size_t n = 0;
    for (std::size_t pos = 0; pos < s.size(); ++n) decode(s, pos);
    return n;
}

body_text extract_rich_text(std::string_view json) {
    // Depth is bounded here: rich_text_builder walks the document recursively.
    auto parsed = core::json::try_parse(json, core::json::kDocument);
    if (!parsed) return body_text{std::string(json), {}};
    const rapidjson::Document& doc = *parsed;
    // A JSON string that itself holds a JSON document (content stored as text).
    if (doc.IsString()) {
        const std::string_view inner(doc.GetString(), doc.GetStringLength());
        auto nested = core::json::try_parse(inner, core::json::kDocument);
        if (nested && (nested->IsObject() || nested->IsArray())) {
            rich_text_builder b;
            b.node(*nested);
            return std::move(b).take();
        }
        return body_text{std::string(trim(inner)), {}};
    }
    rich_text_builder b;
    b.node(doc);
    return std::move(b).take();
}

std::vector<section_mark> markdown_sections(std::string_view text) {
    std::vector<section_mark> out;
    std::vector<std::pair<int, std::string>> stack;
    std::size_t pos = 0;
    std::size_t cp = 0;
    bool fenced = false;
    while (pos < text.size()) {
        auto nl = text.find('\n', pos);
        if (nl == std::string_view::npos) nl = text.size();
        const auto line = text.substr(pos, nl - pos);
        if (line.starts_with("```") || line.starts_with("~~~")) fenced = !fenced;
        std::size_t hashes = 0;
        while (hashes < line.size() && line[hashes] == '#') ++hashes;
        if (!fenced && hashes >= 1 && hashes <= 6 && hashes < line.size() &&
            (line[hashes] == ' ' || line[hashes] == '\t')) {
            auto title = trim(line.substr(hashes));
            while (!title.empty() && title.back() == '#') title.remove_suffix(1);
            title = trim(title);
            if (!title.empty()) {
                const int level = static_cast<int>(hashes);
                while (!stack.empty() && stack.back().first >= level) stack.pop_back();
                stack.emplace_back(level, std::string(title));
                section_mark m;
                m.offset = cp;
                for (const auto& h : stack) m.path.push_back(h.second);
                out.push_back(std::move(m));
            }
        }
        cp += utf8_length(line) + (nl < text.size() ? 1 : 0);
        pos = nl + 1;
    }
    return out;
}

body_text item_body(const std::optional<std::string>& plain_text,
                    const std::optional<std::string>& content_json) {
    if (plain_text && !trim(*plain_text).empty()) {
        return body_text{*plain_text, markdown_sections(*plain_text)};
    }
    if (content_json && !content_json->empty() && *content_json != "null") {
        return extract_rich_text(*content_json);
    }
    return {};
}

std::string item_text(std::string_view title, const std::vector<std::string>& tags,
                      std::string_view body) {
    std::string tag_line;
    for (const auto& t : tags) {
        const auto s = trim(t);
        if (s.empty()) continue;
        if (!tag_line.empty()) tag_line += ", ";
        tag_line += s;
    }
    std::string out;
    for (std::string_view part : {trim(title), std::string_view(tag_line), trim(body)}) {
        if (part.empty()) continue;
        if (!out.empty()) out += "\n\n";
        out += part;
    }
    return out;
}

chunking make_chunks(const body_text& body, const chunk_options& o) {
    chunking result;
    const std::string_view text = body.text;
    const std::size_t size = std::max<std::size_t>(o.size, 2);
    const std::size_t overlap = std::min(o.overlap, size / 2);
    // Code points past what max_chunks windows can reach are never looked at.
    const std::size_t limit = o.max_chunks * size + 1;
    std::vector<std::uint32_t> byte_of;  // code point index -> byte offset, plus the end
    std::vector<char32_t> cps;
    std::size_t pos = 0;
    while (pos < text.size() && cps.size() < limit) {
        byte_of.push_back(static_cast<std::uint32_t>(pos));
        cps.push_back(decode(text, pos));
    }
    byte_of.push_back(static_cast<std::uint32_t>(pos));
    const std::size_t n = cps.size();
    const bool cut_short = pos < text.size();
    result.length = cut_short ? n + utf8_length(text.substr(pos)) : n;
    const bool has_pages = text.find('\f') != std::string_view::npos;

    const auto ws = [&](std::size_t i) { return is_space(cps[i]); };
    const auto skip_ws = [&](std::size_t i) {
        while (i < n && ws(i)) ++i;
        return i;
    };
    // Rank of a cut before code point p (chunk = [start, p)): 4 paragraph, 3 sentence,
    // 2 line, 1 space, 0 none.
    const auto cut_rank = [&](std::size_t p) -> int {
        const char32_t prev = cps[p - 1];
        if (prev == '\f') return 4;
        if (prev == '\n') {
            std::size_t q = p - 1;
            while (q > 0 && (cps[q - 1] == ' ' || cps[q - 1] == '\t' || cps[q - 1] == '\r')) --q;
            if (q > 0 && (cps[q - 1] == '\n' || cps[q - 1] == '\f')) return 4;
        }
        if (is_space(prev) && p >= 2) {
            std::size_t q = p - 1;
            while (q > 0 && is_closing(cps[q - 1])) --q;
            if (q > 0 && is_sentence_end(cps[q - 1])) return 3;
        }
        if (prev == 0x3002 || prev == 0xFF01 || prev == 0xFF1F) return 3;
        if (prev == '\n') return 2;
        if (is_space(prev)) return 1;
        return 0;
    };

    std::size_t start = skip_ws(0);
    std::size_t page = 1;
    std::size_t page_scan = 0;
    std::size_t section = 0;
    while (start < n) {
        if (result.chunks.size() >= o.max_chunks) {
            result.truncated = true;
            break;
        }
        const std::size_t hard = std::min(start + size, n);
        std::size_t end = hard;
        if (hard < n) {
            const std::size_t lo = start + size / 2;
            std::size_t best[5] = {0, 0, 0, 0, 0};
            for (std::size_t p = hard; p > lo; --p) {
                const int r = cut_rank(p);
                if (r > 0 && best[r] == 0) best[r] = p;
                if (r == 4) break;
            }
            for (int r = 4; r >= 1; --r) {
                if (best[r] != 0) {
                    end = best[r];
                    break;
                }
            }
        }
        std::size_t e = end;
        while (e > start && ws(e - 1)) --e;
        if (e == start) e = end;

        chunk c;
        c.index = static_cast<int>(result.chunks.size());
        c.char_start = start;
        c.char_end = e;
        c.content = std::string(text.substr(byte_of[start], byte_of[e] - byte_of[start]));
        if (has_pages) {
            for (; page_scan < start; ++page_scan) {
                if (cps[page_scan] == '\f') ++page;
            }
            c.page_number = static_cast<int>(page);
        }
        while (section < body.sections.size() && body.sections[section].offset <= start) ++section;
        if (section > 0) c.section_path = body.sections[section - 1].path;
        result.chunks.push_back(std::move(c));
        result.covered_until = e;

        if (skip_ws(end) >= n) break;
        // The next window repeats up to `overlap` characters, starting at a sentence or word.
        std::size_t next = std::max(e > overlap ? e - overlap : 0, start + 1);
        const std::size_t bound = std::min(e, next + std::max<std::size_t>(overlap / 2, 1));
        std::size_t word = 0;
        std::size_t sentence = 0;
        for (std::size_t p = next; p < bound; ++p) {
            if (p == 0 || ws(p)) continue;
            const int r = cut_rank(p);
            if (r >= 2) {
                sentence = p;
                break;
            }
            if (r == 1 && word == 0) word = p;
        }
        if (sentence != 0) {
            next = sentence;
        } else if (word != 0) {
            next = word;
        }
        next = skip_ws(next);
        if (next <= start) next = start + 1;
        start = next;
    }
    if (!result.truncated && cut_short && result.covered_until < result.length) {
        result.truncated = true;
    }
    return result;
}

std::vector<std::string> parse_text_array(std::string_view s) {
    std::vector<std::string> out;
    if (s.size() < 2 || s.front() != '{' || s.back() != '}') return out;
    s = s.substr(1, s.size() - 2);
    std::size_t i = 0;
    while (i < s.size()) {
        std::string item;
        bool quoted = false;
        if (s[i] == '"') {
            quoted = true;
            ++i;
            while (i < s.size() && s[i] != '"') {
                if (s[i] == '\\' && i + 1 < s.size()) ++i;
                item += s[i++];
            }
            ++i;  // closing quote
        } else {
            while (i < s.size() && s[i] != ',') item += s[i++];
        }
        if (quoted || item != "NULL") out.push_back(std::move(item));
        if (i < s.size() && s[i] == ',') ++i;
    }
    return out;
}

}  // namespace awp::embedder
