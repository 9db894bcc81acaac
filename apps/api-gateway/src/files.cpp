// Agent files: each agent's workspace, the folder its runtime works in:
// <OPENCLAW_STATE_DIR>/workspace-<slug>. Paths are decoded
// once, checked segment by segment, and opened with openat2(RESOLVE_BENEATH) relative to the
// sandbox, so nothing outside it (.., absolute paths, symlinks out, NUL) is read or written.
// Agents of another gateway are served by that gateway's own api-gateway (proxy_to_gateway).
// Why one file: the path rules (clean_path, open_beneath) and the routes that use
// them (GET, POST with multipart, the proxy to another gateway) are one sandbox boundary; keeping
// them together keeps every file access going through the same two functions.
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "awp/core/crypto.hpp"
#include "awp/core/gateway.hpp"
#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "awp/http/multipart.hpp"
#include "awp/storage/content.hpp"
#include "gateway.hpp"
#include "json.hpp"

namespace awp::api {

using http::http_error;

namespace {

/// The folder an agent's files are: the one its runtime works in (docs/runtime.md), in the
/// workspaces folder when one is set, else in the runtime's state folder. The slug follows the
/// schema's rule (no '/', never ".."), so it names one folder.
std::string workspace_of(const gateway_config& cfg, const agent_home& home) {
    return (cfg.workspaces_dir.empty() ? cfg.agents_dir : cfg.workspaces_dir) + "/workspace-" +
           home.slug;
}

/// Marks a request one api-gateway forwarded to another (loop guard).
constexpr std::string_view kProxiedHeader = "X-Awp-Proxied";

class fd_guard {
public:
    explicit fd_guard(int fd = -1) : fd_(fd) {}
    ~fd_guard() {
        if (fd_ >= 0) ::close(fd_);
    }
    fd_guard(fd_guard&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    fd_guard& operator=(fd_guard&& o) noexcept {
        std::swap(fd_, o.fd_);
        return *this;
    }
    [[nodiscard]] int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }

private:
    int fd_;
};

/// openat2 beneath `dir`; falls back to a per-segment O_NOFOLLOW walk where the kernel lacks it.
int open_beneath(int dir, const std::string& rel, int flags, mode_t mode = 0) {
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
    how.mode = (flags & O_CREAT) != 0 ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = ::syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
    // Fallback: no symlinks at all.
    std::size_t start = 0;
    fd_guard cur(::dup(dir));
    for (;;) {
        auto slash = rel.find('/', start);
        const auto seg =
            rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (slash == std::string::npos) {
            return ::openat(cur.get(), seg.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
        }
        int next = ::openat(cur.get(), seg.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) return -1;
        cur = fd_guard(next);
        start = slash + 1;
    }
}

/// Longest name of one path component and of a whole path (Linux's NAME_MAX and PATH_MAX).
constexpr std::size_t kMaxName = 255;
constexpr std::size_t kMaxPath = 4096;

/// The raw (encoded) tail decoded once and checked: segments non-empty, not . or .., without
/// '/', '\\', NUL or other control characters after decoding, valid UTF-8, each at most 255
/// bytes and the whole at most 4096. 400 naming the problem otherwise.
std::string clean_path(std::string_view raw, bool encoded) {
    if (raw.empty()) throw http_error(400, "bad_path", "a file path is required");
    if (raw.size() > 3 * kMaxPath) {
        throw http_error(400, "bad_path",
                         "the path is longer than " + std::to_string(kMaxPath) + " bytes");
    }
    std::string out;
    std::size_t start = 0;
    while (start <= raw.size()) {
        auto slash = raw.find('/', start);
        if (slash == std::string_view::npos) slash = raw.size();
        auto seg_raw = raw.substr(start, slash - start);
        std::optional<std::string> seg =
            encoded ? http::percent_decode(seg_raw) : std::optional<std::string>(seg_raw);
        if (!seg) throw http_error(400, "bad_path", "malformed percent-encoding in the path");
        if (seg->empty() || *seg == "." || *seg == ".." ||
            seg->find_first_of(std::string_view("/\\", 2)) != std::string::npos) {
            throw http_error(400, "bad_path", "the path must stay inside the agent's sandbox");
        }
        if (std::any_of(seg->begin(), seg->end(), [](char ch) {
                const auto u = static_cast<unsigned char>(ch);
                return u < 0x20 || u == 0x7f;
            })) {
            throw http_error(400, "bad_path",
                             "the path contains a NUL or another control character");
        }
        if (!core::json::is_utf8(*seg)) {
            throw http_error(400, "bad_path", "the path is not valid UTF-8");
        }
        if (seg->size() > kMaxName) {
            throw http_error(
                400, "bad_path",
                "a name in the path is longer than " + std::to_string(kMaxName) + " bytes");
        }
        if (!out.empty()) out += '/';
        out += *seg;
        start = slash + 1;
    }
    if (out.size() > kMaxPath) {
        throw http_error(400, "bad_path",
                         "the path is longer than " + std::to_string(kMaxPath) + " bytes");
    }
    return out;
}

/// What kind of thing a non-regular file is, for the 4xx that refuses it.
std::string file_kind(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISDIR(m)) return "a directory";
    return "not a regular file";
}

/// The open() failure as the caller should see it.
http_error open_failure(int err) {
    switch (err) {
        case ELOOP:
            return {403, "not_regular_file", "the path is a symbolic link, which is not followed"};
        case EXDEV:
            return {403, "bad_path", "the path leads outside the agent's sandbox"};
        case ENAMETOOLONG:
            return {400, "bad_path", "the path is too long"};
        case EACCES:
        case EPERM:
            return {403, "forbidden", "the file cannot be read"};
        default:
            return {404, "not_found", "no such file"};
    }
}

/// The request body wherever the server left it: a spooled file (the upload route) or memory.
/// Read a bounded piece at a time; never held whole.
class body_source {
public:
    explicit body_source(const request& r) : r_(r) {}
    [[nodiscard]] std::uint64_t size() const noexcept {
        return r_.body_file ? r_.body_file->size() : r_.body.size();
    }
    /// Up to `n` bytes at `offset`; fewer only at the end (or when the file shrank: 0).
    std::size_t read(std::uint64_t offset, char* out, std::size_t n) const {
        if (!r_.body_file) {
            if (offset >= r_.body.size()) return 0;
            const auto k = std::min<std::uint64_t>(n, r_.body.size() - offset);
            std::memcpy(out, r_.body.data() + offset, static_cast<std::size_t>(k));
            return static_cast<std::size_t>(k);
        }
        for (;;) {
            const auto got = ::pread(r_.body_file->fd(), out, n, static_cast<off_t>(offset));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) throw http_error(500, "internal", "cannot read the uploaded body");
            return static_cast<std::size_t>(got);
        }
    }

private:
    const request& r_;
};

/// Where the file's bytes are within the request body.
struct upload {
    std::string path;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
};

/// multipart/form-data: a "file" part (its filename is the path unless a "path" field is given).
/// One streaming pass over the body in kChunk pieces: the "path" field is kept (it is short:
/// longer is a 400), the file part only as the range of the body it spans, copied later.
upload parse_multipart(const request& r, const body_source& body) {
    http::multipart_reader reader(
        http::multipart_boundary(r.header.get("content-type").value_or("")));
    upload out;
    std::optional<std::string> file_name;
    bool have_file = false;
    enum class into { nothing, path, file } current = into::nothing;
    bool file_started = false;
    reader.on_part = [&](const http::multipart_reader::part& p) {
        current = into::nothing;
        if (p.name && *p.name == "path") {
            current = into::path;
            out.path.clear();
        } else if (p.name && *p.name == "file") {
            current = into::file;
            file_name = p.filename;
            have_file = true;
            file_started = false;
            out.size = 0;
        }
    };
    reader.on_data = [&](std::uint64_t at, std::string_view bytes) {
        if (current == into::path) {
            // Raw bytes: clean_path checks them; more than any valid path can be is refused here.
            if (out.path.size() + bytes.size() > kMaxPath) {
                throw http_error(400, "bad_path",
                                 "the path is longer than " + std::to_string(kMaxPath) + " bytes");
            }
            out.path.append(bytes);
        } else if (current == into::file) {
            if (!file_started) out.offset = at;
            file_started = true;
            out.size += bytes.size();
        }
    };
    reader.on_part_end = [&] {
        if (current == into::file && !file_started) out.offset = 0;
        current = into::nothing;
    };
    std::vector<char> chunk(http::file_body::kChunk);
    std::uint64_t at = 0;
    while (at < body.size() && !reader.done()) {
        const auto n = body.read(at, chunk.data(), chunk.size());
        if (n == 0) break;
        reader.feed(std::string_view(chunk.data(), n));
        at += n;
    }
    reader.finish();
    if (!have_file) throw http_error(422, "invalid_field", "file part is required");
    if (out.path.empty() && file_name) out.path = *file_name;
    if (out.path.empty()) throw http_error(422, "invalid_field", "path is required");
    return out;
}

}  // namespace

