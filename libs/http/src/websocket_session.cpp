// An accepted websocket on Boost.Beast: reads for the handler's session, a writer that drains a
// bounded queue filled from any thread, the write deadline that cuts a peer whose window stays
// shut, and the close handshake (a drain, a limit, the handler's end).
#include "websocket_session.hpp"

#include <deque>
#include <mutex>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/stream.hpp>

#include "awp/core/log.hpp"

namespace awp::http::detail {

namespace beast = boost::beast;
namespace bws = boost::beast::websocket;
using net::use_awaitable;

namespace {

/// A read buffer above this is given back after the message (an idle socket keeps little).
constexpr std::size_t kKeepReadBuffer = 4096;
/// RFC 6455: a close frame's reason is at most 123 bytes.
constexpr std::size_t kMaxReason = 123;

std::string cut_reason(std::string r) {
    if (r.size() <= kMaxReason) return r;
    std::size_t n = kMaxReason;
    // Not inside a UTF-8 sequence: the peer would fail the connection on a broken one.
    while (n > 0 && (static_cast<unsigned char>(r[n]) & 0xC0U) == 0x80U) --n;
    r.resize(n);
    return r;
}

class session_impl final : public websocket, public std::enable_shared_from_this<session_impl> {
public:
    using bhttp_request = beast::http::request<beast::http::string_body>;

    session_impl(beast::tcp_stream&& s, const websocket_options& o, std::string remote)
        : ws_(std::move(s)),
          o_(o),
          remote_(std::move(remote)),
          wake_(ws_.get_executor()),
          deadline_(ws_.get_executor()) {}

    /// The opening handshake; false when it failed (the connection is then unusable).
    net::awaitable<bool> accept(const bhttp_request& req, const std::string& protocol) {
        beast::get_lowest_layer(ws_).expires_never();  // the websocket's own timeouts from here
        bws::stream_base::timeout t{};
        t.handshake_timeout = o_.handshake_timeout;
        t.idle_timeout = o_.idle_timeout;
        t.keep_alive_pings = true;
        ws_.set_option(t);
        ws_.read_message_max(o_.message_limit);
        ws_.auto_fragment(false);
        ws_.set_option(bws::stream_base::decorator([protocol](bws::response_type& res) {
            if (!protocol.empty()) res.set(beast::http::field::sec_websocket_protocol, protocol);
        }));
        auto [ec] = co_await ws_.async_accept(req, net::as_tuple(use_awaitable));
        if (ec) {
            std::lock_guard lock(mu_);
            closing_ = true;
            finished_ = true;
        }
        co_return !ec;
    }

    net::awaitable<std::optional<websocket_message>> read() override {
        if (read_done_) co_return std::nullopt;
        rd_.clear();
        auto [ec, n] = co_await ws_.async_read(rd_, net::as_tuple(use_awaitable));
        (void)n;
        if (ec) {
            read_done_ = true;
            {
                std::lock_guard lock(mu_);
                if (code_ == 0) {
                    if (ec == bws::error::closed) {
                        code_ = ws_.reason().code;
                        reason_ = std::string(ws_.reason().reason.c_str());
                    } else if (ec == bws::error::message_too_big) {
                        code_ = close_code::too_big;
                        reason_ = "message above " + std::to_string(o_.message_limit) + " bytes";
                    } else if (ec == beast::error::timeout) {
                        code_ = close_code::going_away;
                        reason_ = "idle timeout";
                    } else {
                        code_ = close_code::protocol_error;
                        reason_ = ec.message();
                    }
                }
                closing_ = true;
                queue_.clear();
                queued_ = 0;
            }
            wake();
            co_return std::nullopt;
        }
        websocket_message m;
        m.binary = ws_.got_binary();
        m.data = beast::buffers_to_string(rd_.data());
        rd_.consume(rd_.size());
        if (rd_.capacity() > kKeepReadBuffer) rd_ = beast::flat_buffer();
        co_return m;
    }

    bool send(std::string data, bool binary) override {
        bool overflow = false;
        {
            std::lock_guard lock(mu_);
            if (closing_) return false;
            if (queued_ + data.size() > o_.queue_limit) {
                overflow = true;
            } else {
                queued_ += data.size();
                queue_.push_back(websocket_message{std::move(data), binary});
                if (!writer_idle_) return true;
                writer_idle_ = false;
            }
        }
        if (overflow) {
            close_now(close_code::policy, "slow client: more than " +
                                              std::to_string(o_.queue_limit) +
                                              " bytes queued for it");
            return false;
        }
        wake();
        return true;
    }

    void close(std::uint16_t code, std::string reason) override {
        request_close(code, std::move(reason), false);
    }
    void close_now(std::uint16_t code, std::string reason) override {
        request_close(code, std::move(reason), true);
    }

    [[nodiscard]] bool is_open() const override {
        std::lock_guard lock(mu_);
        return !closing_;
    }
    [[nodiscard]] std::size_t queued_bytes() const override {
        std::lock_guard lock(mu_);
        return queued_;
    }
    [[nodiscard]] std::pair<std::uint16_t, std::string> close_reason() const override {
        std::lock_guard lock(mu_);
        return {code_, reason_};
    }
    [[nodiscard]] const std::string& remote() const override { return remote_; }

