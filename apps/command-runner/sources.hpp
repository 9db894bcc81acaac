// source_write providers: an interface, a generic HTTP JSON provider and a test double, and the
// credentials lookup in the gateway's secrets env file.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "awp/core/error.hpp"

#include "awp/http/outbound.hpp"

namespace awp::runner {

/// The provider refused or failed the write; the message is stored as the command's error.
class source_error : public core::error {
public:
    using core::error::error;
};

struct source_call {
    std::string connection_id;
    std::string provider;
    std::string config;  // source_connections.config (JSON object text)
    std::string action;
    std::string params;                              // JSON object text
    std::map<std::string, std::string> credentials;  // api_key and <field> from gateway.env
    std::chrono::seconds timeout{120};
    /// Where the provider may connect (a tenant writes config.url): the public internet, and
    /// what the operator allows (OUTBOUND_ALLOW); never link-local or a database port.
    std::optional<http::outbound_check> check;
};

class source_provider {
public:
    virtual ~source_provider() = default;
    /// Runs the action; returns the result as JSON text (stored as the command's stdout).
    virtual boost::asio::awaitable<std::string> execute(source_call call) = 0;
};

/// The provider for a source_connections.provider value, or nullptr when none is known here:
/// "http_json" (POST {config.url}/{action} with params as the JSON body, Bearer api_key) and
/// "test" (a double that echoes the call; action "fail" fails).
std::unique_ptr<source_provider> make_source_provider(const std::string& provider);

/// Reads KEY='value' lines (as format_env_file writes them; unquoted values too).
std::map<std::string, std::string> read_env_file(const std::string& path);

/// The credentials of one connection in the env: <PROVIDER>_SOURCE_<first 8 of the id,
/// upper-case> is api_key; <that>__<FIELD> is <field> (lower-case). PROVIDER is upper-cased,
/// other characters than letters and digits become '_'.
std::map<std::string, std::string> source_credentials(const std::map<std::string, std::string>& env,
                                                      const std::string& provider,
                                                      const std::string& connection_id);

}  // namespace awp::runner
