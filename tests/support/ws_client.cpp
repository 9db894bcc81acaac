// The tests' websocket client: handshake, masked framing, bounded reads (ws_client.hpp).
#include "support/ws_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <stdexcept>

namespace awp::test {

namespace {

using clock = std::chrono::steady_clock;

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

std::uint16_t ws_client::frame::close_code() const {
    if (payload.size() < 2) return 0;
    return static_cast<std::uint16_t>((static_cast<unsigned char>(payload[0]) << 8) |
                                      static_cast<unsigned char>(payload[1]));
}

std::string ws_client::frame::close_reason() const {
    return payload.size() > 2 ? payload.substr(2) : std::string();
}

ws_client::ws_client(unsigned short port, const std::string& target,
                     const std::vector<std::pair<std::string, std::string>>& headers, int rcvbuf) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd_);
        throw std::runtime_error("ws_client: cannot connect");
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string req =
        "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n";
    bool custom_upgrade = false;
    for (const auto& [k, v] : headers) {
        if (lower(k) == "upgrade" || lower(k) == "sec-websocket-version") custom_upgrade = true;
    }
    if (!custom_upgrade) {
        req += "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n";
        req += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    }
    for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    req += "\r\n";
    send_raw(req);
    const auto end = clock::now() + std::chrono::seconds(10);
    std::size_t head_end = std::string::npos;
    while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
        if (!fill(end)) return;
    }
    answer_.head = lower(buf_.substr(0, head_end + 2));
    answer_.status = std::stoi(answer_.head.substr(9, 3));
    buf_.erase(0, head_end + 4);
    if (answer_.status != 101) {
        std::size_t len = 0;
        if (auto cl = answer_.head.find("\r\ncontent-length:"); cl != std::string::npos) {
            len = std::stoul(answer_.head.substr(cl + 17));
        }
        while (buf_.size() < len && fill(end)) {
        }
        answer_.body = buf_.substr(0, std::min(len, buf_.size()));
        buf_.erase(0, answer_.body.size());
    }
}

ws_client::~ws_client() {
    if (fd_ >= 0) ::close(fd_);
}

bool ws_client::send_raw(std::string_view s) {
    while (!s.empty()) {
        const auto n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
        if (n <= 0) return false;
        s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

bool ws_client::send_frame(std::uint8_t op, std::string_view payload, bool fin, bool mask) {
    std::string f;
    f += static_cast<char>((fin ? 0x80 : 0x00) | (op & 0x0F));
    const std::uint8_t m = mask ? 0x80 : 0x00;
    if (payload.size() < 126) {
        f += static_cast<char>(m | payload.size());
    } else if (payload.size() <= 0xFFFF) {
        f += static_cast<char>(m | 126);
        f += static_cast<char>((payload.size() >> 8) & 0xFF);
        f += static_cast<char>(payload.size() & 0xFF);
    } else {
        f += static_cast<char>(m | 127);
        for (int i = 7; i >= 0; --i) f += static_cast<char>((payload.size() >> (8 * i)) & 0xFF);
    }
    if (!mask) {
        f.append(payload);
        return send_raw(f);
    }
    static thread_local std::mt19937 rng{std::random_device{}()};
    char key[4];
    for (auto& k : key) k = static_cast<char>(rng() & 0xFF);
    f.append(key, 4);
    const auto at = f.size();
    f.append(payload);
    for (std::size_t i = 0; i < payload.size(); ++i) f[at + i] ^= key[i % 4];
    return send_raw(f);
}

bool ws_client::send_close(std::uint16_t code, std::string_view reason) {
    sent_close_ = true;
    std::string p;
    p += static_cast<char>(code >> 8);
    p += static_cast<char>(code & 0xFF);
    p.append(reason);
    return send_frame(close_frame, p);
}

bool ws_client::fill(clock::time_point end) {
    if (eof_) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(end - clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char tmp[65536];
    const auto n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
        eof_ = true;
        return false;
    }
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
}

std::optional<ws_client::frame> ws_client::take() {
    if (buf_.size() < 2) return std::nullopt;
    const auto b0 = static_cast<unsigned char>(buf_[0]);
    const auto b1 = static_cast<unsigned char>(buf_[1]);
    std::size_t at = 2;
    std::uint64_t len = b1 & 0x7FU;
    if (len == 126) {
        if (buf_.size() < 4) return std::nullopt;
        len = (static_cast<std::uint64_t>(static_cast<unsigned char>(buf_[2])) << 8) |
              static_cast<unsigned char>(buf_[3]);
        at = 4;
    } else if (len == 127) {
        if (buf_.size() < 10) return std::nullopt;
        len = 0;
        for (int i = 0; i < 8; ++i) len = (len << 8) | static_cast<unsigned char>(buf_[2 + i]);
        at = 10;
    }
    const bool masked = (b1 & 0x80U) != 0;
    if (masked) at += 4;  // servers do not mask; tolerated here
    if (buf_.size() < at + len) return std::nullopt;
    frame f;
    f.fin = (b0 & 0x80U) != 0;
    f.op = static_cast<std::uint8_t>(b0 & 0x0FU);
    f.payload = buf_.substr(at, static_cast<std::size_t>(len));
    buf_.erase(0, at + static_cast<std::size_t>(len));
    return f;
}

void ws_client::on_close(const frame& f) {
    last_close_ = f;
    if (!answer_close_) return;
    if (!sent_close_) {
        const auto code = f.close_code();
        send_close(code == 0 ? 1000 : code);
    }
    // The closing handshake is done on this side: no more writes (the server's teardown reads
    // until this end of the stream).
    ::shutdown(fd_, SHUT_WR);
}

std::optional<ws_client::frame> ws_client::read_frame(std::chrono::milliseconds timeout) {
    const auto end = clock::now() + timeout;
    for (;;) {
        if (auto f = take()) {
            if (f->op == close_frame) on_close(*f);
            return f;
        }
        if (!fill(end)) return std::nullopt;
    }
}

std::optional<ws_client::frame> ws_client::read_message(std::chrono::milliseconds timeout) {
    const auto end = clock::now() + timeout;
    std::optional<frame> partial;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock::now());
        if (left.count() <= 0) return std::nullopt;
        auto f = read_frame(left);
        if (!f) return std::nullopt;
        if (f->op == ping) {
            send_frame(pong, f->payload);
            continue;
        }
        if (f->op == pong) continue;
        if (f->op == close_frame) return f;
        if (f->op == continuation && partial) {
            partial->payload += f->payload;
            if (f->fin) return partial;
            continue;
        }
        if (!f->fin) {
            partial = std::move(f);
            continue;
        }
        return f;
    }
}

bool ws_client::closed_within(std::chrono::milliseconds timeout) {
    const auto end = clock::now() + timeout;
    while (!eof_) {
        while (auto f = take()) {
            if (f->op == close_frame) on_close(*f);
        }
        if (!fill(end)) break;
    }
    while (auto f = take()) {
        if (f->op == close_frame) on_close(*f);
    }
    return eof_;
}

}  // namespace awp::test
