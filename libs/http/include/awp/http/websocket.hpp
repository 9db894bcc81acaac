// A websocket the HTTP server accepted on a websocket route (router::add_websocket): a
// message-oriented stream with a bounded outbound queue, the route's limits and timeouts, and
// close codes. Plain C++ in the interface; Boost.Beast's websocket stream lives in src/.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "awp/http/message.hpp"

namespace awp::http {

namespace net = boost::asio;

/// Close codes (RFC 6455, 7.4.1) as awp sends them.
namespace close_code {
inline constexpr std::uint16_t normal = 1000;
inline constexpr std::uint16_t going_away = 1001;  ///< the server drains (SIGTERM)
inline constexpr std::uint16_t protocol_error = 1002;
inline constexpr std::uint16_t bad_payload = 1007;  ///< a text message that is not UTF-8
inline constexpr std::uint16_t policy = 1008;       ///< a limit (slow client, rate, token)
inline constexpr std::uint16_t too_big = 1009;      ///< a message above the route's limit
inline constexpr std::uint16_t internal = 1011;     ///< the handler failed
inline constexpr std::uint16_t try_again_later = 1013;
}  // namespace close_code

struct websocket_options {
    /// The largest message the peer may send (all frames of it); a larger one closes the
    /// socket with 1009.
    std::size_t message_limit = 64 * 1024;
    /// Bytes queued for the peer and not yet written. A message that would go above it closes
    /// the socket with 1008 and a reason saying so, and what was queued is dropped: a client
    /// that does not read never makes the server buffer without bound.
    std::size_t queue_limit = 1024 * 1024;
    /// No frame from the peer for this long (a ping is sent at half of it, and its pong
    /// counts): the socket is closed.
    std::chrono::milliseconds idle_timeout{60'000};
    /// One message not written to the peer within this: the connection is cut (a peer whose
    /// window stays shut).
    std::chrono::milliseconds write_timeout{30'000};
    /// The opening and the closing handshakes, each; past it the connection is cut.
    std::chrono::milliseconds handshake_timeout{5'000};
};

/// A message from the peer.
struct websocket_message {
    std::string data;
    bool binary = false;
};

/// An accepted websocket. read() belongs to the session coroutine the route's handler returned
/// (one read at a time, on the connection's strand); send() and close() may be called from any
/// thread and never block.
class websocket {
public:
    websocket() = default;
    websocket(const websocket&) = delete;
    websocket& operator=(const websocket&) = delete;
    virtual ~websocket() = default;

    /// The next message; nullopt once the socket is closed (by the peer, a limit, a timeout,
    /// close(), or the server's drain). A text message is valid UTF-8 (else 1007).
    virtual net::awaitable<std::optional<websocket_message>> read() = 0;
    /// Queues a message for the peer, after those already queued. False when the socket is
    /// closing or closed, or when this message would put the queue above its bound (then the
    /// socket is closed: 1008 "slow client: ...").
    virtual bool send(std::string data, bool binary = false) = 0;
    /// Sends a close frame with `code` and `reason` (cut to 123 bytes) once what is queued is
    /// written; later sends are refused. The first close wins.
    virtual void close(std::uint16_t code, std::string reason) = 0;
    /// Like close(), but what is still queued is dropped first (a limit, a revoked token).
    virtual void close_now(std::uint16_t code, std::string reason) = 0;
    [[nodiscard]] virtual bool is_open() const = 0;
    /// Bytes queued and not yet written.
    [[nodiscard]] virtual std::size_t queued_bytes() const = 0;
    /// The close code and reason this side sent or received (0 while open).
    [[nodiscard]] virtual std::pair<std::uint16_t, std::string> close_reason() const = 0;
    [[nodiscard]] virtual const std::string& remote() const = 0;
};

/// What a websocket route's handler decides about an upgrade request.
struct websocket_accept {
    /// When set, this answer is sent as HTTP instead of the upgrade (401, 403, 429...).
    std::optional<response> refusal;
    /// Run on the accepted socket (on its strand); the socket is closed (1000) when it returns,
    /// and with 1011 when it throws.
    std::function<net::awaitable<void>(std::shared_ptr<websocket>)> session;
    /// The Sec-WebSocket-Protocol to answer, one the client offered ("" = none).
    std::string protocol;
};

/// A websocket route's handler: takes the upgrade request (a GET with Upgrade: websocket; the
/// server answers anything else 426 itself) and refuses it or returns the session to run.
using websocket_handler = std::function<net::awaitable<websocket_accept>(request)>;

}  // namespace awp::http
