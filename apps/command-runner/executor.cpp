// Running one leased command's action (executor.hpp). The runtime operations that read the
// runtime's answers between calls are in runtime_ops.cpp.
#include "executor.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "agent_state.hpp"
#include "awp/core/child_env.hpp"
#include "awp/core/error.hpp"
#include "awp/core/json.hpp"
#include "awp/core/secrets.hpp"
#include "awp/http/outbound.hpp"
#include "housekeeping.hpp"
#include "local_ops.hpp"
#include "pre_run.hpp"
#include "scrub.hpp"
#include "secrets.hpp"
#include "sources.hpp"

namespace awp::runner {

namespace proc = core::process;
using namespace std::chrono_literals;

namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

command_outcome lost() { return command_outcome::of(command_outcome::kind::lease_lost); }

/// The template folders of `dir` whose names a provision may give (the rule of template_name,
/// as deploy/runtime/common.sh publishes them), sorted, comma-separated; "none" when there is
/// none.
std::string known_templates(const std::string& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        if (!e.is_directory(ec)) continue;
        const auto name = e.path().filename().string();
        try {
            if (template_name(name) == name) names.push_back(name);
        } catch (const core::error&) {  // _shared, hidden folders, unsafe names
        }
    }
    std::sort(names.begin(), names.end());
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? "none" : out;
}

}  // namespace

proc::spawn_options child_options(const runner_config& cfg, const std::string& gateway_slug,
                                  std::vector<std::string> argv, bool as_agent) {
    proc::spawn_options o;
    o.argv = std::move(argv);
    if (as_agent) o.run_as = cfg.agent_user;
    o.env["AGENT_RUNTIME"] = cfg.agent_runtime;
    o.env["AWP_RUNTIME_HOME"] = cfg.runtime_home;
    // The runtime's own setting: every CLI call works on the state this runner edits.
    o.env["OPENCLAW_STATE_DIR"] = cfg.runtime_home;
    o.env["AWP_SECRETS_DIR"] = cfg.secrets_dir;
    if (!cfg.workspaces_dir.empty()) o.env["AWP_WORKSPACES_DIR"] = cfg.workspaces_dir;
    // The agent scripts publish the templates and keep the workspaces on their branches.
    o.env["AWP_TEMPLATES_DIR"] = cfg.templates();
    o.env["AWP_TEMPLATES_REPO"] = cfg.template_repo();
    if (!cfg.templates_source.empty()) o.env["AWP_TEMPLATES_SOURCE"] = cfg.templates_source;
    if (!cfg.host_ops_dir.empty()) o.env["AWP_HOST_OPS_DIR"] = cfg.host_ops_dir;
    o.env["AWP_GATEWAY"] = gateway_slug;
    // The runner's own credentials never reach a child: an allowlisted environment.
    core::child_env::apply(o);
    // Room for redaction before the final cut, so no secret is split at the cut.
    o.max_output = cfg.output_limit + 4096;
    o.kill_grace = 2s;
    return o;
}

executor::executor(const runner_config& cfg, std::string gateway_slug, core::pg::session& db,
                   command_io& io, housekeeping& hk)
    : cfg_(cfg), slug_(std::move(gateway_slug)), db_(db), io_(io), hk_(hk) {}

std::vector<std::string> executor::redactions(const command_row& cmd) const {
    return hk_.secrets().for_command(cmd);
}

net::awaitable<std::optional<std::string>> executor::shared_runtime_id(const command_row& cmd,
                                                                       std::string slug,
                                                                       std::string id) {
    // Parameters built apart from the co_await: GCC 12 miscompiles a braced list inside one.
    core::pg::params params{cmd.id, slug};
    const auto r = co_await read_before_run(
        db_, cmd, std::string("agents of the gateway"),
        std::string("SELECT a.slug FROM public.agents a JOIN public.agent_commands c ON "
                    "c.gateway_id = a.gateway_id AND c.tenant_id = a.tenant_id WHERE c.id = "
                    "$1::uuid AND a.slug <> $2 ORDER BY a.slug"),
        std::move(params));
    if (!r) co_return std::nullopt;
    for (int i = 0; i < r->size(); ++i) {
        const auto other = r->get<std::string>(i, 0);
        try {
            if (runtime::agent_id(other) == id) co_return other;
        } catch (const core::error&) {  // a slug the runtime cannot hold maps to no id
        }
    }
    co_return std::string();
}

