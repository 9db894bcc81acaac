// Runtime mode names, including the original product's aliases.
#include "config.hpp"

#include "awp/core/error.hpp"
#include "awp/http/client.hpp"

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
    // A base address: the library's URL rules (http/https, host, port, no user info), and no
    // query, fragment or white space to append paths to.
    if (!http::parse_url(url) || url.find_first_of(" \t\r\n?#") != std::string::npos) {
        throw core::config_error("GATEWAY_API_URL must be an http(s)://host[:port] URL, got \"" +
                                 given + "\"");
    }
    return url;
}

}  // namespace awp::runner
