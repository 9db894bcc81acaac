// The serving rules of content.hpp: extension types, signatures, the inline list and its
// agreement with the bytes.
#include "awp/storage/content.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "awp/core/json.hpp"
#include "awp/http/message.hpp"

namespace awp::storage {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool starts_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

/// Case-insensitive prefix test for ASCII markup.
bool starts_with_ci(std::string_view s, std::string_view p) {
    if (s.size() < p.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
    }
    return true;
}

bool is_token(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) return false;
    return std::string_view("()<>@,;:\\\"/[]?={}").find(c) == std::string_view::npos;
}

/// The markup a browser sniffs as HTML (WHATWG MIME Sniffing, "scriptable" patterns): a tag
/// name followed by a space or '>' (or the comment opener).
bool looks_like_html(std::string_view s) {
    static constexpr std::string_view kTags[] = {"<!doctype html",
                                                 "<html",
                                                 "<head",
                                                 "<script",
                                                 "<iframe",
                                                 "<h1",
                                                 "<div",
                                                 "<font",
                                                 "<table",
                                                 "<a",
                                                 "<style",
                                                 "<title",
                                                 "<b",
                                                 "<body",
                                                 "<br",
                                                 "<p",
                                                 "<!--"};
    for (const auto tag : kTags) {
        if (!starts_with_ci(s, tag)) continue;
        if (tag == "<!--") return true;
        if (s.size() == tag.size()) return true;
        const char next = s[tag.size()];
        if (next == ' ' || next == '>' || next == '\t' || next == '\n' || next == '\r' ||
            next == '\f') {
            return true;
        }
    }
    return false;
}

}  // namespace

std::string content_type_for(std::string_view path) {
    static const std::pair<const char*, const char*> kTypes[] = {
        {".md", "text/markdown; charset=utf-8"},
        {".txt", "text/plain; charset=utf-8"},
        {".json", "application/json"},
        {".html", "text/html; charset=utf-8"},
        {".css", "text/css"},
        {".js", "text/javascript"},
        {".py", "text/x-python; charset=utf-8"},
        {".sh", "text/x-shellscript; charset=utf-8"},
        {".yaml", "application/yaml"},
        {".yml", "application/yaml"},
        {".csv", "text/csv; charset=utf-8"},
        {".png", "image/png"},
        {".jpg", "image/jpeg"},
        {".jpeg", "image/jpeg"},
        {".gif", "image/gif"},
        {".webp", "image/webp"},
        {".svg", "image/svg+xml"},
        {".pdf", "application/pdf"},
        {".zip", "application/zip"},
        {".xml", "application/xml"},
    };
    const auto dot = path.rfind('.');
    if (dot != std::string_view::npos && path.find('/', dot) == std::string_view::npos) {
        const auto ext = lower(path.substr(dot));
        for (const auto& [e, t] : kTypes) {
            if (ext == e) return t;
        }
    }
    return "application/octet-stream";
}

bool inline_safe(std::string_view content_type) {
    const auto media = media_type(content_type);
    static constexpr std::string_view kInline[] = {
        "text/plain", "text/markdown", "text/csv",   "application/json", "image/png",
        "image/jpeg", "image/gif",     "image/webp", "application/pdf",  "audio/mpeg",
        "audio/ogg",  "audio/wav",     "video/mp4",  "video/webm"};
    return std::find(std::begin(kInline), std::end(kInline), media) != std::end(kInline);
}

std::string disposition(std::string_view kind, std::string_view name) {
    const auto slash = name.rfind('/');
    const auto base = slash == std::string_view::npos ? name : name.substr(slash + 1);
    std::string ascii;
    for (const char ch : base) {
        const auto u = static_cast<unsigned char>(ch);
        ascii.push_back(u >= 0x20 && u < 0x7f && ch != '"' && ch != '\\' ? ch : '_');
    }
    return std::string(kind) + "; filename=\"" + ascii + "\"; filename*=UTF-8''" +
           http::percent_encode(base);
}

