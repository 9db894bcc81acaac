// Source connectors: manifests under API_CONNECTORS_DIR (<id>/connector.json) that say how to
// authorise with a provider (OAuth 2 authorization code + PKCE, or an API key) and how to
// validate credentials and browse through its HTTP JSON API. See docs/api-gateway.md.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rapidjson/document.h>

namespace awp::api {

/// One call of a provider's API: method and a path appended to the API base URL.
struct connector_endpoint {
    std::string method = "POST";
    std::string path;
};

struct connector {
    std::string id;               // the folder name, [a-z0-9][a-z0-9_-]{0,63}
    std::string label;            // for people
    std::string runner_provider;  // source_connections.provider: the runner's provider
    bool api_key = false;         // auth.types has "api_key"
    bool oauth2 = false;          // auth.types has "oauth2"

    // OAuth 2 (authorization code with PKCE S256).
    std::string authorize_url;
    std::string token_url;
    std::vector<std::string> scopes;
    std::string scope_separator = " ";
    std::string client_id_env;
    std::string client_secret_env;
    std::string client_id;          // read from client_id_env at start-up
    std::string client_secret;      // read from client_secret_env at start-up (secret)
    bool token_auth_basic = false;  // client credentials in Authorization: Basic, else the body
    std::vector<std::pair<std::string, std::string>> extra_params;  // added to the authorize URL
    std::string account_label_field;  // dotted path in the token answer (e.g. workspace_name)

    // The HTTP JSON API (the base URL the runner's http_json provider posts actions to).
    std::string base_url;
    std::chrono::milliseconds timeout{15'000};
    connector_endpoint validate;
    std::string validate_account_field;  // dotted path in the validate answer
    connector_endpoint browse;
    std::string browse_path_param = "path";  // "" = not sent
    std::string browse_cursor_param = "cursor";
    std::string items_field = "items";
    std::string next_cursor_field = "next_cursor";
    /// Normalised item field → dotted path in the provider's item (id, name, type by default).
    std::vector<std::pair<std::string, std::string>> item_fields;
    std::string default_type = "item";

    /// Why the API cannot be used here (an environment variable is not set); empty = usable.
    std::string unavailable;
    /// Why OAuth cannot start here (not an oauth2 connector, client id not set); empty = usable.
    std::string oauth_unavailable;
};

/// Reads an environment variable; nullopt when it is not set.
using env_lookup = std::function<std::optional<std::string>(const std::string&)>;

/// Parses the text of <dir_name>/connector.json. Throws core::error saying what is wrong.
/// `${NAME}` in URLs is replaced by the environment variable NAME; a missing one makes the
/// connector unavailable (not malformed).
connector parse_connector(std::string_view text, std::string_view dir_name, const env_lookup& env);

/// The connectors of a directory, loaded once at start-up, and the OAuth replay guard.
class connector_registry {
public:
    /// Loads every <dir>/<id>/connector.json; a malformed manifest is logged and skipped.
    explicit connector_registry(const std::string& dir);
    [[nodiscard]] const connector* find(std::string_view id) const;
    [[nodiscard]] std::size_t size() const noexcept { return connectors_.size(); }

    /// Marks an OAuth state as used until `expires_unix`; false when it was used already.
    bool consume_state(const std::string& state, long long expires_unix);

private:
    std::map<std::string, connector, std::less<>> connectors_;
    std::mutex mu_;
    std::map<std::string, long long> used_states_;  // state → expiry (unix seconds)
};

/// The value at a dotted path ("data.team.name", "results.0.id"), or nullptr.
const rapidjson::Value* json_at(const rapidjson::Value& v, std::string_view dotted);

/// A scalar JSON value as text (strings as they are, numbers printed); nullopt otherwise.
std::optional<std::string> json_scalar_text(const rapidjson::Value* v);

}  // namespace awp::api
