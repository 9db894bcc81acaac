// The workspace registry: workspaces.json (public fields) and secrets.json (service-role keys)
// in the config directory, mode 0600, changed under an flock with atomic replace. A corrupt
// file is reported (registry_error), never read as empty or overwritten.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "awp/core/error.hpp"

namespace awp::api {

class registry_error : public core::error {
public:
    using core::error::error;
};

struct workspace {
    std::string id, label, emoji, url, anon_key, created_at;
    bool is_default = false;
};

class registry {
public:
    explicit registry(std::string dir) : dir_(std::move(dir)) {}
    /// Every workspace and the active id (empty when none).
    std::vector<workspace> list(std::string* active_id = nullptr) const;
    /// hint (a cookie) if it names one, else the active id, the default, the first.
    std::optional<workspace> active(const std::optional<std::string>& hint) const;
    /// Adds a workspace; returns it.
    workspace add(workspace w, const std::string& service_role_key, bool make_default);
    /// Sets the active id and the default; false when the id is unknown.
    bool activate(const std::string& id);
    /// The service-role key of a workspace (never sent to clients).
    std::optional<std::string> service_role_key(const std::string& id) const;
    [[nodiscard]] const std::string& dir() const noexcept { return dir_; }

private:
    std::string dir_;
};

}  // namespace awp::api
