// The wake relay's line protocol (docs/protocols/wake-relay.md): what awp-wake sends a gateway
// host over its stream, and the checks both ends make. Written once, here: awp-wake formats and
// filters with it, core::listener parses with it.
//
// The database NOTIFYs `awp_wake` with "<channel> <payload>" beside every per-gateway NOTIFY
// (public.awp_notify_gateway, sql/functions/wake.sql). awp-wake LISTENs on that one channel and
// forwards each line to the streams of the channel's gateway:
//
//   ready <gateway id>      first line: the login was checked, wake-ups follow (look now)
//   <channel> <payload>     a wake-up of one of the gateway's channels (payload may be empty)
//   rescan                  the relay's own LISTEN reconnected or a stream overflowed (look now)
//   ping                    every kPingInterval, so a dead relay is noticed
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace awp::core::wake {

/// The relay's channel: one listening session per database, whatever the number of gateways.
inline constexpr std::string_view kChannel = "awp_wake";
/// The relay's stream endpoint.
inline constexpr std::string_view kPath = "/v1/wake";
/// awp-wake's default port.
inline constexpr unsigned short kDefaultPort = 8095;
/// A line longer than this (without its "\n") is a protocol error.
inline constexpr std::size_t kMaxLine = 256;
inline constexpr std::chrono::seconds kPingInterval{15};
/// A stream that sent nothing (not even a ping) for this long is dead.
inline constexpr std::chrono::seconds kSilenceLimit{3 * kPingInterval};

/// The per-gateway channels and the hex gateway id in their names (core::channels).
struct gateway_channel {
    std::string_view channel;
    std::string_view gateway_hex;  ///< 32 lowercase hex digits
};

/// A channel a relay may forward: a known per-gateway prefix + 32 lowercase hex digits.
[[nodiscard]] std::optional<gateway_channel> parse_channel(std::string_view channel);

/// The 32 lowercase hex digits of a canonical uuid; nullopt when `uuid` is not one.
[[nodiscard]] std::optional<std::string> gateway_hex(std::string_view uuid);

/// What a line of the stream says.
struct line {
    enum class kind { ready, wake, rescan, ping };
    kind what = kind::ping;
    std::string channel;  ///< wake: the channel; ready: the gateway id
    std::string payload;  ///< wake: the payload ("" allowed)
};

/// Parses one line (without "\n"). nullopt for anything not in the protocol: too long, an
/// unknown word, a channel that is not a per-gateway one, a payload that is not a uuid or empty.
[[nodiscard]] std::optional<line> parse_line(std::string_view text);

/// The relay's side: a NOTIFY payload of `awp_wake` ("<channel> <payload>") as a checked wake-up;
/// nullopt when it is not one (anyone may pg_notify that channel: it is checked like outside
/// bytes).
[[nodiscard]] std::optional<line> parse_notify_payload(std::string_view payload);

/// "<channel> <payload>\n" of a checked wake-up.
[[nodiscard]] std::string format_wake(const line& l);

/// The header a pool login's host sends its gateway key in (GATEWAY_KEY, sql/0026): the relay
/// checks the Basic login with the key presented (pg::connection::set_gateway_key).
inline constexpr std::string_view kGatewayKeyHeader = "Awp-Gateway-Key";

/// The relay's reading of a stream request's Authorization header: "Basic base64(user:password)"
/// (scheme case-insensitive, at most 1 KiB, a non-empty user, no NUL). nullopt otherwise.
struct credentials {
    std::string user;
    std::string password;
};
[[nodiscard]] std::optional<credentials> parse_basic_credentials(std::string_view header);

}  // namespace awp::core::wake
