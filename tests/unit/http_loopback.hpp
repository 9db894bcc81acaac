// Loopback helpers for the awp::http unit tests: the real server on an ephemeral port with its
// own io threads, and a blocking raw socket that sends exact bytes and reads what comes back.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "awp/http/server.hpp"

namespace awp::test::http_loopback {

namespace net = boost::asio;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// awp::http::server on 127.0.0.1:<any port>, run by two threads until the object goes.
class server {
public:
    server(http::router r, http::server_options o) {
        o.bind = "127.0.0.1";
        o.port = 0;
        srv_ = std::make_unique<http::server>(ioc_, std::move(r), std::move(o));
        srv_->listen();
        net::co_spawn(ioc_, srv_->run(), [this](const std::exception_ptr&) { done_ = true; });
        for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
    }
    ~server() {
        stop();
        wait_stopped(std::chrono::seconds(5));
        ioc_.stop();
        for (auto& t : threads_) t.join();
    }
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    [[nodiscard]] unsigned short port() const { return srv_->port(); }
    void stop() { srv_->stop(); }
    /// True once run() returned (every in-flight request finished).
    bool wait_stopped(milliseconds timeout) const {
        const auto end = clock::now() + timeout;
        while (!done_ && clock::now() < end) std::this_thread::sleep_for(milliseconds(5));
        return done_;
    }
    [[nodiscard]] std::size_t connections() const { return srv_->active_connections(); }

private:
    net::io_context ioc_;
    std::unique_ptr<http::server> srv_;
    std::vector<std::thread> threads_;
    std::atomic<bool> done_{false};
};

/// A parsed answer: status, lower-cased header block, body.
struct answer {
    int status = 0;
    std::string head;  // the status line and headers, lower-cased
    std::string body;
    [[nodiscard]] bool has_header(std::string_view line) const {
        return head.find(std::string(line)) != std::string::npos;
    }
};

/// One TCP connection to 127.0.0.1:port with blocking reads bounded by poll().
class raw {
public:
    explicit raw(unsigned short port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            ::close(fd_);
            throw std::runtime_error("cannot connect to the test server");
        }
        int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    ~raw() { ::close(fd_); }
    raw(const raw&) = delete;
    raw& operator=(const raw&) = delete;

    /// False when the peer has gone (EPIPE/ECONNRESET).
    bool send(std::string_view s) {
        while (!s.empty()) {
            const auto n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
            if (n <= 0) return false;
            s.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }

    /// The next complete response (Content-Length framed; head_only: an answer to HEAD, whose
    /// Content-Length announces no body), nullopt on EOF or timeout.
    std::optional<answer> read(milliseconds timeout = milliseconds(5000), bool head_only = false) {
        const auto end = clock::now() + timeout;
        for (;;) {
            if (auto a = take(head_only)) return a;
            if (!fill(end)) return std::nullopt;
        }
    }

    /// True when the server closes the connection within the timeout (bytes before the EOF
    /// are kept for read()).
    bool closed_within(milliseconds timeout) {
        const auto end = clock::now() + timeout;
        while (!eof_) {
            if (!fill(end)) return eof_;
        }
        return true;
    }
    [[nodiscard]] const std::string& pending() const { return buf_; }

private:
    bool fill(clock::time_point end) {
        if (eof_) return false;
        const auto left = std::chrono::duration_cast<milliseconds>(end - clock::now()).count();
        if (left <= 0) return false;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
        char tmp[16384];
        const auto n = ::recv(fd_, tmp, sizeof tmp, 0);
        if (n <= 0) {
            eof_ = true;
            return false;
        }
        buf_.append(tmp, static_cast<std::size_t>(n));
        return true;
    }
    std::optional<answer> take(bool head_only) {
        const auto end = buf_.find("\r\n\r\n");
        if (end == std::string::npos) return std::nullopt;
        answer a;
        a.head = buf_.substr(0, end + 2);
        for (auto& c : a.head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::size_t len = 0;
        if (auto cl = a.head.find("\r\ncontent-length:"); cl != std::string::npos && !head_only) {
            len = std::stoul(a.head.substr(cl + 17));
        }
        if (buf_.size() < end + 4 + len) return std::nullopt;
        a.body = buf_.substr(end + 4, len);
        a.status = std::stoi(a.head.substr(9, 3));
        buf_.erase(0, end + 4 + len);
        return a;
    }

    int fd_ = -1;
    std::string buf_;
    bool eof_ = false;
};

}  // namespace awp::test::http_loopback