    /// Writes what is queued until the socket closes; sends the close frame when asked.
    net::awaitable<void> write_loop() {
        auto self = shared_from_this();
        for (;;) {
            std::optional<websocket_message> next;
            bool do_close = false;
            {
                std::lock_guard lock(mu_);
                if (finished_) break;
                if (!queue_.empty()) {
                    next = std::move(queue_.front());
                    queue_.pop_front();
                } else if (closing_) {
                    do_close = true;
                } else {
                    writer_idle_ = true;
                }
            }
            if (next) {
                const auto size = next->data.size();
                ws_.binary(next->binary);
                arm_deadline(o_.write_timeout);
                auto [ec, n] =
                    co_await ws_.async_write(net::buffer(next->data), net::as_tuple(use_awaitable));
                (void)n;
                writing_ = false;
                {
                    std::lock_guard lock(mu_);
                    queued_ = queued_ >= size ? queued_ - size : 0;
                }
                if (ec) {
                    fail(ec);
                    break;
                }
                continue;
            }
            if (do_close) {
                bws::close_reason cr;
                {
                    std::lock_guard lock(mu_);
                    cr.code = code_ == 0 ? close_code::normal : code_;
                    cr.reason = cut_reason(reason_);
                }
                if (ws_.is_open()) {
                    // The handshake timeout bounds it; a peer that never answers is cut then.
                    arm_deadline(o_.handshake_timeout + o_.handshake_timeout);
                    co_await ws_.async_close(cr, net::as_tuple(use_awaitable));
                    writing_ = false;
                }
                break;
            }
            wake_.expires_at(net::steady_timer::time_point::max());
            co_await wake_.async_wait(net::as_tuple(use_awaitable));
        }
        {
            std::lock_guard lock(mu_);
            finished_ = true;
            closing_ = true;
            queue_.clear();
            queued_ = 0;
        }
        deadline_.cancel();
        boost::system::error_code ignored;
        auto& sock = beast::get_lowest_layer(ws_).socket();
        sock.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
        sock.close(ignored);
    }

    /// The server's drain: 1001, what is queued is still written.
    void drain() { close(close_code::going_away, "server shutting down"); }

private:
    void request_close(std::uint16_t code, std::string reason, bool drop) {
        bool wake_writer = false;
        {
            std::lock_guard lock(mu_);
            if (drop) {
                queue_.clear();
                queued_ = 0;
            }
            if (closing_) return;
            closing_ = true;
            code_ = code;
            reason_ = std::move(reason);
            wake_writer = writer_idle_;
            writer_idle_ = false;
        }
        if (drop) {
            // A write stuck on a peer that does not read is not waited for past the handshake
            // timeout (the close frame comes after it).
            net::post(ws_.get_executor(), [self = shared_from_this()] {
                if (self->writing_) self->arm_deadline(self->o_.handshake_timeout);
            });
        }
        if (wake_writer) wake();
    }

    void wake() {
        net::post(ws_.get_executor(), [self = shared_from_this()] { self->wake_.cancel(); });
    }

    /// On the strand: the write (or close) now running must end within `d`, else the
    /// connection is cut, which ends it with an error.
    void arm_deadline(std::chrono::milliseconds d) {
        writing_ = true;
        const auto gen = ++deadline_gen_;
        deadline_.expires_after(d);
        deadline_.async_wait([self = shared_from_this(), gen](boost::system::error_code ec) {
            if (ec || gen != self->deadline_gen_ || !self->writing_) return;
            {
                std::lock_guard lock(self->mu_);
                if (self->code_ == 0 || self->code_ == close_code::normal) {
                    self->code_ = close_code::policy;
                    self->reason_ = "slow client: a write did not complete in time";
                }
            }
            boost::system::error_code ignored;
            beast::get_lowest_layer(self->ws_).socket().close(ignored);
        });
    }

    void fail(const boost::system::error_code& ec) {
        std::lock_guard lock(mu_);
        if (code_ == 0) {
            code_ = close_code::going_away;
            reason_ = "connection lost: " + ec.message();
        }
        closing_ = true;
    }

    bws::stream<beast::tcp_stream> ws_;
    websocket_options o_;
    std::string remote_;
    beast::flat_buffer rd_;
    net::steady_timer wake_;
    net::steady_timer deadline_;
    std::uint64_t deadline_gen_ = 0;  // strand only
    bool writing_ = false;            // strand only: a write or close is in flight
    bool read_done_ = false;          // the reader's own

    mutable std::mutex mu_;
    std::deque<websocket_message> queue_;
    std::size_t queued_ = 0;
    bool closing_ = false;      // no more sends: a close is asked for or the connection ended
    bool finished_ = false;     // the writer ended
    bool writer_idle_ = false;  // the writer waits for wake()
    std::uint16_t code_ = 0;
    std::string reason_;
};

}  // namespace

net::awaitable<void> run_websocket(beast::tcp_stream stream,
                                   beast::http::request<beast::http::string_body> upgrade,
                                   websocket_accept accept, websocket_options options,
                                   std::string remote, drain_registrar on_open) {
    auto ws = std::make_shared<session_impl>(std::move(stream), options, std::move(remote));
    if (!co_await ws->accept(upgrade, accept.protocol)) co_return;
    upgrade = {};  // the request's fields are not kept for the socket's life
    on_open([weak = std::weak_ptr<session_impl>(ws)] {
        if (auto s = weak.lock()) s->drain();
    });
    auto run_handler = [](std::shared_ptr<session_impl> s,
                          websocket_accept a) -> net::awaitable<void> {
        std::string failure;
        try {
            co_await a.session(s);
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (!failure.empty()) {
            core::log::error("websocket session failed", {{"error", failure}});
            s->close_now(close_code::internal, "internal error");
        } else {
            s->close(close_code::normal, "");
        }
    };
    using namespace net::experimental::awaitable_operators;
    co_await (run_handler(ws, std::move(accept)) && ws->write_loop());
}

}  // namespace awp::http::detail
