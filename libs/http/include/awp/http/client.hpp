// A small HTTP/1.1 client (http:// and https://) for upstream calls: the embedder, Chrome's
// DevTools HTTP endpoint, OAuth token endpoints, source providers, other gateways. One request
// per connection. HTTPS verifies the peer against the system's trust store (or ca_file) and the
// host name, with SNI; there is no way to turn verification off.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>

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
    std::string scheme;  // "http" or "https"
    std::string host;
    std::string port;    // "80" / "443" when absent
    std::string target;  // path and query, "/" when absent
};
/// Parses http(s)://host[:port][/path]; nullopt for anything else (user info included).
[[nodiscard]] std::optional<url_parts> parse_url(std::string_view url);

struct client_request {
    std::string method = "GET";
    std::string url;
    headers header;
    std::string body;
    std::chrono::milliseconds timeout{10'000};  // the whole exchange
    std::size_t body_limit = 64 * 1024 * 1024;
    std::string ca_file;  // https: PEM bundle to trust instead of the system store
    /// Called with the URL's host and every address it resolved to before any connection is
    /// made; it throws (outbound_refused, outbound.hpp) to refuse. The connection then goes to
    /// those checked addresses: there is no second lookup. fetch never follows redirects.
    std::function<void(std::string_view host, const net::ip::address&, std::uint16_t port)> check;
};

/// Performs the request on the calling coroutine's executor. Any status is a response (a 3xx
/// is returned as it is, never followed); failures to connect, time-outs and protocol errors
/// throw upstream_error; an address refused by `check` throws what check threw.
net::awaitable<response> fetch(client_request r);

/// The same, blocking, on a private io_context (tests, CLIs).
response fetch_sync(client_request r);

}  // namespace awp::http
