// RapidJSON helpers for the gateway: a compact writer and strict readers of request bodies.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace awp::api {

/// A JSON text built with RapidJSON's writer: `json_out j; j.w.StartObject(); ... j.str()`.
struct json_out {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w{buf};
    void key(std::string_view k) { w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size())); }
    void str(std::string_view v) { w.String(v.data(), static_cast<rapidjson::SizeType>(v.size())); }
    void kv(std::string_view k, std::string_view v) {
        key(k);
        str(v);
    }
    void kv_opt(std::string_view k, const std::optional<std::string>& v) {
        key(k);
        if (v) {
            str(*v);
        } else {
            w.Null();
        }
    }
    /// Inserts already serialised JSON as a value.
    void raw(std::string_view json) {
        w.RawValue(json.data(), json.size(), rapidjson::kObjectType);
    }
    [[nodiscard]] std::string str() const { return {buf.GetString(), buf.GetSize()}; }
};

/// A JSON object body; throws http_error 400 when it is not JSON or not an object.
rapidjson::Document parse_object_body(std::string_view body);

/// Optional string member; throws http_error 422 naming the field when it has another type.
std::optional<std::string> opt_string(const rapidjson::Value& o, const char* name);
/// Required non-blank string member; 422 naming the field otherwise.
std::string req_string(const rapidjson::Value& o, const char* name);
std::optional<bool> opt_bool(const rapidjson::Value& o, const char* name);

}  // namespace awp::api