std::string executor::read_runtime_file(const std::string& path) const {
    // The runtime's files are the agent user's (0600 as the runtime writes them).
    const core::identity::as_user_files as_agent(cfg_.agent_user);
    return read_text(path);
}

net::awaitable<command_outcome> executor::run_steps(command_row cmd, plan p) {
    const int lease = static_cast<int>(p.timeout.count()) *
                          static_cast<int>(std::max<std::size_t>(1, p.steps.size())) +
                      60;
    if (!co_await io_.hold_for(db_, cmd, lease)) co_return lost();
    if (p.kind == plan_kind::provision) {
        // The agents row says so while it runs; its end (ready or error) goes with the outcome.
        co_await io_.agent_state(db_, cmd, p.fields.at("agent_slug"), provisioning_state());
    }
    if (p.sync_secrets_first) {
        // provision: the agent's env file must be current before the runtime reads it.
        const std::string failure = co_await hk_.sync(db_);
        if (!failure.empty()) {
            co_return command_outcome::failure(
                "secrets sync failed, the agent's env file is not current: " + failure);
        }
    }
    if (std::string why = prepare_steps(cmd, p); !why.empty()) {
        co_return command_outcome::failure(std::move(why));
    }
    const auto secrets = redactions(cmd);
    const auto deadline = std::chrono::steady_clock::now() + p.timeout;
    std::string out, err, error;
    std::optional<int> exit_code;
    bool ok = true;
    for (std::size_t i = 0; i < p.steps.size() && ok; ++i) {
        proc::spawn_options o = child(p.steps[i].argv, !p.steps[i].host_operation);
        o.stdin_data = p.steps[i].stdin_data;
        // A JSON output is read whole (up to 8 MiB), then trimmed by entries, never by bytes.
        if (p.json_output) o.max_output = std::size_t{8} << 20;
        if (p.fields.count("cwd") && std::filesystem::is_directory(p.fields.at("cwd")))
            o.working_dir = p.fields.at("cwd");
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        o.timeout = std::max(left, std::chrono::milliseconds(1));
        proc::process_result r;
        std::string spawn_failure;
        try {
            r = co_await proc::async_run(o);
        } catch (const proc::spawn_error& e) {
            spawn_failure = e.what();
        }
        if (!spawn_failure.empty()) {
            ok = false;
            error = spawn_failure;  // "cannot start <program>: <why>"
            break;
        }
        if (p.steps.size() > 1) {
            out += "$ " + o.argv[0] + (o.argv.size() > 1 ? " " + o.argv[1] : "") + " ...\n";
        }
        out += r.out;
        err += r.err;
        if (r.timed_out) {
            ok = false;
            error = "timed out after " + std::to_string(p.timeout.count()) +
                    " s (process group killed)";
        } else if (r.term_signal != 0) {
            ok = false;
            error = "killed by signal " + std::to_string(r.term_signal);
        } else if (r.exit_code != 0) {
            ok = false;
            exit_code = r.exit_code;
            error = "exited with code " + std::to_string(r.exit_code);
            const std::string why =
                runtime::error_line(redact(r.err, secrets), redact(r.out, secrets));
            if (!why.empty()) error += ": " + why;
        } else {
            exit_code = 0;
        }
    }
    if (ok && !p.success_stdout.empty() && out.find_first_not_of(" \r\n\t") == std::string::npos)
        out = p.success_stdout;
    std::string patch;
    if (ok && p.kind == plan_kind::set_agent_model) patch = co_await reload_session(p);
    if (ok && p.field("check") == std::optional<std::string>("gateway_restart")) {
        if (auto why = runtime::restart_failure(out)) {
            ok = false;
            error = "restart_gateway: " + *why;
        }
    }
    command_outcome o =
        ok ? command_outcome::success(std::move(out), std::move(err))
           : command_outcome::failure(std::move(error), exit_code, std::move(out), std::move(err));
    o.patch = std::move(patch);
    o.json_out = p.json_output;
    co_return o;
}