net::awaitable<std::optional<std::string>> gateway::own_gateway_id(const principal& p) {
    if (core::is_valid_uuid(cfg_.gateway_id)) co_return cfg_.gateway_id;
    // Per database: a workspace's database has its own gateway rows. A failed lookup is kept
    // for a minute, so agent routes do not pay a second transaction each while unresolvable.
    const auto now = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(gateway_mu_);
        auto it = own_gateway_ids_.find(p.workspace_id);
        if (it != own_gateway_ids_.end() && (it->second.id || now < it->second.retry_at)) {
            co_return it->second.id;
        }
    }
    principal svc;
    svc.who = principal::kind::service;  // the request's database, as the service role
    svc.workspace_id = p.workspace_id;
    svc.workspace_url = p.workspace_url;
    std::optional<std::string> found;
    try {
        // The one rule that names a gateway by id or slug (sql/0018, core::gateway).
        auto t = co_await db_->begin(svc);
        auto r = co_await t.query_and_commit(core::gateway::kResolveSql, cfg_.gateway_id,
                                             std::optional<std::string>());
        if (r.size() == 1) found = r.get<std::string>(0, 0);
    } catch (const std::exception&) {
        found.reset();  // no such gateway here, or the database is away: decide by slug
    }
    std::lock_guard lock(gateway_mu_);
    own_gateway_ids_[p.workspace_id] = {found, now + std::chrono::seconds(60)};
    co_return found;
}

