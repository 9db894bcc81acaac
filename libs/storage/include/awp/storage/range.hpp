// Range requests of a download (RFC 9110, 14): one byte range of a stored file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace awp::storage {

struct byte_range {
    enum class kind {
        whole,          ///< no Range, or one the server may ignore (several ranges, another unit,
                        ///< a malformed header): the whole file, 200
        partial,        ///< first..last (inclusive), 206
        unsatisfiable,  ///< a valid range that starts past the end: 416
    };
    kind what = kind::whole;
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    [[nodiscard]] std::uint64_t length() const noexcept { return last - first + 1; }
};

/// The range `header` asks of a file of `size` bytes: "bytes=a-b", "bytes=a-" and "bytes=-n"
/// (the last n). A last position past the end is cut to the end; "-0" and a first position at
/// or past the end are unsatisfiable. Anything else is ignored (kind::whole), as RFC 9110
/// allows: several ranges, other units, garbage.
[[nodiscard]] byte_range parse_range(std::optional<std::string_view> header, std::uint64_t size);

/// "bytes first-last/size" for a 206, "bytes */size" for a 416.
[[nodiscard]] std::string content_range(const byte_range& r, std::uint64_t size);

}  // namespace awp::storage
