// The secrets protocol's names and key, spelled once: which names a secret may have (the
// secrets.key CHECK of sql/0003, held to is_valid_name by `integration: secret names ...`), the
// names awp itself gives secrets (source credentials, channel tokens), the files the command
// runner writes them to, and the 32-byte key of their enc:v1 values (crypto.hpp has the format).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace awp::core::secrets {

// ---- names ----

/// The longest secret name (SQL: `{0,127}` after the first character).
inline constexpr std::size_t kMaxNameLength = 128;

/// A secret's name is an environment variable name: ASCII letter or '_', then letters, digits
/// and '_', at most 128 characters (^[A-Za-z_][A-Za-z0-9_]{0,127}$). The env files the runner
/// writes (`NAME='value'` lines) depend on it.
[[nodiscard]] bool is_valid_name(std::string_view name) noexcept;

/// The gateway secret holding a source connection's credential:
/// <PROVIDER>_SOURCE_<first 8 characters of the connection id>, upper-case, every character of
/// the provider that is not a letter or digit written '_'. The command runner reads it back
/// from gateway.env (`api_key`), and `<that>__<FIELD>` as the credential's other fields.
[[nodiscard]] std::string source_secret_name(std::string_view provider,
                                             std::string_view connection_id);
/// `<source_secret_name>__<FIELD>`: a further field of the credential (FIELD upper-cased;
/// the runner hands it to the connector lower-cased), e.g. __REFRESH_TOKEN.
[[nodiscard]] std::string source_field_name(std::string_view source_secret, std::string_view field);

/// The secret holding a channel's bot token: <CHANNEL>_BOT_TOKEN, upper-case.
[[nodiscard]] std::string channel_token_name(std::string_view channel);

// ---- files (under the runner's SECRETS_DIR) ----

/// The gateway's secrets, for every agent of the gateway.
inline constexpr std::string_view kGatewayEnvFile = "gateway.env";
/// The folder of the agents' files.
inline constexpr std::string_view kAgentsDir = "agents";
/// "agents/<slug>.env": the gateway's secrets overlaid with the agent's own. nullopt when the
/// slug is not an agent slug (sql/0003 agents.slug: ^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$, no
/// ".."), so no name can leave agents/.
[[nodiscard]] std::optional<std::string> agent_env_file(std::string_view agent_slug);

// ---- the key of enc:v1 values ----

/// The 32-byte AES key of the secrets: HOSTED_SECRETS_KEY decoded when it is set (throws
/// config_error when it is not 32 bytes in base64url, base64 or hex), else HKDF-SHA256 of the
/// service-role key (crypto::derive_secret_key); empty when neither is set. The api-gateway
/// that encrypts and the command runner that decrypts both take it from here.
[[nodiscard]] std::string encryption_key(std::string_view hosted_secrets_key,
                                         std::string_view service_role_key);

}  // namespace awp::core::secrets
