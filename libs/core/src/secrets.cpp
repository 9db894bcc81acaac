// The secrets protocol's names and key (secrets.hpp).
#include "awp/core/secrets.hpp"

#include "awp/core/crypto.hpp"

namespace awp::core::secrets {

namespace {
constexpr bool is_alpha(char c) noexcept {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
constexpr char upper(char c) noexcept {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}

bool is_agent_slug(std::string_view s) noexcept {
    if (s.empty() || s.size() > 128) return false;
    if (!is_alpha(s[0]) && !is_digit(s[0])) return false;
    for (const char c : s)
        if (!is_alpha(c) && !is_digit(c) && c != '.' && c != '_' && c != '-') return false;
    return s.find("..") == std::string_view::npos;
}
}  // namespace

bool is_valid_name(std::string_view name) noexcept {
    if (name.empty() || name.size() > kMaxNameLength) return false;
    if (!is_alpha(name[0]) && name[0] != '_') return false;
    for (const char c : name)
        if (!is_alpha(c) && !is_digit(c) && c != '_') return false;
    return true;
}

std::string source_secret_name(std::string_view provider, std::string_view connection_id) {
    std::string out;
    for (const char c : provider) out.push_back(is_alpha(c) || is_digit(c) ? upper(c) : '_');
    out += "_SOURCE_";
    for (const char c : connection_id.substr(0, 8)) out.push_back(upper(c));
    return out;
}

std::string source_field_name(std::string_view source_secret, std::string_view field) {
    std::string out(source_secret);
    out += "__";
    for (const char c : field) out.push_back(upper(c));
    return out;
}

std::string channel_token_name(std::string_view channel) {
    std::string out;
    for (const char c : channel) out.push_back(upper(c));
    return out + "_BOT_TOKEN";
}

std::optional<std::string> agent_env_file(std::string_view agent_slug) {
    if (!is_agent_slug(agent_slug)) return std::nullopt;
    std::string out(kAgentsDir);
    out += '/';
    out += agent_slug;
    out += ".env";
    return out;
}

std::string encryption_key(std::string_view hosted_secrets_key, std::string_view service_role_key) {
    if (!hosted_secrets_key.empty()) return crypto::parse_hosted_secrets_key(hosted_secrets_key);
    if (!service_role_key.empty()) return crypto::derive_secret_key(service_role_key);
    return {};
}

}  // namespace awp::core::secrets
