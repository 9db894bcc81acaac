// Reading the JSON files of a model folder with RapidJSON, with errors that name the file.
#pragma once

#include <rapidjson/document.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace awp::embed::detail {

std::string read_file(const std::filesystem::path& file);
/// Parses a JSON file; throws awp::embed::error "<file>: ..." when missing or malformed.
rapidjson::Document read_json(const std::filesystem::path& file);
/// How messages name a file: its whole path.
std::string display_name(const std::filesystem::path& file);

/// Typed getters: nullopt when the key is absent or null, an error naming file and key when the
/// value has the wrong type.
std::optional<long long> get_int(const rapidjson::Value& object, const char* key,
                                 const std::filesystem::path& file);
std::optional<double> get_number(const rapidjson::Value& object, const char* key,
                                 const std::filesystem::path& file);
std::optional<bool> get_bool(const rapidjson::Value& object, const char* key,
                             const std::filesystem::path& file);
std::optional<std::string> get_string(const rapidjson::Value& object, const char* key,
                                      const std::filesystem::path& file);

}  // namespace awp::embed::detail
