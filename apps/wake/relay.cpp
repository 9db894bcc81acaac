// The wake relay: LISTEN awp_wake, check logins, write wake-ups to the streams of their gateway.
#include "relay.hpp"

#include <algorithm>
#include <cstdio>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/log.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/wake.hpp"

namespace awp::wake {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace log = core::log;
using net::use_awaitable;
using net::ip::tcp;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kQueueLimit = 256;  // lines waiting for one slow stream
constexpr auto kHeaderTimeout = 10s;
constexpr auto kWriteTimeout = 10s;
constexpr auto kRefusalPause = 250ms;  // before a refused login's answer: slows guessing

}  // namespace

/// One host's stream: lines waiting to be written, and the flag its writer waits on.
struct relay::stream {
    explicit stream(const net::any_io_executor& ex) : ready(ex) {}
    std::deque<std::string> lines;
    core::event ready;
    bool closed = false;

    void push(std::string line) {
        if (closed) return;
        if (std::find(lines.begin(), lines.end(), line) != lines.end()) return;  // coalesce
        if (lines.size() >= kQueueLimit) {
            // Too slow to keep up: one look replaces everything it missed.
            lines.clear();
            line = "rescan\n";
        }
        lines.push_back(std::move(line));
        ready.set();
    }
};

void add_options(core::daemon::cli& cli, config& c) {
    cli.add_common(c.common);
    auto& app = cli.app();
    cli.secret(app.add_option("--auth-database-url", c.auth_database_url,
                              "Where hosts' logins are checked (its user and password are "
                              "replaced by the host's; default DATABASE_URL)")
                   ->envname("AUTH_DATABASE_URL"));
    app.add_option("--bind", c.bind, "Address of the stream endpoint")
        ->envname("WAKE_BIND")
        ->capture_default_str();
    app.add_option("--port", c.port, "Port of the stream endpoint (0: any free port)")
        ->envname("WAKE_PORT")
        ->capture_default_str();
    app.add_option("--max-streams", c.max_streams, "Streams of all hosts together")
        ->envname("WAKE_MAX_STREAMS")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    app.add_option("--max-gateway-streams", c.max_gateway_streams, "Streams of one gateway")
        ->envname("WAKE_MAX_GATEWAY_STREAMS")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--login-cache", c.login_cache_s,
                   "Seconds a checked login is trusted without asking Postgres again")
        ->envname("WAKE_LOGIN_CACHE")
        ->check(CLI::Range(0.0, 86400.0))
        ->capture_default_str();
}

relay::relay(net::io_context& ioc, config cfg) : ioc_(ioc), cfg_(std::move(cfg)) {
    if (cfg_.auth_database_url.empty()) cfg_.auth_database_url = cfg_.common.database_url;
    check_done_ = std::make_unique<net::steady_timer>(ioc_);
}

relay::~relay() = default;

void relay::request_stop() {
    stopping_ = true;
    if (listener_) listener_->stop();
    if (acceptor_) {
        boost::system::error_code ec;
        acceptor_->close(ec);
    }
    for (auto& [gw, list] : by_gateway_) {
        for (auto& s : list) {
            s->closed = true;
            s->ready.set();
        }
    }
}

net::awaitable<void> relay::run() {
    auto ex = co_await net::this_coro::executor;
    core::listener_options lo;
    lo.dsn = cfg_.common.database_url;
    lo.channels = {std::string(core::wake::kChannel)};
    lo.safety_poll = 24h;  // nothing to poll: the hosts poll their own tables
    lo.name = "wake";
    listener_ = std::make_unique<core::listener>(
        lo, [this](const pg::notification& n) { on_notify(n); },
        [this](core::rescan_reason why) {
            if (why != core::rescan_reason::connected) return;
            // Whatever was notified while the relay was not listening is lost: every host looks.
            if (listened_once_) broadcast_rescan();
            if (!listened_once_) core::daemon::notify_ready();
            listened_once_ = true;
        });
    acceptor_ = std::make_unique<tcp::acceptor>(ex);
    const tcp::endpoint ep(net::ip::make_address(cfg_.bind), cfg_.port);
    acceptor_->open(ep.protocol());
    acceptor_->set_option(tcp::acceptor::reuse_address(true));
    boost::system::error_code ec;
    acceptor_->bind(ep, ec);
    if (ec)
        throw core::config_error("cannot bind " + cfg_.bind + ":" + std::to_string(cfg_.port) +
                                 ": " + ec.message());
    acceptor_->listen(1024);
    port_ = acceptor_->local_endpoint().port();
    log::info("wake relay listening", {{"bind", cfg_.bind}, {"port", static_cast<int>(port_)}});
    core::event listener_done(ex);
    net::co_spawn(ex, listener_->run(), [&](std::exception_ptr) { listener_done.set(); });
    co_await accept_loop();
    listener_->stop();
    co_await listener_done.wait();
}

