// The Beast side of awp::http::server: accept loop, one coroutine per connection on its own
// strand, per-route body limits, timeouts, the access log and the drain.
// Why one file: the router, the connection coroutine (session) and the accept loop
// share server::impl, the per-connection state and the spool for large bodies; session() is one
// state machine (read, limit, spool, dispatch, write, keep-alive) that does not split well.
#include "awp/http/server.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "awp/core/log.hpp"
#include "websocket_session.hpp"

namespace awp::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using net::use_awaitable;

namespace {

std::vector<std::string> split_path(std::string_view path) {
    std::vector<std::string> out;
    std::size_t i = 0;
    if (!path.empty() && path.front() == '/') i = 1;
    while (i <= path.size()) {
        auto slash = path.find('/', i);
        if (slash == std::string_view::npos) slash = path.size();
        out.emplace_back(path.substr(i, slash - i));
        i = slash + 1;
    }
    return out;
}

}  // namespace

void router::add(std::string method, std::string pattern, handler h, route_options o) {
    routes_.push_back(route{std::move(method), split_path(pattern), std::move(h), o, {}, {}});
}

void router::add(const std::vector<std::string>& methods, const std::string& pattern,
                 const handler& h, route_options o) {
    for (const auto& m : methods) add(m, pattern, h, o);
}

void router::add_websocket(std::string pattern, websocket_handler h, websocket_options o) {
    route r{"GET", split_path(pattern), {}, route_options{}, std::move(h), o};
    r.options.body_limit = 0;
    routes_.push_back(std::move(r));
}

router::match_result router::match(std::string_view method, std::string_view path) const {
    match_result out;
    // Decoded once, every segment, before any route is looked up.
    const auto raw = split_path(path);
    std::vector<std::string> segs;
    segs.reserve(raw.size());
    for (std::size_t n = 0; n < raw.size(); ++n) {
        const auto where = "path segment " + std::to_string(n + 1);
        auto d = percent_decode(raw[n]);
        if (!d) {
            out.bad_path = where + " has a malformed %-escape";
            return out;
        }
        if (d->size() > kMaxSegmentBytes) {
            out.bad_path = where + " is longer than " + std::to_string(kMaxSegmentBytes) +
                           " bytes once decoded";
            return out;
        }
        if (auto bad = text_problem(*d); !bad.empty()) {
            out.bad_path = where + " " + std::string(bad) + " once decoded";
            return out;
        }
        segs.push_back(std::move(*d));
    }
    for (const auto& r : routes_) {
        std::map<std::string, std::string, std::less<>> params;
        bool ok = true;
        std::size_t i = 0;
        for (; i < r.segments.size() && ok; ++i) {
            const auto& p = r.segments[i];
            if (!p.empty() && p.front() == '*') {
                if (i >= segs.size() || segs[i].empty()) {
                    ok = false;
                    break;
                }
                // The tail is handed on as sent: a handler that splits it decodes each segment
                // itself (an encoded '/' stays inside its segment).
                std::string rest;
                for (std::size_t j = i; j < raw.size(); ++j) {
                    if (j > i) rest += '/';
                    rest += raw[j];
                }
                params[p.substr(1)] = rest;
                i = segs.size();
                break;
            }
            if (i >= segs.size()) {
                ok = false;
            } else if (!p.empty() && p.front() == ':') {
                if (segs[i].empty()) {
                    ok = false;
                } else {
                    params[p.substr(1)] = segs[i];
                }
            } else if (p != segs[i]) {
                ok = false;
            }
        }
        if (!ok || i != segs.size()) continue;
        if (r.method != method && !(method == "HEAD" && r.method == "GET")) {
            if (std::find(out.allow.begin(), out.allow.end(), r.method) == out.allow.end()) {
                out.allow.push_back(r.method);
            }
            continue;
        }
        if (r.ws) {
            out.ws = &r.ws;
            out.ws_options = r.ws_options;
        } else {
            out.h = &r.h;
        }
        out.options = r.options;
        out.params = std::move(params);
        out.allow.clear();
        return out;
    }
    return out;
}

void add_security_headers(headers& h, bool hsts) {
    h.add("X-Content-Type-Options", "nosniff");
    h.add("X-Frame-Options", "DENY");
    h.add("Content-Security-Policy", "frame-ancestors 'none'");
    h.add("Referrer-Policy", "strict-origin-when-cross-origin");
    if (hsts) h.add("Strict-Transport-Security", "max-age=31536000; includeSubDomains");
}

