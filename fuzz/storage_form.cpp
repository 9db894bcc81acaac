// The upload form of /storage/v1 (awp::storage::upload_form over the multipart reader): the body
// fed whole and fed cut at two points (taken from the input) must give the same file bytes, the
// same fields and the same verdict; only http_error(400, bad_multipart) may escape, and no field
// kept may pass its bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "awp/http/message.hpp"
#include "awp/storage/upload_form.hpp"

namespace {

std::string run(std::string_view body, std::size_t cut1, std::size_t cut2) {
    std::string log;
    try {
        awp::storage::upload_form f("multipart/form-data; boundary=XyZ");
        std::string file;
        f.on_file_data = [&](std::string_view b) { file.append(b); };
        f.feed(body.substr(0, cut1));
        f.feed(body.substr(cut1, cut2 - cut1));
        f.feed(body.substr(cut2));
        f.finish();
        const auto& x = f.form();
        if (x.size != file.size()) std::abort();
        for (const auto* v : {&x.cache_control, &x.metadata}) {
            if (*v && (*v)->size() > awp::storage::upload_form::kMaxFieldBytes) std::abort();
        }
        log = "file=" + file + "|type=" + x.content_type.value_or("-") +
              "|cc=" + x.cache_control.value_or("-") + "|md=" + x.metadata.value_or("-");
    } catch (const awp::http::http_error& e) {
        if (e.status() != 400 || e.code() != "bad_multipart") std::abort();
        log = "[error]";
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
