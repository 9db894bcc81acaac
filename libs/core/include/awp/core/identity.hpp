// The agent user: who the processes a daemon starts run as (AGENT_USER), so an agent, a shell
// command or the runtime CLI cannot read the daemon's files, environment or credentials
// (docs/security.md, "The agent user"). One policy for the runner and the dispatcher.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace awp::core::identity {

/// A user of the passwd database.
struct user {
    uid_t uid = 0;
    gid_t gid = 0;  // primary group
    std::string name;
    std::string home;
};

/// The user named by a name or a numeric uid. Throws config_error naming it when there is no
/// such user, or when it is root (uid 0): children never run as root on purpose.
[[nodiscard]] user lookup(const std::string& name_or_uid);

/// Whether this process may start children as another user: CAP_SETUID and CAP_SETGID in its
/// effective set (root has them; a systemd unit grants them with AmbientCapabilities).
[[nodiscard]] bool can_switch() noexcept;

/// AGENT_USER resolved for a daemon at start: nullopt when unset (children run as the daemon's
/// own user); else the user, after checking this process can switch to it. Throws config_error
/// (exit 78) with what to do otherwise.
[[nodiscard]] std::optional<user> agent_user(const std::string& setting);

/// With an agent user, at start: `agent_dir` (the runtime's state, named by `agent_setting`) must
/// be a folder (not a symlink) that the agent user owns, and none of the daemon's own folders
/// (`own`: setting name and path: its state, its secrets) may lie inside it, where the agent user
/// could move them away and plant its own. Throws config_error saying what to change.
void check_layout(const user& u, const std::string& agent_setting, const std::string& agent_dir,
                  const std::vector<std::pair<std::string, std::string>>& own);

/// For files the daemon itself writes where the agent user owns the folders (the runtime's
/// state, the workspaces): the calling thread's file-system identity becomes that user's
/// (setfsuid/setfsgid), so what it creates belongs to the agent user and a symlink or folder an
/// agent planted leads only where the agent could write itself. Restored on destruction.
/// Per thread: nothing may await in between. A no-op for nullopt.
class as_user_files {
public:
    explicit as_user_files(const std::optional<user>& u) noexcept;
    ~as_user_files();
    as_user_files(const as_user_files&) = delete;
    as_user_files& operator=(const as_user_files&) = delete;

private:
    bool active_ = false;
    uid_t old_uid_ = 0;
    gid_t old_gid_ = 0;
};

}  // namespace awp::core::identity