net::awaitable<void> relay::accept_loop() {
    while (!stopping_) {
        auto [ec, socket] = co_await acceptor_->async_accept(net::as_tuple(use_awaitable));
        if (stopping_) break;
        if (ec) {
            if (ec == net::error::operation_aborted) break;
            log::warn("accept failed", {{"error", ec.message()}});
            net::steady_timer pause(co_await net::this_coro::executor, 50ms);
            co_await pause.async_wait(net::as_tuple(use_awaitable));
            continue;
        }
        net::co_spawn(acceptor_->get_executor(), serve(std::move(socket)), net::detached);
    }
}

namespace {

bhttp::response<bhttp::string_body> answer(unsigned status, std::string body,
                                           const char* content_type = "application/json") {
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), 11};
    res.set(bhttp::field::content_type, content_type);
    res.set(bhttp::field::cache_control, "no-store");
    res.set(bhttp::field::connection, "close");
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
}

std::string error_json(std::string_view code, std::string_view message) {
    return "{\"error\":\"" + std::string(code) + "\",\"message\":\"" + std::string(message) + "\"}";
}

}  // namespace

net::awaitable<void> relay::serve(tcp::socket socket) {
    beast::tcp_stream conn(std::move(socket));
    beast::flat_buffer buffer;  // the parser's header_limit bounds what is kept
    bhttp::request_parser<bhttp::empty_body> parser;
    parser.header_limit(8 * 1024);
    parser.body_limit(0);
    conn.expires_after(kHeaderTimeout);
    auto [rec, rn] =
        co_await bhttp::async_read_header(conn, buffer, parser, net::as_tuple(use_awaitable));
    (void)rn;
    if (rec) {  // timed out, closed or not HTTP: nothing worth an answer
        log::debug("request refused unanswered", {{"error", rec.message()}});
        co_return;
    }
    const auto& req = parser.get();
    std::optional<bhttp::response<bhttp::string_body>> res;
    const std::string_view target(req.target().data(), req.target().size());
    if (target != core::wake::kPath && target != "/healthz") {
        res = answer(404, error_json("not_found", "no such path"));
    } else if (req.method() != bhttp::verb::get) {
        res = answer(405, error_json("method_not_allowed", "use GET"));
        res->set(bhttp::field::allow, "GET");
        res->prepare_payload();
    } else if (target == "/healthz") {
        const bool up = listening();
        res =
            answer(up ? 200 : 503, std::string("{\"status\":\"") + (up ? "ok" : "degraded") +
                                       "\",\"listening\":" + (up ? "true" : "false") +
                                       ",\"streams\":" + std::to_string(stream_count_) +
                                       ",\"gateways\":" + std::to_string(by_gateway_.size()) + "}");
    }
    if (res) {
        conn.expires_after(kWriteTimeout);
        co_await bhttp::async_write(conn, *res, net::as_tuple(use_awaitable));
        co_return;
    }
    // GET /v1/wake: the host's own login decides which gateway's wake-ups it gets.
    const auto creds = core::wake::parse_basic_credentials(std::string_view(
        req[bhttp::field::authorization].data(), req[bhttp::field::authorization].size()));
    // A pool login's host also sends its gateway key: the login is checked with it presented.
    const auto key_field = req[core::wake::kGatewayKeyHeader];
    const std::string gateway_key(key_field.data(), key_field.size());
    unsigned status = 401;
    std::optional<std::string> gateway_id;
    if (creds && !stopping_ && (gateway_key.empty() || core::pg::is_gateway_key(gateway_key)))
        gateway_id = co_await check_login(creds->user, creds->password, gateway_key, status);
    if (!gateway_id) {
        if (status == 401 || status == 403) {
            net::steady_timer pause(conn.get_executor(), kRefusalPause);
            co_await pause.async_wait(net::as_tuple(use_awaitable));
        }
        auto r = status == 403 ? answer(403, error_json("forbidden", "the login is no gateway's"))
                 : status == 503
                     ? answer(503, error_json("unavailable", "cannot check the login now"))
                     : answer(401, error_json("unauthorized",
                                              "a gateway's database login is required (Basic, "
                                              "and Awp-Gateway-Key for a pool login)"));
        if (status == 401) r.set(bhttp::field::www_authenticate, "Basic realm=\"awp-wake\"");
        conn.expires_after(kWriteTimeout);
        co_await bhttp::async_write(conn, r, net::as_tuple(use_awaitable));
        co_return;
    }
    const auto hex = core::wake::gateway_hex(*gateway_id);
    auto& list = by_gateway_[*hex];
    if (stream_count_ >= cfg_.max_streams || list.size() >= cfg_.max_gateway_streams) {
        if (list.empty()) by_gateway_.erase(*hex);
        auto r = answer(429, error_json("too_many_streams", "too many streams open"));
        r.set(bhttp::field::retry_after, "5");
        conn.expires_after(kWriteTimeout);
        co_await bhttp::async_write(conn, r, net::as_tuple(use_awaitable));
        co_return;
    }
    tcp::socket sock = conn.release_socket();
    co_await run_stream(sock, *hex, *gateway_id);
}