net::awaitable<agent_home> gateway::locate_agent(principal p, std::string slug) {
    auto t = co_await db_->begin(p);
    auto rows = co_await t.query_and_commit(
        // The address comes from the gateway runner's heartbeat: a row only daemons write, so
        // no user can point another gateway's traffic (and its bearer tokens) elsewhere.
        "SELECT a.tenant_id::text, a.slug, a.config::text, g.id::text, g.slug, "
        "(SELECT h.meta->>'api_url' FROM public.daemon_heartbeats h WHERE h.gateway_id = g.id "
        "AND h.daemon = 'command-runner' AND h.meta ? 'api_url' "
        "ORDER BY h.last_seen_at DESC LIMIT 1) "
        "FROM public.agents a LEFT JOIN public.gateways g "
        "ON g.tenant_id = a.tenant_id AND g.id = a.gateway_id WHERE a.slug = $1",
        slug);
    if (rows.empty()) throw http_error(404, "not_found", "agent not found");
    agent_home a;
    a.tenant_id = rows.get<std::string>(0, 0);
    a.slug = rows.get<std::string>(0, 1);
    a.config_json = rows.get<std::string>(0, 2);
    if (auto gid = rows.get_optional<std::string>(0, 3)) {
        a.gateway_slug = rows.get<std::string>(0, 4);
        // Local means this host's gateway by id: GATEWAY_ID resolved once (a slug can be
        // renamed and taken by another tenant later; the id cannot), by slug only until then.
        const auto own = co_await own_gateway_id(p);
        a.local = own ? *gid == *own : a.gateway_slug == cfg_.gateway_id;
        a.api_url = rows.get_optional<std::string>(0, 5).value_or("");
    }
    co_return a;
}

