// The data API's errors: PostgREST's body {"code","details","hint","message"} with its HTTP
// status, for the dialect's own refusals (PGRSTnnn) and for Postgres errors (the SQLSTATE as
// the code, PostgREST's SQLSTATE → status table). The one place both are spelled.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "awp/core/error.hpp"

namespace awp::rest {

/// A refusal with PostgREST's error shape. `details` and `hint` null when empty; a details
/// value that is already JSON (PGRST's own structured details) goes in `details_json`.
class api_error : public core::error {
public:
    api_error(unsigned status, std::string code, std::string message, std::string details = {},
              std::string hint = {})
        : core::error(message),
          status_(status),
          code_(std::move(code)),
          message_(std::move(message)),
          details_(std::move(details)),
          hint_(std::move(hint)) {}
    [[nodiscard]] unsigned status() const noexcept { return status_; }
    [[nodiscard]] const std::string& code() const noexcept { return code_; }
    [[nodiscard]] const std::string& message() const noexcept { return message_; }
    [[nodiscard]] const std::string& details() const noexcept { return details_; }
    [[nodiscard]] const std::string& hint() const noexcept { return hint_; }
    /// The JSON body: {"code":..,"details":..,"hint":..,"message":..}.
    [[nodiscard]] std::string body() const;
    /// Extra response headers (WWW-Authenticate on 401, ...).
    std::vector<std::pair<std::string, std::string>> headers;
    /// details as raw JSON instead of a string (null details when both are empty).
    std::string details_json;

private:
    unsigned status_;
    std::string code_, message_, details_, hint_;
};

/// The HTTP status PostgREST answers a Postgres error with. `authenticated`: the request
/// carried a JWT (42501 is then 403, else 401).
[[nodiscard]] unsigned status_for_sqlstate(std::string_view sqlstate, std::string_view message,
                                           bool authenticated) noexcept;

/// A Postgres error as the data API answers it (the SQLSTATE is the code).
[[nodiscard]] api_error from_sql_error(std::string_view sqlstate, std::string message,
                                       std::string details, std::string hint, bool authenticated);

/// The reason phrase PostgREST's server sends with a status (the client shows it as
/// statusText): "OK", "Created", "Partial Content", "Not Acceptable", ...
[[nodiscard]] std::string_view reason_phrase(unsigned status) noexcept;

}  // namespace awp::rest