/// One live connection, as the drain sees it. Touched only on the connection's strand
/// except for the registry's pointer to it.
struct conn_state {
    net::any_io_executor ex;
    beast::tcp_stream* stream = nullptr;
    bool idle = true;
    /// A websocket's: closes it with 1001 (set once the socket is open).
    std::function<void()> drain;
};

struct server::impl : std::enable_shared_from_this<server::impl> {
    impl(net::io_context& c, router r, server_options o)
        : ioc(c), routes(std::move(r)), options(std::move(o)), acceptor(net::make_strand(c)) {}

    net::io_context& ioc;
    router routes;
    server_options options;
    tcp::acceptor acceptor;
    std::atomic<bool> stopping{false};
    std::atomic<std::size_t> active{0};
    std::atomic<std::size_t> websockets{0};
    std::mutex mu;
    std::set<std::shared_ptr<conn_state>> conns;
};

namespace {

using beast_response = bhttp::response<bhttp::string_body>;

/// Status, the handler's headers and the ones every response carries.
template <class Body>
void fill_header(bhttp::response<Body>& out, const response& r, unsigned version, bool keep_alive,
                 bool hsts) {
    out.version(version);
    out.result(r.status);
    out.reason(r.reason.empty() ? reason(r.status) : std::string_view(r.reason));
    for (const auto& [n, v] : r.header.fields()) out.insert(n, v);
    if (!r.header.has("Cache-Control")) out.set(bhttp::field::cache_control, "no-store");
    // A handler's own Content-Security-Policy is sent besides the server's: browsers enforce
    // every policy, so neither weakens the other.
    headers sec;
    add_security_headers(sec, hsts);
    for (const auto& [n, v] : sec.fields()) out.insert(n, v);
    out.keep_alive(keep_alive && !r.close);
}

beast_response to_beast(response r, unsigned version, bool keep_alive, bool hsts, bool head) {
    beast_response out;
    fill_header(out, r, version, keep_alive, hsts);
    const auto size = r.body_file ? r.body_file->size() : r.body.size();
    if (!head) out.body() = std::move(r.body);
    out.content_length(size);
    return out;
}

/// Sends a file_body response in chunks of file_body::kChunk, each under the write timeout.
/// False when the connection cannot be used any more (write failed, the file shrank).
net::awaitable<bool> write_file_response(beast::tcp_stream& stream, response r, unsigned version,
                                         bool keep_alive, const server_options& o) {
    bhttp::response<bhttp::buffer_body> out;
    fill_header(out, r, version, keep_alive, o.hsts);
    const auto file = r.body_file;
    out.content_length(file->size());
    out.body().data = nullptr;
    out.body().more = true;
    bhttp::response_serializer<bhttp::buffer_body> sr{out};
    stream.expires_after(o.write_timeout);
    auto [hec, hn] = co_await bhttp::async_write_header(stream, sr, net::as_tuple(use_awaitable));
    (void)hn;
    if (hec) co_return false;
    std::vector<char> chunk(file_body::kChunk);
    std::uint64_t left = file->size();
    auto at = static_cast<off_t>(file->offset());
    while (!sr.is_done()) {
        if (left == 0) {
            out.body().data = nullptr;
            out.body().more = false;
        } else {
            const auto want = static_cast<std::size_t>(
                std::min<std::uint64_t>(left, static_cast<std::uint64_t>(chunk.size())));
            ssize_t n = 0;
            do {
                n = ::pread(file->fd(), chunk.data(), want, at);
            } while (n < 0 && errno == EINTR);
            if (n <= 0) {
                core::log::warn("file response ended early",
                                {{"error", n < 0 ? std::string(std::strerror(errno))
                                                 : std::string("the file shrank")}});
                co_return false;
            }
            at += static_cast<off_t>(n);
            left -= static_cast<std::uint64_t>(n);
            out.body().data = chunk.data();
            out.body().size = static_cast<std::size_t>(n);
            out.body().more = true;
        }
        stream.expires_after(o.write_timeout);
        auto [ec, wn] = co_await bhttp::async_write(stream, sr, net::as_tuple(use_awaitable));
        (void)wn;
        if (ec == bhttp::error::need_buffer) continue;
        if (ec) co_return false;
    }
    co_return true;
}

/// A descriptor closed when it goes out of scope, unless released.
class unique_fd {
public:
    explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
    ~unique_fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    [[nodiscard]] int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_;
};

/// An unlinked temporary file for a spooled request body: O_TMPFILE where the file system
/// has it, else mkstemp and unlink at once. Nothing is left on disk whatever happens next.
int open_spool(const std::string& dir_option) {
    std::string dir = dir_option;
    if (dir.empty()) {
        const char* env = std::getenv("TMPDIR");
        dir = env != nullptr && *env != '\0' ? env : "/tmp";
    }
    int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    std::string name = dir + "/.awp-body-XXXXXX";
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
    return fd;
}

struct spool_result {
    boost::system::error_code ec;
    std::uint64_t bytes = 0;
    int write_errno = 0;  // the spool file could not be written (disk full)
};

/// Reads the rest of the request into `fd`, one buffer_body chunk at a time: the parser that
/// read the header is moved into one with a buffer body (its limit and state kept), so a body of
/// any size, chunked or not, costs kChunk bytes of memory.
net::awaitable<spool_result> read_spooled(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                          bhttp::request_parser<bhttp::string_body>& header,
                                          std::size_t limit, int fd) {
    bhttp::request_parser<bhttp::buffer_body> p{std::move(header)};
    p.body_limit(limit);
    std::vector<char> chunk(file_body::kChunk);
    spool_result out;
    while (!p.is_done()) {
        p.get().body().data = chunk.data();
        p.get().body().size = chunk.size();
        auto [ec, n] = co_await bhttp::async_read(stream, buffer, p, net::as_tuple(use_awaitable));
        (void)n;
        if (ec == bhttp::error::need_buffer) ec = {};
        const std::size_t got = chunk.size() - p.get().body().size;
        std::size_t off = 0;
        while (off < got) {
            const auto w = ::write(fd, chunk.data() + off, got - off);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                out.write_errno = errno;
                co_return out;
            }
            off += static_cast<std::size_t>(w);
        }
        out.bytes += got;
        if (ec) {
            out.ec = ec;
            co_return out;
        }
    }
    co_return out;
}

