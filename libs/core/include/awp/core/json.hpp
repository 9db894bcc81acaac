// The one entry point for JSON text from outside the process (request bodies, rows, payloads,
// CLI output, files): a size limit per caller, a nesting-depth limit enforced while parsing
// (iteratively: no recursion on attacker depth), invalid UTF-8 and NUL bytes refused, and an
// error that names the offset where the text is wrong. Every parse in awp goes through here.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/error.hpp"

namespace awp::core::json {

/// What a caller accepts. The defaults suit a request body or a row's payload; callers with
/// bigger inputs (a model listing, a manifest file) say so.
struct limits {
    std::size_t max_bytes = std::size_t{1} << 20;
    /// Objects and arrays nested deeper than this are refused while parsing. Nothing awp reads
    /// legitimately nests beyond a dozen levels.
    unsigned max_depth = 64;
};

/// Presets, so the same kind of input has the same limit everywhere.
inline constexpr limits kRequestBody{std::size_t{1} << 20, 64};
inline constexpr limits kPayload{std::size_t{1} << 20, 64};
inline constexpr limits kSmall{64 * 1024, 32};    // claims, cookies, config entries
inline constexpr limits kDocument{64 << 20, 64};  // files and CLI outputs awp reads

/// The text is not acceptable JSON. what() names the reason and the byte offset; the text
/// itself is never repeated (it may hold secrets).
class parse_error : public core::error {
public:
    parse_error(std::string message, std::size_t offset)
        : core::error(std::move(message)), offset_(offset) {}
    /// Byte offset of the problem in the input.
    [[nodiscard]] std::size_t offset() const noexcept { return offset_; }

private:
    std::size_t offset_;
};

/// Parses one JSON value (any type). Throws parse_error: too large, too deep, invalid UTF-8,
/// a NUL byte, a syntax error, or anything after the value.
[[nodiscard]] rapidjson::Document parse(std::string_view text, const limits& l = {});

/// Same, and the value must be an object ("expected a JSON object" otherwise).
[[nodiscard]] rapidjson::Document parse_object(std::string_view text, const limits& l = {});

/// For callers that fall back on bad input rather than report it: nullopt where parse() throws.
[[nodiscard]] std::optional<rapidjson::Document> try_parse(std::string_view text,
                                                           const limits& l = {});

/// The text is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points
/// above U+10FFFF), as every JSON string must be.
[[nodiscard]] bool is_utf8(std::string_view text) noexcept;

/// A value serialised back to compact JSON.
[[nodiscard]] std::string to_string(const rapidjson::Value& v);

/// The string member `name` of object `o`, or `fallback` when absent or not a string.
[[nodiscard]] std::string string_or(const rapidjson::Value& o, const char* name,
                                    std::string fallback = {});

/// A JSON text built with RapidJSON's writer: `writer j; j.w.StartObject(); ... j.str()`.
struct writer {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w{buf};
    void key(std::string_view k) { w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size())); }
    void str(std::string_view v) { w.String(v.data(), static_cast<rapidjson::SizeType>(v.size())); }
    void kv(std::string_view k, std::string_view v) {
        key(k);
        str(v);
    }
    /// Inserts already serialised JSON as a value.
    void raw(std::string_view json) {
        w.RawValue(json.data(), json.size(), rapidjson::kObjectType);
    }
    [[nodiscard]] std::string str() const { return {buf.GetString(), buf.GetSize()}; }
};

}  // namespace awp::core::json
