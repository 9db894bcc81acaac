// A small HTTP/1.1 client (plain http://) for upstream calls: the embedder, Chrome's DevTools
// HTTP endpoint, OAuth token endpoints, other gateways. One request per connection.
#pragma once

#include <chrono>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "awp/http/message.hpp"

namespace awp::http {

namespace net = boost::asio;

/// The upstream could not be used: kind says how (a gateway maps it to 502 or 504).
class upstream_error : public core::error {
public:
    enum class kind { unreachable, timeout, protocol };
    upstream_error(kind k, const std::string& message) : core::error(message), kind_(k) {}
    [[nodiscard]] kind what_kind() const noexcept { return kind_; }

private:
    kind kind_;
};

struct url_parts {
    std::string scheme;  // "http"
    std::string host;
    std::string port;    // "80" when absent
    std::string target;  // path and query, "/" when absent
};
/// Parses http://host[:port][/path]; nullopt for anything else (https included).
[[nodiscard]] std::optional<url_parts> parse_url(std::string_view url);

struct client_request {
    std::string method = "GET";
    std::string url;
    headers header;
    std::string body;
    std::chrono::milliseconds timeout{10'000};  // the whole exchange
    std::size_t body_limit = 64 * 1024 * 1024;
};

/// Performs the request on the calling coroutine's executor. Any status is a response;
/// failures to connect, time-outs and protocol errors throw upstream_error.
net::awaitable<response> fetch(client_request r);

/// The same, blocking, on a private io_context (tests, CLIs).
response fetch_sync(client_request r);

}  // namespace awp::http
