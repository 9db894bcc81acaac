// The agent runtime adapter: every call awp makes to the openclaw CLI, in one place, with the
// argv of each supported runtime version. The runner and the dispatcher hold one `cli` (detected
// at start-up: an unsupported version stops the daemon with exit 78) and ask it for argv; they
// never spell a subcommand or flag themselves. Pure functions except detect() and the lock.
// docs/runtime.md has the table of what each action runs on each version.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "awp/core/error.hpp"

namespace awp::runtime {

/// How the CLI of a supported version is spoken. A new column of docs/runtime.md, a new value.
enum class dialect {
    v2026_6,  // 2026.6.x: agents.list[] in openclaw.json, auth-profiles.json per agent dir
    v2026_9,  // 2026.9.x: agents.entries.<id>, auth in SQLite, --agent on model auth commands
};

struct version {
    int year = 0, month = 0, patch = 0;
    std::string text;  // "2026.6.1"
};

/// "OpenClaw 2026.6.1 (2e08f0f)" (or a bare "2026.6.1") → the version; nullopt otherwise.
std::optional<version> parse_version(std::string_view version_output);

/// The dialect of a version, or nullopt when awp does not support it.
std::optional<dialect> dialect_of(const version& v);

/// The versions this build supports, for messages: "2026.6.x, 2026.9.x".
std::string supported_versions();

/// The version or the runtime is not usable: a configuration error (the daemon exits 78).
class unsupported_runtime : public core::config_error {
public:
    using core::config_error::config_error;
};

/// A spec thinking level (none, low, medium, high) as the runtime spells it (off, low, medium,
/// high); "" stays "" (the agent's default). Throws core::error for anything else.
std::string thinking_level(const std::string& spec_level);

/// The runtime's id of the agent with this awp slug: the runtime's own normalisation (lower
/// case, runs of other characters than [a-z0-9_-] become '-', no leading or trailing '-', at
/// most 64). Throws core::error when the id would be empty or "main" (the runtime's own default
/// agent, which awp never provisions or removes).
std::string agent_id(const std::string& slug);

/// Removes terminal control sequences (CSI/OSC escapes, other C0 controls but \n and \t, \r
/// line rewrites) from CLI output, so stored messages read as text.
std::string strip_terminal(std::string_view text);

/// The last non-empty line of the runtime's own error text (stderr, else stdout), stripped of
/// terminal codes and of the CLI's "[openclaw] " prefix, at most `max` bytes.
std::string error_line(std::string_view err, std::string_view out, std::size_t max = 300);

/// One run of the CLI.
struct call {
    std::vector<std::string> argv;
    std::optional<std::string> stdin_data;
};

/// The runtime CLI of one installed version. Copyable; holds no handles.
class cli {
public:
    /// openclaw 2026.6.1 as `openclaw` on PATH (until detect() says otherwise).
    cli();
    cli(std::string program, version v, dialect d);
    /// For tests and fixed set-ups: the version given as text; throws unsupported_runtime.
    cli(std::string program, const std::string& version_text);

    /// Runs `<program> --version` (blocking, ≤ timeout, the child environment policy) and
    /// returns the cli for it. Throws unsupported_runtime naming the program, what it printed
    /// and the supported versions when it cannot start, fails, or is not supported.
    static cli detect(const std::string& program,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));

    const std::string& program() const noexcept { return program_; }
    const version& runtime_version() const noexcept { return version_; }
    dialect kind() const noexcept { return dialect_; }

    // ---- agents --------------------------------------------------------------------------
    /// Registers the agent with its workspace folder (created and seeded by the runtime).
    call add_agent(const std::string& id, const std::string& workspace,
                   const std::optional<std::string>& model) const;
    /// Name and emoji; nullopt when neither is given.
    std::optional<call> set_identity(const std::string& id, const std::optional<std::string>& name,
                                     const std::optional<std::string>& emoji) const;
    /// A chat channel account for the agent whose token the runtime reads from `token_file`.
    call add_channel(const std::string& channel, const std::string& id,
                     const std::string& token_file) const;
    /// Routes the channel account of the same id to the agent.
    call bind(const std::string& id, const std::string& channel) const;
    /// Unregisters the agent and prunes its state.
    call delete_agent(const std::string& id) const;
    /// `agents list --json` (the test and the runner read the runtime's view from it).
    call list_agents() const;

    /// Model and thinking default of one agent (config writes through the CLI, so the runtime's
    /// own lock and validation apply). `index` is the agent's position in agents.list (2026.6
    /// only; see agent_index). A value "" clears the setting (config unset); nullopt leaves it.
    std::vector<call> set_agent_model(const std::string& id, std::optional<std::size_t> index,
                                      const std::optional<std::string>& model,
                                      const std::optional<std::string>& thinking) const;
    /// 2026.6: the index of the agent in agents.list of the runtime's openclaw.json text;
    /// nullopt when it is not there. Other dialects: always 0 (keyed by id).
    std::optional<std::size_t> agent_index(const std::string& config_json,
                                           const std::string& id) const;

