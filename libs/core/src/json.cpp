// JSON parsing under limits: RapidJSON's iterative reader (no recursion, so depth costs no
// stack), UTF-8 validated, with a handler in front of the document that counts nesting.
#include "awp/core/json.hpp"

#include <cstring>

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

namespace awp::core::json {

namespace {

namespace rj = rapidjson;

/// Forwards SAX events to the document and stops the reader past the depth limit.
template <class Next>
class depth_limited {
public:
    depth_limited(Next& next, unsigned max_depth) : next_(next), max_(max_depth) {}
    bool Null() { return next_.Null(); }
    bool Bool(bool b) { return next_.Bool(b); }
    bool Int(int i) { return next_.Int(i); }
    bool Uint(unsigned u) { return next_.Uint(u); }
    bool Int64(std::int64_t i) { return next_.Int64(i); }
    bool Uint64(std::uint64_t u) { return next_.Uint64(u); }
    bool Double(double d) { return next_.Double(d); }
    bool RawNumber(const char* s, rj::SizeType n, bool copy) { return next_.RawNumber(s, n, copy); }
    bool String(const char* s, rj::SizeType n, bool copy) { return next_.String(s, n, copy); }
    bool Key(const char* s, rj::SizeType n, bool copy) { return next_.Key(s, n, copy); }
    bool StartObject() { return enter() && next_.StartObject(); }
    bool EndObject(rj::SizeType n) {
        --depth_;
        return next_.EndObject(n);
    }
    bool StartArray() { return enter() && next_.StartArray(); }
    bool EndArray(rj::SizeType n) {
        --depth_;
        return next_.EndArray(n);
    }
    [[nodiscard]] bool too_deep() const noexcept { return too_deep_; }

private:
    bool enter() {
        if (++depth_ > max_) {
            too_deep_ = true;
            return false;
        }
        return true;
    }
    Next& next_;
    unsigned max_;
    unsigned depth_ = 0;
    bool too_deep_ = false;
};

constexpr unsigned kFlags = rj::kParseIterativeFlag | rj::kParseValidateEncodingFlag;

}  // namespace

rj::Document parse(std::string_view text, const limits& l) {
    if (text.size() > l.max_bytes) {
        throw parse_error("JSON text of " + std::to_string(text.size()) +
                              " bytes is larger than the limit of " + std::to_string(l.max_bytes),
                          l.max_bytes);
    }
    // RapidJSON's memory stream reads a NUL as the end of input; JSON never holds a raw one.
    // (An empty view may have no data pointer, and memchr's must not be null.)
    if (const void* nul = text.empty() ? nullptr : std::memchr(text.data(), '\0', text.size())) {
        const auto at = static_cast<std::size_t>(static_cast<const char*>(nul) - text.data());
        throw parse_error("invalid JSON at offset " + std::to_string(at) + ": a NUL byte", at);
    }
    rj::Document doc;
    rj::Reader reader;
    rj::MemoryStream stream(text.data(), text.size());
    bool too_deep = false;
    auto generate = [&](rj::Document& handler) {
        depth_limited<rj::Document> guard(handler, l.max_depth);
        const bool ok = !reader.Parse<kFlags>(stream, guard).IsError();
        too_deep = guard.too_deep();
        return ok;
    };
    doc.Populate(generate);
    if (reader.HasParseError()) {
        const auto at = reader.GetErrorOffset();
        if (too_deep) {
            throw parse_error("invalid JSON at offset " + std::to_string(at) +
                                  ": nested deeper than " + std::to_string(l.max_depth) + " levels",
                              at);
        }
        throw parse_error("invalid JSON at offset " + std::to_string(at) + ": " +
                              rj::GetParseError_En(reader.GetParseErrorCode()),
                          at);
    }
    return doc;
}

rj::Document parse_object(std::string_view text, const limits& l) {
    auto doc = parse(text, l);
    if (!doc.IsObject()) throw parse_error("expected a JSON object", 0);
    return doc;
}

std::optional<rj::Document> try_parse(std::string_view text, const limits& l) {
    try {
        return parse(text, l);
    } catch (const parse_error&) {
        return std::nullopt;
    }
}

std::string to_string(const rj::Value& v) {
    writer out;
    v.Accept(out.w);
    return out.str();
}

std::string string_or(const rj::Value& o, const char* name, std::string fallback) {
    if (!o.IsObject()) return fallback;
    auto it = o.FindMember(name);
    if (it == o.MemberEnd() || !it->value.IsString()) return fallback;
    return {it->value.GetString(), it->value.GetStringLength()};
}

bool is_utf8(std::string_view text) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const auto* end = p + text.size();
    while (p < end) {
        const unsigned c = *p;
        if (c < 0x80) {
            ++p;
            continue;
        }
        int more = 0;
        unsigned cp = 0;
        unsigned min = 0;
        if ((c & 0xE0) == 0xC0) {
            more = 1;
            cp = c & 0x1F;
            min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            more = 2;
            cp = c & 0x0F;
            min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            more = 3;
            cp = c & 0x07;
            min = 0x10000;
        } else {
            return false;
        }
        if (end - p <= more) return false;
        for (int i = 1; i <= more; ++i) {
            if ((p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i] & 0x3FU);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        p += more + 1;
    }
    return true;
}

}  // namespace awp::core::json
