// The environment policy of child processes (child_env.hpp).
#include "awp/core/child_env.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

extern char** environ;

namespace awp::core::child_env {

namespace {

constexpr std::array<std::string_view, 27> kExact = {"PATH",
                                                     "HOME",
                                                     "USER",
                                                     "LOGNAME",
                                                     "SHELL",
                                                     "LANG",
                                                     "LANGUAGE",
                                                     "TZ",
                                                     "TERM",
                                                     "COLORTERM",
                                                     "NO_COLOR",
                                                     "TMPDIR",
                                                     "XDG_CONFIG_HOME",
                                                     "XDG_DATA_HOME",
                                                     "XDG_CACHE_HOME",
                                                     "XDG_STATE_HOME",
                                                     "XDG_RUNTIME_DIR",
                                                     "HTTP_PROXY",
                                                     "HTTPS_PROXY",
                                                     "NO_PROXY",
                                                     "http_proxy",
                                                     "https_proxy",
                                                     "no_proxy",
                                                     "SSL_CERT_FILE",
                                                     "SSL_CERT_DIR",
                                                     "NODE_EXTRA_CA_CERTS",
                                                     "NODE_ENV"};
constexpr std::array<std::string_view, 2> kPrefixes = {"LC_", "OPENCLAW_"};
constexpr std::array<std::string_view, 10> kSecretWords = {
    "KEY",        "SECRET", "PASSWORD",     "PASSWD", "TOKEN",
    "CREDENTIAL", "DSN",    "DATABASE_URL", "COOKIE", "AUTH"};

std::string upper(std::string_view s) {
    std::string u(s);
    for (auto& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return u;
}

bool in_list(std::string_view list, std::string_view name) {
    while (!list.empty()) {
        const auto comma = list.find(',');
        auto item = list.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (!item.empty() && item.back() == '*') {
            if (name.substr(0, item.size() - 1) == item.substr(0, item.size() - 1)) return true;
        } else if (!item.empty() && item == name) {
            return true;
        }
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

}  // namespace

std::string without_url_password(std::string_view value) {
    // scheme://user:password@host... → scheme://user@host...; anything else unchanged.
    const auto scheme = value.find("://");
    if (scheme == std::string_view::npos) return std::string(value);
    const auto start = scheme + 3;
    const auto end = value.find_first_of("/?#", start);
    const auto authority = value.substr(start, end == std::string_view::npos ? end : end - start);
    const auto at = authority.rfind('@');
    if (at == std::string_view::npos) return std::string(value);
    const auto colon = authority.find(':');
    if (colon == std::string_view::npos || colon > at) return std::string(value);
    std::string out(value.substr(0, start + colon));
    out += value.substr(start + at);
    return out;
}

bool looks_secret(std::string_view name) noexcept {
    const auto u = upper(name);
    if (u.rfind("PG", 0) == 0) return true;
    return std::any_of(kSecretWords.begin(), kSecretWords.end(),
                       [&](std::string_view w) { return u.find(w) != std::string::npos; });
}

bool inherited(std::string_view name, std::string_view extra_allow) noexcept {
    if (name.empty() || looks_secret(name)) return false;
    if (std::find(kExact.begin(), kExact.end(), name) != kExact.end()) return true;
    for (auto p : kPrefixes) {
        if (name.substr(0, p.size()) == p) return true;
    }
    return in_list(extra_allow, name);
}

namespace {

env_map inherited_of(char** parent) {
    const char* allow = std::getenv(kAllowVariable);
    const std::string_view extra = allow ? allow : "";
    env_map out;
    for (char** e = parent; e != nullptr && *e != nullptr; ++e) {
        const std::string_view kv(*e);
        const auto eq = kv.find('=');
        if (eq == std::string_view::npos) continue;
        const auto name = kv.substr(0, eq);
        if (!inherited(name, extra)) continue;
        // A password in a URL (a proxy's, say) is a credential of the daemon: kept only for a
        // variable the operator named in AWP_CHILD_ENV_ALLOW on purpose.
        const auto value = kv.substr(eq + 1);
        out.emplace(std::string(name),
                    in_list(extra, name) ? std::string(value) : without_url_password(value));
    }
    return out;
}

// What a child inherits of this process's own environment, worked out again only when that
// changed: a daemon starts a child per command, and the scan of every variable was 6.6 % of the
// runner's CPU per command (bench/runner/RESULTS.md). setenv and unsetenv replace or remove
// entries of environ and glibc never frees a string it set, so an entry's text does not change
// under the same pointer: the array of entry pointers is the key (AWP_CHILD_ENV_ALLOW is one of
// the entries). awp never calls putenv, whose caller-owned strings could change in place.
struct inherited_cache {
    std::mutex m;
    std::vector<const char*> key;
    env_map vars;
};

env_map own_inherited() {
    static inherited_cache cache;
    std::vector<const char*> key;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) key.push_back(*e);
    const std::lock_guard lock(cache.m);
    if (key != cache.key) {
        cache.vars = inherited_of(environ);
        cache.key = std::move(key);
    }
    return cache.vars;
}

}  // namespace

env_map build(const env_map& set, char** parent) {
    env_map out = parent == nullptr ? own_inherited() : inherited_of(parent);
    for (const auto& [k, v] : set) out.insert_or_assign(k, v);
    return out;
}

void apply(process::spawn_options& o) {
    o.env = build(o.env);
    o.env_unset.clear();
    o.replace_env = true;
}

}  // namespace awp::core::child_env
