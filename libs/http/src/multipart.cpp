// The streaming multipart/form-data reader: a small state machine over a carry buffer that
// holds only what cannot be decided yet (a possible delimiter at the end of a chunk, or a part's
// headers), so memory stays bounded by the chunk size plus kMaxPartHeaders.
#include "awp/http/multipart.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

#include "awp/http/message.hpp"

namespace awp::http {

namespace {

[[noreturn]] void bad(const std::string& message) {
    throw http_error(400, "bad_multipart", message);
}

/// key="value" in a part's header block (Content-Disposition parameters).
std::optional<std::string> attribute(const std::string& heads, const std::string& key) {
    auto k = heads.find(key + "=\"");
    if (k == std::string::npos) return std::nullopt;
    auto e = heads.find('"', k + key.size() + 2);
    if (e == std::string::npos) return std::nullopt;
    return heads.substr(k + key.size() + 2, e - k - key.size() - 2);
}

/// The value of header `name` (lower case) in a part's header block, trimmed; the first wins.
std::optional<std::string> header_value(const std::string& heads, std::string_view name) {
    std::size_t at = 0;
    while (at <= heads.size()) {
        auto eol = heads.find("\r\n", at);
        if (eol == std::string::npos) eol = heads.size();
        const std::string_view line(heads.data() + at, eol - at);
        const auto colon = line.find(':');
        if (colon == name.size() &&
            std::equal(name.begin(), name.end(), line.begin(), [](char n, char c) {
                return n == static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            })) {
            auto v = line.substr(colon + 1);
            while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
            while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
            return std::string(v);
        }
        at = eol + 2;
    }
    return std::nullopt;
}

}  // namespace

std::string multipart_boundary(std::string_view content_type) {
    auto b = content_type.find("boundary=");
    if (b == std::string_view::npos) bad("multipart boundary missing");
    std::string boundary(content_type.substr(b + 9));
    if (auto semi = boundary.find(';'); semi != std::string::npos) boundary.resize(semi);
    if (boundary.size() >= 2 && boundary.front() == '"')
        boundary = boundary.substr(1, boundary.size() - 2);
    if (boundary.empty()) bad("multipart boundary missing");
    return boundary;
}

multipart_reader::multipart_reader(std::string boundary)
    : delimiter_("--" + boundary), next_("\r\n--" + boundary) {}

void multipart_reader::feed(std::string_view bytes) {
    if (state_ == state::done) {
        pending_at_ += bytes.size();  // the epilogue: ignored
        return;
    }
    pending_.append(bytes);
    run();
}

void multipart_reader::run() {
    auto consume = [this](std::size_t n) {
        pending_.erase(0, n);
        pending_at_ += n;
    };
    for (;;) {
        switch (state_) {
            case state::preamble: {
                const auto at = pending_.find(delimiter_);
                if (at == std::string::npos) {
                    // Keep what could be the start of a delimiter cut by the chunk's end.
                    consume(pending_.size() - std::min(pending_.size(), delimiter_.size() - 1));
                    return;
                }
                consume(at + delimiter_.size());
                state_ = state::after_delimiter;
                break;
            }
            case state::after_delimiter:
                if (pending_.size() < 2) return;
                if (pending_.compare(0, 2, "--") == 0) {
                    consume(pending_.size());
                    state_ = state::done;
                    return;
                }
                if (pending_.compare(0, 2, "\r\n") != 0) bad("malformed part");
                consume(2);
                state_ = state::headers;
                break;
            case state::headers: {
                const auto end = pending_.find("\r\n\r\n");
                if (end == std::string::npos || end > kMaxPartHeaders) {
                    if (pending_.size() > kMaxPartHeaders + 3) {
                        bad("part headers longer than " + std::to_string(kMaxPartHeaders) +
                            " bytes");
                    }
                    return;
                }
                const std::string heads = pending_.substr(0, end);
                consume(end + 4);
                part p;
                p.name = attribute(heads, " name");
                if (!p.name) p.name = attribute(heads, ";name");
                p.filename = attribute(heads, "filename");
                p.content_type = header_value(heads, "content-type");
                state_ = state::content;
                if (on_part) on_part(p);
                break;
            }
            case state::content: {
                const auto at = pending_.find(next_);
                const auto emit =
                    at != std::string::npos
                        ? at
                        : pending_.size() - std::min(pending_.size(), next_.size() - 1);
                if (emit > 0 && on_data)
                    on_data(pending_at_, std::string_view(pending_).substr(0, emit));
                if (at == std::string::npos) {
                    consume(emit);
                    return;
                }
                consume(at + next_.size());
                state_ = state::after_delimiter;
                if (on_part_end) on_part_end();
                break;
            }
            case state::done:
                consume(pending_.size());
                return;
        }
    }
}

void multipart_reader::finish() {
    switch (state_) {
        case state::preamble:
            bad("no multipart parts");
        case state::after_delimiter:
            bad("malformed part");
        case state::headers:
            bad("malformed part headers");
        case state::content:
            bad("unterminated part");
        case state::done:
            return;
    }
}

}  // namespace awp::http
