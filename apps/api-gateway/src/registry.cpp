// Workspace registry files and the /api/workspaces routes.
// Why one file: the registry's file format and locking (first half) and the
// /api/workspaces routes over it (second half) change together: each route is a thin call into
// the registry plus the probes the add/validate routes run.
#include "registry.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"
#include "awp/core/migrate.hpp"
#include "awp/core/time.hpp"
#include "awp/core/uuid.hpp"
#include "gateway.hpp"
#include "json.hpp"
#include "sessions.hpp"

namespace awp::api {

namespace fs = std::filesystem;
using http::http_error;

namespace {

constexpr const char* kRegistryFile = "workspaces.json";
constexpr const char* kSecretsFile = "secrets.json";

/// Exclusive (or shared) flock on <dir>/.registry.lock for the life of the object.
class dir_lock {
public:
    dir_lock(const std::string& dir, bool exclusive) {
        std::error_code ec;
        fs::create_directories(dir, ec);
        ::chmod(dir.c_str(), 0700);
        fd_ = ::open((dir + "/.registry.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd_ < 0)
            throw registry_error("cannot open the registry lock: " +
                                 std::string(std::strerror(errno)));
        while (::flock(fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
            if (errno != EINTR) {
                ::close(fd_);
                throw registry_error("cannot lock the registry");
            }
        }
    }
    ~dir_lock() {
        ::flock(fd_, LOCK_UN);
        ::close(fd_);
    }
    dir_lock(const dir_lock&) = delete;
    dir_lock& operator=(const dir_lock&) = delete;

private:
    int fd_ = -1;
};

/// The file parsed; an empty document (object) when it does not exist; registry_error when
/// it exists but is not a JSON object of the expected version.
rapidjson::Document read_json(const std::string& path) {
    rapidjson::Document d;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            d.SetObject();
            return d;
        }
        throw registry_error("cannot read " + path + ": " + std::strerror(errno));
    }
    std::string text;
    char buf[65536];
    for (;;) {
        auto n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    try {
        d = core::json::parse_object(text, core::json::kDocument);
    } catch (const core::json::parse_error& e) {
        throw registry_error(fs::path(path).filename().string() + " is corrupt (" + e.what() +
                             "); fix or remove it");
    }
    return d;
}

/// Writes <path>.tmp (0600), fsyncs, renames over path, fsyncs the directory.
void write_atomic(const std::string& dir, const std::string& name, const std::string& text) {
    const auto path = dir + "/" + name;
    const auto tmp = path + "." + std::to_string(::getpid()) + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) throw registry_error("cannot write " + tmp + ": " + std::strerror(errno));
    std::size_t off = 0;
    while (off < text.size()) {
        auto n = ::write(fd, text.data() + off, text.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            ::close(fd);
            ::unlink(tmp.c_str());
            throw registry_error("cannot write " + tmp);
        }
        off += static_cast<std::size_t>(n);
    }
    ::fchmod(fd, 0600);
    ::fsync(fd);
    ::close(fd);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        ::unlink(tmp.c_str());
        throw registry_error("cannot replace " + path);
    }
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

std::string string_member(const rapidjson::Value& o, const char* k) {
    auto it = o.FindMember(k);
    return it != o.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

std::vector<workspace> parse_list(const rapidjson::Document& d, std::string* active) {
    std::vector<workspace> out;
    if (active) *active = string_member(d, "activeWorkspaceId");
    auto it = d.FindMember("workspaces");
    if (it == d.MemberEnd()) return out;
    if (!it->value.IsArray()) throw registry_error("workspaces.json is corrupt (workspaces)");
    for (const auto& w : it->value.GetArray()) {
        if (!w.IsObject()) throw registry_error("workspaces.json is corrupt (entry)");
        workspace x;
        x.id = string_member(w, "id");
        x.label = string_member(w, "label");
        x.emoji = string_member(w, "emoji");
        x.url = string_member(w, "url");
        x.anon_key = string_member(w, "anonKey");
        x.database_url = string_member(w, "databaseUrl");
        x.created_at = string_member(w, "createdAt");
        auto dflt = w.FindMember("isDefault");
        x.is_default = dflt != w.MemberEnd() && dflt->value.IsBool() && dflt->value.GetBool();
        if (x.id.empty()) throw registry_error("workspaces.json is corrupt (entry without id)");
        out.push_back(std::move(x));
    }
    return out;
}

std::string serialise(const std::vector<workspace>& ws, const std::string& active) {
    json_out o;
    o.w.StartObject();
    o.key("version");
    o.w.Int(1);
    o.key("activeWorkspaceId");
    if (active.empty()) {
        o.w.Null();
    } else {
        o.str(active);
    }
    o.key("workspaces");
    o.w.StartArray();
    for (const auto& w : ws) {
        o.w.StartObject();
        o.kv("id", w.id);
        o.kv("label", w.label);
        o.kv("emoji", w.emoji);
        o.kv("url", w.url);
        o.kv("anonKey", w.anon_key);
        if (!w.database_url.empty()) o.kv("databaseUrl", w.database_url);  // 0600 file
        o.key("isDefault");
        o.w.Bool(w.is_default);
        o.kv("createdAt", w.created_at);
        o.w.EndObject();
    }
    o.w.EndArray();
    o.w.EndObject();
    return o.str();
}

}  // namespace

std::vector<workspace> registry::list(std::string* active_id) const {
    dir_lock lock(dir_, false);
    return parse_list(read_json(dir_ + "/" + kRegistryFile), active_id);
}

std::optional<workspace> registry_snapshot::pick(const std::optional<std::string>& hint) const {
    auto find = [&](const std::string& id) -> std::optional<workspace> {
        if (id.empty()) return std::nullopt;
        for (const auto& w : all) {
            if (w.id == id) return w;
        }
        return std::nullopt;
    };
    if (hint) {
        if (auto w = find(*hint)) return w;
    }
    if (auto w = find(active_id)) return w;
    for (const auto& w : all) {
        if (w.is_default) return w;
    }
    if (!all.empty()) return all.front();
    return std::nullopt;
}

std::optional<workspace> registry::active(const std::optional<std::string>& hint) const {
    registry_snapshot s;
    s.all = list(&s.active_id);
    return s.pick(hint);
}

namespace {

bool same_file(const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
           a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec &&
           a.st_ctim.tv_sec == b.st_ctim.tv_sec && a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

}  // namespace

std::shared_ptr<const registry_snapshot> registry::snapshot() const {
    const auto path = dir_ + "/" + kRegistryFile;
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(cache_mu_);
    // File times are coarse (a clock tick), so a copy is trusted for a second at most even
    // when nothing in stat() moved; writers replace the file (new inode) anyway.
    if (cache_.snap && cache_.exists == exists && (!exists || same_file(cache_.st, st)) &&
        now - cache_.read_at < std::chrono::seconds(1)) {
        return cache_.snap;
    }
    auto fresh = std::make_shared<registry_snapshot>();
    fresh->all = list(&fresh->active_id);  // registry_error when corrupt: nothing cached
    // Only a different content makes a new generation (pools are swept on a new one).
    bool changed = !cache_.snap || cache_.snap->active_id != fresh->active_id ||
                   cache_.snap->all.size() != fresh->all.size();
    for (std::size_t i = 0; !changed && i < fresh->all.size(); ++i) {
        const auto& a = cache_.snap->all[i];
        const auto& b = fresh->all[i];
        changed = a.id != b.id || a.url != b.url || a.is_default != b.is_default;
    }
    fresh->generation = changed ? ++generation_ : cache_.snap->generation;
    // stat again after the read: a write in between must not be cached under the old stat.
    struct stat after {};
    const bool exists_after = ::stat(path.c_str(), &after) == 0;
    cache_.snap = fresh;
    cache_.exists = exists_after;
    cache_.st = after;
    cache_.read_at = exists_after == exists && (!exists || same_file(st, after))
                         ? now
                         : std::chrono::steady_clock::time_point{};
    return fresh;
}

std::string public_url(const std::string& url) {
    return is_postgres_url(url) ? core::log::redact_dsn(url) : url;
}

bool is_postgres_url(std::string_view url) {
    return url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0;
}

workspace registry::add(workspace w, const std::string& key, bool make_default) {
    dir_lock lock(dir_, true);
    std::string act;
    auto all = parse_list(read_json(dir_ + "/" + kRegistryFile), &act);
    auto secrets = read_json(dir_ + "/" + kSecretsFile);
    w.id = core::uuid::generate_v4().to_string();
    w.created_at = core::now_iso8601_utc();
    w.is_default = all.empty() || make_default;
    if (w.is_default) {
        for (auto& x : all) x.is_default = false;
    }
    if (act.empty()) act = w.id;
    all.push_back(w);
    // Secrets first: a registry entry without its key would be unusable.
    if (!secrets.HasMember("workspaces") || !secrets["workspaces"].IsObject()) {
        secrets.RemoveMember("workspaces");
        secrets.AddMember("workspaces", rapidjson::Value(rapidjson::kObjectType),
                          secrets.GetAllocator());
    }
    secrets.RemoveMember("version");
    secrets.AddMember("version", 1, secrets.GetAllocator());
    rapidjson::Value entry(rapidjson::kObjectType);
    entry.AddMember("serviceRoleKey", rapidjson::Value(key.c_str(), secrets.GetAllocator()),
                    secrets.GetAllocator());
    secrets["workspaces"].AddMember(rapidjson::Value(w.id.c_str(), secrets.GetAllocator()), entry,
                                    secrets.GetAllocator());
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> sw(sb);
    secrets.Accept(sw);
    write_atomic(dir_, kSecretsFile, std::string(sb.GetString(), sb.GetSize()));
    write_atomic(dir_, kRegistryFile, serialise(all, act));
    return w;
}

bool registry::activate(const std::string& id) {
    dir_lock lock(dir_, true);
    std::string act;
    auto all = parse_list(read_json(dir_ + "/" + kRegistryFile), &act);
    bool found = false;
    for (auto& w : all) {
        w.is_default = w.id == id;
        found = found || w.is_default;
    }
    if (!found) return false;
    write_atomic(dir_, kRegistryFile, serialise(all, id));
    return true;
}

std::optional<std::string> registry::service_role_key(const std::string& id) const {
    dir_lock lock(dir_, false);
    auto s = read_json(dir_ + "/" + kSecretsFile);
    auto ws = s.FindMember("workspaces");
    if (ws == s.MemberEnd() || !ws->value.IsObject()) return std::nullopt;
    auto e = ws->value.FindMember(id.c_str());
    if (e == ws->value.MemberEnd() || !e->value.IsObject()) return std::nullopt;
    auto k = string_member(e->value, "serviceRoleKey");
    if (k.empty()) return std::nullopt;
    return k;
}

// ---- routes ---------------------------------------------------------------------------------

namespace {

/// A workspace as a client sees it. Operators see a DSN without its password; everyone else
/// sees the url only when it is a platform (http) URL, never a database's connection details.
void write_public(json_out& o, const workspace& w, bool operator_view,
                  std::optional<bool> active = std::nullopt) {
    o.w.StartObject();
    o.kv("id", w.id);
    o.kv("label", w.label);
    o.kv("emoji", w.emoji);
    o.key("url");
    if (operator_view || !is_postgres_url(w.url)) {
        o.str(public_url(w.url));  // a DSN's password stays in the file
    } else {
        o.w.Null();
    }
    o.kv("anonKey", w.anon_key);
    if (operator_view && !w.database_url.empty()) o.kv("databaseUrl", public_url(w.database_url));
    o.key("isDefault");
    o.w.Bool(w.is_default);
    if (active) {
        o.key("active");
        o.w.Bool(*active);
    }
    o.kv("createdAt", w.created_at);
    o.w.EndObject();
}

http_error corrupt(const registry_error& e) {
    core::log::error("workspace registry unusable", {{"error", e.what()}});
    return http_error(500, "registry_corrupt", e.what());
}

bool valid_url(const std::string& u) {
    return u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0 ||
           u.rfind("postgres://", 0) == 0 || u.rfind("postgresql://", 0) == 0;
}

/// host[:port] of an absolute http(s) URL; "" when it is not one.
std::string_view authority_of(std::string_view url) {
    const auto s = url.find("://");
    if (s == std::string_view::npos) return {};
    const auto scheme = url.substr(0, s);
    if (scheme != "http" && scheme != "https") return {};
    auto rest = url.substr(s + 3);
    return rest.substr(0, rest.find_first_of("/?#"));
}

/// Where a platform shows its database's connection string, for the platform at `url`.
std::string where_connection_string_is(std::string_view url) {
    auto host = authority_of(url);
    host = host.substr(0, host.find(':'));
    constexpr std::string_view kHosted = ".supabase.co";
    if (host.size() > kHosted.size() && host.ends_with(kHosted)) {
        const auto ref = host.substr(0, host.find('.'));
        return "the project's dashboard: Connect (or Project Settings > Database > Connection "
               "string), the direct connection postgresql://<role>:<password>@db." +
               std::string(ref) + ".supabase.co:5432/postgres";
    }
    if (host == "127.0.0.1" || host == "localhost" || host == "[::1]") {
        return "`supabase status` (its DB URL) for a local project, else the platform's "
               "database settings (its connection string)";
    }
    return "the platform's database settings (its connection string)";
}

/// The error object of a platform URL given without its database's connection string (422
/// needs_database_url): what to add and where the platform shows it. The same from
/// POST /api/workspaces and POST /api/workspaces/validate.
std::string needs_database_url(std::string_view url) {
    const auto where = where_connection_string_is(url);
    json_out o;
    o.w.StartObject();
    o.kv("code", "needs_database_url");
    o.kv("message",
         "a platform URL is served through its database: add databaseUrl, the postgres:// "
         "connection string shown in " +
             where +
             " (use a role like awp_api that does not bypass row-level security; "
             "docs/api-gateway.md, Workspaces)");
    o.kv("field", "databaseUrl");
    o.kv("where", where);
    o.w.EndObject();
    return o.str();
}

/// A `next` the switch may redirect to: a path on this site (one leading '/', no scheme or
/// host, no backslash or control character a browser could read as another origin).
bool is_local_path(std::string_view p) {
    if (p.empty() || p.size() > 2048 || p.front() != '/') return false;
    if (p.size() > 1 && (p[1] == '/' || p[1] == '\\')) return false;
    return std::none_of(p.begin(), p.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f || c == '\\';
    });
}

/// The section of a page: its first two segments ("/dashboard/agents/sierra" becomes
/// "/dashboard/agents"), where the original UI's switcher goes after a switch so a page about
/// a resource of the old workspace does not answer 404 in the new one.
std::string section_root(std::string_view path) {
    path = path.substr(0, path.find_first_of("?#"));
    std::string out;
    int segments = 0;
    std::size_t i = 0;
    while (i < path.size() && segments < 2) {
        while (i < path.size() && path[i] == '/') ++i;
        if (i >= path.size()) break;
        const auto end = std::min(path.find('/', i), path.size());
        out += "/";
        out += path.substr(i, end - i);
        ++segments;
        i = end;
    }
    return out.empty() || !is_local_path(out) ? "/" : out;
}

}  // namespace

net::awaitable<response> gateway::workspaces_get(request r) {
    auto p = require_session_or_service(r);
    std::vector<workspace> all;
    std::string act;
    std::optional<http_error> err;
    try {
        all = registry_->list(&act);
    } catch (const registry_error& e) {
        err = corrupt(e);
    }
    if (err) throw *err;
    // The spec: "list of workspaces in the registry", so a JSON array. Each entry says whether
    // it is the caller's active workspace (an operator's: the registry's active one; a user's:
    // the session's) and whether it is the default for new sign-ins.
    const std::string active = p.is_operator ? act : p.workspace_id;
    json_out o;
    o.w.StartArray();
    for (const auto& w : all) {
        // An ordinary user sees the workspace of the session, nothing of the others.
        if (!p.is_operator && w.id != p.workspace_id) continue;
        write_public(o, w, p.is_operator, w.id == active);
    }
    o.w.EndArray();
    co_return response::json(200, o.str());
}

net::awaitable<response> gateway::workspaces_post(request r) {
    require_operator(r);
    if (r.media_type() != "application/json") {
        throw http_error(415, "unsupported_media_type", "send application/json");
    }
    auto body = parse_object_body(r.body);
    workspace w;
    w.label = req_string(body, "label");
    if (w.label.empty() || w.label.size() > 80) {
        throw http_error(422, "invalid_field", "label must be 1 to 80 bytes");
    }
    w.emoji = opt_string(body, "emoji").value_or("🧭");
    if (w.emoji.empty() || w.emoji.size() > 32) {
        throw http_error(422, "invalid_field", "emoji must be 1 to 8 characters");
    }
    w.url = req_string(body, "url");
    if (!valid_url(w.url)) {
        throw http_error(422, "invalid_field", "url must be an http(s) or postgres URL");
    }
    w.anon_key = req_string(body, "anonKey");
    if (w.anon_key.size() < 20) throw http_error(422, "invalid_field", "anonKey is too short");
    // A hosted platform URL is served through its database's connection string (the platform
    // shows it in its database settings), never through a DSN guessed from the URL.
    if (auto dsn = opt_string(body, "databaseUrl")) {
        if (is_postgres_url(w.url)) {
            throw http_error(422, "invalid_field",
                             "databaseUrl is for a platform URL; this url is a DSN already");
        }
        if (!is_postgres_url(*dsn)) {
            throw http_error(422, "invalid_field",
                             "databaseUrl must be a postgres:// connection string");
        }
        w.database_url = *dsn;
    }
    auto key = req_string(body, "serviceRoleKey");
    if (key.size() < 20) throw http_error(422, "invalid_field", "serviceRoleKey is too short");
    const bool make_default = opt_bool(body, "makeDefault").value_or(false);
    // Accepted, it would answer 502 on every database route: refused now, saying what to add.
    if (!is_postgres_url(w.url) && w.database_url.empty()) {
        co_return response::json(422, R"({"error":)" + needs_database_url(w.url) + "}");
    }
    std::optional<http_error> err;
    try {
        w = registry_->add(std::move(w), key, make_default);
    } catch (const registry_error& e) {
        err = corrupt(e);
    }
    if (err) throw *err;
    core::log::info("workspace registered", {{"workspace_id", w.id}, {"label", w.label}});
    // Its signed-out sessions are read before a session of it is used (docs/security.md,
    // "Sessions"): the watch starts now, and the answer waits for its first read (bounded).
    try {
        retain_workspaces(*registry_->snapshot());
    } catch (const registry_error&) {
    }
    co_await sessions_->wait_ready(w.id, std::chrono::seconds(5));
    json_out o;
    write_public(o, w, true);
    co_return response::json(201, o.str());
}

namespace {

/// A GET that switches is refused when it comes from another site: a link or an image there
/// would otherwise switch a signed-in browser (the session cookie is SameSite=Lax, sent on a
/// top-level cross-site GET). Sec-Fetch-Site and Origin as for every state change, and, for
/// browsers that send neither, a Referer of another origin. Direct navigation (no Referer,
/// Sec-Fetch-Site: none) and the gateway's own pages pass.
void refuse_cross_site_get(const gateway& g, const request& r) {
    g.check_same_origin(r);
    auto referer = r.header.get("referer");
    if (!referer) return;
    const auto authority = authority_of(*referer);
    if (!authority.empty()) {
        const auto host = r.header.get("host");
        if (host && authority == *host) return;
        const auto origin = referer->substr(0, referer->find("://") + 3 + authority.size());
        for (const auto& a : g.config().allowed_origins) {
            if (origin == a) return;
        }
    }
    throw http_error(403, "cross_site", "the Referer is another site");
}

/// A browser's navigation (a link followed, an address typed) rather than a script's fetch.
bool is_navigation(const request& r) {
    if (auto mode = r.header.get("sec-fetch-mode")) return *mode == "navigate";
    auto accept = r.header.get("accept");
    return accept && accept->find("text/html") != std::string_view::npos;
}

}  // namespace

net::awaitable<response> gateway::workspaces_switch(request r) {
    // POST (the original UI's switcher: {workspaceId}) or GET (the spec's method: a link, an
    // address typed) with ?workspaceId=. A session of the workspace switched to is required;
    // the switch sets this browser's awp_active_workspace cookie and nothing any other user
    // sees. An operator may also make it the host's default for new sign-ins with POST
    // ("makeDefault": true). A GET answers a browser's navigation with 303 to ?next= (a path
    // on this site) or back to the section of the page it came from; a script gets JSON.
    const bool get = r.method == "GET" || r.method == "HEAD";
    if (get) refuse_cross_site_get(*this, r);
    auto p = require_session_or_service(r);
    std::optional<std::string> id = r.query_param("workspaceId");
    bool make_default = false;
    std::optional<std::string> next;
    if (get) {
        if (r.query_param("makeDefault")) {
            throw http_error(422, "invalid_field",
                             "makeDefault changes the host's default workspace: POST it");
        }
        next = r.query_param("next");
        if (next && !is_local_path(*next)) {
            throw http_error(422, "invalid_field",
                             "next must be a path on this site, starting with a single '/'");
        }
    } else if (!r.body.empty()) {
        auto body = parse_object_body(r.body);
        if (auto b = opt_string(body, "workspaceId")) id = b;
        make_default = opt_bool(body, "makeDefault").value_or(false);
    }
    if (!id || !core::is_valid_uuid(*id)) {
        throw http_error(422, "invalid_field", "workspaceId must be a UUID");
    }
    if (make_default && !p.is_operator) {
        throw http_error(403, "operator_required",
                         "only an operator may change the default workspace");
    }
    std::shared_ptr<const registry_snapshot> snap;
    std::optional<http_error> err;
    try {
        snap = registry_->snapshot();
    } catch (const registry_error& e) {
        err = corrupt(e);
    }
    if (err) throw *err;
    const bool exists = std::any_of(snap->all.begin(), snap->all.end(),
                                    [&](const workspace& w) { return w.id == *id; });
    if (!exists) throw http_error(404, "not_found", "no such workspace");
    if (p.who == principal::kind::user && p.workspace_id != *id) {
        throw http_error(403, "workspace_session_required",
                         "sign in to that workspace first (POST /api/auth/login with its "
                         "workspaceId); a session of one workspace is not valid in another");
    }
    if (make_default) {
        bool found = false;
        try {
            found = registry_->activate(*id);
        } catch (const registry_error& e) {
            err = corrupt(e);
        }
        if (err) throw *err;
        if (!found) throw http_error(404, "not_found", "no such workspace");
    }
    std::optional<std::string> location;
    if (get && next) {
        location = *next;
    } else if (get && is_navigation(r)) {
        // Back where the browser came from (a page of this site: refuse_cross_site_get).
        const auto referer = r.header.get("referer");
        const auto authority = referer ? authority_of(*referer) : std::string_view();
        location = authority.empty()
                       ? std::string("/")
                       : section_root(referer->substr(referer->find("://") + 3 + authority.size()));
    }
    if (location) {
        // Bytes a header may not carry raw (non-ASCII text of a path, spaces) are escaped.
        std::string escaped;
        for (char c : *location) {
            const auto u = static_cast<unsigned char>(c);
            escaped += u >= 0x80 || c == ' ' ? http::percent_encode(std::string_view(&c, 1))
                                             : std::string(1, c);
        }
        location = std::move(escaped);
    }
    json_out o;
    o.w.StartObject();
    o.key("ok");
    o.w.Bool(true);
    o.kv("workspaceId", *id);
    if (location) o.kv("location", *location);
    o.w.EndObject();
    auto res = response::json(location ? 303 : 200, o.str());
    if (location) res.header.add("Location", *location);
    http::cookie_options co;
    co.max_age = 31536000;
    co.secure = cfg_.cookie_secure;
    res.header.add("Set-Cookie", http::set_cookie(kActiveWorkspaceCookie, *id, co));
    co_return res;
}

namespace {

/// What validation found. Before the credentials are accepted every failure is the same
/// answer (unreachable_or_rejected), so the route cannot tell a closed port from a wrong
/// password; only with an accepted credential does it say more.
struct probe_result {
    bool ok = false;
    std::string code = "unreachable_or_rejected";
    std::string message = "could not connect with these details (address, credentials or key)";
};

net::awaitable<probe_result> probe_postgres(std::string dsn) {
    probe_result out;
    std::string failure;
    std::optional<pg::connection> c;
    try {
        c = co_await pg::connection::async_connect(dsn);
    } catch (const pg::connection_error& e) {
        failure = e.what();
    }
    if (!c) {
        core::log::info("workspace validation: cannot connect", {{"error", failure}});
        co_return out;  // unreachable_or_rejected: the same answer for every cause
    }
    std::string version;
    std::string bypass;
    try {
        bypass = co_await rls_bypass_reason(*c);
        // What the gateway will do on it: take service_role (sign-in, service routes), for one
        // transaction only (the DSN may point at a transaction-pooling PgBouncer).
        std::vector<pg::connection::pipelined> st;
        st.push_back({"SELECT set_config('role', 'service_role', true)", {}});
        st.push_back(
            {"SELECT CASE WHEN to_regclass('public.schema_migrations') IS NULL THEN NULL "
             "ELSE (SELECT max(version) FROM public.schema_migrations) END",
             {}});
        auto r = co_await c->async_pipeline(std::move(st));
        version = r.at(1).get_optional<std::string>(0, 0).value_or("");
    } catch (const std::exception& e) {
        failure = e.what();
    }
    if (!bypass.empty()) {
        out.code = "role_bypasses_rls";
        out.message = "the DSN's role " + bypass +
                      "; use the api role (awp_api) so row-level security applies";
    } else if (!failure.empty()) {
        out.code = "schema_missing";
        out.message =
            "cannot read the schema version as service_role (is the role a member "
            "of service_role, authenticated and anon, like awp_api?)";
    } else if (version.empty()) {
        out.code = "schema_missing";
        out.message = "the awp schema is not installed (run awpctl migrate)";
    } else if (!core::migrate::is_current(version)) {
        out.code = "schema_too_old";
        out.message = "the schema is at " + version + ", this awp needs " +
                      std::string(core::migrate::schema_version) + "; run awpctl migrate";
    } else {
        out.ok = true;
    }
    co_return out;
}

}  // namespace

net::awaitable<response> gateway::workspaces_validate(request r) {
    // Not a scanner: operators only, one probe per operator per kValidateEvery, a deadline,
    // and failures answered no sooner than kValidateFloor with one shape whatever was behind
    // the address (docs/security.md).
    constexpr auto kValidateEvery = std::chrono::seconds(2);
    constexpr auto kValidateDeadline = std::chrono::seconds(5);
    constexpr auto kValidateFloor = std::chrono::milliseconds(1000);
    auto p = require_operator(r);
    if (r.media_type() != "application/json") {
        throw http_error(415, "unsupported_media_type", "send application/json");
    }
    auto body = parse_object_body(r.body);
    auto url = req_string(body, "url");
    if (!valid_url(url))
        throw http_error(422, "invalid_field", "url must be an http(s) or postgres URL");
    // A platform URL is served through its database: its connection string is what is
    // validated, and without one there is nothing to validate (nor to serve).
    if (!is_postgres_url(url)) {
        auto dsn = opt_string(body, "databaseUrl");
        if (!dsn) {
            co_return response::json(422,
                                     R"({"ok":false,"error":)" + needs_database_url(url) + "}");
        }
        if (!is_postgres_url(*dsn)) {
            throw http_error(422, "invalid_field",
                             "databaseUrl must be a postgres:// connection string");
        }
        url = *dsn;
    }
    {
        const auto now = std::chrono::steady_clock::now();
        const auto who = p.who == principal::kind::service ? std::string("service") : p.sub;
        std::lock_guard lock(validate_mu_);
        auto& last = validate_last_[who];
        if (now - last < kValidateEvery) {
            http_error e(429, "too_many_attempts", "one validation every 2 seconds");
            e.extra.add("Retry-After", "2");
            throw e;
        }
        last = now;
        if (validate_last_.size() > 10'000) validate_last_.clear();
    }
    const auto started = std::chrono::steady_clock::now();
    // libpq's connect_timeout bounds the connect; the deadline bounds the rest.
    auto dsn = url + (url.find('?') == std::string::npos ? "?" : "&") +
               "connect_timeout=" + std::to_string(kValidateDeadline.count());
    probe_result res = co_await probe_postgres(std::move(dsn));
    if (res.ok) co_return response::json(200, R"({"ok":true})");
    const auto spent = std::chrono::steady_clock::now() - started;
    if (spent < kValidateFloor) {
        net::steady_timer t(co_await net::this_coro::executor, kValidateFloor - spent);
        co_await t.async_wait(net::use_awaitable);
    }
    co_return response::json(422, R"({"ok":false,"error":{"code":)" + http::json_quote(res.code) +
                                      R"(,"message":)" + http::json_quote(res.message) + "}}");
}

}  // namespace awp::api
