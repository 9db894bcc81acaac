// What a stored file is served as, written once for every route that hands a user's file to a
// browser (/storage/v1 objects and the agent files of /api/agents/:slug/files): the type a file
// name suggests, what bytes look like (sniffing), which types a browser may show inline under the
// API's origin (none of them runs script), and the Content-Disposition that names a file.
// Everything else is a download in a sandbox (docs/security.md, "Storage").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace awp::storage {

/// The type a file name's extension suggests (".png" → image/png); application/octet-stream
/// for anything else. The agent files route serves by name.
[[nodiscard]] std::string content_type_for(std::string_view path);

/// Types a browser may show under the API's origin: none of them runs script (plain text,
/// Markdown, CSV, JSON, PNG, JPEG, GIF, WebP, PDF, MP3, MP4, WebM, Ogg, WAV). HTML, SVG, XML,
/// JavaScript and anything unknown are not. Takes a Content-Type with or without parameters.
[[nodiscard]] bool inline_safe(std::string_view content_type);

/// `kind` ("inline" or "attachment") with the file's name: an ASCII fallback and RFC 5987's
/// filename*. `name` may be a path: its last segment is used.
[[nodiscard]] std::string disposition(std::string_view kind, std::string_view name);

/// How many leading bytes sniff() looks at.
inline constexpr std::size_t kSniffBytes = 512;

/// What the first bytes of a file are, by their signature: image/png, image/jpeg, image/gif,
/// image/webp, application/pdf, application/zip, application/gzip, audio/mpeg, audio/ogg,
/// audio/wav, video/mp4, video/webm; text/html for markup a browser would run (HTML tags, a
/// <script>, <svg> is image/svg+xml, <?xml is application/xml); text/plain for UTF-8 text
/// without other control characters than tab, newlines, form feed and escape;
/// application/octet-stream otherwise. An empty file is text/plain.
[[nodiscard]] std::string sniff(std::string_view head);

/// The media type of a Content-Type ("Image/PNG; q=1" → "image/png"); "" when it is not
/// type/subtype of token characters (or longer than 255 bytes).
[[nodiscard]] std::string media_type(std::string_view content_type);

/// How a stored file is sent: its Content-Type and whether a browser may show it inline.
struct served_as {
    std::string content_type;
    bool inline_ok = false;
};
/// The declared type (what the uploader said) is sent when it is a media type, else
/// application/octet-stream. It is shown inline only when the declared type is inline_safe and
/// the bytes agree: an image or PDF must carry its own signature, a text type must sniff as
/// text. Otherwise the file is a download (attachment, CSP sandbox): a type is never trusted
/// for inline serving on the uploader's word.
[[nodiscard]] served_as serve(std::string_view declared, std::string_view sniffed);

/// Whether `content_type`'s media type is one of `allowed` (exact, or "type/*", or "*/*"; case
/// does not matter). An empty list allows every type.
[[nodiscard]] bool mime_allowed(std::string_view content_type,
                                const std::vector<std::string>& allowed);
/// Why `pattern` cannot be an entry of a bucket's allowed_mime_types ("" when it can).
[[nodiscard]] std::string mime_pattern_problem(std::string_view pattern);

/// A bucket's file_size_limit written as the platform accepts it: "20GB", "1.5MB", "30KB",
/// "3B" (decimal units; case does not matter). nullopt when it is not one.
[[nodiscard]] std::optional<std::uint64_t> parse_size(std::string_view text);

}  // namespace awp::storage