std::string sniff(std::string_view head) {
    const auto b = [&](std::size_t i) { return static_cast<unsigned char>(head[i]); };
    if (starts_with(head, "\x89PNG\r\n\x1a\n")) return "image/png";
    if (head.size() >= 3 && b(0) == 0xFF && b(1) == 0xD8 && b(2) == 0xFF) return "image/jpeg";
    if (starts_with(head, "GIF87a") || starts_with(head, "GIF89a")) return "image/gif";
    if (starts_with(head, "RIFF") && head.size() >= 12) {
        if (head.substr(8, 4) == "WEBP") return "image/webp";
        if (head.substr(8, 4) == "WAVE") return "audio/wav";
    }
    if (starts_with(head, "%PDF-")) return "application/pdf";
    if (starts_with(head, std::string_view("PK\x03\x04", 4))) return "application/zip";
    if (head.size() >= 2 && b(0) == 0x1F && b(1) == 0x8B) return "application/gzip";
    if (starts_with(head, "ID3") ||
        (head.size() >= 2 && b(0) == 0xFF && (b(1) == 0xFB || b(1) == 0xF3 || b(1) == 0xF2))) {
        return "audio/mpeg";  // a tag, or an MPEG audio layer III frame
    }
    if (starts_with(head, "OggS")) return "audio/ogg";
    if (head.size() >= 12 && head.substr(4, 4) == "ftyp") return "video/mp4";
    if (starts_with(head, "\x1a\x45\xdf\xa3")) return "video/webm";
    // Markup: after a byte order mark and white space, as a browser looks.
    std::string_view text = head;
    if (starts_with(text, "\xEF\xBB\xBF")) text.remove_prefix(3);
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n' ||
                             text.front() == '\r' || text.front() == '\f')) {
        text.remove_prefix(1);
    }
    if (starts_with_ci(text, "<svg")) return "image/svg+xml";
    if (starts_with_ci(text, "<?xml")) return "application/xml";
    if (looks_like_html(text)) return "text/html";
    // Text: UTF-8 (a multibyte sequence cut by the end of the sample is allowed) without
    // control characters other than tab, newlines, form feed and escape.
    std::string_view sample = head;
    for (std::size_t back = 1; back <= 3 && back <= sample.size(); ++back) {
        const auto c = static_cast<unsigned char>(sample[sample.size() - back]);
        if ((c & 0xC0U) == 0x80U) continue;  // a continuation byte: look further back
        if (c >= 0xC0U) {
            const std::size_t need = c >= 0xF0U ? 4 : c >= 0xE0U ? 3 : 2;
            if (need > back) sample.remove_suffix(back);  // the sequence the sample cut
        }
        break;
    }
    if (!core::json::is_utf8(sample)) return "application/octet-stream";
    const bool control = std::any_of(sample.begin(), sample.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return (u < 0x20 && u != '\t' && u != '\n' && u != '\r' && u != '\f' && u != 0x1B) ||
               u == 0x7F;
    });
    return control ? "application/octet-stream" : "text/plain";
}

std::string media_type(std::string_view content_type) {
    if (content_type.size() > 255) return {};
    auto media = content_type.substr(0, content_type.find(';'));
    while (!media.empty() && (media.front() == ' ' || media.front() == '\t'))
        media.remove_prefix(1);
    while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
    const auto slash = media.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == media.size()) return {};
    for (std::size_t i = 0; i < media.size(); ++i) {
        if (i != slash && !is_token(media[i])) return {};
    }
    return lower(media);
}

served_as serve(std::string_view declared, std::string_view sniffed) {
    served_as out;
    const auto media = media_type(declared);
    if (media.empty()) {
        out.content_type = "application/octet-stream";
        return out;
    }
    // The declared value as sent (its charset parameter is the uploader's to give), but only
    // printable ASCII: it goes into a header.
    const bool printable = std::all_of(declared.begin(), declared.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u >= 0x20 && u < 0x7F;
    });
    out.content_type = printable ? std::string(declared) : media;
    if (!inline_safe(media)) return out;
    const auto family = media.substr(0, media.find('/'));
    if (family == "text" || media == "application/json") {
        out.inline_ok = sniffed == "text/plain";
    } else {
        out.inline_ok = sniffed == media;
    }
    return out;
}

bool mime_allowed(std::string_view content_type, const std::vector<std::string>& allowed) {
    if (allowed.empty()) return true;
    const auto media = media_type(content_type);
    if (media.empty()) return false;
    for (const auto& a : allowed) {
        const auto pattern = lower(a);
        if (pattern == "*/*" || pattern == media) return true;
        if (pattern.size() > 2 && pattern.compare(pattern.size() - 2, 2, "/*") == 0 &&
            media.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0) {
            return true;
        }
    }
    return false;
}

std::string mime_pattern_problem(std::string_view pattern) {
    if (pattern == "*/*") return {};
    if (pattern.size() > 2 && pattern.substr(pattern.size() - 2) == "/*") {
        const auto type = pattern.substr(0, pattern.size() - 2);
        if (std::all_of(type.begin(), type.end(), is_token)) return {};
    } else if (!media_type(pattern).empty() && pattern.find(';') == std::string_view::npos) {
        return {};
    }
    return "\"" + std::string(pattern.substr(0, 64)) +
           "\" is not a MIME type (type/subtype, type/* or */*)";
}

std::optional<std::uint64_t> parse_size(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == 0 || i > 15) return std::nullopt;
    std::size_t frac_end = i;
    if (i < text.size() && text[i] == '.') {
        frac_end = i + 1;
        while (frac_end < text.size() && std::isdigit(static_cast<unsigned char>(text[frac_end])))
            ++frac_end;
        if (frac_end == i + 1 || frac_end - i > 7) return std::nullopt;
    }
    const auto number = std::stod(std::string(text.substr(0, frac_end)));
    const auto unit = lower(text.substr(frac_end));
    double scale = 0;
    if (unit == "b") {
        scale = 1;
    } else if (unit == "kb") {
        scale = 1e3;
    } else if (unit == "mb") {
        scale = 1e6;
    } else if (unit == "gb") {
        scale = 1e9;
    } else {
        return std::nullopt;
    }
    const double bytes = std::floor(number * scale);
    if (bytes > 9.0e15) return std::nullopt;
    return static_cast<std::uint64_t>(bytes);
}

}  // namespace awp::storage
