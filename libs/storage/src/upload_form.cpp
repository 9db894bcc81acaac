// The upload form (upload_form.hpp) on the streaming multipart reader.
#include "awp/storage/upload_form.hpp"

#include <utility>

#include "awp/http/message.hpp"

namespace awp::storage {

namespace {

[[noreturn]] void bad(const std::string& message) {
    throw http::http_error(400, "bad_multipart", message);
}

}  // namespace

upload_form::upload_form(std::string_view content_type)
    : reader_(http::multipart_boundary(content_type)) {
    reader_.on_part = [this](const http::multipart_reader::part& p) {
        if (++parts_ > kMaxParts) bad("more than " + std::to_string(kMaxParts) + " form parts");
        current_ = into::nothing;
        if (p.filename) {
            // The file: a part with a filename, whatever its field name (storage-js sends "").
            if (fields_.has_file) bad("the form holds more than one file");
            fields_.has_file = true;
            fields_.filename = p.filename;
            fields_.content_type = p.content_type;
            current_ = into::file;
        } else if (p.name && *p.name == "cacheControl") {
            fields_.cache_control.emplace();
            current_ = into::cache_control;
        } else if (p.name && *p.name == "metadata") {
            fields_.metadata.emplace();
            current_ = into::metadata;
        }
    };
    reader_.on_data = [this](std::uint64_t, std::string_view bytes) {
        switch (current_) {
            case into::file:
                fields_.size += bytes.size();
                if (on_file_data) on_file_data(bytes);
                break;
            case into::cache_control:
            case into::metadata: {
                auto& field = current_ == into::metadata ? fields_.metadata : fields_.cache_control;
                if (field->size() + bytes.size() > kMaxFieldBytes) {
                    bad("a form field is longer than " + std::to_string(kMaxFieldBytes) + " bytes");
                }
                field->append(bytes);
                break;
            }
            case into::nothing:
                break;  // another field: not kept
        }
    };
    reader_.on_part_end = [this] { current_ = into::nothing; };
}

void upload_form::feed(std::string_view bytes) { reader_.feed(bytes); }

void upload_form::finish() {
    reader_.finish();
    if (!fields_.has_file) bad("the form holds no file (a part with a filename)");
}

}  // namespace awp::storage
