// Runtime mode names, including the original product's aliases.
#include "config.hpp"

#include "awp/core/error.hpp"

namespace awp::runner {

runtime_mode parse_runtime_mode(const std::string& text) {
    if (text == "container" || text == "docker") return runtime_mode::container;
    if (text == "service_manager" || text == "systemd") return runtime_mode::service_manager;
    throw core::config_error(
        "RUNTIME_MODE must be container or service_manager (aliases docker, systemd), got \"" +
        text + "\"");
}

const char* to_string(runtime_mode m) noexcept {
    return m == runtime_mode::container ? "container" : "service_manager";
}

std::string normalize_api_url(std::string given) {
    std::string url = given;
    while (!url.empty() && url.back() == '/') url.pop_back();
    if (given.empty()) return url;
    const auto scheme = url.find("://");
    const auto rest = scheme == std::string::npos ? std::string() : url.substr(scheme + 3);
    const auto host = rest.substr(0, rest.find('/'));
    const bool ok = (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) &&
                    !host.empty() && host.front() != ':' &&
                    url.find_first_of(" \t\r\n@?#") == std::string::npos;
    if (!ok) {
        throw core::config_error("GATEWAY_API_URL must be an http(s)://host[:port] URL, got \"" +
                                 given + "\"");
    }
    return url;
}

}  // namespace awp::runner
