// Browser routes: the agent's Chromium over the DevTools protocol. State is Chromium's target
// list (GET <cdp>/json/list, pages only); a screenshot is Page.getLayoutMetrics and
// Page.captureScreenshot (JPEG, clipped to the visible viewport and scaled to maxWidth) over a
// WebSocket to the active page. Every step runs on the request's coroutine under one deadline.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/stream.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/log.hpp"
#include "awp/http/client.hpp"
#include "awp/http/outbound.hpp"
#include "gateway.hpp"
#include "json.hpp"

namespace awp::api {

namespace {

namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using steady = std::chrono::steady_clock;
using http::http_error;
using net::as_tuple;
using net::use_awaitable;

constexpr int kQualityDefault = 50;
constexpr int kMaxWidthDefault = 1280;
constexpr int kMaxWidthMin = 16;
constexpr int kMaxWidthMax = 7680;
constexpr std::size_t kMaxMessage = 64 * 1024 * 1024;  // base64 of a large JPEG

http_error unreachable(const std::string& message) { return {502, "browser_unreachable", message}; }

http_error timed_out() {
    return {504, "browser_timeout", "the agent's browser did not answer in time"};
}

/// Time left before the deadline; 504 when none is.
std::chrono::milliseconds left(steady::time_point deadline) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    if (ms.count() <= 0) throw timed_out();
    return ms;
}

/// An optional integer query parameter within [lo, hi]; 422 naming the field otherwise.
int int_param(const request& r, std::string_view name, int fallback, int lo, int hi) {
    auto v = r.query_param(name);
    if (!v) return fallback;
    const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
    long long n = 0;
    const char* first = v->data();
    const char* last = first + v->size();
    auto [end, ec] = std::from_chars(first, last, n);
    if (v->empty() || ec != std::errc() || end != last) {
        throw http_error(422, "invalid_field",
                         std::string(name) + " must be an integer from " + range);
    }
    if (n < lo || n > hi) {
        throw http_error(422, "invalid_field", std::string(name) + " must be from " + range);
    }
    return static_cast<int>(n);
}

/// The DevTools endpoint an agent's config names: agents.config browser.cdpUrl (or
/// browser.cdp_url); nullopt when it names none (the gateway's API_BROWSER_CDP_URL is used).
std::optional<std::string> agent_cdp_url(const agent_home& a) {
    auto d = core::json::try_parse(a.config_json, core::json::kPayload);
    if (!d || !d->IsObject()) return std::nullopt;
    auto b = d->FindMember("browser");
    if (b == d->MemberEnd() || !b->value.IsObject()) return std::nullopt;
    for (const char* key : {"cdpUrl", "cdp_url"}) {
        auto u = b->value.FindMember(key);
        if (u == b->value.MemberEnd() || u->value.IsNull()) continue;
        if (!u->value.IsString() || !is_cdp_url(u->value.GetString())) {
            throw http_error(502, "browser_misconfigured",
                             std::string("the agent's config.browser.") + key +
                                 " must be an http://host:port URL");
        }
        return std::string(u->value.GetString(), u->value.GetStringLength());
    }
    return std::nullopt;
}

/// Where to reach DevTools: an address, and the Host value Chromium accepts (it refuses host
/// names other than localhost, so names are resolved here and the address is sent).
struct cdp_peer {
    tcp::endpoint endpoint;
    std::string authority;
};

/// The address to connect to; with `check`, every address the host resolves to is checked
/// first (403 outbound_refused), and the one connected to is one of them.
net::awaitable<cdp_peer> resolve_peer(std::string url,
                                      std::optional<http::outbound_check> check = std::nullopt) {
    auto u = http::parse_url(url);
    if (!u || u->scheme != "http") {
        throw unreachable("the DevTools endpoint is not an http://host:port URL");
    }
    boost::system::error_code ec;
    auto addr = net::ip::make_address(u->host, ec);
    const auto port = static_cast<unsigned short>(std::stoul(u->port));
    const auto checked = [&](const net::ip::address& a) {
        if (!check) return;
        try {
            (*check)(u->host, a, port);
        } catch (const http::outbound_refused& e) {
            throw http_error(
                403, "outbound_refused",
                std::string("the agent's config.browser.cdpUrl is refused: ") + e.what());
        }
    };
    if (!ec) checked(addr);
    if (ec) {
        auto ex = co_await net::this_coro::executor;
        tcp::resolver resolver(ex);
        auto [rec, found] =
            co_await resolver.async_resolve(u->host, u->port, as_tuple(use_awaitable));
        if (rec || found.empty()) {
            throw unreachable("cannot resolve the browser host " + u->host);
        }
        for (const auto& e : found) checked(e.endpoint().address());
        // DevTools listens on IPv4 loopback by default: prefer an IPv4 address ("localhost"
        // often resolves to ::1 first).
        addr = found.begin()->endpoint().address();
        for (const auto& e : found) {
            if (e.endpoint().address().is_v4()) {
                addr = e.endpoint().address();
                break;
            }
        }
    }
    cdp_peer p;
    p.endpoint = tcp::endpoint(addr, port);
    p.authority =
        addr.is_v6() ? "[" + addr.to_string() + "]:" + u->port : addr.to_string() + ":" + u->port;
    co_return p;
}

/// The addresses of the agent's gateway host as its runner registered them (the host of
/// its api_url, resolved); empty when none is registered or it does not resolve.
net::awaitable<std::vector<net::ip::address>> registered_addresses(std::string api_url) {
    std::vector<net::ip::address> out;
    auto u = http::parse_url(api_url);
    if (!u) co_return out;
    boost::system::error_code ec;
    auto addr = net::ip::make_address(u->host, ec);
    if (!ec) {
        out.push_back(addr);
        co_return out;
    }
    tcp::resolver resolver(co_await net::this_coro::executor);
    auto [rec, found] = co_await resolver.async_resolve(u->host, u->port, as_tuple(use_awaitable));
    if (rec) co_return out;
    for (const auto& e : found) out.push_back(e.endpoint().address());
    co_return out;
}

struct page_tab {
    std::string id;
    std::string url;
    std::string title;
    std::string ws_path;  // /devtools/page/<id>
};

std::string member_string(const rapidjson::Value& o, const char* name) {
    auto m = o.FindMember(name);
    if (m == o.MemberEnd() || !m->value.IsString()) return {};
    return {m->value.GetString(), m->value.GetStringLength()};
}

/// Chromium's page targets, most recently active first (the order /json/list keeps).
net::awaitable<std::vector<page_tab>> list_pages(cdp_peer peer, steady::time_point deadline) {
    http::client_request q;
    q.url = "http://" + peer.authority + "/json/list";
    q.header.add("Accept", "application/json");
    q.timeout = left(deadline);
    q.body_limit = 8 * 1024 * 1024;
    std::optional<response> answer;
    std::optional<http::upstream_error::kind> failure;
    std::string why;
    try {
        answer = co_await http::fetch(std::move(q));
    } catch (const http::upstream_error& e) {
        failure = e.what_kind();
        why = e.what();
    }
    if (failure) {
        core::log::warn("browser devtools unreachable",
                        {{"endpoint", peer.authority}, {"error", why}});
        if (*failure == http::upstream_error::kind::timeout) throw timed_out();
        throw unreachable("the agent's browser is not reachable at " + peer.authority);
    }
    if (answer->status != 200) {
        throw unreachable("the agent's browser answered " + std::to_string(answer->status) +
                          " to /json/list");
    }
    auto d = core::json::try_parse(answer->body, core::json::kDocument);
    if (!d || !d->IsArray()) {
        throw unreachable("the agent's browser answered /json/list with no target list");
    }
    std::vector<page_tab> tabs;
    for (const auto& t : d->GetArray()) {
        if (!t.IsObject() || member_string(t, "type") != "page") continue;
        page_tab tab;
        tab.id = member_string(t, "id");
        if (tab.id.empty()) continue;
        tab.url = member_string(t, "url");
        tab.title = member_string(t, "title");
        // Only the path of webSocketDebuggerUrl is used: the connection goes to the configured
        // endpoint, never to a host named by the answer.
        const auto ws = member_string(t, "webSocketDebuggerUrl");
        const auto at = ws.find("/devtools/page/");
        tab.ws_path = at == std::string::npos ? "/devtools/page/" + http::percent_encode(tab.id)
                                              : ws.substr(at);
        tabs.push_back(std::move(tab));
    }
    co_return tabs;
}

/// What a failed WebSocket step means for the caller.
http_error ws_failure(const boost::system::error_code& ec, std::string_view step) {
    if (ec == beast::error::timeout) return timed_out();
    return unreachable("the DevTools connection failed while " + std::string(step) + ": " +
                       ec.message());
}

struct viewport {
    double x = 0;
    double y = 0;
    double width = 0;
    double height = 0;
    double device_scale = 1;  // device pixels per CSS pixel
};

double number_at(const rapidjson::Value& o, const char* obj, const char* field) {
    auto m = o.FindMember(obj);
    if (m == o.MemberEnd() || !m->value.IsObject()) return 0;
    auto f = m->value.FindMember(field);
    if (f == m->value.MemberEnd() || !f->value.IsNumber()) return 0;
    return f->value.GetDouble();
}

/// The visible part of the page from Page.getLayoutMetrics, in CSS pixels.
viewport viewport_of(const rapidjson::Value& result) {
    viewport v;
    const char* css = "cssVisualViewport";
    if (number_at(result, css, "clientWidth") <= 0) css = "cssLayoutViewport";
    v.width = std::floor(number_at(result, css, "clientWidth"));
    v.height = std::floor(number_at(result, css, "clientHeight"));
    v.x = number_at(result, css, "pageX");
    v.y = number_at(result, css, "pageY");
    if (v.width < 1 || v.height < 1) {
        throw unreachable("the agent's browser reported no viewport size");
    }
    // The deprecated visualViewport is in device pixels: its ratio to the CSS one is the
    // device scale factor (1 for headless Chromium).
    const double device = number_at(result, "visualViewport", "clientWidth");
    if (device > 0) v.device_scale = std::clamp(device / v.width, 0.25, 8.0);
    return v;
}

/// One CDP command's reply: `result`, or 502 with the browser's error message.
std::optional<rapidjson::Document> reply_for(int id, const std::string& text) {
    auto d = core::json::try_parse(text, core::json::kDocument);
    if (!d || !d->IsObject()) {
        throw unreachable("the agent's browser sent a DevTools message that is not JSON");
    }
    auto idm = d->FindMember("id");
    if (idm == d->MemberEnd() || !idm->value.IsInt() || idm->value.GetInt() != id) {
        return std::nullopt;  // an event or another reply
    }
    auto err = d->FindMember("error");
    if (err != d->MemberEnd()) {
        std::string msg = err->value.IsObject() ? member_string(err->value, "message") : "";
        throw http_error(502, "browser_error",
                         "the agent's browser refused the screenshot: " +
                             (msg.empty() ? std::string("unknown error") : msg));
    }
    if (!d->HasMember("result") || !(*d)["result"].IsObject()) {
        throw unreachable("the agent's browser sent a DevTools reply without a result");
    }
    return d;
}

/// A JPEG of the page's visible viewport, at most max_width pixels wide.
net::awaitable<std::string> capture_jpeg(cdp_peer peer, std::string ws_path, int quality,
                                         int max_width, steady::time_point deadline) {
    auto ex = co_await net::this_coro::executor;
    websocket::stream<beast::tcp_stream> ws(ex);
    ws.read_message_max(kMaxMessage);
    auto& tcp_layer = beast::get_lowest_layer(ws);
    tcp_layer.expires_after(left(deadline));
    auto [cec] = co_await tcp_layer.async_connect(peer.endpoint, as_tuple(use_awaitable));
    if (cec) throw ws_failure(cec, "connecting");
    tcp_layer.expires_after(left(deadline));
    auto [hec] = co_await ws.async_handshake(peer.authority, ws_path, as_tuple(use_awaitable));
    if (hec) throw ws_failure(hec, "opening the page's WebSocket");
    ws.text(true);

    viewport vp;
    std::string jpeg;
    beast::flat_buffer buf;
    for (int id = 1; id <= 2; ++id) {
        json_out m;
        m.w.StartObject();
        m.key("id");
        m.w.Int(id);
        if (id == 1) {
            m.kv("method", "Page.getLayoutMetrics");
        } else {
            // Scale so the image is at most max_width device pixels wide; never upscale.
            const double scale = std::min(1.0, max_width / (vp.width * vp.device_scale));
            m.kv("method", "Page.captureScreenshot");
            m.key("params");
            m.w.StartObject();
            m.kv("format", "jpeg");
            m.key("quality");
            m.w.Int(quality);
            m.key("captureBeyondViewport");
            m.w.Bool(false);
            m.key("clip");
            m.w.StartObject();
            m.key("x");
            m.w.Double(vp.x);
            m.key("y");
            m.w.Double(vp.y);
            m.key("width");
            m.w.Double(vp.width);
            m.key("height");
            m.w.Double(vp.height);
            m.key("scale");
            m.w.Double(scale);
            m.w.EndObject();
            m.w.EndObject();
        }
        m.w.EndObject();
        const auto text = m.str();
        tcp_layer.expires_after(left(deadline));
        auto [wec, wn] = co_await ws.async_write(net::buffer(text), as_tuple(use_awaitable));
        (void)wn;
        if (wec) throw ws_failure(wec, "sending a DevTools command");
        std::optional<rapidjson::Document> reply;
        while (!reply) {
            tcp_layer.expires_after(left(deadline));
            buf.clear();
            auto [rec, rn] = co_await ws.async_read(buf, as_tuple(use_awaitable));
            (void)rn;
            if (rec) throw ws_failure(rec, "waiting for the browser's reply");
            reply = reply_for(id, beast::buffers_to_string(buf.data()));
        }
        const auto& result = (*reply)["result"];
        if (id == 1) {
            vp = viewport_of(result);
            continue;
        }
        const auto data = result.FindMember("data");
        if (data == result.MemberEnd() || !data->value.IsString()) {
            throw unreachable("the agent's browser sent a screenshot without data");
        }
        try {
            jpeg = core::crypto::base64_decode(
                std::string_view(data->value.GetString(), data->value.GetStringLength()));
        } catch (const core::error&) {
            throw unreachable("the agent's browser sent a screenshot that is not base64");
        }
    }
    // Polite close, briefly and never past the deadline: the image is already here.
    const auto rest =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    if (rest.count() > 0) {
        tcp_layer.expires_after(std::min(rest, std::chrono::milliseconds(1000)));
        auto [closing] =
            co_await ws.async_close(websocket::close_code::normal, as_tuple(use_awaitable));
        (void)closing;
    }
    if (jpeg.size() < 4 || static_cast<unsigned char>(jpeg[0]) != 0xFF ||
        static_cast<unsigned char>(jpeg[1]) != 0xD8) {
        throw unreachable("the agent's browser sent a screenshot that is not a JPEG");
    }
    co_return jpeg;
}

}  // namespace

