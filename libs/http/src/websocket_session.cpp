// An accepted websocket on Boost.Beast: reads for the handler's session, a writer that drains a
// bounded queue filled from any thread, the write deadline that cuts a peer whose window stays
// shut, and the close handshake (a drain, a limit, the handler's end).
#include "websocket_session.hpp"

#include <list>
#include <mutex>
#include <utility>

#include <boost/asio/as_tuple.hpp>
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

    session_impl(net::ip::tcp::socket&& s, const websocket_options& o, std::string remote)
        : ws_(std::move(s)),
          o_(o),
          remote_(std::move(remote)),
          done_(ws_.get_executor()),
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
        // A server's frames are not masked and not compressed here: Beast's write buffer (4 KiB
        // by default, kept for the socket's life) is never used.
        ws_.write_buffer_bytes(8);
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
        // Per message, and while waiting only a byte of it: Beast prepares the buffer before a
        // frame arrives (1,536 bytes for a whole message), which an idle socket would hold.
        beast::flat_buffer rd;
        auto [ec, n] = co_await ws_.async_read_some(rd, 1, net::as_tuple(use_awaitable));
        (void)n;
        if (!ec && !ws_.is_message_done()) {
            auto [rest_ec, rest_n] = co_await ws_.async_read(rd, net::as_tuple(use_awaitable));
            (void)rest_n;
            ec = rest_ec;
        }
        if (ec) {
            read_done_ = true;
            bool start_writer = false;
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
                start_writer = !writer_active_;
                writer_active_ = true;
            }
            if (start_writer) start_writing();
            co_return std::nullopt;
        }
        websocket_message m;
        m.binary = ws_.got_binary();
        m.data = beast::buffers_to_string(rd.data());
        co_return m;
    }

    bool send(std::string data, bool binary) override {
        bool overflow = false;
        bool start_writer = false;
        {
            std::lock_guard lock(mu_);
            if (closing_) return false;
            if (queued_ + data.size() > o_.queue_limit) {
                overflow = true;
            } else {
                queued_ += data.size();
                queue_.push_back(websocket_message{std::move(data), binary});
                start_writer = !writer_active_;
                writer_active_ = true;
            }
        }
        if (overflow) {
            close_now(close_code::policy, "slow client: more than " +
                                              std::to_string(o_.queue_limit) +
                                              " bytes queued for it");
            return false;
        }
        if (start_writer) start_writing();
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

    /// Until the writer has ended (written the close, or found the connection gone).
    net::awaitable<void> wait_finished() {
        for (;;) {
            {
                std::lock_guard lock(mu_);
                if (finished_) co_return;
            }
            done_.expires_at(net::steady_timer::time_point::max());
            co_await done_.async_wait(net::as_tuple(use_awaitable));
        }
    }

    /// The server's drain: 1001, what is queued is still written.
    void drain() { close(close_code::going_away, "server shutting down"); }

private:
    // The writer is a chain of completion handlers on the strand, not a coroutine: a socket with
    // nothing to write holds no frame and no pending wait. writer_active_ (under mu_) says a
    // chain runs; whoever sets it starts one.
    void start_writing() {
        net::post(ws_.get_executor(), [self = shared_from_this()] { self->write_next(); });
    }

    void write_next() {  // on the strand
        std::optional<websocket_message> next;
        bool do_close = false;
        {
            std::lock_guard lock(mu_);
            if (finished_) {
                writer_active_ = false;
                return;
            }
            if (!queue_.empty()) {
                next = std::move(queue_.front());
                queue_.pop_front();
            } else if (closing_) {
                do_close = true;
            } else {
                writer_active_ = false;
                return;
            }
        }
        if (next) {
            current_ = std::move(*next);
            ws_.binary(current_.binary);
            arm_deadline(o_.write_timeout);
            ws_.async_write(net::buffer(current_.data),
                            [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                                self->written(ec);
                            });
            return;
        }
        if (do_close && ws_.is_open()) {
            bws::close_reason cr;
            {
                std::lock_guard lock(mu_);
                cr.code = code_ == 0 ? close_code::normal : code_;
                cr.reason = cut_reason(reason_);
            }
            // The handshake timeout bounds it; a peer that never answers is cut then.
            arm_deadline(o_.handshake_timeout + o_.handshake_timeout);
            ws_.async_close(cr, [self = shared_from_this()](boost::system::error_code) {
                self->writing_ = false;
                self->finish();
            });
            return;
        }
        finish();
    }

    void written(boost::system::error_code ec) {  // on the strand
        writing_ = false;
        const auto size = current_.data.size();
        current_ = websocket_message{};
        {
            std::lock_guard lock(mu_);
            queued_ = queued_ >= size ? queued_ - size : 0;
        }
        if (ec) {
            fail(ec);
            finish();
            return;
        }
        write_next();
    }

    void finish() {  // on the strand: the connection ends
        {
            std::lock_guard lock(mu_);
            finished_ = true;
            closing_ = true;
            writer_active_ = false;
            queue_.clear();
            queued_ = 0;
        }
        deadline_.cancel();
        boost::system::error_code ignored;
        auto& sock = beast::get_lowest_layer(ws_).socket();
        sock.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
        sock.close(ignored);
        done_.cancel();
    }

    void request_close(std::uint16_t code, std::string reason, bool drop) {
        bool start_writer = false;
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
            start_writer = !writer_active_;
            writer_active_ = true;
        }
        if (drop) {
            // A write stuck on a peer that does not read is not waited for past the handshake
            // timeout (the close frame comes after it).
            net::post(ws_.get_executor(), [self = shared_from_this()] {
                if (self->writing_) self->arm_deadline(self->o_.handshake_timeout);
            });
        }
        if (start_writer) start_writing();
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
    net::steady_timer done_;  // run_websocket waits on it for the writer's end
    net::steady_timer deadline_;
    websocket_message current_;       // strand only: the message being written
    std::uint64_t deadline_gen_ = 0;  // strand only
    bool writing_ = false;            // strand only: a write or close is in flight
    bool read_done_ = false;          // the reader's own

    mutable std::mutex mu_;
    std::list<websocket_message> queue_;  // a list: nothing allocated while empty
    std::size_t queued_ = 0;
    bool closing_ = false;        // no more sends: a close is asked for or the connection ended
    bool finished_ = false;       // the writer ended
    bool writer_active_ = false;  // a write_next chain runs (or is posted)
    std::uint16_t code_ = 0;
    std::string reason_;
};

}  // namespace

net::awaitable<void> run_websocket(std::unique_ptr<websocket_handoff> h, drain_registrar on_open) {
    auto ws =
        std::make_shared<session_impl>(std::move(h->socket), h->options, std::move(h->remote));
    if (!co_await ws->accept(h->upgrade, h->accept.protocol)) co_return;
    auto session = std::move(h->accept.session);
    h.reset();  // the request and the route's answer are not kept for the socket's life
    on_open([weak = std::weak_ptr<session_impl>(ws)] {
        if (auto s = weak.lock()) s->drain();
    });
    on_open = nullptr;
    // The handler's session here; the writer runs as completion handlers beside it (no frame of
    // its own while idle). Then the close is written and the connection ended.
    std::string failure;
    try {
        co_await session(ws);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!failure.empty()) {
        core::log::error("websocket session failed", {{"error", failure}});
        ws->close_now(close_code::internal, "internal error");
    } else {
        ws->close(close_code::normal, "");
    }
    co_await ws->wait_finished();
}

}  // namespace awp::http::detail