net::awaitable<std::optional<std::string>> relay::check_login(const std::string& user,
                                                              const std::string& password,
                                                              const std::string& gateway_key,
                                                              unsigned& status) {
    const std::string key = core::crypto::sha256_hex(user + std::string(1, '\0') + password +
                                                     std::string(1, '\0') + gateway_key);
    const auto now = std::chrono::steady_clock::now();
    if (auto it = logins_.find(key); it != logins_.end()) {
        if (it->second.until > now) co_return it->second.gateway_id;
        logins_.erase(it);
    }
    if (checks_waiting_ >= 1024) {  // a storm beyond what Postgres should take at once
        status = 503;
        co_return std::nullopt;
    }
    ++checks_waiting_;
    while (checks_running_ >= cfg_.login_checks && !stopping_) {
        check_done_->expires_at(net::steady_timer::time_point::max());
        co_await check_done_->async_wait(net::as_tuple(use_awaitable));
    }
    --checks_waiting_;
    ++checks_running_;
    struct release {
        relay& r;
        ~release() {
            --r.checks_running_;
            r.check_done_->cancel();
        }
    } guard{*this};
    try {
        const std::string dsn =
            core::pg::dsn_with_login(cfg_.auth_database_url, core::pg::login{user, password});
        pg::connection c = co_await pg::connection::async_connect(dsn);
        c.set_gateway_key(gateway_key);  // the relay's own process has none
        const pg::result r = co_await c.async_query("SELECT public.awp_session_gateway()::text");
        const std::string id(r.size() == 1 ? r.text(0, 0) : std::string_view());
        const auto hex = core::wake::gateway_hex(id);
        // A key must be honoured as sent: refused (wrong, rotated, another gateway's), or beside
        // a gateway's own login that names another gateway, it is 401, as a wrong password is.
        if (!gateway_key.empty() && (!hex || gateway_key.compare(5, 32, *hex) != 0)) {
            status = 401;
            co_return std::nullopt;
        }
        if (!hex) {  // the login is no gateway's
            status = 403;
            co_return std::nullopt;
        }
        if (cfg_.login_cache_s > 0) {
            logins_[key] = {
                id, std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(cfg_.login_cache_s * 1000))};
        }
        co_return id;
    } catch (const pg::connection_error& e) {
        // libpq says why; a refused password and an unknown role look alike to the host.
        const std::string_view what = e.what();
        const bool refused = what.find("authentication failed") != std::string_view::npos ||
                             what.find("does not exist") != std::string_view::npos ||
                             what.find("pg_hba.conf") != std::string_view::npos ||
                             what.find("no password supplied") != std::string_view::npos;
        status = refused ? 401 : 503;
        if (!refused) log::warn("cannot check a login", {{"error", std::string(what)}});
        co_return std::nullopt;
    } catch (const core::error& e) {
        log::warn("cannot check a login", {{"error", std::string(e.what())}});
        status = 503;
        co_return std::nullopt;
    }
}

