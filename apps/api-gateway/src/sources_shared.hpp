// The helpers the sources routes share (sources.cpp: validate and browse; sources_oauth.cpp:
// the OAuth 2 + PKCE start and callback): keys and secret names, the sealed OAuth state cookie,
// upstream calls to a connector's HTTP JSON API, stored credentials, browse and token answers,
// secret-safe error text. Private to the sources routes: nothing else in the gateway includes
// it, and tokens handled here never reach a log line, a response or a redirect.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "awp/http/client.hpp"
#include "connectors.hpp"
#include "gateway.hpp"

namespace awp::api::sources_detail {

inline constexpr std::size_t kMaxParam = 2048;

struct oauth_state {
    std::string state;
    std::string verifier;
    std::string provider;
    std::string sub;
    std::string tenant;
    std::string gateway_id;
    std::string connection_id;  // empty: a new connection
    std::string redirect_uri;
    long long exp = 0;
};

struct upstream_answer {
    bool answered = false;
    bool timed_out = false;
    bool refused = false;  // the outbound policy refused the address (nothing was sent)
    std::string failure;
    unsigned status = 0;
    std::string content_type;
    std::string body;
};

struct stored_connection {
    std::string id;
    std::string provider;
    std::string connector;
    std::string status;
    std::string token;
};

struct token_answer {
    std::string access_token;
    std::string refresh_token;
    std::string token_type;
    std::string scope;
    std::optional<long long> expires_in;
    std::string error;
    std::string error_description;
    std::string account_label;
};

/// The enc:v1 key the command runner decrypts with: HOSTED_SECRETS_KEY, else HKDF of the
/// service-role key. 503 when neither is configured.
std::string secrets_key(const gateway_config& cfg);

/// The key that seals the OAuth state cookie (derived from JWT_SECRET, never stored).
std::string state_key(const gateway_config& cfg);

/// <PROVIDER>_SOURCE_<first 8 of the id, upper-case>: the runner's credentials variable.
std::string secret_name(const std::string& runner_provider, const std::string& connection_id);

/// awp_oauth_<provider>: the OAuth state cookie's name.
std::string cookie_name(const std::string& provider);

std::string clear_state_cookie(const gateway_config& cfg, const std::string& provider);

/// A failure of the OAuth callback: the state cookie is cleared with the error.
[[noreturn]] void flow_error(unsigned status, std::string code, const std::string& message,
                             const std::string& clear_cookie);

/// Printable text from a provider, bounded, and empty when it echoes the credential.
std::string safe_text(std::string_view s, std::string_view secret, std::size_t limit = 200);

/// An OAuth error code ([a-z0-9_.-], at most 64 characters).
std::string safe_code(std::string_view s);

std::string with_query(const std::string& url, const std::string& query);

std::string seal_state(const oauth_state& s, const std::string& key);

/// The state sealed in a cookie value; nullopt when it was altered, is for another provider
/// or is not ours.
std::optional<oauth_state> open_state(const std::string& value, const std::string& key,
                                      const std::string& provider);

net::awaitable<upstream_answer> call_upstream(http::client_request req);

/// 504 for a slow provider, 502 for one that cannot be reached or answered garbage.
[[noreturn]] void transport_error(const upstream_answer& a, const connector& c,
                                  const std::string& what, const std::string& clear = {});

http::client_request api_request(const connector& c, const connector_endpoint& e,
                                 const std::string& token);

const connector& usable_connector(const connector_registry& reg, const std::string& id);

/// The connection as the caller sees it under RLS (404 otherwise) and its decrypted token.
net::awaitable<stored_connection> load_connection(db_pool& db, principal p, std::string id,
                                                  std::string key);

std::string require_uuid(const std::optional<std::string>& v, const char* field);

std::optional<std::string> bounded(std::optional<std::string> v, const char* field);

std::string normalise_items(const connector& c, const std::string& body);

/// Maps a provider's refusal of credentials or a request.
[[noreturn]] void provider_status_error(const upstream_answer& a, const connector& c,
                                        const std::string& token);

token_answer parse_token_answer(const connector& c, const upstream_answer& a);

http::client_request token_request(const connector& c, const std::string& code,
                                   const std::string& verifier, const std::string& redirect_uri);

std::string connection_config(const connector& c, const oauth_state& st, const token_answer& tok);

}  // namespace awp::api::sources_detail