net::awaitable<response> gateway::proxy_to_gateway(request r, agent_home a) {
    // A proxied request is never proxied again: two gateways that each think the other hosts
    // the agent would otherwise bounce it between them until a timeout.
    if (r.header.has(kProxiedHeader)) {
        throw http_error(502, "proxy_loop",
                         "the agent's gateway '" + a.gateway_slug +
                             "' is not served here and the request was already forwarded once");
    }
    auto base = a.api_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    if (base.empty()) {
        throw http_error(502, "gateway_unreachable",
                         "gateway '" + a.gateway_slug + "' has registered no api address");
    }
    if (!http::parse_url(base)) {
        throw http_error(502, "gateway_unreachable",
                         "gateway '" + a.gateway_slug + "' registered an api address that is " +
                             "not an http(s):// URL");
    }
    http::client_request up;
    // HEAD is answered by GET routes; ask for GET so the answer has a body to read.
    up.method = r.method == "HEAD" ? "GET" : r.method;
    up.url = base + r.target;
    // The caller's credentials and the request's own data, nothing else.
    if (auto auth = r.header.get("authorization")) {
        up.header.add("Authorization", std::string(*auth));
    } else if (auto token = token_from_cookies(r); !token.empty()) {
        up.header.add("Authorization", "Bearer " + token);
    }
    if (auto ct = r.header.get("content-type")) up.header.add("Content-Type", std::string(*ct));
    if (auto fp = r.header.get("x-file-path")) up.header.add("X-File-Path", std::string(*fp));
    up.header.add(std::string(kProxiedHeader), "1");
    if (r.body_file) {
        // The proxy still sends one buffer: the body, at most the upload limit, is read back
        // from the spool file into memory (only for agents of another gateway).
        const body_source src(r);
        up.body.resize(static_cast<std::size_t>(src.size()));
        std::size_t got = 0;
        while (got < up.body.size()) {
            const auto n = src.read(got, up.body.data() + got, up.body.size() - got);
            if (n == 0) throw http_error(500, "internal", "cannot read the uploaded body");
            got += n;
        }
    } else {
        up.body = std::move(r.body);
    }
    up.timeout = std::chrono::milliseconds(static_cast<long>(cfg_.proxy_timeout_s * 1000));
    std::optional<response> answer;
    std::optional<http::upstream_error::kind> failure;
    try {
        answer = co_await http::fetch(std::move(up));
    } catch (const http::upstream_error& e) {
        failure = e.what_kind();
        core::log::warn("proxy to gateway failed",
                        {{"gateway", a.gateway_slug}, {"agent", a.slug}, {"error", e.what()}});
    }
    if (failure) {
        if (*failure == http::upstream_error::kind::timeout) {
            throw http_error(504, "gateway_timeout",
                             "gateway '" + a.gateway_slug + "' did not answer in time");
        }
        throw http_error(502, "gateway_unreachable",
                         "gateway '" + a.gateway_slug + "' is unreachable");
    }
    response out;
    out.status = answer->status;
    // The type and how the remote gateway wants it shown (attachment + sandbox for active
    // content) travel with the body; nothing else does.
    for (const char* name : {"Content-Type", "Content-Disposition", "Content-Security-Policy"}) {
        if (auto v = answer->header.get(name)) out.header.add(name, std::string(*v));
    }
    out.body = std::move(answer->body);
    co_return out;
}