std::string executor::prepare_steps(const command_row& cmd, plan& p) {
    const runtime::cli& rt = cfg_.runtime;
    auto add = [&](runtime::call c) {
        p.steps.push_back({std::move(c.argv), std::move(c.stdin_data)});
    };
    const std::string config = cfg_.runtime_home + "/openclaw.json";
    if (p.kind == plan_kind::set_agent_model) {
        const std::string id = p.fields.at("agent_id");
        const auto index = rt.agent_index(read_runtime_file(config), id);
        if (!index) {
            return cmd.action + ": agent \"" + id + "\" is not configured in the runtime (" +
                   config + ")";
        }
        for (auto& c : rt.set_agent_model(id, index, p.field("model"), p.field("thinking")))
            add(std::move(c));
        return "";
    }
    if (p.kind != plan_kind::provision) return "";
    const std::string slug = p.fields.at("agent_slug");
    const std::string id = p.fields.at("agent_id");
    const std::string channel = p.fields.at("channel");
    const std::string workspace = cfg_.workspace(slug);
    std::optional<std::string> template_name = p.field("source_template");
    if (template_name && cfg_.templates_source.empty() &&
        !std::filesystem::is_directory(cfg_.templates() + "/" + *template_name)) {
        // Without a template source the folder is every template: no process, no git.
        return "provision: template \"" + *template_name +
               "\" does not exist on this gateway; known templates: " +
               known_templates(cfg_.templates()) + " (templates folder " + cfg_.templates() + ")";
    }
    std::string token_file;
    if (channel != "none") {
        // The runtime reads the bot token from a file awp keeps (0600), never from argv.
        const std::string var = core::secrets::channel_token_name(channel);
        auto env = read_env_file(cfg_.secrets_dir + "/agents/" + slug + ".env");
        if (env[var].empty()) env = read_env_file(cfg_.secrets_dir + "/gateway.env");
        if (env[var].empty()) {
            return "provision: no " + var + " among the agent's secrets (" + cfg_.secrets_dir +
                   "/agents/" + slug + ".env) or the gateway's; store the " + channel +
                   " bot token first, or provision with channel \"none\"";
        }
        token_file = cfg_.channel_token_dir() + "/" + id + "." + channel + ".token";
        // With AGENT_USER the file is the agent user's (the runtime reads it as that user).
        const core::identity::as_user_files as_agent(cfg_.agent_user);
        std::error_code ec;
        std::filesystem::create_directories(cfg_.channel_token_dir(), ec);
        std::filesystem::permissions(cfg_.channel_token_dir(), std::filesystem::perms::owner_all,
                                     ec);
        try {
            write_file_atomic(token_file, env[var], 0600);
        } catch (const std::exception& e) {
            return std::string("provision: cannot write the channel token file: ") + e.what();
        }
    }
    if (template_name && !cfg_.templates_source.empty()) {
        // With a template source the names are known once it is read: the templates published,
        // then looked up (deploy/runtime/templates.sh), before the runtime is called.
        p.steps.push_back(
            {{cfg_.scripts() + "/templates.sh", "require", *template_name}, std::nullopt});
    }
    add(rt.add_agent(id, workspace, p.field("model")));
    if (auto c = rt.set_identity(id, p.field("name"), p.field("emoji"))) add(std::move(*c));
    if (template_name) {
        // The workspace becomes a checkout of the template's branch: its files over the
        // runtime's seed files, and `update` merges the template's later versions into it.
        p.steps.push_back(
            {{cfg_.scripts() + "/checkout-template.sh", slug, "template/" + *template_name},
             std::nullopt});
    }
    if (!token_file.empty()) {
        add(rt.add_channel(channel, id, token_file));
        add(rt.bind(id, channel));
    }
    // What the runtime has no place for stays in awp's own record of the agent.
    std::vector<std::pair<std::string, std::string>> record = {
        {"slug", slug}, {"runtime_agent_id", id}, {"command_id", cmd.id}};
    for (const char* k : {"channel", "discord_server_id", "discord_user_id", "source_template",
                          "description", "owner_name", "owner_preferred_name", "owner_timezone"}) {
        if (const auto v = p.field(k)) record.emplace_back(k, *v);
    }
    try {
        std::filesystem::create_directories(cfg_.state_dir + "/agents");
        write_file_atomic(cfg_.state_dir + "/agents/" + slug + ".json", json_object(record) + "\n",
                          0600);
    } catch (const std::exception& e) {
        return std::string("provision: cannot write awp's record of the agent: ") + e.what();
    }
    return "";
}

