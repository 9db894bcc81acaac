// Actions done in-process on the runtime's files: set_agent_model, auth_remove, upload_file.
#pragma once

#include <string>

#include "awp/core/error.hpp"

namespace awp::runner {

class local_op_error : public core::error {
public:
    using core::error::error;
};

/// Sets (non-empty) or clears (empty) the model / thinking default of the agent's entry in
/// <home>/openclaw.json (agents.list[] with id == slug or ending in "/slug"), under an flock
/// on <home>/openclaw.json.lock, replaced atomically. Field absent from the map: untouched.
/// Returns a one-line summary.
std::string set_agent_model(const std::string& home, const std::string& slug,
                            const std::string* model, const std::string* thinking);

/// Removes profiles[<profile_id>] from every <home>/agents/*/agent/auth-profiles.json (each real
/// file once). Returns a summary; throws local_op_error when no file had the profile.
std::string auth_remove(const std::string& home, const std::string& profile_id);

/// Writes `content` to <dir>/<path> (dir must exist: the agent's workspace), creating
/// sub-folders, atomically, with the octal `mode`. Returns a summary.
std::string upload_file(const std::string& dir, const std::string& path, const std::string& content,
                        const std::string& mode);

}  // namespace awp::runner
