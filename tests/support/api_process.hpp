// awp-api-gateway as a real process on a loopback port, for the e2e tests of its routes.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "awp/http/client.hpp"

namespace awp::test {

/// The JWT secret and service-role key every api_gateway_process runs with (tests mint tokens
/// with the same secret).
inline constexpr const char* kApiJwtSecret = "e2e-jwt-secret-that-is-long-enough-0123456789";
inline constexpr const char* kApiServiceKey = "e2e-service-role-key-0123456789abcdef";

class scoped_database;

/// Authorization: Bearer <token>.
http::headers bearer(const std::string& token);
/// A user session of `tenant` for api_gateway_process: role authenticated, an hour long, signed
/// with kApiJwtSecret (a session of the gateway's own database).
std::string user_token(const std::string& tenant);

/// A postgresql:// URL of the api role (awp_api, with its password) on a test database: what
/// an operator registers as a workspace.
std::string api_role_url(const scoped_database& db);

class api_gateway_process {
public:
    using env_map = std::map<std::string, std::string>;

    /// Starts the gateway on `dsn` (awp_api) with a scratch folder of its own (config,
    /// sandboxes) and waits until /api/health answers (a Catch2 failure after 15 s). `extra`
    /// overrides the defaults (API_PORT too); `prepare` may add to the environment once the
    /// scratch folder exists.
    explicit api_gateway_process(
        const std::string& dsn, env_map extra = {}, const std::string& prefix = "awp-api-e2e-",
        const std::function<void(const std::filesystem::path& dir, env_map& env)>& prepare = {});
    /// SIGTERM, then SIGKILL after 5 s; removes the scratch folder.
    ~api_gateway_process();
    api_gateway_process(const api_gateway_process&) = delete;
    api_gateway_process& operator=(const api_gateway_process&) = delete;

    /// SIGTERM and wait: the exit status (-1 when killed by a signal).
    int stop();
    /// SIGKILL and wait (a gateway that vanishes).
    void kill();
    [[nodiscard]] std::string logs() const;
    [[nodiscard]] std::string url() const;
    http::response request(const std::string& method, const std::string& target,
                           http::headers h = {}, std::string body = {}) const;
    http::response get(const std::string& target, http::headers h = {}) const;

    std::filesystem::path dir;
    std::string log_path;
    unsigned short port = 0;
    pid_t pid = -1;
};

}  // namespace awp::test
