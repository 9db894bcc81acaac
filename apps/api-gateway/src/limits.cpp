// What one client may cost (limits.hpp): the settings, the request rates of /rest/v1, /auth/v1
// and realtime joins, and the error shapes the data API's routes answer a refusal in.
#include "limits.hpp"

#include <cctype>

#include "awp/core/error.hpp"
#include "awp/rest/error.hpp"
#include "gateway.hpp"

namespace awp::api {

void add_limit_options(core::daemon::cli& cli, limits_config& c) {
    auto& app = cli.app();
    app.add_option("--trusted-proxies", c.trusted_proxies,
                   "Comma list of CIDRs or addresses of proxies whose X-Forwarded-For gives the "
                   "client's address (the TLS proxy in front); nobody else's header is believed")
        ->envname("API_TRUSTED_PROXIES");
    const auto rate = [&](const char* flag, std::string& v, const char* env, const char* what) {
        app.add_option(
               flag, v,
               std::string(what) + ": N/s, N/min or N/h, optionally :burst (default burst N); off")
            ->envname(env)
            ->capture_default_str();
    };
    rate("--rate-rest-address", c.rest_per_address, "API_RATE_REST_ADDRESS",
         "Data API (/rest/v1) requests from one client address");
    rate("--rate-rest-user", c.rest_per_user, "API_RATE_REST_USER",
         "Data API (/rest/v1) requests of one user");
    rate("--rate-auth-address", c.auth_per_address, "API_RATE_AUTH_ADDRESS",
         "/auth/v1 requests from one client address");
    rate("--rate-auth-user", c.auth_per_user, "API_RATE_AUTH_USER",
         "/auth/v1 requests of one signed-in user");
    rate("--rate-join-address", c.join_per_address, "API_RATE_JOIN_ADDRESS",
         "Realtime channel joins from one client address");
    rate("--rate-join-user", c.join_per_user, "API_RATE_JOIN_USER",
         "Realtime channel joins of one user");
    app.add_option("--rest-max-embeds", c.max_embeds,
                   "Embedded resources one data-API request may ask for (every level, spreads "
                   "included)")
        ->envname("API_REST_MAX_EMBEDS")
        ->check(CLI::Range(std::size_t{1}, std::size_t{500}))
        ->capture_default_str();
    app.add_option("--rest-max-joins", c.max_joins,
                   "Joins the embeds of one data-API request may make (a many-to-many counts two)")
        ->envname("API_REST_MAX_JOINS")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1000}))
        ->capture_default_str();
    app.add_option("--rest-anon-statement-timeout", c.anon_statement_timeout,
                   "statement_timeout of an anon data-API request unless the role sets one")
        ->envname("API_REST_ANON_STATEMENT_TIMEOUT")
        ->capture_default_str();
    app.add_option("--rest-authenticated-statement-timeout", c.authenticated_statement_timeout,
                   "statement_timeout of a signed-in user's data-API request unless the role "
                   "sets one")
        ->envname("API_REST_AUTHENTICATED_STATEMENT_TIMEOUT")
        ->capture_default_str();
}

void check_duration(const std::string& value, std::string_view what) {
    bool digit = false;
    for (const char ch : value) {
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != ' ' && ch != '.') {
            digit = false;
            break;
        }
        digit = digit || std::isdigit(static_cast<unsigned char>(ch)) != 0;
    }
    if (!digit || value.size() > 32) {
        throw core::config_error(std::string(what) + " must be a duration like 3s, got \"" + value +
                                 "\"");
    }
}

