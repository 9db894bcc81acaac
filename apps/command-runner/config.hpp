// The command runner's configuration: what main parses and every part of the runner reads.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "awp/core/daemon.hpp"
#include "awp/core/identity.hpp"
#include "awp/runtime/openclaw.hpp"

namespace awp::runner {

/// How gateway services are restarted and updated (spec: RUNTIME_MODE).
enum class runtime_mode { container, service_manager };

/// "container" / "docker" and "service_manager" / "systemd"; throws config_error otherwise.
runtime_mode parse_runtime_mode(const std::string& text);
const char* to_string(runtime_mode m) noexcept;

/// GATEWAY_API_URL: "" or http(s)://host[:port][/path], returned without a trailing '/';
/// throws config_error otherwise.
std::string normalize_api_url(std::string url);

struct runner_config {
    std::string database_url;
    core::daemon::wake_options wake;  // WAKE_DATABASE_URL, WAKE_URL, WAKE_CA_FILE
    std::string gateway_slug;         // GATEWAY_ID: this gateway's id or slug (resolved once)
    std::string gateway_token;        // GATEWAY_TOKEN: first registration (secret)
    std::string gateway_label;        // label given to consume_gateway_token
    std::string tenant_id;            // TENANT_ID: optional; the gateway must belong to it
    std::string state_dir;  // keeps the registration (gateway id and slug) across restarts
    std::string instance;   // identity in leases and heartbeats

    std::string gateway_api_url;  // GATEWAY_API_URL: this host's api-gateway (meta.api_url)
    runtime_mode mode = runtime_mode::container;
    int command_timeout_s = 120;  // COMMAND_TIMEOUT
    std::string networking_mode = "local";
    std::string agent_runtime = "openclaw";  // AGENT_RUNTIME
    runtime::cli runtime;                    // its version, detected at start (main)
    std::string compose_project = "awp";
    std::string runtime_home;  // OPENCLAW_STATE_DIR: the runtime's state (openclaw.json, agents/,
                               // workspace-<slug>/), passed to every runtime CLI call
    /// OUTBOUND_ALLOW: what source connectors (http_json) may reach besides the public internet
    /// (comma list of CIDRs, addresses, host names, each with an optional :port; the
    /// api-gateway's API_OUTBOUND_ALLOW syntax). The database's port is always refused.
    std::string outbound_allow;
    std::string secrets_dir;  // gateway.env and agents/<slug>.env
    /// AWP_WORKSPACES_DIR: where the agents' workspaces are (workspace-<slug>); default the
    /// runtime's state folder. With an agent user, a folder shared with the api-gateway, since
    /// the runtime keeps its own state folder 0700.
    std::string workspaces_dir;
    std::string workspace(const std::string& slug) const {
        return (workspaces_dir.empty() ? runtime_home : workspaces_dir) + "/workspace-" + slug;
    }
    /// AGENT_USER: the user every process of an agent runs as (the runtime CLI, run_shell, the
    /// agent scripts, template copies); it owns runtime_home. Unset: the runner's own user.
    std::optional<core::identity::user> agent_user;
    std::string scripts_dir;  // deploy/runtime: add/update/remove/update-all agent scripts
    /// AWP_TEMPLATES_DIR: the agent templates (one folder each, deploy/templates); default the
    /// templates/ folder beside the scripts.
    std::string templates_dir;
    /// AWP_TEMPLATES_REPO: the git repository the templates are published to (a branch
    /// template/<name> each, a commit per change) and the agents' workspaces track; default
    /// <OPENCLAW_STATE_DIR>/awp-templates.git (the agent user's, who runs the scripts).
    std::string templates_repo;
    /// AWP_TEMPLATES_SOURCE: more templates, published with the folder's on every provision
    /// and update (a name it has wins over the folder's): a git repository (a path or URL,
    /// optionally git+<url>) with template/<name> branches, or whose default branch keeps a
    /// templates/<name> folder each (the product's layout, templates/_shared under each); or a
    /// local folder of template folders (or with a templates/ folder of them). "" = none.
    std::string templates_source;
    std::string scripts() const { return scripts_dir.empty() ? std::string(".") : scripts_dir; }
    std::string templates() const {
        return templates_dir.empty() ? scripts() + "/../templates" : templates_dir;
    }
    std::string template_repo() const {
        return templates_repo.empty() ? runtime_home + "/awp-templates.git" : templates_repo;
    }
    std::string repo_dir;  // service_manager update_gateway: the checkout to pull
    /// AWP_HOST_OPS_DIR: the request folder of the host's awp-host-ops helper (deploy/systemd):
    /// when set, service_manager's restart_dispatcher, restart_gateway and update_gateway are
    /// asked of that helper (it runs them with the rights the runner's unit does not have).
    std::string host_ops_dir;
    std::string service_role_key;          // secret: derives the secrets key (enc:v1)
    std::string hosted_secrets_key;        // secret: the 32-byte key itself, when set
    int auth_timeout_s = 300;              // auth flow ceiling
    int callback_port = 1455;              // the runtime's OAuth callback port
    std::size_t output_limit = 16 * 1024;  // bytes kept per stream and command
    double safety_poll_s = 30;             // also the heartbeat period
    double secrets_interval_s = 300;
    double drain_timeout_s = 20;

    std::chrono::seconds command_timeout() const { return std::chrono::seconds(command_timeout_s); }
    /// Where the channel bot tokens the runtime reads (--token-file) are kept: awp's secrets
    /// folder, or, with AGENT_USER, a folder of the runtime's state the agent user owns (the
    /// runtime runs as that user and must read them; the secrets folder is the runner's own).
    std::string channel_token_dir() const {
        return agent_user ? runtime_home + "/awp-channels" : secrets_dir + "/channels";
    }
    int lease_seconds() const { return command_timeout_s + 60; }
};

/// The options parsed as text and turned into runner_config fields by finish_config().
struct option_text {
    std::string mode = "container";  // RUNTIME_MODE
    std::string agent_user;          // AGENT_USER
};

/// Where the agent scripts are when AWP_RUNTIME_SCRIPTS does not say: <exe>/../share/awp/runtime
/// when installed, else the source tree's deploy/runtime (a build tree), else
/// /usr/local/share/awp/runtime. The templates default to templates/ beside them.
std::string default_scripts_dir();

/// The defaults that depend on $HOME (runtime state, secrets, state and checkout folders).
runner_config default_config();

/// Registers every option of the runner (and the common ones) with its environment name.
void add_options(core::daemon::cli& cli, runner_config& cfg, core::daemon::common_config& common,
                 option_text& args);

/// After parsing: the checks and derived fields (runtime mode, GATEWAY_API_URL, the secrets key,
/// OUTBOUND_ALLOW, AGENT_USER's layout, the runtime's version), then the common options. An exit
/// code (78, the reason on stderr) when the configuration is unusable.
std::optional<int> finish_config(runner_config& cfg, const core::daemon::common_config& common,
                                 const option_text& args);

/// default_config + add_options + parse + finish_config: the configuration main runs with, or
/// the exit code to stop with (0 after --help or --print-config, 78 for bad configuration).
std::optional<int> load_config(int argc, char** argv, runner_config& cfg);

}  // namespace awp::runner
