// awp::http::fetch over https: a real TLS server on a loopback port with certificates made by
// the openssl CLI; the peer is verified against ca_file and the host name, never skipped.
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <catch2/catch.hpp>

#include "awp/http/client.hpp"

namespace tls_client_test {

namespace fs = std::filesystem;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

struct temp_dir {
    fs::path path;
    temp_dir() {
        std::string tmpl = (fs::temp_directory_path() / "awp-tls-XXXXXX").string();
        path = ::mkdtemp(tmpl.data());
    }
    ~temp_dir() { fs::remove_all(path); }
};

// A self-signed certificate for `names` (subjectAltName list), written as cert.pem + key.pem.
void make_cert(const fs::path& dir, const std::string& cn, const std::string& names) {
    const std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -keyout '" +
        (dir / "key.pem").string() + "' -out '" + (dir / "cert.pem").string() +
        "' -subj '/CN=" + cn + "' -addext 'subjectAltName=" + names + "' 2>/dev/null";
    const int rc = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(rc));
    REQUIRE(WEXITSTATUS(rc) == 0);
}

// Serves every connection: TLS handshake, one request, 200 with the request target as body.
class tls_server {
public:
    explicit tls_server(const fs::path& dir) : ctx_(ssl::context::tls_server) {
        ctx_.use_certificate_chain_file((dir / "cert.pem").string());
        ctx_.use_private_key_file((dir / "key.pem").string(), ssl::context::pem);
        acceptor_.open(tcp::v4());
        acceptor_.bind({net::ip::make_address("127.0.0.1"), 0});
        acceptor_.listen();
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] { serve(); });
    }
    ~tls_server() {
        stop_ = true;
        boost::system::error_code ec;
        tcp::socket poke(ioc_);
        poke.connect({net::ip::make_address("127.0.0.1"), port_}, ec);
        thread_.join();
    }
    [[nodiscard]] unsigned short port() const { return port_; }
    [[nodiscard]] int served() const { return served_; }

private:
    void serve() {
        while (!stop_) {
            tcp::socket sock(ioc_);
            boost::system::error_code ec;
            acceptor_.accept(sock, ec);
            if (ec || stop_) return;
            ssl::stream<tcp::socket> s(std::move(sock), ctx_);
            s.handshake(ssl::stream_base::server, ec);
            if (ec) continue;  // the client refused our certificate
            boost::beast::flat_buffer buf;
            bhttp::request<bhttp::string_body> req;
            bhttp::read(s, buf, req, ec);
            if (ec) continue;
            bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
            res.set(bhttp::field::content_type, "text/plain");
            res.body() =
                std::string(req.target()) + " host=" + std::string(req[bhttp::field::host]);
            res.prepare_payload();
            bhttp::write(s, res, ec);
            ++served_;
            s.shutdown(ec);
        }
    }
    net::io_context ioc_;
    ssl::context ctx_;
    tcp::acceptor acceptor_{ioc_};
    unsigned short port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> served_{0};
    std::thread thread_;
};

awp::http::upstream_error fetch_error(awp::http::client_request r) {
    try {
        awp::http::fetch_sync(std::move(r));
    } catch (const awp::http::upstream_error& e) {
        return e;
    }
    FAIL("the request was expected to fail");
    return awp::http::upstream_error(awp::http::upstream_error::kind::protocol, "");
}

}  // namespace

TEST_CASE("https URLs parse with 443 as the default port", "[http][tls]") {
    auto u = awp::http::parse_url("https://example.org/a?b=1");
    REQUIRE(u);
    CHECK(u->scheme == "https");
    CHECK(u->port == "443");
    CHECK(u->target == "/a?b=1");
    CHECK(awp::http::parse_url("https://user:pw@example.org/") == std::nullopt);
    CHECK(awp::http::parse_url("ftp://example.org/") == std::nullopt);
}

TEST_CASE("fetch over https verifies the certificate and the host name", "[http][tls]") {
    temp_dir dir;
    make_cert(dir.path, "localhost", "DNS:localhost,IP:127.0.0.1");
    tls_server server(dir.path);
    const std::string port = std::to_string(server.port());

    awp::http::client_request r;
    r.url = "https://localhost:" + port + "/v1/items?x=1";
    r.ca_file = (dir.path / "cert.pem").string();
    r.timeout = std::chrono::seconds(5);
    auto res = awp::http::fetch_sync(r);
    CHECK(res.status == 200);
    CHECK(res.body == "/v1/items?x=1 host=localhost:" + port);

    // An IP address is checked against the certificate's IP entries.
    r.url = "https://127.0.0.1:" + port + "/ip";
    CHECK(awp::http::fetch_sync(r).body.rfind("/ip ", 0) == 0);

    // Not in the trust store (no ca_file): refused before any request is sent.
    const int before = server.served();
    awp::http::client_request untrusted = r;
    untrusted.ca_file.clear();
    auto e = fetch_error(untrusted);
    CHECK(e.what_kind() == awp::http::upstream_error::kind::unreachable);
    CHECK(std::string(e.what()).find("certificate") != std::string::npos);
    CHECK(server.served() == before);

    // A missing CA file is a clear error, not a silent fallback.
    awp::http::client_request missing = r;
    missing.ca_file = (dir.path / "absent.pem").string();
    CHECK(std::string(fetch_error(missing).what()).find("trusted certificates") !=
          std::string::npos);
}

TEST_CASE("fetch over https refuses a certificate for another host", "[http][tls]") {
    temp_dir dir;
    make_cert(dir.path, "other.example", "DNS:other.example");
    tls_server server(dir.path);
    awp::http::client_request r;
    r.url = "https://localhost:" + std::to_string(server.port()) + "/";
    r.ca_file = (dir.path / "cert.pem").string();
    r.timeout = std::chrono::seconds(5);
    auto e = fetch_error(r);
    CHECK(e.what_kind() == awp::http::upstream_error::kind::unreachable);
    CHECK(std::string(e.what()).find("mismatch") != std::string::npos);
    CHECK(server.served() == 0);
}

}  // namespace tls_client_test
