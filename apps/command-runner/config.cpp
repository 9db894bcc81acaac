// The runner's options (each with its environment name and default), their checks, and the
// runtime mode names including the original product's aliases.
#include "config.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "awp/core/error.hpp"
#include "awp/http/client.hpp"
#include "awp/http/outbound.hpp"
#include "secrets.hpp"

namespace awp::runner {

runtime_mode parse_runtime_mode(const std::string& text) {
    if (text == "container" || text == "docker") return runtime_mode::container;
    if (text == "service_manager" || text == "systemd") return runtime_mode::service_manager;
    throw core::config_error(
        "RUNTIME_MODE must be container or service_manager (aliases docker, systemd), got \"" +
        text + "\"");
}

const char* to_string(runtime_mode m) noexcept {
    return m == runtime_mode::container ? "container" : "service_manager";
}

std::string normalize_api_url(std::string given) {
    std::string url = given;
    while (!url.empty() && url.back() == '/') url.pop_back();
    if (given.empty()) return url;
    // A base address: the library's URL rules (http/https, host, port, no user info), and no
    // query, fragment or white space to append paths to.
    if (!http::parse_url(url) || url.find_first_of(" \t\r\n?#") != std::string::npos) {
        throw core::config_error("GATEWAY_API_URL must be an http(s)://host[:port] URL, got \"" +
                                 given + "\"");
    }
    return url;
}

std::string default_scripts_dir() {
    // Installed (cmake --install, the .deb, the image): <prefix>/share/awp/runtime beside
    // <prefix>/bin; run from a build tree (scripts/run-stack.sh): the source tree's scripts.
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto installed = exe.parent_path() / ".." / "share" / "awp" / "runtime";
        if (std::filesystem::is_directory(installed / "", ec)) {
            return std::filesystem::weakly_canonical(installed, ec).string();
        }
    }
#ifdef AWP_SOURCE_RUNTIME_SCRIPTS
    if (std::filesystem::is_directory(AWP_SOURCE_RUNTIME_SCRIPTS, ec))
        return AWP_SOURCE_RUNTIME_SCRIPTS;
#endif
    return "/usr/local/share/awp/runtime";
}

runner_config default_config() {
    runner_config cfg;
    const char* home_env = std::getenv("HOME");
    const std::string home = home_env ? home_env : "/tmp";
    cfg.runtime_home = home + "/.openclaw";
    cfg.secrets_dir = cfg.runtime_home + "/secrets";
    cfg.state_dir = home + "/.local/state/awp";
    cfg.scripts_dir = default_scripts_dir();
    cfg.repo_dir = home + "/awp";
    return cfg;
}

