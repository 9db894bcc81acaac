// The workspace registry: workspaces.json (public fields) and secrets.json (service-role keys)
// in the config directory, mode 0600, changed under an flock with atomic replace. A corrupt
// file is reported (registry_error), never read as empty or overwritten.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "awp/core/error.hpp"

namespace awp::api {

class registry_error : public core::error {
public:
    using core::error::error;
};

struct workspace {
    std::string id, label, emoji, url, anon_key, created_at;
    /// For a workspace given as a hosted platform URL (https://<ref>.supabase.co): the
    /// connection string of its database, added by the operator (`databaseUrl`), which the
    /// gateway pools for the database routes. Empty for a DSN workspace (url is the DSN).
    std::string database_url;
    bool is_default = false;
};

/// workspaces.json as read at one moment; generation grows with every change seen.
struct registry_snapshot {
    std::vector<workspace> all;
    std::string active_id;
    std::uint64_t generation = 0;
    /// hint (a cookie) if it names one, else the active id, the default, the first.
    [[nodiscard]] std::optional<workspace> pick(const std::optional<std::string>& hint) const;
};

class registry {
public:
    explicit registry(std::string dir) : dir_(std::move(dir)) {}
    /// Every workspace and the active id (empty when none).
    std::vector<workspace> list(std::string* active_id = nullptr) const;
    /// hint (a cookie) if it names one, else the active id, the default, the first.
    std::optional<workspace> active(const std::optional<std::string>& hint) const;
    /// The registry for the request path: re-read only when workspaces.json changed (inode,
    /// size, times) or the copy is older than a second, so a request costs one stat().
    /// Throws registry_error when the file is corrupt (every time, until it is fixed).
    std::shared_ptr<const registry_snapshot> snapshot() const;
    /// Adds a workspace; returns it.
    workspace add(workspace w, const std::string& service_role_key, bool make_default);
    /// Sets the active id and the default; false when the id is unknown.
    bool activate(const std::string& id);
    /// The service-role key of a workspace (never sent to clients).
    std::optional<std::string> service_role_key(const std::string& id) const;
    [[nodiscard]] const std::string& dir() const noexcept { return dir_; }

private:
    std::string dir_;
    struct cached {
        std::shared_ptr<const registry_snapshot> snap;
        struct stat st {};
        bool exists = false;
        std::chrono::steady_clock::time_point read_at;
    };
    mutable std::mutex cache_mu_;
    mutable cached cache_;
    mutable std::uint64_t generation_ = 0;
};

/// A workspace url as clients may see it: a Postgres DSN's password replaced by "***".
[[nodiscard]] std::string public_url(const std::string& url);
/// The url is a Postgres DSN (postgres:// or postgresql://) the gateway can pool.
[[nodiscard]] bool is_postgres_url(std::string_view url);
/// The DSN the database routes of a workspace use: its url when that is a DSN, else its
/// databaseUrl ("" when a platform-URL workspace has none: db.cpp answers what to add).
[[nodiscard]] inline std::string database_of(const workspace& w) {
    return is_postgres_url(w.url) ? w.url : w.database_url;
}

}  // namespace awp::api