net::awaitable<void> relay::run_stream(tcp::socket& socket, const std::string& gateway_hex,
                                       const std::string& gateway_id) {
    auto ex = socket.get_executor();
    auto s = std::make_shared<stream>(ex);
    by_gateway_[gateway_hex].push_back(s);
    ++stream_count_;
    log::debug("stream opened", {{"gateway_id", gateway_id}});
    struct unregister {
        relay& r;
        const std::string& hex;
        std::shared_ptr<stream> s;
        ~unregister() {
            --r.stream_count_;
            auto it = r.by_gateway_.find(hex);
            if (it == r.by_gateway_.end()) return;
            auto& v = it->second;
            v.erase(std::remove(v.begin(), v.end(), s), v.end());
            if (v.empty()) r.by_gateway_.erase(it);
        }
    } guard{*this, gateway_hex, s};

    // The host never sends anything after its request: a read ends only when it goes away.
    net::co_spawn(
        ex,
        [&socket, s]() -> net::awaitable<void> {
            char sink[64];
            while (!s->closed) {
                auto [ec, n] = co_await socket.async_read_some(net::buffer(sink),
                                                               net::as_tuple(use_awaitable));
                (void)n;
                if (ec) break;
            }
            s->closed = true;
            s->ready.set();
        },
        net::detached);

    std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nCache-Control: "
        "no-store\r\nX-Content-Type-Options: nosniff\r\nTransfer-Encoding: chunked\r\n\r\n";
    std::string out = "ready " + gateway_id + "\n";
    net::steady_timer write_timer(ex);
    while (!s->closed && !stopping_) {
        if (!out.empty()) {
            char size[20];
            const int len = std::snprintf(size, sizeof size, "%zx\r\n", out.size());
            std::string frame =
                head + std::string(size, static_cast<std::size_t>(len)) + out + "\r\n";
            head.clear();
            out.clear();
            // A host that does not read for kWriteTimeout is dropped (it reconnects and looks).
            write_timer.expires_after(kWriteTimeout);
            write_timer.async_wait([&socket](const boost::system::error_code& ec) {
                if (!ec) {
                    boost::system::error_code ignored;
                    socket.cancel(ignored);
                }
            });
            auto [ec, n] =
                co_await net::async_write(socket, net::buffer(frame), net::as_tuple(use_awaitable));
            (void)n;
            write_timer.cancel();
            if (ec) break;
        }
        const bool woke = co_await s->ready.wait_for(core::wake::kPingInterval);
        if (!woke) {
            out = "ping\n";
            continue;
        }
        while (!s->lines.empty()) {
            out += s->lines.front();
            s->lines.pop_front();
        }
    }
    s->closed = true;
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    log::debug("stream closed", {{"gateway_id", gateway_id}});
}

void relay::on_notify(const pg::notification& n) {
    const auto l = core::wake::parse_notify_payload(n.payload);
    if (!l) return;  // anyone may NOTIFY awp_wake: what is not a wake-up is dropped
    const auto ch = core::wake::parse_channel(l->channel);
    auto it = by_gateway_.find(std::string(ch->gateway_hex));
    if (it == by_gateway_.end()) return;
    const std::string line = core::wake::format_wake(*l);
    for (auto& s : it->second) s->push(line);
}

void relay::broadcast_rescan() {
    for (auto& [gw, list] : by_gateway_)
        for (auto& s : list) s->push("rescan\n");
}

}  // namespace awp::wake
