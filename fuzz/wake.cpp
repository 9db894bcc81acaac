// The wake relay's parsers of outside bytes (core/wake.hpp): the lines a host reads from the
// relay, the awp_wake payloads anyone may NOTIFY, and the Authorization header of a stream
// request, and the gateway key a pool login's host sends in Awp-Gateway-Key (pg::is_gateway_key).
// A line that parses as a wake-up must format back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "awp/core/pg.hpp"
#include "awp/core/wake.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    namespace wake = awp::core::wake;
    if (const auto l = wake::parse_line(text); l && l->what == wake::line::kind::wake) {
        const std::string back = wake::format_wake(*l);
        if (back.substr(0, back.size() - 1) != text) std::abort();
        if (!wake::parse_channel(l->channel)) std::abort();
    }
    if (const auto l = wake::parse_notify_payload(text)) {
        if (l->channel.find('\n') != std::string::npos ||
            l->payload.find('\n') != std::string::npos)
            std::abort();
    }
    if (const auto c = wake::parse_basic_credentials(text)) {
        if (c->user.empty() || c->user.find(':') != std::string::npos) std::abort();
    }
    if (awp::core::pg::is_gateway_key(text)) {
        // Exactly the shape the database checks: 81 characters of the key's alphabet.
        if (text.size() != 81 || text.substr(0, 5) != "awpk_" || text[37] != '_') std::abort();
        for (const char c : text) {
            const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                            (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
            if (!ok) std::abort();
        }
    }
    return 0;
}
