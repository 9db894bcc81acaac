// core::json::parse: every JSON document the daemons read (request bodies, payloads, claims,
// model files). Limits as the callers use them; a parsed document must serialise and parse again.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "awp/core/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace json = awp::core::json;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    for (const auto& limits : {json::kSmall, json::kRequestBody, json::limits{4096, 4}}) {
        try {
            auto d = json::parse(text, limits);
            const auto again = json::to_string(d);
            // What we write, we read back, with the same shape. (Numbers may move by an ulp:
            // RapidJSON 1.1.0's default number parser is not exact on long mantissas, and its
            // full-precision mode has undefined behaviour on "0e-29" (clz(0), found here), so
            // awp keeps the default; docs/security.md.)
            auto round = json::parse(again, json::kDocument);
            if (round.GetType() != d.GetType()) __builtin_trap();
            if (d.IsObject() && round.MemberCount() != d.MemberCount()) __builtin_trap();
            if (d.IsArray() && round.Size() != d.Size()) __builtin_trap();
        } catch (const json::parse_error&) {
        }
    }
    return 0;
}
