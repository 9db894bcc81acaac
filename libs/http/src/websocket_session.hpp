// The hand-over from the HTTP connection (server.cpp) to an accepted websocket route
// (websocket_session.cpp): the handshake, the handler's session, the writer and the close.
#pragma once

#include <functional>
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

/// Runs an accepted websocket on `stream` (its strand): the opening handshake answering
/// `upgrade`, then the handler's session and the writer side by side until both end. Returns
/// once the connection is closed.
net::awaitable<void> run_websocket(
    boost::beast::tcp_stream stream,
    boost::beast::http::request<boost::beast::http::string_body> upgrade, websocket_accept accept,
    websocket_options options, std::string remote, drain_registrar on_open);

}  // namespace awp::http::detail
