// RapidJSON helpers for the gateway: a compact writer and strict readers of request bodies.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "awp/core/json.hpp"

namespace awp::api {

/// core::json::writer with the gateway's nullable-string helper.
struct json_out : core::json::writer {
    void kv_opt(std::string_view k, const std::optional<std::string>& v) {
        key(k);
        if (v) {
            str(*v);
        } else {
            w.Null();
        }
    }
};

/// A JSON object body (core::json::kRequestBody limits); throws http_error 400 naming what is
/// wrong when it is not JSON or not an object.
rapidjson::Document parse_object_body(std::string_view body);

/// The member of that name, or nullptr when it is absent or null.
[[nodiscard]] const rapidjson::Value* member(const rapidjson::Value& o, const char* name);
/// Optional string member; throws http_error 422 naming the field when it has another type.
std::optional<std::string> opt_string(const rapidjson::Value& o, const char* name);
/// Required non-blank string member; 422 naming the field otherwise.
std::string req_string(const rapidjson::Value& o, const char* name);
std::optional<bool> opt_bool(const rapidjson::Value& o, const char* name);

}  // namespace awp::api
