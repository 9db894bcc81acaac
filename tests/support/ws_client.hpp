// A blocking websocket client for tests (RFC 6455 framing written here, not Beast's): the
// opening handshake with any headers, masked frames of any shape (also malformed ones, for the
// hostile tests), reads bounded by a timeout, and a receive window that can be shut (a client
// that stops reading).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace awp::test {

class ws_client {
public:
    enum opcode : std::uint8_t {
        continuation = 0x0,
        text = 0x1,
        binary = 0x2,
        close_frame = 0x8,
        ping = 0x9,
        pong = 0xA
    };
    struct frame {
        std::uint8_t op = text;
        bool fin = true;
        std::string payload;
        /// A close frame's code and reason (0 when it has none).
        [[nodiscard]] std::uint16_t close_code() const;
        [[nodiscard]] std::string close_reason() const;
    };
    struct handshake {
        int status = 0;
        std::string head;  // status line and headers, lower-cased
        std::string body;  // a refusal's body
    };

    /// Connects to 127.0.0.1:port and sends the upgrade for `target` with `headers` (name,
    /// value). `rcvbuf` > 0 shrinks the socket's receive buffer first (a slow client).
    ws_client(unsigned short port, const std::string& target,
              const std::vector<std::pair<std::string, std::string>>& headers = {}, int rcvbuf = 0);
    ~ws_client();
    ws_client(const ws_client&) = delete;
    ws_client& operator=(const ws_client&) = delete;

    /// The server's answer to the upgrade: 101 when it accepted.
    [[nodiscard]] const handshake& answer() const { return answer_; }
    [[nodiscard]] bool open() const { return answer_.status == 101; }

    /// One frame, masked as a client must (mask = false: a protocol violation).
    bool send_frame(std::uint8_t op, std::string_view payload, bool fin = true, bool mask = true);
    /// The next frame of any kind, nullopt on timeout or EOF.
    bool send_text(std::string_view s) { return send_frame(text, s); }
    bool send_close(std::uint16_t code, std::string_view reason = {});
    /// Raw bytes on the socket (a frame header cut short, garbage).
    bool send_raw(std::string_view bytes);

    /// The next frame of any kind, nullopt on timeout or EOF. A close frame from the server is
    /// answered as a browser does (its code echoed, then no more writes) unless
    /// answer_close(false) was called.
    void answer_close(bool on) { answer_close_ = on; }
    std::optional<frame> read_frame(std::chrono::milliseconds timeout = std::chrono::seconds(5));
    /// The next text or binary message (pings answered, pongs skipped); a close frame is
    /// returned as is; nullopt on timeout or EOF.
    std::optional<frame> read_message(std::chrono::milliseconds timeout = std::chrono::seconds(5));
    /// Messages until `pred` holds for one (returned), skipping others; nullopt on timeout.
    template <class Pred>
    std::optional<frame> read_until(Pred&& pred,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
        const auto end = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                end - std::chrono::steady_clock::now());
            if (left.count() <= 0) return std::nullopt;
            auto f = read_message(left);
            if (!f) return std::nullopt;
            if (pred(*f)) return f;
            if (f->op == close_frame) return std::nullopt;
        }
    }
    /// True when the server closes the TCP connection within the timeout (frames before it
    /// are dropped, the close frame kept in last_close()).
    bool closed_within(std::chrono::milliseconds timeout);
    [[nodiscard]] const std::optional<frame>& last_close() const { return last_close_; }
    [[nodiscard]] bool eof() const { return eof_; }

private:
    bool fill(std::chrono::steady_clock::time_point end);
    void on_close(const frame& f);
    std::optional<frame> take();

    int fd_ = -1;
    handshake answer_;
    std::string buf_;
    bool eof_ = false;
    std::optional<frame> last_close_;
    bool answer_close_ = true;
    bool sent_close_ = false;
};

}  // namespace awp::test
