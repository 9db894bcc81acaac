// The streaming multipart/form-data reader of the agent file upload (awp::http::multipart_reader):
// the body fed whole and fed cut at two points (taken from the input) must give the same parts,
// the same content ranges and the same verdict; only http_error(400, bad_multipart) may escape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "awp/http/message.hpp"
#include "awp/http/multipart.hpp"

namespace {

/// Everything the reader reported, as one string, or the error it threw.
std::string run(std::string_view body, std::size_t cut1, std::size_t cut2) {
    awp::http::multipart_reader r("XyZ");
    std::string log;
    r.on_part = [&](const awp::http::multipart_reader::part& p) {
        log += "[part " + p.name.value_or("-") + " " + p.filename.value_or("-") + "]";
    };
    std::uint64_t next = 0;
    r.on_data = [&](std::uint64_t at, std::string_view bytes) {
        // Pieces of one part are contiguous; the content is what the body holds there.
        if (next != 0 && at != next && log.back() != ']') std::abort();
        if (body.substr(static_cast<std::size_t>(at), bytes.size()) != bytes) std::abort();
        next = at + bytes.size();
        log.append(bytes);
    };
    r.on_part_end = [&] { log += "[end]"; };
    try {
        r.feed(body.substr(0, cut1));
        r.feed(body.substr(cut1, cut2 - cut1));
        r.feed(body.substr(cut2));
        r.finish();
    } catch (const awp::http::http_error& e) {
        if (e.status() != 400 || e.code() != "bad_multipart") std::abort();
        log += "[error " + std::string(e.what()) + "]";
    }
    return log;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
    std::size_t a = data[0] % (body.size() + 1);
    std::size_t b = data[1] % (body.size() + 1);
    if (a > b) std::swap(a, b);
    if (run(body, 0, 0) != run(body, a, b)) std::abort();
    return 0;
}