net::awaitable<response> gateway::files_get(request r) {
    auto p = require_session(r);
    auto home = co_await locate_agent(p, r.param("slug"));
    if (!home.local) {
        auto proxied = co_await proxy_to_gateway(std::move(r), std::move(home));
        co_return proxied;
    }
    const auto root = workspace_of(cfg_, home);
    const auto raw = r.param("path");
    // A bad name is a 400 whether or not the sandbox exists yet.
    const std::string rel = raw.empty() ? std::string() : clean_path(raw, true);
    fd_guard rootfd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (rootfd.get() < 0) {
        if (raw.empty()) co_return response::json(200, R"({"path":"","entries":[]})");
        throw http_error(404, "not_found", "no such file");
    }
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it would stall this I/O thread
    // and every request on it); O_NOFOLLOW: a symbolic link is not a file to serve. What was
    // opened is looked at (fstat) before a byte is read.
    constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
    fd_guard fd(rel.empty() ? ::openat(rootfd.get(), ".", kFlags | O_DIRECTORY | O_CLOEXEC)
                            : open_beneath(rootfd.get(), rel, kFlags));
    if (fd.get() < 0) {
        const int err = errno;
        if (err == ENXIO || err == ENODEV) {
            // A socket (or a device without a driver) cannot be opened for reading: look at
            // what it is without opening it for I/O, to say so.
            fd_guard path(open_beneath(rootfd.get(), rel, O_PATH | O_NOFOLLOW));
            struct stat ps {};
            if (path.get() >= 0 && ::fstat(path.get(), &ps) == 0) {
                throw http_error(403, "not_regular_file",
                                 "the path is " + file_kind(ps.st_mode) + ", not a regular file");
            }
        }
        throw open_failure(err);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw http_error(404, "not_found", "no such file");
    if (S_ISDIR(st.st_mode)) {
        DIR* d = ::fdopendir(::dup(fd.get()));
        if (!d) throw http_error(500, "internal", "cannot list the directory");
        json_out o;
        o.w.StartObject();
        o.kv("path", rel);
        o.key("entries");
        o.w.StartArray();
        while (auto* e = ::readdir(d)) {
            std::string name = e->d_name;
            if (name == "." || name == "..") continue;
            // A name that is not UTF-8 cannot be written in JSON nor asked for again.
            if (!core::json::is_utf8(name)) continue;
            struct stat es {};
            if (::fstatat(fd.get(), name.c_str(), &es, AT_SYMLINK_NOFOLLOW) != 0) continue;
            o.w.StartObject();
            o.kv("name", name);
            o.kv("type", S_ISDIR(es.st_mode) ? "dir" : S_ISREG(es.st_mode) ? "file" : "other");
            o.key("size");
            o.w.Int64(static_cast<std::int64_t>(es.st_size));
            o.w.EndObject();
        }
        ::closedir(d);
        o.w.EndArray();
        o.w.EndObject();
        co_return response::json(200, o.str());
    }
    if (!S_ISREG(st.st_mode)) {
        throw http_error(403, "not_regular_file",
                         "the path is " + file_kind(st.st_mode) + ", not a regular file");
    }
    // The descriptor goes to the response: the server sends the file in bounded chunks.
    const auto type = storage::content_type_for(rel);
    auto res = response::file(200, type, fd.release(), static_cast<std::uint64_t>(st.st_size));
    if (storage::inline_safe(type)) {
        res.header.set("Content-Disposition", storage::disposition("inline", rel));
    } else {
        // Active content (HTML, SVG, XML, scripts, unknown types) never runs under the API's
        // origin: a download, and a sandbox should a browser render it anyway.
        res.header.set("Content-Disposition", storage::disposition("attachment", rel));
        res.header.set("Content-Security-Policy", "sandbox");
    }
    co_return res;
}

net::awaitable<response> gateway::files_post(request r) {
    auto p = require_session(r);
    auto home = co_await locate_agent(p, r.param("slug"));
    if (!home.local) {
        auto proxied = co_await proxy_to_gateway(std::move(r), std::move(home));
        co_return proxied;
    }
    const body_source body(r);
    upload up;
    if (r.media_type() == "multipart/form-data") {
        up = parse_multipart(r, body);
    } else {
        auto q = r.query_param("path");
        if (!q) {
            if (auto h = r.header.get("x-file-path")) q = std::string(*h);
        }
        if (!q || q->empty()) throw http_error(422, "invalid_field", "path is required");
        up.path = *q;
        up.size = body.size();
    }
    if (up.size > cfg_.upload_limit) {
        throw http_error(413, "body_too_large", "the file exceeds the upload limit");
    }
    const auto rel = clean_path(up.path, false);
    const auto root = workspace_of(cfg_, home);
    // A workspaces folder shared with the agent user's group: what is written here is theirs too.
    const bool shared = !cfg_.workspaces_dir.empty();
    std::error_code ec;
    std::filesystem::create_directories(root, ec);
    fd_guard dir(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() < 0) throw http_error(500, "internal", "the sandbox is not available");
    // Walk and create the parent directories beneath the sandbox.
    std::size_t start = 0;
    for (;;) {
        auto slash = rel.find('/', start);
        if (slash == std::string::npos) break;
        const auto seg = rel.substr(start, slash - start);
        ::mkdirat(dir.get(), seg.c_str(), shared ? 0770 : 0700);
        int next = open_beneath(dir.get(), seg, O_PATH | O_DIRECTORY | O_NOFOLLOW);
        if (next < 0) throw http_error(400, "bad_path", "a parent of the path is not a directory");
        dir = fd_guard(next);
        start = slash + 1;
    }
    const auto name = rel.substr(start);
    const auto tmp = ".upload-" + core::crypto::hex_encode(core::crypto::random_bytes(8));
    fd_guard out(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                          shared ? 0660 : 0600));
    if (out.get() < 0) throw http_error(500, "internal", "cannot write the file");
    // Copied a bounded chunk at a time from the body (the spool file) to the new file.
    std::vector<char> chunk(http::file_body::kChunk);
    std::uint64_t copied = 0;
    while (copied < up.size) {
        const auto want =
            static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), up.size - copied));
        const auto got = body.read(up.offset + copied, chunk.data(), want);
        bool failed = got == 0;
        for (std::size_t off = 0; !failed && off < got;) {
            auto n = ::write(out.get(), chunk.data() + off, got - off);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                failed = true;
                break;
            }
            off += static_cast<std::size_t>(n);
        }
        if (failed) {
            ::unlinkat(dir.get(), tmp.c_str(), 0);
            throw http_error(500, "internal", "cannot write the file");
        }
        copied += got;
    }
    ::fsync(out.get());
    struct stat target {};
    if (::fstatat(dir.get(), name.c_str(), &target, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(target.st_mode)) {
        ::unlinkat(dir.get(), tmp.c_str(), 0);
        throw http_error(409, "conflict", "a directory exists at that path");
    }
    if (::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
        ::unlinkat(dir.get(), tmp.c_str(), 0);
        throw http_error(500, "internal", "cannot write the file");
    }
    json_out o;
    o.w.StartObject();
    o.kv("path", rel);
    o.key("size");
    o.w.Uint64(up.size);
    o.kv("contentType", storage::content_type_for(rel));
    o.w.EndObject();
    co_return response::json(201, o.str());
}

}  // namespace awp::api
