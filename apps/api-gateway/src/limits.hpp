// What one client may cost the gateway and its database (issue 37; docs/security.md, "Request
// rates" and "The data API"): the client's address behind trusted proxies, request rates per
// address and per user on /rest/v1, /auth/v1 and realtime joins (one rate limiter, libs/http),
// the data API's cost bounds checked before Postgres sees a request (embeds, joins), and its
// statement time per role. Settings: API_TRUSTED_PROXIES, API_RATE_*, API_REST_MAX_EMBEDS,
// API_REST_MAX_JOINS, API_REST_ANON_STATEMENT_TIMEOUT, API_REST_AUTHENTICATED_STATEMENT_TIMEOUT.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "awp/core/daemon.hpp"
#include "awp/http/client_address.hpp"
#include "awp/http/message.hpp"
#include "awp/http/rate_limit.hpp"

namespace awp::api {

/// The settings (flags and environment: add_limit_options), checked and parsed by
/// validate_limits.
struct limits_config {
    std::string trusted_proxies;  ///< API_TRUSTED_PROXIES: CIDRs whose X-Forwarded-For is believed
    // Request rates: "N/s", "N/min" or "N/h", optionally ":burst"; "off".
    std::string rest_per_address = "200/s";     ///< API_RATE_REST_ADDRESS
    std::string rest_per_user = "100/s";        ///< API_RATE_REST_USER
    std::string auth_per_address = "10/s:60";   ///< API_RATE_AUTH_ADDRESS
    std::string auth_per_user = "5/s:30";       ///< API_RATE_AUTH_USER
    std::string join_per_address = "20/s:200";  ///< API_RATE_JOIN_ADDRESS
    std::string join_per_user = "10/s:100";     ///< API_RATE_JOIN_USER
    /// Embedded resources in one /rest/v1 request, every level and spreads counted
    /// (API_REST_MAX_EMBEDS), and the joins they make once resolved, a many-to-many counting
    /// two (API_REST_MAX_JOINS).
    std::size_t max_embeds = 20;
    std::size_t max_joins = 30;
    /// statement_timeout of anon's and authenticated's requests unless the role has its own
    /// (API_REST_ANON_STATEMENT_TIMEOUT, API_REST_AUTHENTICATED_STATEMENT_TIMEOUT); the
    /// service role and others get API_REST_STATEMENT_TIMEOUT.
    std::string anon_statement_timeout = "3s";
    std::string authenticated_statement_timeout = "8s";

    // Parsed by validate_limits.
    http::trusted_proxies proxies;
    http::rate_rule rest_address, rest_user, auth_address, auth_user, join_address, join_user;
};

void add_limit_options(core::daemon::cli& cli, limits_config& c);
/// Throws core::config_error naming the setting.
void validate_limits(limits_config& c);
/// A duration Postgres' statement_timeout takes ("30s", "500ms", "2min", "0"), checked for
/// form only (letters, digits, blanks, dots): config_error naming `what` otherwise.
void check_duration(const std::string& value, std::string_view what);

/// Where a request rate is limited.
enum class rate_surface { rest, auth, join };

/// The request rates of one gateway process: one limiter (libs/http) for every surface, a
/// bucket per client address and one per user on each.
class request_rates {
public:
    explicit request_rates(const limits_config& c);
    /// A refused request: Retry-After and the sentence saying which limit.
    struct refusal {
        long retry_after = 1;
        std::string message;
    };
    /// Charges one request of `surface` from `address` (request::remote) by `user` ("" for none:
    /// anon, a failed token, a sign-in before it is known); nullopt when it may go on.
    std::optional<refusal> take(rate_surface surface, std::string_view address,
                                std::string_view user);
    [[nodiscard]] std::size_t buckets() const { return limiter_.size(); }

private:
    http::rate_limiter limiter_;
    const limits_config& c_;
};

/// The data API's answers to a refusal, in each dialect: PostgREST's body on /rest/v1
/// ({code, message, details, hint}), CORS for any origin.
http::response rest_error(const http::headers& request_headers, unsigned status,
                          std::string_view code, std::string_view message, std::string_view details,
                          std::string_view hint = {});

}  // namespace awp::api
