// awpctl health: exits 0 when a daemon is alive — its heartbeat row is fresh (--daemon) and/or
// its HTTP health route answers 2xx (--url). Container health checks and scripts call it.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <string>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include "awp/core/error.hpp"
#include "awp/core/pg.hpp"
#include "commands.hpp"

namespace awp::ctl {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// The freshest heartbeat of the daemon among the rows the filters allow.
constexpr const char* kHeartbeatSql = R"SQL(
SELECT h.instance, g.slug, floor(extract(epoch FROM now() - h.last_seen_at))::bigint AS age_s
  FROM daemon_heartbeats h JOIN gateways g ON g.id = h.gateway_id
 WHERE h.daemon = $1
   AND ($2::text IS NULL OR g.slug = $2 OR g.id::text = $2)
   AND ($3::text IS NULL OR h.instance = $3)
   AND ($4::text IS NULL OR starts_with(h.instance, $4))
 ORDER BY h.last_seen_at DESC
 LIMIT 1
)SQL";

struct health_options {
    std::string daemon;
    std::string gateway;
    std::string instance;
    bool local = false;
    int within_s = 90;
    std::string url;
    double timeout_s = 5;
};

struct verdict {
    bool ok = false;
    std::string what;  // one line for people
};

std::string hostname() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

std::optional<std::string> opt(const std::string& s) {
    if (s.empty()) return std::nullopt;
    return s;
}

verdict check_heartbeat(const context& ctx, const health_options& o) {
    // Heartbeat rows carry the short name (command-runner); accept the unit name too.
    std::string daemon = o.daemon;
    if (daemon.rfind("awp-", 0) == 0) daemon = daemon.substr(4);
    std::optional<std::string> prefix;
    if (o.local && o.instance.empty()) prefix = hostname() + ":";
    auto conn = core::pg::connection::connect(ctx.database_url);
    const auto r = conn.exec(kHeartbeatSql, {daemon, opt(o.gateway), opt(o.instance), prefix});
    std::string scope = daemon;
    if (!o.gateway.empty()) scope += " on gateway " + o.gateway;
    if (!o.instance.empty()) scope += " (instance " + o.instance + ")";
    if (prefix) scope += " on host " + prefix->substr(0, prefix->size() - 1);
    if (r.empty()) return {false, scope + ": no heartbeat recorded"};
    const auto age = r.get<std::int64_t>(0, 2);
    const std::string seen = r.get<std::string>(0, 0) + " on gateway " + r.get<std::string>(0, 1) +
                             ", last seen " + std::to_string(age) + " s ago";
    if (age > o.within_s) {
        return {false,
                scope + ": silent (" + seen + ", limit " + std::to_string(o.within_s) + " s)"};
    }
    return {true, scope + ": alive (" + seen + ")"};
}

struct parsed_url {
    std::string host, port, target;
};

parsed_url parse_url(const std::string& url) {
    constexpr std::string_view kScheme = "http://";
    if (url.rfind(kScheme, 0) != 0) {
        throw core::config_error("--url must start with http:// (got \"" + url + "\")");
    }
    const std::string rest = url.substr(kScheme.size());
    const auto slash = rest.find('/');
    const std::string authority = rest.substr(0, slash);
    parsed_url u;
    u.target = slash == std::string::npos ? "/" : rest.substr(slash);
    if (!authority.empty() && authority.front() == '[') {  // [::1]:8088
        const auto close = authority.find(']');
        if (close == std::string::npos) throw core::config_error("--url: bad IPv6 address");
        u.host = authority.substr(1, close - 1);
        u.port = close + 2 <= authority.size() ? authority.substr(close + 2) : "";
    } else {
        const auto colon = authority.rfind(':');
        u.host = authority.substr(0, colon);
        u.port = colon == std::string::npos ? "" : authority.substr(colon + 1);
    }
    if (u.port.empty()) u.port = "80";
    if (u.host.empty()) throw core::config_error("--url has no host (got \"" + url + "\")");
    return u;
}

