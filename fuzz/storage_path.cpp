// The rules of /storage/v1 that read outside bytes before anything else (libs/storage): a
// request path's tail split into a bucket and a name, the name rules, a Range header, the
// sniffer and the serving decision. None may crash or throw; a name they accept must hold none
// of the characters the rules refuse (checked again here byte by byte), and an accepted range
// must lie inside the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "awp/storage/content.hpp"
#include "awp/storage/names.hpp"
#include "awp/storage/range.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const auto p = awp::storage::split_object_path(in);
    if (p.problem.empty()) {
        const std::string_view name = p.name;
        if (name.empty() || name.front() == '/' || name.back() == '/') std::abort();
        if (name.find("//") != std::string_view::npos) std::abort();
        if (name == ".." || name.starts_with("../") || name.ends_with("/..") ||
            name.find("/../") != std::string_view::npos) {
            std::abort();
        }
        for (const char c : name) {
            const auto u = static_cast<unsigned char>(c);
            if (u < 0x20 || u == 0x7F || c == '\\') std::abort();
        }
        if (name.size() > awp::storage::kMaxNameBytes) std::abort();
        if (!awp::storage::bucket_name_problem(p.bucket).empty()) std::abort();
    }
    (void)awp::storage::object_name_problem(in);
    (void)awp::storage::prefix_problem(in);
    const std::uint64_t file_size = size == 0 ? 0 : data[0] * 977ULL;
    const auto r = awp::storage::parse_range(in, file_size);
    if (r.what == awp::storage::byte_range::kind::partial) {
        if (r.first > r.last || r.last >= file_size) std::abort();
    }
    const auto sniffed = awp::storage::sniff(in.substr(0, awp::storage::kSniffBytes));
    const auto served = awp::storage::serve(in, sniffed);
    for (const char c : served.content_type) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7F) std::abort();  // it goes into a header
    }
    if (served.inline_ok && !awp::storage::inline_safe(served.content_type)) std::abort();
    (void)awp::storage::parse_size(in);
    (void)awp::storage::mime_allowed(in, {"image/*", "text/plain"});
    return 0;
}
