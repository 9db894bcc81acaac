// source_write providers and credentials.
#include "sources.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

#include <rapidjson/document.h>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/json.hpp"
#include "awp/core/secrets.hpp"

#include "awp/http/client.hpp"

namespace awp::runner {

namespace net = boost::asio;
namespace http = awp::http;
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
    const std::string prefix = core::secrets::source_secret_name(provider, connection_id);
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

class http_json_provider : public source_provider {
public:
    net::awaitable<std::string> execute(source_call call) override {
        std::string base;
        if (auto cfg = core::json::try_parse(call.config, core::json::kPayload)) {
            base = core::json::string_or(*cfg, "url");
        }
        if (base.empty()) throw source_error("http_json: the connection's config has no \"url\"");
        while (!base.empty() && base.back() == '/') base.pop_back();
        const std::string url = base + "/" + call.action;
        const auto parts = http::parse_url(url);
        if (!parts || url.find_first_of(" \t\r\n") != std::string::npos) {
            // Never echo a URL with user info: its password would land in the command row.
            const bool user_info = base.find('@') != std::string::npos;
            throw source_error("http_json: config.url must be an http:// or https:// URL, got " +
                               (user_info
                                    ? std::string("one with user info (credentials belong in the "
                                                  "gateway's secrets, not the URL)")
                                    : "\"" + base + "\""));
        }
        http::client_request req;
        req.method = "POST";
        req.url = url;
        req.header.set("User-Agent", "awp-command-runner");
        req.header.set("Content-Type", "application/json");
        req.header.set("Accept", "application/json");
        if (auto it = call.credentials.find("api_key"); it != call.credentials.end()) {
            req.header.set("Authorization", "Bearer " + it->second);
        }
        req.body = call.params;
        req.timeout = call.timeout;
        req.body_limit = 8 * 1024 * 1024;
        if (call.check) req.check = *call.check;
        http::response o;
        std::string refused;
        try {
            o = co_await http::fetch(std::move(req));
        } catch (const http::outbound_refused& e) {
            refused = e.what();
        } catch (const http::upstream_error& e) {
            if (e.what_kind() == http::upstream_error::kind::timeout) {
                throw source_error("http_json: no answer within " +
                                   std::to_string(call.timeout.count()) + " s");
            }
            throw source_error(std::string("http_json: ") + e.what());
        }
        if (!refused.empty()) {
            throw source_error("http_json: config.url is refused by the outbound policy: " +
                               refused + " (an operator may allow it with OUTBOUND_ALLOW)");
        }
        if (o.status < 200 || o.status >= 300) {
            throw source_error("http_json: " + call.action + " answered HTTP " +
                               std::to_string(o.status) + ": " + o.body.substr(0, 500));
        }
        try {
            (void)core::json::parse(o.body, core::json::kDocument);
        } catch (const core::json::parse_error& e) {
            throw source_error(std::string("http_json: the answer is not JSON: ") + e.what());
        }
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