bool is_cdp_url(std::string_view url) {
    auto u = http::parse_url(url);
    if (!u || u->scheme != "http" || u->target != "/") return false;
    // The port must be written out (DevTools has no default port), and nothing may follow it
    // but one '/'.
    auto authority = url.substr(7);
    if (auto slash = authority.find('/'); slash != std::string_view::npos) {
        if (authority.substr(slash) != "/") return false;
        authority = authority.substr(0, slash);
    }
    const auto colon = authority.rfind(':');
    if (colon == std::string_view::npos || authority.back() == ']') return false;
    if (u->port.empty() || u->port.size() > 5) return false;
    const auto port = std::stoul(u->port);
    return port >= 1 && port <= 65535;
}

namespace {

net::awaitable<cdp_peer> devtools_peer(const gateway& g, agent_home home) {
    auto own_url = agent_cdp_url(home);
    // The operator's API_BROWSER_CDP_URL is the operator's to choose; an address a tenant
    // wrote into the agent's config must be on the agent's own gateway host.
    if (!own_url) {
        auto peer = co_await resolve_peer(g.config().browser_cdp_url);
        co_return peer;
    }
    auto own = co_await registered_addresses(home.api_url);
    auto peer = co_await resolve_peer(
        *own_url, g.outbound_check(http::outbound_scope::own_host, std::move(own)));
    co_return peer;
}

}  // namespace

