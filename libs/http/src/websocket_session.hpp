// The hand-over from the HTTP connection (server.cpp) to an accepted websocket route
// (websocket_session.cpp): the handshake, the handler's session, the writer and the close.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "awp/http/websocket.hpp"

namespace awp::http::detail {

/// Called once the socket is open with the function the server's drain calls (on the
/// connection's strand) to close it with 1001.
using drain_registrar = std::function<void(std::function<void()>)>;

/// What the HTTP loop hands to an accepted websocket: on the heap, moved once (a coroutine's
/// parameters live as long as its frame, which is the socket's life; these are let go after the
/// handshake).
struct websocket_handoff {
    boost::asio::ip::tcp::socket socket;  ///< its executor is the connection's strand
    boost::beast::http::request<boost::beast::http::string_body> upgrade;
    websocket_accept accept;
    websocket_options options;
    std::string remote;
};

/// Runs an accepted websocket: the opening handshake answering the upgrade, then the handler's
/// session with the writer beside it until both end. Returns once the connection is closed.
net::awaitable<void> run_websocket(std::unique_ptr<websocket_handoff> h, drain_registrar on_open);

}  // namespace awp::http::detail
