// HTTP messages as plain values (no Beast in the interface): requests with parsed query,
// cookies and route parameters; responses with JSON and error helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "awp/core/error.hpp"

namespace awp::http {

/// Header fields in arrival order; lookups are case-insensitive.
class headers {
public:
    void add(std::string name, std::string value) {
        fields_.emplace_back(std::move(name), std::move(value));
    }
    /// Replaces every field of that name with one.
    void set(std::string_view name, std::string value);
    void erase(std::string_view name);
    /// The first field of that name.
    [[nodiscard]] std::optional<std::string_view> get(std::string_view name) const;
    [[nodiscard]] bool has(std::string_view name) const { return get(name).has_value(); }
    [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& fields() const noexcept {
        return fields_;
    }

private:
    std::vector<std::pair<std::string, std::string>> fields_;
};

/// A field value's item without the optional whitespace (spaces and tabs, RFC 9110's OWS) around
/// it.
[[nodiscard]] std::string_view trim_ows(std::string_view s) noexcept;

/// A body held in an open file instead of memory. As a response body it is read while it is
/// sent, at most kChunk bytes at a time: a download of any size costs the same memory (exactly
/// `size` bytes are sent; a file that shrinks meanwhile ends the connection). As a request body
/// (route_options::spool_body) it is the unlinked file the server wrote the body to. Owns the
/// descriptor (closed with the last copy).
class file_body {
public:
    static constexpr std::size_t kChunk = 64 * 1024;
    /// As a response body: the `size` bytes from `offset` on (a range of the file).
    file_body(int fd, std::uint64_t size, std::uint64_t offset = 0) noexcept
        : fd_(fd), size_(size), offset_(offset) {}
    ~file_body();
    file_body(const file_body&) = delete;
    file_body& operator=(const file_body&) = delete;
    [[nodiscard]] int fd() const noexcept { return fd_; }
    [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
    [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }

private:
    int fd_;
    std::uint64_t size_;
    std::uint64_t offset_;
};

struct request {
    std::string method;  // "GET", "POST", ...
    std::string target;  // as sent: path and query
    /// target before '?', still percent-encoded; the server checked that every segment decodes
    /// to UTF-8 text (router::match).
    std::string path;
    std::string query;  // after '?', without it, as sent
    /// The query decoded once by the server ('+' is a space), in order. Empty on routes with
    /// route_options::raw_query: their handler reads `query` with its own grammar.
    std::vector<std::pair<std::string, std::string>> query_params;
    headers header;
    std::string body;
    /// On routes with route_options::spool_body: the body, in an unlinked temporary file
    /// (read it with pread from offset 0; `body` is then empty). Null elsewhere.
    std::shared_ptr<file_body> body_file;
    /// The client's address (client_address.hpp): the TCP peer, or behind a trusted proxy
    /// (server_options::trusted_proxies) the address X-Forwarded-For gives for it.
    std::string remote;
    std::string peer;  ///< the TCP peer's address, whatever the headers say
    bool keep_alive = true;
    /// Route parameters: ":name" segments decoded, "*name" tails as sent (still encoded, each
    /// segment checked like the rest of the path).
    std::map<std::string, std::string, std::less<>> params;
    /// What the route's admission (route_options::admit) left for its handler: decisions it
    /// made, resources it holds for the request's life (a slot released when the request goes).
    std::shared_ptr<void> context;

    [[nodiscard]] std::optional<std::string_view> get(std::string_view name) const {
        return header.get(name);
    }
    [[nodiscard]] std::string param(std::string_view name) const;
    /// First query parameter of that name (query_params: decoded, '+' is a space).
    [[nodiscard]] std::optional<std::string> query_param(std::string_view name) const;
    /// Every cookie of the Cookie headers (name → value, first wins).
    [[nodiscard]] std::map<std::string, std::string, std::less<>> cookies() const;
    [[nodiscard]] std::optional<std::string> cookie(std::string_view name) const;
    /// Content-Type without parameters, lower case ("application/json").
    [[nodiscard]] std::string media_type() const;
};

struct response {
    unsigned status = 200;
    /// The status line's reason phrase ("" = the standard one for the status): a dialect whose
    /// clients read it (the data API's statusText) sets its own.
    std::string reason;
    headers header;
    std::string body;
    bool close = false;  // close the connection after this response
    /// When set, the body is this file's content (and `body` is ignored).
    std::shared_ptr<file_body> body_file;

    /// A JSON response from an already serialised body.
    static response json(unsigned status, std::string body);
    /// The error body every awp HTTP service uses: {"error":{"code","message"}}.
    static response error(unsigned status, std::string_view code, std::string_view message);
    static response bytes(unsigned status, std::string content_type, std::string body);
    /// A body streamed from an open regular file (file_body takes the descriptor): `size`
    /// bytes from `offset` on.
    static response file(unsigned status, std::string content_type, int fd, std::uint64_t size,
                         std::uint64_t offset = 0);
};

/// Thrown by handlers to answer with an error body; the server turns it into response::error.
class http_error : public core::error {
public:
    http_error(unsigned status, std::string code, const std::string& message)
        : core::error(message), status_(status), code_(std::move(code)) {}
    [[nodiscard]] unsigned status() const noexcept { return status_; }
    [[nodiscard]] const std::string& code() const noexcept { return code_; }
    /// Extra headers for the error response (Allow, WWW-Authenticate, ...).
    http::headers extra;

private:
    unsigned status_;
    std::string code_;
};

/// Standard reason phrase ("Not Found").
[[nodiscard]] std::string_view reason(unsigned status) noexcept;
/// JSON string literal with quotes and escapes.
[[nodiscard]] std::string json_quote(std::string_view s);
/// Percent-decoding; '+' as space when `plus_is_space`. Nullopt on a malformed escape.
[[nodiscard]] std::optional<std::string> percent_decode(std::string_view s,
                                                        bool plus_is_space = false);
/// Percent-encoding of everything but unreserved characters (RFC 3986).
[[nodiscard]] std::string percent_encode(std::string_view s);
/// "a=1&b=2" → pairs, decoded; a pair with a malformed escape is skipped (form bodies).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> parse_query(std::string_view q);
/// Why decoded bytes cannot be handed on as text ("" when they can): not UTF-8 (RFC 3629, so
/// overlong forms and surrogates are refused too) or a NUL byte, which C strings, libpq
/// parameters and file names would silently cut.
[[nodiscard]] std::string_view text_problem(std::string_view decoded) noexcept;
/// A query string decoded strictly, as the server does once per request: `params` in order
/// ('+' is a space), or `error` naming the first parameter (by position) that has a malformed
/// %-escape or whose name or value is not text (text_problem).
struct decoded_query {
    std::vector<std::pair<std::string, std::string>> params;
    std::string error;  // "" = the whole query decoded
};
[[nodiscard]] decoded_query decode_query(std::string_view q);
/// A Set-Cookie value.
struct cookie_options {
    std::string path = "/";
    long max_age = -1;  // seconds; -1 = session cookie, 0 = delete
    bool http_only = true;
    bool secure = false;
    std::string same_site = "Lax";
};
[[nodiscard]] std::string set_cookie(std::string_view name, std::string_view value,
                                     const cookie_options& o = {});

}  // namespace awp::http
