// Reading the JSON files of a model folder with RapidJSON, with errors that name the file.
#include "json_file.hpp"

#include <awp/core/json.hpp>
#include <awp/embed/error.hpp>

#include <fstream>
#include <sstream>

namespace awp::embed::detail {

std::string display_name(const std::filesystem::path& file) {
    // The whole path: "1_Pooling/config.json" must not read as the model's config.json.
    return file.lexically_normal().string();
}

std::string read_file(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw error(display_name(file) + ": cannot open");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw error(display_name(file) + ": read error");
    return std::move(buffer).str();
}

rapidjson::Document read_json(const std::filesystem::path& file) {
    if (!std::filesystem::exists(file)) throw error(display_name(file) + ": missing");
    const std::string text = read_file(file);
    try {
        // tokenizer.json of a real model is a few MB; 64 MB bounds a hostile one.
        return core::json::parse(text, core::json::kDocument);
    } catch (const core::json::parse_error& e) {
        throw error(display_name(file) + ": " + e.what());
    }
}

namespace {

const rapidjson::Value* member(const rapidjson::Value& object, const char* key) {
    if (!object.IsObject()) return nullptr;
    const auto it = object.FindMember(key);
    if (it == object.MemberEnd() || it->value.IsNull()) return nullptr;
    return &it->value;
}

[[noreturn]] void wrong_type(const char* key, const char* expected,
                             const std::filesystem::path& file) {
    throw error(display_name(file) + ": \"" + key + "\" must be " + expected);
}

}  // namespace

std::optional<long long> get_int(const rapidjson::Value& object, const char* key,
                                 const std::filesystem::path& file) {
    const auto* v = member(object, key);
    if (v == nullptr) return std::nullopt;
    if (!v->IsInt64()) wrong_type(key, "an integer", file);
    return v->GetInt64();
}

std::optional<double> get_number(const rapidjson::Value& object, const char* key,
                                 const std::filesystem::path& file) {
    const auto* v = member(object, key);
    if (v == nullptr) return std::nullopt;
    if (!v->IsNumber()) wrong_type(key, "a number", file);
    return v->GetDouble();
}

std::optional<bool> get_bool(const rapidjson::Value& object, const char* key,
                             const std::filesystem::path& file) {
    const auto* v = member(object, key);
    if (v == nullptr) return std::nullopt;
    if (!v->IsBool()) wrong_type(key, "true or false", file);
    return v->GetBool();
}

std::optional<std::string> get_string(const rapidjson::Value& object, const char* key,
                                      const std::filesystem::path& file) {
    const auto* v = member(object, key);
    if (v == nullptr) return std::nullopt;
    if (!v->IsString()) wrong_type(key, "a string", file);
    return std::string(v->GetString(), v->GetStringLength());
}

}  // namespace awp::embed::detail