struct outcome {
    response res;
    bool close = false;
};

/// A refused body still arriving after the refusal is read and dropped this long, this much.
constexpr std::chrono::milliseconds kLingerTime{2000};
constexpr std::size_t kLingerBytes = 32 * 1024 * 1024;

/// An error the server answers itself on a matched route, in the route's dialect.
response route_error(const route_options& o, const request& req, unsigned status,
                     std::string_view code, std::string_view message) {
    if (o.error_shape) return o.error_shape(req.header, status, code, message);
    return response::error(status, code, message);
}

net::awaitable<response> invoke(const handler* h, request req) {
    std::string failure;
    std::optional<response> answer;
    try {
        answer = co_await (*h)(std::move(req));
    } catch (const http_error& e) {
        auto r = response::error(e.status(), e.code(), e.what());
        for (const auto& [n, v] : e.extra.fields()) r.header.add(n, v);
        answer = std::move(r);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (answer) co_return std::move(*answer);
    core::log::error("request handler failed", {{"error", failure}});
    co_return response::error(500, "internal", "internal error");
}

/// The route's admission; a thrown http_error refuses like a handler's, any other failure is
/// logged and answered 500.
net::awaitable<admission> invoke_admit(const admit_handler& admit, request& req) {
    std::string failure;
    std::optional<admission> answer;
    try {
        answer = co_await admit(req);
    } catch (const http_error& e) {
        auto r = response::error(e.status(), e.code(), e.what());
        for (const auto& [n, v] : e.extra.fields()) r.header.add(n, v);
        answer.emplace();
        answer->refuse = std::move(r);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (answer) co_return std::move(*answer);
    core::log::error("request admission failed", {{"error", failure}});
    admission refused;
    refused.refuse = response::error(500, "internal", "internal error");
    co_return refused;
}

void unregister(server::impl& s, const std::shared_ptr<conn_state>& st) {
    std::lock_guard lock(s.mu);
    s.conns.erase(st);
}

/// The websocket route's decision on an upgrade request; a thrown http_error or failure is a
/// refusal like a handler's.
net::awaitable<websocket_accept> invoke_websocket(const websocket_handler* h, request req) {
    std::string failure;
    std::optional<websocket_accept> answer;
    try {
        answer = co_await (*h)(std::move(req));
    } catch (const http_error& e) {
        auto r = response::error(e.status(), e.code(), e.what());
        for (const auto& [n, v] : e.extra.fields()) r.header.add(n, v);
        answer.emplace();
        answer->refusal = std::move(r);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!answer) {
        core::log::error("websocket handler failed", {{"error", failure}});
        answer.emplace();
        answer->refusal = response::error(500, "internal", "internal error");
    } else if (!answer->refusal && !answer->session) {
        answer->refusal = response::error(500, "internal", "internal error");
    }
    co_return std::move(*answer);
}

/// An accepted websocket, once its connection left the HTTP loop: runs it, then ends the
/// connection as session() would have.
net::awaitable<void> websocket_connection(std::shared_ptr<server::impl> s,
                                          std::shared_ptr<conn_state> st,
                                          std::unique_ptr<detail::websocket_handoff> h) {
    s->websockets.fetch_add(1);
    auto on_open = [s, st](std::function<void()> drain) {
        st->drain = std::move(drain);
        // A stop() that came before this: its drain found nothing to close.
        if (s->stopping) st->drain();
    };
    try {
        co_await detail::run_websocket(std::move(h), on_open);
    } catch (const std::exception& e) {
        core::log::error("websocket connection failed", {{"error", e.what()}});
    }
    st->drain = nullptr;
    unregister(*s, st);
    s->websockets.fetch_sub(1);
    s->active.fetch_sub(1);
}

net::awaitable<void> session(std::shared_ptr<server::impl> s, tcp::socket sock) {
    auto st = std::make_shared<conn_state>();
    beast::tcp_stream stream(std::move(sock));
    st->ex = stream.get_executor();
    st->stream = &stream;
    {
        std::lock_guard lock(s->mu);
        s->conns.insert(st);
    }
    std::string remote;
    {
        boost::system::error_code ec;
        auto ep = stream.socket().remote_endpoint(ec);
        if (!ec) remote = ep.address().to_string();
    }
    // The client's address (client_address.hpp) of the request being served: the access log's
    // and, for a websocket, the socket's remote().
    std::string client = remote;
    beast::flat_buffer buffer;
    bool first = true;
    const auto& o = s->options;
    // A request refused before its body was read: the body still arriving is drained a moment
    // before the socket closes (a close with unread bytes resets the connection, and the client
    // could lose the answer that explains the refusal).
    bool unread_body = false;
    // Set when a websocket route accepted the upgrade: the connection leaves the HTTP loop.
    std::optional<bhttp::request<bhttp::string_body>> upgrade;
    websocket_accept ws_accept;
    websocket_options ws_options;
    for (;;) {
        if (s->stopping) break;
        bhttp::request_parser<bhttp::string_body> parser;
        parser.header_limit(static_cast<std::uint32_t>(o.header_limit));
        // No limit while reading the header: Beast checks Content-Length against the limit as
        // soon as the header is parsed, before we know the route. The route's own limit (or
        // the unrouted one) is set right after, and Content-Length is checked against it.
        parser.body_limit(boost::none);
        stream.expires_after(first && buffer.size() == 0 ? o.header_timeout : o.idle_timeout);
        st->idle = true;
        auto [ec, n] =
            co_await bhttp::async_read_header(stream, buffer, parser, net::as_tuple(use_awaitable));
        st->idle = false;
        first = false;
        const auto started = std::chrono::steady_clock::now();
        if (ec) {
            if (ec == bhttp::error::header_limit) {
                auto res =
                    to_beast(response::error(431, "headers_too_large", "request headers too large"),
                             11, false, o.hsts, false);
                stream.expires_after(o.write_timeout);
                co_await bhttp::async_write(stream, res, net::as_tuple(use_awaitable));
            } else if (ec != bhttp::error::end_of_stream && ec != beast::error::timeout &&
                       ec != net::error::operation_aborted && ec != net::error::connection_reset &&
                       ec != net::error::eof && (n > 0 || buffer.size() > 0)) {
                // Bytes arrived that are not HTTP (n counts only what the parser accepted).
                auto res = to_beast(response::error(400, "bad_request", "malformed request"), 11,
                                    false, o.hsts, false);
                stream.expires_after(o.write_timeout);
                co_await bhttp::async_write(stream, res, net::as_tuple(use_awaitable));
            }
            break;
        }
        // The header's facts are kept apart: a spooled body moves the parser (and its message).
        const auto& hdr = parser.get();
        const unsigned version = hdr.version();
        const bool client_keep_alive = hdr.keep_alive();
        const auto method = std::string(hdr.method_string());
        const auto path = std::string(hdr.target().substr(0, hdr.target().find('?')));
        request req;
        req.method = std::string(hdr.method_string());
        req.target = std::string(hdr.target());
        auto q = req.target.find('?');
        req.path = req.target.substr(0, q);
        if (q != std::string::npos) req.query = req.target.substr(q + 1);
        req.peer = remote;
        req.keep_alive = client_keep_alive;
        for (const auto& f : hdr)
            req.header.add(std::string(f.name_string()), std::string(f.value()));
        req.remote = client_address(req.peer, req.header, o.trusted);
        client = req.remote;
        const bool head = req.method == "HEAD";

        std::optional<response> early;
        parser.body_limit(o.unrouted_body_limit);
        auto m = s->routes.match(req.method, req.path);
        auto body_timeout =
            m.options.body_timeout.count() > 0 ? m.options.body_timeout : o.body_timeout;
        if (!m.bad_path.empty()) {
            early = response::error(400, "bad_path", m.bad_path);
        } else if (!m.h && !m.ws) {
            if (!m.allow.empty()) {
                std::string allow;
                for (const auto& a : m.allow) allow += (allow.empty() ? "" : ", ") + a;
                early = response::error(405, "method_not_allowed",
                                        "method " + req.method + " is not allowed here");
                early->header.set("Allow", allow);
            } else {
                early = response::error(404, "not_found", "no such route");
            }
        } else {
            if (!m.options.raw_query && !req.query.empty()) {
                auto decoded = decode_query(req.query);
                if (!decoded.error.empty()) {
                    early = response::error(400, "bad_query", decoded.error);
                } else {
                    req.query_params = std::move(decoded.params);
                }
            }
            parser.body_limit(m.options.body_limit);
            if (m.ws && !early) {
                if (!boost::beast::websocket::is_upgrade(parser.get())) {
                    early = response::error(426, "upgrade_required",
                                            "this route is a websocket: send Upgrade: websocket");
                    early->header.set("Upgrade", "websocket");
                    early->header.set("Connection", "Upgrade");
                } else if (!parser.is_done()) {
                    early = response::error(400, "bad_request", "a websocket upgrade has no body");
                    early->close = true;
                } else {
                    req.params = std::move(m.params);
                    auto accept = co_await invoke_websocket(m.ws, std::move(req));
                    if (accept.refusal) {
                        early = std::move(*accept.refusal);
                    } else {
                        if (o.access_log) {
                            core::log::info("request", {{"method", method},
                                                        {"path", path},
                                                        {"status", 101},
                                                        {"remote", client}});
                        }
                        upgrade.emplace(parser.release());
                        ws_accept = std::move(accept);
                        ws_options = m.ws_options;
                        break;
                    }
                }
            }
            // The route's admission first: it may refuse an oversized body in its own words.
            if (!early && m.h && m.options.admit) {
                req.params = m.params;
                auto admitted = co_await invoke_admit(m.options.admit, req);
                if (admitted.refuse) {
                    early = std::move(*admitted.refuse);
                } else if (admitted.body_timeout.count() > 0) {
                    body_timeout = admitted.body_timeout;
                }
            }
            if (auto len = parser.content_length(); !early && len && *len > m.options.body_limit) {
                early = route_error(
                    m.options, req, 413, "body_too_large",
                    "request body exceeds " + std::to_string(m.options.body_limit) + " bytes");
                early->close = true;
            }
        }
        unique_fd spool;
        const bool spooled = !early && m.options.spool_body;
        if (spooled) {
            spool.reset(open_spool(m.options.spool_dir));
            if (spool.get() < 0) {
                core::log::error("cannot make a file for the request body",
                                 {{"dir", m.options.spool_dir}, {"error", std::strerror(errno)}});
                early = response::error(503, "unavailable", "the request body cannot be stored");
            }
        }
        bool close_after = false;
        std::uint64_t bytes_in = 0;
        if (!early && !parser.is_done()) {
            if (auto expect = req.header.get("expect"); expect && *expect == "100-continue") {
                stream.expires_after(o.write_timeout);
                static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
                co_await net::async_write(stream, net::buffer(kContinue.data(), kContinue.size()),
                                          net::as_tuple(use_awaitable));
            }
            // The body deadline is a timer that cancels the read, not the stream's own expiry:
            // that one closes the socket, and the client would never see the 408.
            stream.expires_never();
            auto phase = std::make_shared<int>(0);  // 0 reading, 1 read done, 2 timed out
            net::steady_timer body_timer(stream.get_executor());
            body_timer.expires_after(body_timeout);
            body_timer.async_wait([phase, &stream](boost::system::error_code tec) {
                // Same strand as the read: phase 0 means the read is still waiting.
                if (!tec && *phase == 0) {
                    *phase = 2;
                    stream.cancel();
                }
            });
            boost::system::error_code bec;
            int spool_errno = 0;
            if (spooled) {
                auto sr = co_await read_spooled(stream, buffer, parser, m.options.body_limit,
                                                spool.get());
                bec = sr.ec;
                bytes_in = sr.bytes;
                spool_errno = sr.write_errno;
            } else {
                auto [rec, rn] = co_await bhttp::async_read(stream, buffer, parser,
                                                            net::as_tuple(use_awaitable));
                (void)rn;
                bec = rec;
                bytes_in = parser.get().body().size();
            }
            if (*phase == 0) *phase = 1;
            body_timer.cancel();
            if (*phase == 2) bec = beast::error::timeout;
            if (spool_errno != 0) {
                core::log::error("cannot write the request body",
                                 {{"error", std::strerror(spool_errno)}});
                early =
                    response::error(spool_errno == ENOSPC || spool_errno == EDQUOT ? 507 : 503,
                                    "insufficient_storage", "the request body cannot be stored");
                close_after = true;
            } else if (bec == bhttp::error::body_limit) {
                early = route_error(
                    m.options, req, 413, "body_too_large",
                    "request body exceeds " + std::to_string(m.options.body_limit) + " bytes");
                close_after = true;
                unread_body = true;
            } else if (bec == beast::error::timeout) {
                early = route_error(m.options, req, 408, "timeout",
                                    "request body not received in time");
                close_after = true;
            } else if (bec) {
                if (bec == bhttp::error::end_of_stream || bec == net::error::eof ||
                    bec == net::error::connection_reset) {
                    break;
                }
                early = route_error(m.options, req, 400, "bad_request", "malformed request body");
                close_after = true;
            }
        } else if (early && !parser.is_done()) {
            close_after = true;  // the unread body would be taken for the next request
            unread_body = true;
        }

        response res;
        if (early) {
            res = std::move(*early);
        } else {
            if (spooled) {
                req.body_file = std::make_shared<file_body>(spool.release(), bytes_in);
            } else {
                req.body = std::move(parser.get().body());
            }
            req.params = std::move(m.params);
            res = co_await invoke(m.h, std::move(req));
        }
        if (res.close) close_after = true;
        const bool keep = client_keep_alive && !close_after && !s->stopping;
        const auto status = res.status;
        std::size_t bytes_out = 0;
        bool written = false;
        if (res.body_file && !head) {
            bytes_out = static_cast<std::size_t>(res.body_file->size());
            written = co_await write_file_response(stream, std::move(res), version, keep, o);
        } else {
            auto out = to_beast(std::move(res), version, keep, o.hsts, head);
            bytes_out = out.body().size();
            stream.expires_after(o.write_timeout);
            auto [wec, wn] = co_await bhttp::async_write(stream, out, net::as_tuple(use_awaitable));
            (void)wn;
            written = !wec;
        }
        if (o.access_log) {
            const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - started)
                                .count();
            core::log::info("request", {{"method", method},
                                        {"path", path},
                                        {"status", status},
                                        {"duration_ms", static_cast<double>(us) / 1000.0},
                                        {"bytes_in", bytes_in},
                                        {"bytes_out", bytes_out},
                                        {"remote", client}});
        }
        if (!written || !keep) break;
    }
    if (upgrade) {
        // Its own coroutine: this one's frame (parser, buffers) is not kept for the socket's life.
        auto ex = st->ex;
        st->stream = nullptr;  // this coroutine's stream is moved away
        // The socket, not the stream: moving a Beast stream leaves its old state allocated in
        // the moved-from object, which a coroutine's parameter keeps for the socket's life.
        auto h = std::make_unique<detail::websocket_handoff>(
            detail::websocket_handoff{stream.release_socket(), std::move(*upgrade),
                                      std::move(ws_accept), ws_options, std::move(client)});
        net::co_spawn(ex, websocket_connection(s, st, std::move(h)), net::detached);
        co_return;
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (unread_body) {
        // A lingering close (as nginx's): closing a socket with unread bytes makes the kernel send
        // a reset, and a client still writing the refused body would lose the refusal with it.
        // What it still sends is read and dropped, for a short while and a bounded amount.
        stream.expires_after(kLingerTime);
        std::vector<char> sink(16 * 1024);
        std::size_t dropped = 0;
        while (dropped < kLingerBytes) {
            auto [rec, n] =
                co_await stream.async_read_some(net::buffer(sink), net::as_tuple(use_awaitable));
            if (rec) break;
            dropped += n;
        }
    }
    st->stream = nullptr;
    unregister(*s, st);
    s->active.fetch_sub(1);
}

}  // namespace

server::server(net::io_context& ioc, router r, server_options o)
    : impl_(std::make_shared<impl>(ioc, std::move(r), std::move(o))) {}

server::~server() = default;

void server::listen() {
    boost::system::error_code ec;
    auto addr = net::ip::make_address(impl_->options.bind, ec);
    if (ec) throw core::config_error("bad bind address: " + impl_->options.bind);
    tcp::endpoint ep(addr, impl_->options.port);
    auto& a = impl_->acceptor;
    a.open(ep.protocol(), ec);
    if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(impl_->options.backlog, ec);
    if (ec) {
        throw core::config_error("cannot listen on " + impl_->options.bind + ":" +
                                 std::to_string(impl_->options.port) + ": " + ec.message());
    }
}

unsigned short server::port() const noexcept {
    boost::system::error_code ec;
    auto ep = impl_->acceptor.local_endpoint(ec);
    return ec ? 0 : ep.port();
}

std::size_t server::active_connections() const noexcept { return impl_->active.load(); }
std::size_t server::active_websockets() const noexcept { return impl_->websockets.load(); }

net::awaitable<void> server::run() {
    auto s = impl_;
    core::log::info("listening", {{"bind", s->options.bind}, {"port", port()}});
    while (!s->stopping) {
        auto [ec, sock] = co_await s->acceptor.async_accept(net::make_strand(s->ioc),
                                                            net::as_tuple(use_awaitable));
        if (ec) {
            if (s->stopping || ec == net::error::operation_aborted) break;
            core::log::warn("accept failed", {{"error", ec.message()}});
            net::steady_timer t(co_await net::this_coro::executor);
            t.expires_after(std::chrono::milliseconds(50));
            co_await t.async_wait(net::as_tuple(use_awaitable));
            continue;
        }
        boost::system::error_code nd;
        sock.set_option(tcp::no_delay(true), nd);
        s->active.fetch_add(1);
        auto ex = sock.get_executor();
        net::co_spawn(ex, session(s, std::move(sock)), [](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex2) {
                core::log::error("connection failed", {{"error", ex2.what()}});
            }
        });
    }
    // Drain: requests in flight finish; idle keep-alive connections were closed by stop().
    net::steady_timer t(co_await net::this_coro::executor);
    while (s->active.load() > 0) {
        t.expires_after(std::chrono::milliseconds(10));
        co_await t.async_wait(net::as_tuple(use_awaitable));
    }
    core::log::info("http server drained");
}

void server::stop() {
    auto s = impl_;
    if (s->stopping.exchange(true)) return;
    net::post(s->acceptor.get_executor(), [s] {
        boost::system::error_code ec;
        s->acceptor.close(ec);
    });
    std::lock_guard lock(s->mu);
    for (const auto& st : s->conns) {
        net::post(st->ex, [st] {
            if (st->drain) {
                st->drain();
            } else if (st->stream && st->idle) {
                st->stream->cancel();
            }
        });
    }
}

}  // namespace awp::http