net::awaitable<response> gateway::browser_state(request r) {
    auto p = require_session(r);
    auto home = co_await locate_agent(p, r.param("slug"));
    if (!home.local) {
        auto proxied = co_await proxy_to_gateway(std::move(r), std::move(home));
        co_return proxied;
    }
    const auto deadline =
        steady::now() + std::chrono::milliseconds(static_cast<long>(cfg_.browser_timeout_s * 1000));
    auto peer = co_await devtools_peer(*this, home);
    auto tabs = co_await list_pages(peer, deadline);
    json_out o;
    o.w.StartObject();
    o.kv("agent", home.slug);
    // The active tab is the first page: Chromium lists targets most recently active first.
    if (tabs.empty()) {
        o.key("activeTabId");
        o.w.Null();
        o.key("url");
        o.w.Null();
        o.key("title");
        o.w.Null();
    } else {
        o.kv("activeTabId", tabs.front().id);
        o.kv("url", tabs.front().url);
        o.kv("title", tabs.front().title);
    }
    o.key("tabs");
    o.w.StartArray();
    for (std::size_t i = 0; i < tabs.size(); ++i) {
        o.w.StartObject();
        o.kv("id", tabs[i].id);
        o.kv("url", tabs[i].url);
        o.kv("title", tabs[i].title);
        o.kv("type", "page");
        o.key("active");
        o.w.Bool(i == 0);
        o.w.EndObject();
    }
    o.w.EndArray();
    o.w.EndObject();
    co_return response::json(200, o.str());
}

net::awaitable<response> gateway::browser_screenshot(request r) {
    auto p = require_session(r);
    const int quality = int_param(r, "quality", kQualityDefault, 1, 100);
    const int max_width = int_param(r, "maxWidth", kMaxWidthDefault, kMaxWidthMin, kMaxWidthMax);
    auto home = co_await locate_agent(p, r.param("slug"));
    if (!home.local) {
        auto proxied = co_await proxy_to_gateway(std::move(r), std::move(home));
        co_return proxied;
    }
    const auto deadline =
        steady::now() + std::chrono::milliseconds(static_cast<long>(cfg_.browser_timeout_s * 1000));
    auto peer = co_await devtools_peer(*this, home);
    auto tabs = co_await list_pages(peer, deadline);
    if (tabs.empty()) {
        throw http_error(502, "browser_no_page", "the agent's browser has no open page");
    }
    auto ws_path = tabs.front().ws_path;
    auto jpeg = co_await capture_jpeg(peer, std::move(ws_path), quality, max_width, deadline);
    auto res = response::bytes(200, "image/jpeg", std::move(jpeg));
    res.header.set("Cache-Control", "no-store");
    co_return res;
}

}  // namespace awp::api
