// The session cookie readers of awp-api-gateway: the awp cookie and the @supabase/ssr formats
// (chunked .0/.1, "base64-" prefix, URL-encoded JSON session, arrays).
#include <cstddef>
#include <cstdint>
#include <string>

#include "gateway.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    awp::http::request r;
    r.header.add("Cookie", std::string(reinterpret_cast<const char*>(data), size));
    (void)awp::api::token_from_cookies(r);
    return 0;
}
