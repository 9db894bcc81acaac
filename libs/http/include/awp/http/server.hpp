// An HTTP/1.1 server on Boost.Beast coroutines: a router with per-route methods and body
// limits, JSON errors (405 with Allow, 413, 404), read/write/idle timeouts, security headers,
// a JSON access log line per request and a graceful drain. The Beast code lives in server.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "awp/http/client_address.hpp"
#include "awp/http/message.hpp"
#include "awp/http/websocket.hpp"

namespace awp::http {

namespace net = boost::asio;

/// A request handler: a coroutine taking the request by value (docs/coroutines.md).
using handler = std::function<net::awaitable<response>(request)>;

/// A route's decision on a request once its header is read, before any byte of its body.
struct admission {
    /// Set: the answer, sent at once; the body is not read (the connection then closes).
    std::optional<response> refuse;
    /// The deadline for this request's body (0: the route's, else the server's body_timeout).
    std::chrono::milliseconds body_timeout{0};
};
/// Looks at a request with its header only (method, target, path, query, headers, params,
/// remote; no body yet) and admits or refuses it; it may leave request::context for the
/// handler. A thrown http_error is a refusal like a handler's.
using admit_handler = std::function<net::awaitable<admission>(request&)>;

struct route_options {
    std::size_t body_limit = 64 * 1024;  // larger bodies get 413
    /// The body is not kept in memory: it is written, file_body::kChunk bytes at a time, to an
    /// unlinked temporary file handed to the handler as request::body_file. Same limit,
    /// timeouts and errors; chunked bodies too.
    bool spool_body = false;
    std::string spool_dir;  // where that file is made; empty = $TMPDIR, else /tmp
    /// The query is handed on as sent (request::query) and not decoded by the server: for a
    /// handler with its own query grammar and error shape (the data API's /rest/v1). Otherwise
    /// it is decoded once into request::query_params, and one that does not decode to text is
    /// answered 400 bad_query before the handler runs.
    bool raw_query = false;
    /// The body's deadline on this route (0: the server's body_timeout).
    std::chrono::milliseconds body_timeout{0};
    /// Runs before the body is read, once the route and the query are checked (and before
    /// Content-Length is held to body_limit, so it may refuse a large body in its own words):
    /// who calls and whether the body is welcome are decided without reading it (an upload
    /// refused for its size, its caller or a full server costs no bytes).
    admit_handler admit;
    /// The shape of the errors the server itself answers on this route before its handler runs
    /// (413 body too large, 408 body too slow, 400 malformed body): a dialect with its own
    /// error body (the data API's PostgREST and GoTrue shapes) sets it; null = response::error.
    std::function<response(const headers& request_headers, unsigned status, std::string_view code,
                           std::string_view message)>
        error_shape;
};

/// Routes by method and path pattern. Pattern segments: literals, ":name" (one segment,
/// percent-decoded into request::params) and a final "*name" (the rest of the path, one or
/// more segments, left encoded). A path that matches with another method gives 405 + Allow.
/// Every segment of a path is decoded once, before any route is looked up: a malformed
/// %-escape, a segment that is not UTF-8 text once decoded (overlong forms and surrogates
/// included) or holds NUL, or one longer than kMaxSegmentBytes, refuses the whole path
/// (match_result::bad_path, answered 400 bad_path), whatever route it would have reached.
/// Literals are compared with the decoded segments.
class router {
public:
    /// The longest path segment accepted, in bytes after percent-decoding (a file name is at
    /// most 255, a Postgres identifier 63).
    static constexpr std::size_t kMaxSegmentBytes = 1024;

    void add(std::string method, std::string pattern, handler h, route_options o = {});
    /// Same handler for several methods ("GET", "POST").
    void add(const std::vector<std::string>& methods, const std::string& pattern, const handler& h,
             route_options o = {});
    /// A websocket route: a GET with Upgrade: websocket goes to `h`, which refuses it or hands
    /// back the session to run on the accepted socket (websocket.hpp); a GET without the
    /// upgrade is answered 426, other methods 405. The query is decoded as on other routes.
    void add_websocket(std::string pattern, websocket_handler h, websocket_options o = {});

    struct match_result {
        const handler* h = nullptr;
        /// A websocket route (then h is null).
        const websocket_handler* ws = nullptr;
        websocket_options ws_options;
        route_options options;
        std::map<std::string, std::string, std::less<>> params;
        std::vector<std::string> allow;  // methods of the path when the method did not match
        /// Why the path is refused ("" when it is not); then nothing else is set.
        std::string bad_path;
    };
    [[nodiscard]] match_result match(std::string_view method, std::string_view path) const;

private:
    struct route {
        std::string method;
        std::vector<std::string> segments;
        handler h;
        route_options options;
        websocket_handler ws;  // set on websocket routes
        websocket_options ws_options;
    };
    std::vector<route> routes_;
};

struct server_options {
    std::string bind = "127.0.0.1";
    unsigned short port = 0;                           // 0 = any free port (see server::port())
    std::string name = "awp";                          // daemon name, not sent to clients
    std::chrono::milliseconds header_timeout{10'000};  // first request line and headers
    std::chrono::milliseconds body_timeout{30'000};
    std::chrono::milliseconds write_timeout{30'000};
    std::chrono::milliseconds idle_timeout{60'000};  // keep-alive between requests
    std::size_t header_limit = 16 * 1024;
    std::size_t unrouted_body_limit = 0;  // body allowed on 404/405 answers
    bool access_log = true;
    bool hsts = false;  // Strict-Transport-Security (behind a TLS-terminating proxy)
    /// Proxies whose X-Forwarded-For gives the client's address (request::remote).
    trusted_proxies trusted;
    int backlog = 1024;
};

/// The server. listen() binds (throws core::config_error when the address is unusable),
/// run() accepts until stop() and then waits for requests in flight to finish; idle
/// keep-alive connections are closed at once, websockets with 1001 after what is queued for
/// them (each within its route's handshake timeout).
class server {
public:
    server(net::io_context& ioc, router r, server_options o);
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    void listen();
    [[nodiscard]] unsigned short port() const noexcept;
    net::awaitable<void> run();
    /// Thread-safe; may be called from a signal handler's completion.
    void stop();
    /// Connections open right now (websockets included).
    [[nodiscard]] std::size_t active_connections() const noexcept;
    /// Websockets open right now.
    [[nodiscard]] std::size_t active_websockets() const noexcept;

    struct impl;

private:
    std::shared_ptr<impl> impl_;
};

/// Security headers every response carries (also used by proxies that build responses).
void add_security_headers(headers& h, bool hsts);

}  // namespace awp::http