    // ---- sessions (through the runtime's gateway) -----------------------------------------
    /// The session key of an agent's session: "agent:<id>:<session>" ("main" when none).
    static std::string session_key(const std::string& id,
                                   const std::optional<std::string>& session);
    call session_create(const std::string& id, const std::optional<std::string>& session) const;
    call session_reset(const std::string& id, const std::optional<std::string>& session) const;
    call session_delete(const std::string& id, const std::optional<std::string>& session) const;
    /// Applies the agent's model/thinking to its live main session (set_agent_model's reload).
    call session_patch(const std::string& id, const std::optional<std::string>& model,
                       const std::optional<std::string>& thinking) const;

    // ---- turns and messages ---------------------------------------------------------------
    /// One agent turn (execute_prompt, the dispatcher's wake). thinking: a spec level.
    call agent_turn(const std::string& id, const std::string& message,
                    const std::optional<std::string>& session,
                    const std::optional<std::string>& model,
                    const std::optional<std::string>& thinking,
                    std::optional<int> timeout_seconds = std::nullopt) const;
    call send_message(const std::string& channel, const std::string& target,
                      const std::string& message, const std::optional<std::string>& account) const;
    call approve_pairing(const std::string& channel, const std::string& code) const;
    call restart_gateway() const;

    // ---- models and auth ------------------------------------------------------------------
    /// `models list --json`: one provider's catalogue (--provider P), or the whole (--all).
    call list_models(const std::optional<std::string>& provider) const;
    /// `models status --json`, no probe: the default model and the providers with credentials
    /// (connected_providers, default_model).
    call model_status() const;
    /// `models set <provider/model>`: the gateway's default model (agents.defaults.model).
    call set_default_model(const std::string& model) const;
    /// `models status --json --probe`, optionally of one profile.
    call auth_status(const std::optional<std::string>& profile_id) const;
    /// The key arrives on stdin, never in argv.
    call paste_api_key(const std::string& provider, const std::string& profile_id,
                       const std::string& key, const std::optional<std::string>& agent) const;
    call login(const std::string& provider, const std::string& profile_id, bool device_code,
               const std::optional<std::string>& agent) const;
    call auth_order(const std::string& provider, const std::string& profile_id,
                    const std::optional<std::string>& agent) const;
    /// 2026.9 has a CLI for it; 2026.6 has none (nullopt: awp edits the auth stores itself,
    /// under the runtime's lock; see remove_auth_profile).
    std::optional<call> auth_logout(const std::string& profile_id, const std::string& agent) const;

private:
    std::string program_;
    version version_;
    dialect dialect_;
    std::vector<std::string> base() const { return {program_}; }
};

/// JSON output of the runtime (list_models, auth_list) made storable within `limit` bytes:
/// anything before the first '{' or '[' (notices) dropped; if still too long, entries are
/// dropped from the end of the longest array until it fits, and the top-level object gets
/// "awpTruncated": {"path": <array>, "kept": k, "total": n}. Never cuts inside a value, so the
/// result is always valid JSON; text that is not JSON is returned as nullopt.
std::optional<std::string> fit_json(std::string_view output, std::size_t limit);

/// The providers the runtime has credentials for, from `models status --json` (its
/// auth.providers: auth profiles, config and environment); nullopt when it is not JSON.
std::optional<std::vector<std::string>> connected_providers(std::string_view status_output);

/// The default model (`defaultModel`) of `models status --json`.
std::optional<std::string> default_model(std::string_view status_output);

/// `models list --json` outputs (one of `--all`, or one of `--provider P` per provider) cut down
/// to the models of `providers` (a model's provider is its key up to the first '/'), in the order
/// of the outputs: {"count": n, "models": [...], "providers": [...]}; nullopt when an output is
/// not the runtime's list.
std::optional<std::string> models_of(const std::vector<std::string_view>& list_outputs,
                                     const std::vector<std::string>& providers);
std::optional<std::string> models_of(std::string_view list_output,
                                     const std::vector<std::string>& providers);

/// The model a provider's catalogue (`models list --json --provider P`) offers first: the first
/// entry the runtime marks available, else the first entry; nullopt when it has none.
std::optional<std::string> first_model(std::string_view list_output, const std::string& provider);

/// `gateway restart --json` answers ok even when there was nothing to restart ("result":
/// "not-loaded": no service installed). The reason to fail restart_gateway, or nullopt.
std::optional<std::string> restart_failure(std::string_view output);

/// The runtime's lock discipline for a file it also writes (openclaw.json, auth-profiles.json):
/// `<path>.lock` created with O_CREAT|O_EXCL holding {"pid", "createdAt"}, removed afterwards.
/// Waits up to `wait` for a lock held by a live process; a lock whose process is gone, or older
/// than `stale`, is taken over. Throws core::error when the wait runs out. Never flock(2).
void with_runtime_lock(const std::string& path, const std::function<void()>& fn,
                       std::chrono::milliseconds wait = std::chrono::seconds(15),
                       std::chrono::milliseconds stale = std::chrono::seconds(60));

/// 2026.6 auth_remove: deletes profiles[<profile_id>] (and its usage/order entries) from every
/// <state>/agents/*/agent/auth-profiles.json, each under with_runtime_lock, replaced
/// atomically. Returns how many stores had it.
int remove_auth_profile(const std::string& state_dir, const std::string& profile_id);

}  // namespace awp::runtime
