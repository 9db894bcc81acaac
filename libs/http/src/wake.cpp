// The wake relay's stream over HTTP(S): one long GET whose chunked body is core::wake's lines.
#include "awp/http/wake.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/wake.hpp"
#include "connection.hpp"

namespace awp::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using net::use_awaitable;

namespace {

constexpr std::chrono::seconds kOpenTimeout{10};

class http_relay_stream final : public core::relay_stream {
public:
    explicit http_relay_stream(connection c) : c_(std::move(c)) {
        parser_.header_limit(8 * 1024);
        parser_.body_limit(boost::none);  // a stream: lines are limited one by one instead
    }

    net::awaitable<void> open(const url_parts& u, const std::string& authorization,
                              const std::string& gateway_key) {
        bhttp::request<bhttp::empty_body> req{bhttp::verb::get, u.target, 11};
        const bool default_port = u.port == (u.scheme == "https" ? "443" : "80");
        req.set(bhttp::field::host, default_port ? u.host : u.host + ":" + u.port);
        req.set(bhttp::field::authorization, authorization);
        if (!gateway_key.empty()) req.set(core::wake::kGatewayKeyHeader, gateway_key);
        req.set(bhttp::field::accept, "text/plain");
        c_.tcp->expires_after(kOpenTimeout);
        boost::system::error_code ec;
        if (c_.tls) {
            std::tie(ec, std::ignore) =
                co_await bhttp::async_write(*c_.tls, req, net::as_tuple(use_awaitable));
        } else {
            std::tie(ec, std::ignore) =
                co_await bhttp::async_write(*c_.tcp, req, net::as_tuple(use_awaitable));
        }
        if (ec) throw upstream_error(upstream_error::kind::unreachable, ec.message());
        c_.tcp->expires_after(kOpenTimeout);
        if (c_.tls) {
            std::tie(ec, std::ignore) = co_await bhttp::async_read_header(
                *c_.tls, buffer_, parser_, net::as_tuple(use_awaitable));
        } else {
            std::tie(ec, std::ignore) = co_await bhttp::async_read_header(
                *c_.tcp, buffer_, parser_, net::as_tuple(use_awaitable));
        }
        if (ec) {
            throw upstream_error(upstream_error::kind::protocol, "bad answer: " + ec.message());
        }
        const unsigned status = parser_.get().result_int();
        if (status != 200) {
            throw upstream_error(upstream_error::kind::protocol,
                                 "the relay answered " + std::to_string(status) +
                                     (status == 401   ? " (it refused the login)"
                                      : status == 403 ? " (the login is no gateway's)"
                                                      : ""));
        }
    }

    net::awaitable<std::string> read_line(std::chrono::milliseconds silence) override {
        while (true) {
            if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
                std::string out = pending_.substr(0, nl);
                pending_.erase(0, nl + 1);
                co_return out;
            }
            if (pending_.size() > core::wake::kMaxLine) {
                throw upstream_error(upstream_error::kind::protocol, "a relay line is too long");
            }
            if (parser_.is_done()) {
                throw upstream_error(upstream_error::kind::unreachable,
                                     "the relay ended the stream");
            }
            char chunk[512];
            parser_.get().body().data = chunk;
            parser_.get().body().size = sizeof chunk;
            c_.tcp->expires_after(silence);
            boost::system::error_code ec;
            if (c_.tls) {
                std::tie(ec, std::ignore) = co_await bhttp::async_read_some(
                    *c_.tls, buffer_, parser_, net::as_tuple(use_awaitable));
            } else {
                std::tie(ec, std::ignore) = co_await bhttp::async_read_some(
                    *c_.tcp, buffer_, parser_, net::as_tuple(use_awaitable));
            }
            if (ec == bhttp::error::need_buffer) ec = {};
            if (ec == beast::error::timeout) {
                throw upstream_error(upstream_error::kind::timeout, "the relay went silent");
            }
            if (ec) throw upstream_error(upstream_error::kind::unreachable, ec.message());
            pending_.append(chunk, sizeof chunk - parser_.get().body().size);
        }
    }

    void cancel() override { c_.tcp->cancel(); }

private:
    connection c_;
    beast::flat_buffer buffer_;
    bhttp::response_parser<bhttp::buffer_body> parser_;
    std::string pending_;
};

}  // namespace

core::relay_opener relay_opener(std::string wake_url, core::pg::login login, std::string ca_file,
                                std::string gateway_key) {
    auto u = parse_url(wake_url);
    if (!u) throw core::config_error("WAKE_URL must be an http:// or https:// URL");
    if (u->target.empty() || u->target == "/") u->target = std::string(core::wake::kPath);
    const std::string authorization =
        "Basic " + core::crypto::base64_encode(login.user + ":" + login.password);
    return [u = *u, authorization, ca_file,
            gateway_key]() -> net::awaitable<std::unique_ptr<core::relay_stream>> {
        client_request r;
        r.ca_file = ca_file;
        connection c =
            co_await open_connection(r, u, std::chrono::steady_clock::now() + kOpenTimeout);
        auto stream = std::make_unique<http_relay_stream>(std::move(c));
        co_await stream->open(u, authorization, gateway_key);
        co_return stream;
    };
}

void use_wake_source(core::listener_options& listen, const core::daemon::wake_options& wake,
                     const std::string& database_url) {
    listen.dsn = wake.listen_dsn(database_url);
    if (wake.url.empty()) return;
    core::pg::login login = core::pg::dsn_login(database_url);
    if (login.user.empty() || login.user.find(':') != std::string::npos) {
        throw core::config_error(
            "WAKE_URL needs DATABASE_URL (or PGUSER) to name the gateway's login, without ':'");
    }
    listen.relay =
        relay_opener(wake.url, std::move(login), wake.ca_file, core::pg::default_gateway_key());
}

}  // namespace awp::http
