// Strict readers of JSON request bodies: 400 for malformed JSON, 422 naming a bad field.
#include "json.hpp"

#include "awp/http/message.hpp"

namespace awp::api {

rapidjson::Document parse_object_body(std::string_view body) {
    try {
        return core::json::parse_object(body, core::json::kRequestBody);
    } catch (const core::json::parse_error& e) {
        throw http::http_error(400, "malformed_json",
                               std::string("the body must be a JSON object: ") + e.what());
    }
}

const rapidjson::Value* member(const rapidjson::Value& o, const char* name) {
    auto it = o.FindMember(name);
    return it == o.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

std::optional<std::string> opt_string(const rapidjson::Value& o, const char* name) {
    auto it = o.FindMember(name);
    if (it == o.MemberEnd() || it->value.IsNull()) return std::nullopt;
    if (!it->value.IsString()) {
        throw http::http_error(422, "invalid_field", std::string(name) + " must be a string");
    }
    return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::string req_string(const rapidjson::Value& o, const char* name) {
    auto v = opt_string(o, name);
    if (!v || v->find_first_not_of(" \t\r\n") == std::string::npos) {
        throw http::http_error(422, "invalid_field", std::string(name) + " is required");
    }
    return *v;
}

std::optional<bool> opt_bool(const rapidjson::Value& o, const char* name) {
    auto it = o.FindMember(name);
    if (it == o.MemberEnd() || it->value.IsNull()) return std::nullopt;
    if (!it->value.IsBool()) {
        throw http::http_error(422, "invalid_field", std::string(name) + " must be a boolean");
    }
    return it->value.GetBool();
}

}  // namespace awp::api