// GET the URL with HTTP/1.0 and a deadline over the whole exchange; 2xx is healthy.
verdict check_http(const health_options& o) {
    const parsed_url u = parse_url(o.url);
    net::io_context ioc;
    tcp::resolver resolver(ioc);
    tcp::socket socket(ioc);
    net::streambuf response;
    const std::string request = "GET " + u.target + " HTTP/1.0\r\nHost: " + u.host +
                                "\r\nUser-Agent: awpctl-health\r\nConnection: close\r\n\r\n";
    boost::system::error_code failure;
    bool done = false;
    resolver.async_resolve(u.host, u.port, [&](auto ec, const tcp::resolver::results_type& eps) {
        if (ec) {
            failure = ec;
            return;
        }
        net::async_connect(socket, eps, [&](auto ec2, const tcp::endpoint&) {
            if (ec2) {
                failure = ec2;
                return;
            }
            net::async_write(socket, net::buffer(request), [&](auto ec3, std::size_t) {
                if (ec3) {
                    failure = ec3;
                    return;
                }
                net::async_read_until(socket, response, "\r\n", [&](auto ec4, std::size_t) {
                    failure = ec4;
                    done = !ec4;
                });
            });
        });
    });
    ioc.run_for(std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000)));
    if (!done) {
        const std::string why = failure ? failure.message() : "no answer within the timeout";
        return {false, o.url + ": " + why};
    }
    std::istream in(&response);
    std::string version;
    int status = 0;
    in >> version >> status;
    if (version.rfind("HTTP/", 0) != 0 || status == 0) {
        return {false, o.url + ": not an HTTP answer"};
    }
    const std::string line = o.url + ": HTTP " + std::to_string(status);
    return {status >= 200 && status < 300, line};
}

void print_json(const verdict& v) {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartObject();
    w.Key("healthy");
    w.Bool(v.ok);
    w.Key("detail");
    w.String(v.what.c_str());
    w.EndObject();
    std::cout << buf.GetString() << "\n";
}

command add_health(CLI::App& root, context& ctx) {
    static health_options o;
    auto* app = root.add_subcommand(
        "health",
        "Exit 0 when a daemon is alive: its heartbeat is fresh (--daemon) and/or its HTTP health "
        "route answers 2xx (--url); exit 1 otherwise. For container health checks");
    app->add_option("--daemon", o.daemon,
                    "Heartbeat name: command-runner, inbox-dispatcher, scheduler, ... (an awp- "
                    "prefix is accepted)");
    app->add_option("--gateway", o.gateway,
                    "Only heartbeats filed under this gateway (slug or id)");
    app->add_option("--instance", o.instance, "Only this instance (exact identity)")
        ->envname("AWP_INSTANCE");
    app->add_flag("--local", o.local,
                  "Only instances on this host (identity begins with <hostname>:); ignored when "
                  "--instance is set");
    app->add_option("--within", o.within_s, "A heartbeat younger than this many seconds is fresh")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    app->add_option("--url", o.url, "HTTP health route, e.g. http://127.0.0.1:3000/api/health");
    app->add_option("--timeout", o.timeout_s, "Seconds allowed for the HTTP check")
        ->check(CLI::Range(0.1, 300.0))
        ->capture_default_str();
    return {app, [&ctx] {
                if (o.daemon.empty() && o.url.empty()) {
                    throw core::config_error("awpctl health needs --daemon and/or --url");
                }
                verdict v{true, ""};
                auto add = [&v](const verdict& part) {
                    v.ok = v.ok && part.ok;
                    v.what += (v.what.empty() ? "" : "; ") + part.what;
                };
                try {
                    if (!o.url.empty()) add(check_http(o));
                    if (!o.daemon.empty()) add(check_heartbeat(ctx, o));
                } catch (const core::config_error&) {
                    throw;
                } catch (const std::exception& e) {
                    // The database being unreachable is an unhealthy answer, not a crash.
                    add({false, e.what()});
                }
                if (ctx.json) {
                    print_json(v);
                } else {
                    (v.ok ? std::cout : std::cerr)
                        << (v.ok ? "healthy: " : "unhealthy: ") << v.what << "\n";
                }
                return v.ok ? 0 : 1;
            }};
}

}  // namespace

AWPCTL_COMMAND(add_health);

}  // namespace awp::ctl
