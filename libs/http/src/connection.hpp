// An open client connection, TCP or TLS (client.cpp): what fetch and the wake relay's stream
// (wake.cpp) share — the resolve, the outbound check, the connect, the certificate check.
#pragma once

#include <chrono>
#include <memory>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "awp/http/client.hpp"

namespace awp::http {

using deadline_type = std::chrono::steady_clock::time_point;

struct connection {
    std::unique_ptr<boost::beast::tcp_stream> tcp;
    std::unique_ptr<net::ssl::context> ctx;                                    // https only
    std::unique_ptr<boost::beast::ssl_stream<boost::beast::tcp_stream&>> tls;  // https only
};

/// Resolves, checks (r.check), connects and, for https, verifies the server's certificate
/// against r.ca_file or the system store. Throws upstream_error.
net::awaitable<connection> open_connection(const client_request& r, const url_parts& u,
                                           deadline_type deadline);

}  // namespace awp::http
