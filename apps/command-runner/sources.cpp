// source_write providers and credentials.
#include "sources.hpp"

#include <cctype>
#include <fstream>
#include <regex>
#include <sstream>

#include <rapidjson/document.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace awp::runner {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace rj = rapidjson;

std::map<std::string, std::string> read_env_file(const std::string& path) {
    std::map<std::string, std::string> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string key = line.substr(0, eq), raw = line.substr(eq + 1), value;
        if (key.rfind("export ", 0) == 0) key = key.substr(7);
        // POSIX single quotes with '\'' escapes, as format_env_file writes; else the raw text.
        if (!raw.empty() && raw.front() == '\'') {
            bool quoted = false;
            for (std::size_t i = 0; i < raw.size(); ++i) {
                if (raw[i] == '\'') {
                    quoted = !quoted;
                } else if (!quoted && raw[i] == '\\' && i + 1 < raw.size()) {
                    value.push_back(raw[++i]);
                } else {
                    value.push_back(raw[i]);
                }
            }
        } else {
            value = raw;
        }
        out[key] = value;
    }
    return out;
}

std::map<std::string, std::string> source_credentials(const std::map<std::string, std::string>& env,
                                                      const std::string& provider,
                                                      const std::string& connection_id) {
    std::string prefix;
    for (char ch : provider) {
        prefix.push_back(std::isalnum(static_cast<unsigned char>(ch))
                             ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch)))
                             : '_');
    }
    prefix += "_SOURCE_";
    for (char ch : connection_id.substr(0, 8)) {
        prefix.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
    }
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : env) {
        if (k == prefix) {
            out["api_key"] = v;
        } else if (k.size() > prefix.size() + 2 &&
                   k.compare(0, prefix.size() + 2, prefix + "__") == 0) {
            std::string field = k.substr(prefix.size() + 2);
            for (auto& ch : field)
                ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            out[field] = v;
        }
    }
    return out;
}

namespace {

using namespace net::experimental::awaitable_operators;

struct parsed_url {
    std::string host, port, target;
};

parsed_url parse_http_url(const std::string& url) {
    static const std::regex re(
        R"(^http://([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(?::([0-9]{1,5}))?(/[^\s]*)?$)");
    std::smatch m;
    if (!std::regex_match(url, m, re)) {
        throw source_error(
            "http_json: config.url must be an http:// URL (https is not supported yet), got \"" +
            url + "\"");
    }
    parsed_url p;
    p.host = m[1].str();
    if (p.host.front() == '[') p.host = p.host.substr(1, p.host.size() - 2);
    p.port = m[2].matched ? m[2].str() : "80";
    p.target = m[3].matched ? m[3].str() : "/";
    return p;
}

struct http_outcome {
    unsigned status = 0;
    std::string body;
    std::string error;
};

net::awaitable<http_outcome> http_post(parsed_url url, std::string body, std::string bearer) {
    http_outcome out;
    auto ex = co_await net::this_coro::executor;
    net::ip::tcp::resolver resolver(ex);
    auto [rec, results] =
        co_await resolver.async_resolve(url.host, url.port, net::as_tuple(net::use_awaitable));
    if (rec) {
        out.error = "cannot resolve " + url.host + ": " + rec.message();
        co_return out;
    }
    beast::tcp_stream stream(ex);
    auto [cec, ep] = co_await stream.async_connect(results, net::as_tuple(net::use_awaitable));
    if (cec) {
        out.error = "cannot connect to " + url.host + ":" + url.port + ": " + cec.message();
        co_return out;
    }
    http::request<http::string_body> req{http::verb::post, url.target, 11};
    req.set(http::field::host, url.host);
    req.set(http::field::user_agent, "awp-command-runner");
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "application/json");
    if (!bearer.empty()) req.set(http::field::authorization, "Bearer " + bearer);
    req.body() = std::move(body);
    req.prepare_payload();
    auto [wec, wn] = co_await http::async_write(stream, req, net::as_tuple(net::use_awaitable));
    if (wec) {
        out.error = "cannot send the request: " + wec.message();
        co_return out;
    }
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(8 * 1024 * 1024);
    auto [rdec, rn] =
        co_await http::async_read(stream, buf, parser, net::as_tuple(net::use_awaitable));
    if (rdec) {
        out.error = "cannot read the response: " + rdec.message();
        co_return out;
    }
    out.status = parser.get().result_int();
    out.body = parser.get().body();
    beast::error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    co_return out;
}

net::awaitable<void> sleep_for(std::chrono::seconds d) {
    net::steady_timer t(co_await net::this_coro::executor, d);
    co_await t.async_wait(net::use_awaitable);
}

class http_json_provider : public source_provider {
public:
    net::awaitable<std::string> execute(source_call call) override {
        rj::Document cfg;
        cfg.Parse(call.config.c_str());
        std::string base;
        if (!cfg.HasParseError() && cfg.IsObject() && cfg.HasMember("url") &&
            cfg["url"].IsString()) {
            base = cfg["url"].GetString();
        }
        if (base.empty()) throw source_error("http_json: the connection's config has no \"url\"");
        while (!base.empty() && base.back() == '/') base.pop_back();
        parsed_url url = parse_http_url(base + "/" + call.action);
        const auto bearer = call.credentials.count("api_key") ? call.credentials.at("api_key") : "";
        auto r = co_await (http_post(url, call.params, bearer) || sleep_for(call.timeout));
        if (r.index() == 1) {
            throw source_error("http_json: no answer within " +
                               std::to_string(call.timeout.count()) + " s");
        }
        http_outcome o = std::get<0>(std::move(r));
        if (!o.error.empty()) throw source_error("http_json: " + o.error);
        if (o.status < 200 || o.status >= 300) {
            throw source_error("http_json: " + call.action + " answered HTTP " +
                               std::to_string(o.status) + ": " + o.body.substr(0, 500));
        }
        rj::Document check;
        check.Parse(o.body.c_str(), o.body.size());
        if (check.HasParseError()) throw source_error("http_json: the answer is not JSON");
        co_return o.body;
    }
};

class test_provider : public source_provider {
public:
    net::awaitable<std::string> execute(source_call call) override {
        if (call.action == "fail")
            throw source_error("test provider: action \"fail\" always fails");
        std::ostringstream out;
        out << R"({"provider":"test","action":")" << call.action << R"(","params":)" << call.params
            << R"(,"has_api_key":)" << (call.credentials.count("api_key") ? "true" : "false")
            << "}";
        co_return out.str();
    }
};

}  // namespace

std::unique_ptr<source_provider> make_source_provider(const std::string& provider) {
    if (provider == "http_json") return std::make_unique<http_json_provider>();
    if (provider == "test") return std::make_unique<test_provider>();
    return nullptr;
}

}  // namespace awp::runner
