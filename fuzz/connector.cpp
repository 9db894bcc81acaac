// Source connector manifests (<dir>/connector.json) as the gateway loads them.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "awp/core/error.hpp"
#include "connectors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const awp::api::env_lookup env = [](const std::string& name) -> std::optional<std::string> {
        if (name == "SET") return std::string("value");
        return std::nullopt;
    };
    try {
        (void)awp::api::parse_connector(text, "fuzz", env);
    } catch (const awp::core::error&) {
    }
    return 0;
}