void add_options(core::daemon::cli& cli, runner_config& cfg, core::daemon::common_config& common,
                 option_text& args) {
    cli.add_common(common);
    cli.add_wake(common);
    cli.add_gateway_key(common);
    auto& app = cli.app();
    app.add_option("--gateway", cfg.gateway_slug, "This gateway's id or slug")
        ->envname("GATEWAY_ID");
    cli.secret(app.add_option("--gateway-token", cfg.gateway_token,
                              "Registration token, exchanged once through consume_gateway_token")
                   ->envname("GATEWAY_TOKEN"));
    app.add_option("--gateway-label", cfg.gateway_label, "Label and slug hint for registration")
        ->envname("GATEWAY_LABEL");
    app.add_option("--gateway-api-url", cfg.gateway_api_url,
                   "This host's api-gateway; others proxy this gateway's agents to it")
        ->envname("GATEWAY_API_URL");
    app.add_option("--tenant-id", cfg.tenant_id,
                   "Tenant of the gateway (optional: refuse to start on another tenant's)")
        ->envname("TENANT_ID");
    app.add_option("--state-dir", cfg.state_dir, "Keeps the registration across restarts")
        ->envname("AWP_STATE_DIR")
        ->capture_default_str();
    app.add_option("--runtime-mode", args.mode,
                   "container or service_manager (aliases docker, systemd)")
        ->envname("RUNTIME_MODE")
        ->capture_default_str();
    app.add_option("--command-timeout", cfg.command_timeout_s,
                   "Seconds before a command's process group is killed")
        ->envname("COMMAND_TIMEOUT")
        ->check(CLI::Range(1, 86400 - 60))
        ->capture_default_str();
    app.add_option(
           "--networking-mode", cfg.networking_mode,
           "local: the runtime's OAuth callback catches the redirect; anything else: paste-back")
        ->envname("NETWORKING_MODE")
        ->capture_default_str();
    app.add_option("--agent-runtime", cfg.agent_runtime, "The agent runtime CLI")
        ->envname("AGENT_RUNTIME")
        ->capture_default_str();
    app.add_option("--agent-user", args.agent_user,
                   "The user the agents' processes run as (runtime CLI, run_shell, agent "
                   "scripts); it owns OPENCLAW_STATE_DIR. Unset: the runner's own user")
        ->envname("AGENT_USER");
    app.add_option("--compose-project", cfg.compose_project,
                   "Compose project of the stack (container mode)")
        ->envname("COMPOSE_PROJECT")
        ->capture_default_str();
    app.add_option("--runtime-state-dir", cfg.runtime_home,
                   "The runtime's state folder (openclaw.json, agents/, workspace-<slug>/); "
                   "the runtime's own OPENCLAW_STATE_DIR, passed to every CLI call")
        ->envname("OPENCLAW_STATE_DIR")
        ->capture_default_str();
    app.add_option("--workspaces-dir", cfg.workspaces_dir,
                   "Where the agents' workspaces are (workspace-<slug>), when not in "
                   "OPENCLAW_STATE_DIR: with AGENT_USER, a folder shared with the api-gateway")
        ->envname("AWP_WORKSPACES_DIR");
    app.add_option("--secrets-dir", cfg.secrets_dir,
                   "Where gateway.env and agents/<slug>.env are written")
        ->envname("SECRETS_DIR")
        ->capture_default_str();
    app.add_option("--scripts-dir", cfg.scripts_dir,
                   "deploy/runtime: the add/update/remove agent scripts")
        ->envname("AWP_RUNTIME_SCRIPTS")
        ->capture_default_str();
    app.add_option("--templates-dir", cfg.templates_dir,
                   "Agent templates, one folder each (default: templates/ beside the scripts)")
        ->envname("AWP_TEMPLATES_DIR");
    app.add_option("--templates-repo", cfg.templates_repo,
                   "Git repository the templates are published to, a branch template/<name> each "
                   "(default: <OPENCLAW_STATE_DIR>/awp-templates.git)")
        ->envname("AWP_TEMPLATES_REPO");
    app.add_option("--templates-source", cfg.templates_source,
                   "Where more templates come from (docs/command-runner.md, \"Templates\"): a git "
                   "repository (path or URL, optionally git+<url>) with template/<name> branches "
                   "or a templates/<name> folder each, or a folder of template folders")
        ->envname("AWP_TEMPLATES_SOURCE");
    app.add_option("--host-ops-dir", cfg.host_ops_dir,
                   "Request folder of the host's awp-host-ops helper (systemd units): "
                   "service_manager restarts and updates go through it")
        ->envname("AWP_HOST_OPS_DIR");
    app.add_option("--repo-dir", cfg.repo_dir,
                   "Checkout pulled by update_gateway in service_manager mode")
        ->envname("AWP_REPO_DIR")
        ->capture_default_str();
    cli.secret(app.add_option("--service-role-key", cfg.service_role_key,
                              "Service-role key: derives the key of the enc:v1 secrets")
                   ->envname("SERVICE_ROLE_KEY"));
    cli.secret(app.add_option("--hosted-secrets-key", cfg.hosted_secrets_key,
                              "The 32-byte secrets key itself (base64url, base64 or hex)")
                   ->envname("HOSTED_SECRETS_KEY"));
    app.add_option("--auth-timeout", cfg.auth_timeout_s, "Ceiling of an auth_start flow, seconds")
        ->envname("AUTH_FLOW_TIMEOUT")
        ->check(CLI::Range(5, 3600))
        ->capture_default_str();
    app.add_option("--callback-port", cfg.callback_port, "The runtime's OAuth callback port")
        ->envname("AUTH_CALLBACK_PORT")
        ->check(CLI::Range(1, 65535))
        ->capture_default_str();
    app.add_option("--output-limit", cfg.output_limit,
                   "Bytes of stdout and of stderr kept per command (the tail)")
        ->envname("OUTPUT_LIMIT")
        ->check(CLI::Range(std::size_t{256}, std::size_t{16} << 20))
        ->capture_default_str();
    app.add_option("--outbound-allow", cfg.outbound_allow,
                   "Addresses source connectors may reach besides the public internet "
                   "(CIDRs, addresses, hosts, :port; docs/security.md)")
        ->envname("OUTBOUND_ALLOW");
    app.add_option("--secrets-interval", cfg.secrets_interval_s,
                   "Seconds between periodic secrets syncs")
        ->envname("SECRETS_SYNC_INTERVAL")
        ->check(CLI::Range(1.0, 86400.0))
        ->capture_default_str();
}

std::optional<int> finish_config(runner_config& cfg, const core::daemon::common_config& common,
                                 const option_text& args) {
    try {
        cfg.mode = parse_runtime_mode(args.mode);
        cfg.gateway_api_url = normalize_api_url(cfg.gateway_api_url);
        // Fails early on a malformed HOSTED_SECRETS_KEY.
        (void)secrets_key(cfg.hosted_secrets_key, cfg.service_role_key);
        (void)http::outbound_policy(cfg.outbound_allow, {});  // names a bad entry
        // Handed to git as a repository: never an option, never a control character.
        const auto& src = cfg.templates_source;
        if (!src.empty() && (src.front() == '-' || src.size() > 2048 ||
                             std::any_of(src.begin(), src.end(), [](char c) {
                                 return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                             }))) {
            throw core::config_error(
                "AWP_TEMPLATES_SOURCE must be a repository path or URL, or a folder (not an "
                "option, no control characters, at most 2048 bytes)");
        }
        cfg.agent_user = core::identity::agent_user(args.agent_user);
        if (cfg.agent_user) {
            core::identity::check_layout(
                *cfg.agent_user, "OPENCLAW_STATE_DIR", cfg.runtime_home,
                {{"SECRETS_DIR", cfg.secrets_dir}, {"AWP_STATE_DIR", cfg.state_dir}});
        }
        // The runtime's version decides every argv; an unsupported one stops here (78).
        cfg.runtime = runtime::cli::detect(cfg.agent_runtime);
    } catch (const core::error& e) {
        std::cerr << "awp-command-runner: " << e.what() << "\n";
        return core::daemon::kExitConfig;
    }
    cfg.database_url = common.database_url;
    cfg.wake = common.wake;
    cfg.instance = common.instance;
    cfg.safety_poll_s = common.safety_poll_s;
    cfg.drain_timeout_s = common.drain_timeout_s;
    return std::nullopt;
}

std::optional<int> load_config(int argc, char** argv, runner_config& cfg) {
    core::daemon::common_config common;
    option_text args;
    cfg = default_config();
    core::daemon::cli cli("awp-command-runner", "Runs the agent_commands of one gateway");
    add_options(cli, cfg, common, args);
    if (auto code = cli.parse(argc, argv, &common)) return code;
    return finish_config(cfg, common, args);
}

}  // namespace awp::runner
