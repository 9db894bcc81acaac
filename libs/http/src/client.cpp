// awp::http::fetch: one HTTP/1.1 request per connection over TCP or TLS, with a deadline for
// the whole exchange.
#include "awp/http/client.hpp"

#include "connection.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace awp::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using net::use_awaitable;

std::optional<url_parts> parse_url(std::string_view url) {
    constexpr std::string_view kHttp = "http://";
    constexpr std::string_view kHttps = "https://";
    url_parts p;
    if (url.substr(0, kHttp.size()) == kHttp) {
        p.scheme = "http";
        url.remove_prefix(kHttp.size());
    } else if (url.substr(0, kHttps.size()) == kHttps) {
        p.scheme = "https";
        url.remove_prefix(kHttps.size());
    } else {
        return std::nullopt;
    }
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
    if (p.port.empty()) p.port = p.scheme == "https" ? "443" : "80";
    if (p.host.empty() || p.port.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return p;
}

namespace {

std::chrono::milliseconds left(deadline_type deadline) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
}

net::ssl::context make_tls_context(const std::string& ca_file) {
    net::ssl::context ctx(net::ssl::context::tls_client);
    ctx.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                    net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                    net::ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    if (ca_file.empty()) {
        ctx.set_default_verify_paths(ec);
    } else {
        ctx.load_verify_file(ca_file, ec);
    }
    if (ec) {
        throw upstream_error(upstream_error::kind::protocol,
                             "cannot load the trusted certificates: " + ec.message());
    }
    ctx.set_verify_mode(net::ssl::verify_peer);
    return ctx;
}

// Writes the request and reads the answer on an open stream (TCP or TLS).
template <class Stream>
net::awaitable<response> exchange(Stream& stream, beast::tcp_stream& tcp, client_request& r,
                                  const url_parts& u, deadline_type deadline) {
    bhttp::request<bhttp::string_body> req;
    req.version(11);
    req.method_string(r.method);
    req.target(u.target);
    const bool default_port = u.port == (u.scheme == "https" ? "443" : "80");
    req.set(bhttp::field::host, default_port ? u.host : u.host + ":" + u.port);
    for (const auto& [n, v] : r.header.fields()) req.insert(n, v);
    req.keep_alive(false);
    req.body() = std::move(r.body);
    if (!req.body().empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH") {
        req.prepare_payload();
    }
    tcp.expires_after(left(deadline));
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
    tcp.expires_after(left(deadline));
    auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser, net::as_tuple(use_awaitable));
    (void)n;
    if (ec == beast::error::timeout) {
        throw upstream_error(upstream_error::kind::timeout, "timed out waiting for the answer");
    }
    if (ec) {
        throw upstream_error(upstream_error::kind::protocol, "bad answer: " + ec.message());
    }
    auto& msg = parser.get();
    response out;
    out.status = msg.result_int();
    for (const auto& f : msg) out.header.add(std::string(f.name_string()), std::string(f.value()));
    out.body = std::move(msg.body());
    co_return out;
}

}  // namespace

net::awaitable<connection> open_connection(const client_request& r, const url_parts& u,
                                           deadline_type deadline) {
    auto ex = co_await net::this_coro::executor;
    tcp::resolver resolver(ex);
    connection c;
    c.tcp = std::make_unique<beast::tcp_stream>(ex);
    beast::tcp_stream& stream = *c.tcp;
    auto [rec, endpoints] =
        co_await resolver.async_resolve(u.host, u.port, net::as_tuple(use_awaitable));
    if (rec) {
        throw upstream_error(upstream_error::kind::unreachable,
                             "cannot resolve " + u.host + ": " + rec.message());
    }
    if (r.check) {
        // Every address, before connecting to any: a name that resolves to one public and one
        // internal address is refused, not tried in turn.
        for (const auto& e : endpoints) {
            r.check(u.host, e.endpoint().address(), e.endpoint().port());
        }
    }
    stream.expires_after(left(deadline));
    auto [cec, ep] = co_await stream.async_connect(endpoints, net::as_tuple(use_awaitable));
    (void)ep;
    if (cec == beast::error::timeout) {
        throw upstream_error(upstream_error::kind::timeout, "timed out connecting");
    }
    if (cec) {
        throw upstream_error(upstream_error::kind::unreachable,
                             "cannot connect to " + u.host + ":" + u.port + ": " + cec.message());
    }
    if (u.scheme == "http") co_return c;
    c.ctx = std::make_unique<net::ssl::context>(make_tls_context(r.ca_file));
    c.tls = std::make_unique<beast::ssl_stream<beast::tcp_stream&>>(stream, *c.ctx);
    auto& tls = *c.tls;
    // The certificate must name the host (OpenSSL's RFC 6125 matching, or the IP address);
    // SNI for names (RFC 6066 leaves IP literals out).
    SSL* ssl = tls.native_handle();
    boost::system::error_code ip_ec;
    (void)net::ip::make_address(u.host, ip_ec);
    const bool is_ip = !ip_ec;
    const int named = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), u.host.c_str())
                            : SSL_set1_host(ssl, u.host.c_str()) *
                                  static_cast<int>(SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME,
                                                            TLSEXT_NAMETYPE_host_name,
                                                            const_cast<char*>(u.host.c_str())));
    if (named != 1) {
        throw upstream_error(upstream_error::kind::protocol, "cannot set the TLS server name");
    }
    stream.expires_after(left(deadline));
    auto [hec] =
        co_await tls.async_handshake(net::ssl::stream_base::client, net::as_tuple(use_awaitable));
    if (hec == beast::error::timeout) {
        throw upstream_error(upstream_error::kind::timeout, "timed out in the TLS handshake");
    }
    if (hec) {
        std::string why = hec.message();
        const long verify = SSL_get_verify_result(tls.native_handle());
        if (verify != X509_V_OK) why = X509_verify_cert_error_string(verify);
        throw upstream_error(upstream_error::kind::unreachable,
                             "TLS handshake with " + u.host + " failed: " + why);
    }
    co_return c;
}

net::awaitable<response> fetch(client_request r) {
    auto u = parse_url(r.url);
    if (!u) throw upstream_error(upstream_error::kind::protocol, "unsupported URL");
    const auto deadline = std::chrono::steady_clock::now() + r.timeout;
    connection c = co_await open_connection(r, *u, deadline);
    beast::tcp_stream& stream = *c.tcp;
    if (!c.tls) {
        auto out = co_await exchange(stream, stream, r, *u, deadline);
        boost::system::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        co_return out;
    }
    auto out = co_await exchange(*c.tls, stream, r, *u, deadline);
    // A polite close_notify, bounded: the answer is complete already.
    stream.expires_after(std::chrono::milliseconds(200));
    auto [sec] = co_await c.tls->async_shutdown(net::as_tuple(use_awaitable));
    (void)sec;
    co_return out;
}

response fetch_sync(client_request r) {
    net::io_context ioc;
    auto fut = net::co_spawn(ioc, fetch(std::move(r)), net::use_future);
    ioc.run();
    return fut.get();
}

}  // namespace awp::http
