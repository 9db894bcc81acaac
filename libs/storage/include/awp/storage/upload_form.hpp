// The multipart/form-data body of an upload, as @supabase/storage-js sends a Blob or a File:
// one file part (any field name, a filename) and the fields cacheControl and metadata. Built on
// http::multipart_reader: bytes go in as they come and the file's bytes come out as they are
// found, so a body of any size is read once, in constant memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "awp/http/multipart.hpp"

namespace awp::storage {

class upload_form {
public:
    /// Longest field value kept (cacheControl, metadata); a longer one is a 400.
    static constexpr std::size_t kMaxFieldBytes = 64 * 1024;
    /// Most parts one form may have.
    static constexpr std::size_t kMaxParts = 16;

    struct fields {
        std::optional<std::string> content_type;  ///< the file part's Content-Type
        std::optional<std::string> filename;      ///< the file part's filename
        std::optional<std::string> cache_control;
        std::optional<std::string> metadata;  ///< the metadata field (JSON text, unchecked)
        std::uint64_t size = 0;               ///< bytes of the file
        bool has_file = false;
    };

    /// Throws http_error(400, "bad_multipart") when `content_type` names no boundary.
    explicit upload_form(std::string_view content_type);

    /// The file's bytes, in order, as they are found.
    std::function<void(std::string_view)> on_file_data;

    /// The next bytes of the body. Throws http_error(400, "bad_multipart") on malformed input, a
    /// second file part, too many parts or a field above kMaxFieldBytes.
    void feed(std::string_view bytes);
    /// The body ended: throws http_error(400, "bad_multipart") unless it was a complete form
    /// with a file part.
    void finish();
    [[nodiscard]] const fields& form() const noexcept { return fields_; }

private:
    enum class into { nothing, file, cache_control, metadata };
    http::multipart_reader reader_;
    fields fields_;
    into current_ = into::nothing;
    std::size_t parts_ = 0;
};

}  // namespace awp::storage