void validate_limits(limits_config& c) {
    c.proxies = http::trusted_proxies(c.trusted_proxies);
    c.rest_address = http::rate_rule::parse(c.rest_per_address, "API_RATE_REST_ADDRESS");
    c.rest_user = http::rate_rule::parse(c.rest_per_user, "API_RATE_REST_USER");
    c.auth_address = http::rate_rule::parse(c.auth_per_address, "API_RATE_AUTH_ADDRESS");
    c.auth_user = http::rate_rule::parse(c.auth_per_user, "API_RATE_AUTH_USER");
    c.join_address = http::rate_rule::parse(c.join_per_address, "API_RATE_JOIN_ADDRESS");
    c.join_user = http::rate_rule::parse(c.join_per_user, "API_RATE_JOIN_USER");
    check_duration(c.anon_statement_timeout, "API_REST_ANON_STATEMENT_TIMEOUT");
    check_duration(c.authenticated_statement_timeout, "API_REST_AUTHENTICATED_STATEMENT_TIMEOUT");
}

// ---- request rates --------------------------------------------------------------------------

request_rates::request_rates(const limits_config& c) : c_(c) {}

std::optional<request_rates::refusal> request_rates::take(rate_surface surface,
                                                          std::string_view address,
                                                          std::string_view user) {
    const char* prefix = "rest";
    const http::rate_rule* per_address = &c_.rest_address;
    const http::rate_rule* per_user = &c_.rest_user;
    const char* what = "data API requests";
    const char* address_env = "API_RATE_REST_ADDRESS";
    const char* user_env = "API_RATE_REST_USER";
    if (surface == rate_surface::auth) {
        prefix = "auth";
        per_address = &c_.auth_address;
        per_user = &c_.auth_user;
        what = "/auth/v1 requests";
        address_env = "API_RATE_AUTH_ADDRESS";
        user_env = "API_RATE_AUTH_USER";
    } else if (surface == rate_surface::join) {
        prefix = "join";
        per_address = &c_.join_address;
        per_user = &c_.join_user;
        what = "channel joins";
        address_env = "API_RATE_JOIN_ADDRESS";
        user_env = "API_RATE_JOIN_USER";
    }
    std::vector<http::rate_limiter::charge> charges;
    charges.push_back({std::string(prefix) + " a " + http::address_key(address), *per_address});
    if (!user.empty())
        charges.push_back({std::string(prefix) + " u " + std::string(user), *per_user});
    const auto no = limiter_.take(charges);
    if (!no) return std::nullopt;
    const bool by_user = no->charge == 1;
    const auto& rule = by_user ? *per_user : *per_address;
    refusal r;
    r.retry_after = no->retry_after;
    r.message = std::string("more ") + what + " than " + rule.to_string() + " " +
                (by_user ? "of one user" : "from one client address") + " (" +
                (by_user ? user_env : address_env) + "); retry in " +
                std::to_string(no->retry_after) + " s";
    return r;
}

// ---- error shapes ---------------------------------------------------------------------------

http::response rest_error(const http::headers& request_headers, unsigned status,
                          std::string_view code, std::string_view message, std::string_view details,
                          std::string_view hint) {
    const rest::api_error e(status, std::string(code), std::string(message), std::string(details),
                            std::string(hint));
    auto res = http::response::json(status, e.body());
    res.reason = std::string(rest::reason_phrase(status));
    res.header.set("Content-Type", "application/json; charset=utf-8");
    http::request for_cors;
    for_cors.header = request_headers;
    add_data_api_cors(for_cors, res);
    return res;
}

// ---- /auth/v1 -------------------------------------------------------------------------------

net::awaitable<response> gateway::auth_v1_limited(net::awaitable<response> (gateway::*fn)(request),
                                                  request r) {
    // The user of a valid bearer token is charged too; the service role is not limited (it
    // holds every key already). A token that does not verify is the handler's to refuse.
    std::string user;
    bool service_role = false;
    try {
        const auto who = data_api_principal(r);
        user = who.sub;
        service_role = who.role == "service_role";
    } catch (const rest::api_error&) {
        user.clear();
    }
    if (!service_role) {
        if (auto no = rates_->take(rate_surface::auth, r.remote, user)) {
            co_return gotrue_refusal(r.header, 429, "over_request_rate_limit",
                                     "Request rate limit reached: " + no->message, no->retry_after);
        }
    }
    co_return co_await auth_v1(fn, std::move(r));
}

}  // namespace awp::api
