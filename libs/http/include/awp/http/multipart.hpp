// A streaming multipart/form-data reader: bytes go in as they come, in chunks of any size (a
// delimiter may straddle two chunks), and the parts come out as events, so a body of any size
// is read in constant memory. Malformed input throws http_error(400, "bad_multipart").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace awp::http {

/// The boundary of a multipart Content-Type ("multipart/form-data; boundary=XyZ"), unquoted;
/// 400 bad_multipart when it has none.
[[nodiscard]] std::string multipart_boundary(std::string_view content_type);

class multipart_reader {
public:
    /// Longest part header block accepted.
    static constexpr std::size_t kMaxPartHeaders = 16 * 1024;

    struct part {
        std::optional<std::string> name;          // Content-Disposition name="..."
        std::optional<std::string> filename;      // Content-Disposition filename="..."
        std::optional<std::string> content_type;  // the part's Content-Type, as sent (trimmed)
    };
    /// A part starts (its headers read).
    std::function<void(const part&)> on_part;
    /// Bytes of the current part's content; `offset` is where they are in the whole body (the
    /// content of a part is one contiguous range).
    std::function<void(std::uint64_t offset, std::string_view bytes)> on_data;
    /// The current part's content is complete.
    std::function<void()> on_part_end;

    explicit multipart_reader(std::string boundary);
    /// The next bytes of the body.
    void feed(std::string_view bytes);
    /// The body ended: throws unless the closing delimiter was seen.
    void finish();
    [[nodiscard]] bool done() const noexcept { return state_ == state::done; }

private:
    enum class state { preamble, after_delimiter, headers, content, done };
    void run();

    std::string delimiter_;  // "--" boundary
    std::string next_;       // "\r\n--" boundary: ends a part's content
    std::string pending_;    // bytes not yet decided on (at most a delimiter's length, or headers)
    std::uint64_t pending_at_ = 0;  // offset of pending_[0] in the body
    state state_ = state::preamble;
};

}  // namespace awp::http
