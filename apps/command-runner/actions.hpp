// Command actions: each payload validated as the spec's tables say and turned into a plan (argv
// steps for the runtime CLI or deploy/runtime scripts, or an in-process operation). Pure: no I/O.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "awp/core/error.hpp"
#include "command.hpp"
#include "config.hpp"

namespace awp::runner {

/// The payload (or the action) is not acceptable; the message names the problem. The runtime
/// is never called for such a command.
class invalid_command : public core::error {
public:
    using core::error::error;
};

/// One program to run, argv only.
struct step {
    std::vector<std::string> argv;
    std::optional<std::string> stdin_data;
    /// The host's own operation (docker compose, systemctl, the installer's update): runs as the
    /// runner's own user. Everything else (the runtime CLI, shell commands, the agent scripts)
    /// runs as AGENT_USER when it is set.
    bool host_operation = false;
};

enum class plan_kind {
    spawn,             // run `steps` one after another; stop at the first failure
    provision,         // the runtime CLI steps of a new agent, built when its secrets are synced
    auth_start,        // interactive login in the background (fields: provider, profile_name, mode)
    auth_paste,        // feed `value` to the flow of parent_command_id
    auth_remove,       // delete a profile from every agent's auth store (field: profile_id)
    set_agent_model,   // edit the agent's entry in the runtime config (agent_slug, model, thinking)
    source_write,      // provider action (connection_id, action, params)
    upload_file,       // write a file into the agent's workspace (path, content bytes, mode)
    list_models,       // the catalogue of the connected providers (no provider given)
    auth_set_default,  // profile first in its provider's order, the default model that provider's
};

struct plan {
    plan_kind kind = plan_kind::spawn;
    std::vector<step> steps;
    std::chrono::seconds timeout{120};
    bool sync_secrets_first = false;  // provision: the agent's env file must exist first
    std::string success_stdout;       // stored when the steps print nothing useful (fixed text)
    bool json_output = false;         // stdout is JSON: stored as valid JSON (runtime::fit_json)
    std::map<std::string, std::string> fields;  // operands of the in-process kinds

    /// The operand of that name, if the plan has it.
    [[nodiscard]] std::optional<std::string> field(const char* name) const {
        const auto it = fields.find(name);
        if (it == fields.end()) return std::nullopt;
        return it->second;
    }
};

/// Validates the command and returns what to do. Throws invalid_command.
plan plan_command(const command_row& cmd, const runner_config& cfg);

/// A provision's source_template as the templates endpoint gives it (its "branch",
/// template/<name>, or its "id", <name>) → the template's name; throws invalid_command.
std::string template_name(const std::string& given);

/// `s` without the spaces, tabs and line ends around it.
std::string trim_space(const std::string& s);

/// Safe-format checks shared with tests.
bool is_uuid(const std::string& s);
bool is_agent_slug(const std::string& s);

}  // namespace awp::runner
