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

}  // namespace awp::runner