net::awaitable<command_outcome> executor::run_local(command_row cmd, plan p) {
    if (!co_await io_.hold_for(db_, cmd, static_cast<int>(p.timeout.count()) + 60))
        co_return lost();
    std::string out, error;
    try {
        if (p.kind == plan_kind::auth_remove) {
            out = co_await remove_profile(p.fields.at("profile_id"));
        } else if (p.kind == plan_kind::upload_file) {
            // As the agent user: the file is the agent's, and a symlink or folder the agent
            // planted leads only where it could write itself.
            const core::identity::as_user_files as_agent(cfg_.agent_user);
            out = upload_file(p.fields.at("dir"), p.fields.at("path"), p.fields.at("content"),
                              p.fields.at("mode"));
        }
    } catch (const std::exception& e) {
        error = e.what();
    }
    if (error.empty()) co_return command_outcome::success(std::move(out));
    co_return command_outcome::failure(std::move(error));
}

net::awaitable<command_outcome> executor::run_runtime_op(command_row cmd, plan p) {
    // Two or three runtime calls, each within the plan's timeout.
    const int lease = static_cast<int>(p.timeout.count()) * 3 + 60;
    const bool held = co_await io_.hold_for(db_, cmd, lease);
    if (!held) co_return lost();
    // Each awaited on its own statement (GCC 12 mishandles some co_return co_await forms).
    command_outcome o;
    if (p.kind == plan_kind::list_models) {
        o = co_await connected_models(cmd, p);
    } else {
        o = co_await set_default_provider(cmd, p);
    }
    co_return o;
}

net::awaitable<command_outcome> executor::run_source_write(command_row cmd, plan p) {
    const std::string conn_id = p.fields.at("connection_id");
    core::pg::params params{conn_id, cmd.tenant_id};
    const auto r = co_await read_before_run(
        db_, cmd, std::string("source connection"),
        std::string("SELECT provider, writable, config::text, status FROM "
                    "public.source_connections WHERE id = $1::uuid AND tenant_id = $2::uuid"),
        std::move(params));
    if (!r) co_return command_outcome::of(command_outcome::kind::abandoned);
    if (r->empty()) {
        co_return command_outcome::failure("source_write: connection " + conn_id + " not found");
    }
    if (!r->get<bool>(0, 1)) {
        co_return command_outcome::failure(
            "source_write: connection " + conn_id +
            " is not writable (writable = false); nothing was executed");
    }
    source_call call;
    call.connection_id = conn_id;
    call.provider = r->get<std::string>(0, 0);
    call.config = r->get<std::string>(0, 2);
    call.action = p.fields.at("action");
    call.params = p.fields.at("params");
    call.timeout = p.timeout;
    call.check.emplace();
    call.check->scope = http::outbound_scope::internet;
    call.check->policy =
        http::outbound_policy(cfg_.outbound_allow, http::database_ports({cfg_.database_url}));
    auto provider = make_source_provider(call.provider);
    if (!provider) {
        co_return command_outcome::failure("source_write: provider \"" + call.provider +
                                           "\" has no write support on this runner");
    }
    if (!co_await io_.hold_for(db_, cmd, static_cast<int>(p.timeout.count()) + 60))
        co_return lost();
    call.credentials = source_credentials(read_env_file(cfg_.secrets_dir + "/gateway.env"),
                                          call.provider, conn_id);
    std::vector<std::string> credentials;
    for (const auto& [k, v] : call.credentials) credentials.push_back(v);
    std::string out, error;
    try {
        out = co_await provider->execute(call);
    } catch (const std::exception& e) {
        error = e.what();
    }
    command_outcome o = error.empty() ? command_outcome::success(std::move(out))
                                      : command_outcome::failure(std::move(error));
    o.secrets = std::move(credentials);  // never stored, whatever the provider echoes
    co_return o;
}

}  // namespace awp::runner
