// The NOTIFY channels of the queue protocols: the one place their names are spelled in C++. The
// SQL that raises them (the pg_notify calls of sql/0005, 0006, 0007, 0010, 0011) is held to these
// names by `integration: the channel names of core::channels are the ones the SQL notifies`.
#pragma once

#include <string>
#include <string_view>

namespace awp::core::channels {

namespace detail {
/// "<prefix><gateway id without dashes>": 32 hex digits keep the name well under Postgres's 63.
inline std::string per_gateway(std::string_view prefix, std::string_view gateway_id) {
    std::string out(prefix);
    for (const char c : gateway_id)
        if (c != '-') out += c;
    return out;
}
}  // namespace detail

/// A command of the gateway became pending (insert, re-queue); payload: the command id.
inline std::string commands(std::string_view gateway_id) {
    return detail::per_gateway("awp_commands_", gateway_id);
}
/// An inbox item of one of the gateway's agents is due; payload: the item id or "".
inline std::string inbox(std::string_view gateway_id) {
    return detail::per_gateway("awp_inbox_", gateway_id);
}
/// The gateway's secrets changed; payload: the secret id when one row changed, else "".
inline std::string secrets(std::string_view gateway_id) {
    return detail::per_gateway("awp_secrets_", gateway_id);
}
/// A knowledge item needs embedding (every tenant); payload: the item id or "".
inline constexpr std::string_view kEmbed = "awp_embed";
/// A session ended (sql/0032): every api-gateway process reads the app_token_revocations row
/// the payload names (its id) and refuses the tokens it covers. The payload is a hint only.
inline constexpr std::string_view kSessionRevoked = "awp_session_revoked";

}  // namespace awp::core::channels
