// Secrets sync (anchor-daemons.md §3): this gateway's enc:v1 rows decrypted into gateway.env and
// one env file per agent, 0600, replaced atomically; a deleted secret leaves the files.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "awp/core/pg.hpp"

namespace awp::runner {

struct secret_row {
    std::string id;
    std::optional<std::string> agent_slug;  // nullopt: a gateway secret
    std::string key;
    std::string encrypted_value;
};

struct sync_result {
    std::vector<std::string> synced_ids;
    std::vector<std::string> failed_ids;  // could not decrypt (wrong key, altered value)
    std::vector<std::string> values;      // the plaintexts, for redaction of outputs
    std::size_t agent_files = 0;
};

/// `KEY='value'` lines sorted by key, single quotes written as '\'' (POSIX shell quoting).
std::string format_env_file(const std::vector<std::pair<std::string, std::string>>& vars);

/// Writes `content` to `path` with mode 0600 through a temporary file and rename().
void write_file_atomic(const std::string& path, const std::string& content, unsigned mode = 0600);

/// Decrypts `rows` with the 32-byte key and writes the files under `dir`: gateway.env (the
/// gateway secrets) and agents/<slug>.env (gateway secrets overlaid with the agent's own) for
/// every agent with secrets of its own; other agents/*.env files are removed. Pure filesystem.
sync_result write_secret_files(const std::string& dir, const std::string& key,
                               const std::vector<secret_row>& rows);

/// Reads the gateway's secrets, writes the files and records sync_status on the rows.
boost::asio::awaitable<sync_result> sync_secrets(core::pg::connection& c, std::string gateway_id,
                                                 std::string dir, std::string key);

/// The 32-byte key: HOSTED_SECRETS_KEY when given, else HKDF of the service-role key; empty
/// when neither is configured (sync is then disabled). core::secrets::encryption_key.
std::string secrets_key(const std::string& hosted_key, const std::string& service_role_key);

}  // namespace awp::runner
