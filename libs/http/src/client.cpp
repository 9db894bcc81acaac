// awp::http::fetch: one HTTP/1.1 request per connection over plain TCP, with a deadline for
// the whole exchange.
#include "awp/http/client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace awp::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using net::use_awaitable;

std::optional<url_parts> parse_url(std::string_view url) {
    constexpr std::string_view kHttp = "http://";
    if (url.substr(0, kHttp.size()) != kHttp) return std::nullopt;
    url.remove_prefix(kHttp.size());
    url_parts p;
    p.scheme = "http";
    auto slash = url.find('/');
    auto authority = url.substr(0, slash);
    p.target = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
    if (authority.empty() || authority.find('@') != std::string_view::npos) return std::nullopt;
    if (authority.front() == '[') {
        auto close = authority.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        p.host = std::string(authority.substr(1, close - 1));
        auto rest = authority.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return std::nullopt;
            p.port = std::string(rest.substr(1));
        }
    } else {
        auto colon = authority.rfind(':');
        p.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) p.port = std::string(authority.substr(colon + 1));
    }
    if (p.port.empty()) p.port = "80";
    if (p.host.empty() || p.port.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return p;
}

net::awaitable<response> fetch(client_request r) {
    auto u = parse_url(r.url);
    if (!u) throw upstream_error(upstream_error::kind::protocol, "unsupported URL");
    auto ex = co_await net::this_coro::executor;
    tcp::resolver resolver(ex);
    beast::tcp_stream stream(ex);
    const auto deadline = std::chrono::steady_clock::now() + r.timeout;
    auto left = [&] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
    };
    auto [rec, endpoints] =
        co_await resolver.async_resolve(u->host, u->port, net::as_tuple(use_awaitable));
    if (rec) {
        throw upstream_error(upstream_error::kind::unreachable,
                             "cannot resolve " + u->host + ": " + rec.message());
    }
    stream.expires_after(left());
    auto [cec, ep] = co_await stream.async_connect(endpoints, net::as_tuple(use_awaitable));
    (void)ep;
    if (cec == beast::error::timeout) {
        throw upstream_error(upstream_error::kind::timeout, "timed out connecting");
    }
    if (cec) {
        throw upstream_error(upstream_error::kind::unreachable,
                             "cannot connect to " + u->host + ":" + u->port + ": " + cec.message());
    }
    bhttp::request<bhttp::string_body> req;
    req.version(11);
    req.method_string(r.method);
    req.target(u->target);
    req.set(bhttp::field::host, u->port == "80" ? u->host : u->host + ":" + u->port);
    for (const auto& [n, v] : r.header.fields()) req.insert(n, v);
    req.keep_alive(false);
    req.body() = std::move(r.body);
    if (!req.body().empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH") {
        req.prepare_payload();
    }
    stream.expires_after(left());
    auto [wec, wn] = co_await bhttp::async_write(stream, req, net::as_tuple(use_awaitable));
    (void)wn;
    if (wec == beast::error::timeout) {
        throw upstream_error(upstream_error::kind::timeout, "timed out sending the request");
    }
    if (wec) throw upstream_error(upstream_error::kind::unreachable, wec.message());
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(r.body_limit);
    parser.header_limit(64 * 1024);
    stream.expires_after(left());
    auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser, net::as_tuple(use_awaitable));
    (void)n;
    if (ec == beast::error::timeout) {
        throw upstream_error(upstream_error::kind::timeout, "timed out waiting for the answer");
    }
    if (ec) {
        throw upstream_error(upstream_error::kind::protocol, "bad answer: " + ec.message());
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    auto& msg = parser.get();
    response out;
    out.status = msg.result_int();
    for (const auto& f : msg) out.header.add(std::string(f.name_string()), std::string(f.value()));
    out.body = std::move(msg.body());
    co_return out;
}

response fetch_sync(client_request r) {
    net::io_context ioc;
    auto fut = net::co_spawn(ioc, fetch(std::move(r)), net::use_future);
    ioc.run();
    return fut.get();
}

}  // namespace awp::http
