// Payload validation and argv mapping of every command action (docs/command-runner.md lists them).
#include "actions.hpp"

#include <algorithm>
#include <cstdint>
#include <regex>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/crypto.hpp"
#include "awp/core/json.hpp"
#include "awp/runtime/openclaw.hpp"

namespace awp::runner {

namespace rj = rapidjson;

namespace {

const std::regex kUuid(
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$");
// The agents.slug rule of the schema: no '/', never "..": safe inside a path.
const std::regex kAgentSlug("^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$");
const std::regex kProvider("^[a-z0-9][a-z0-9._-]{0,63}$");
const std::regex kProfileName("^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
const std::regex kProfileId("^[a-z0-9][a-z0-9._-]{0,63}:[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
const std::regex kModel(
    "^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,99}/[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,199}$");
const std::regex kPairingCode("^[A-Za-z0-9_-]{1,100}$");
const std::regex kDigits("^[0-9]{1,32}$");
const std::regex kTimezone("^[A-Za-z][A-Za-z0-9_+-]{0,39}(/[A-Za-z0-9][A-Za-z0-9_+-]{0,39}){0,3}$");
// A template's name: one folder of the templates, one branch template/<name> of their repository.
const std::regex kTemplate("^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$");
const std::regex kSessionId("^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$");
const std::regex kSourceAction("^[a-z][a-z0-9_.-]{0,63}$");
const std::regex kUrl("^https?://[^\\s\"'<>]{1,2040}$");
const std::regex kFileMode("^0?[0-7]{3}$");

bool has_control(const std::string& s, bool allow_newlines) {
    return std::any_of(s.begin(), s.end(), [&](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        if (allow_newlines && (c == '\n' || c == '\t' || c == '\r')) return false;
        return c < 0x20 || c == 0x7f;
    });
}

/// Typed, named access to one command's payload; every failure names action and field.
class payload {
public:
    payload(const command_row& cmd) : action_(cmd.action) {
        try {
            doc_ = core::json::parse_object(cmd.payload, core::json::kPayload);
        } catch (const core::json::parse_error& e) {
            fail(std::string("payload must be a JSON object (") + e.what() + ")");
        }
    }

    [[noreturn]] void fail(const std::string& what) const {
        throw invalid_command(action_ + ": " + what);
    }

    bool has(const char* name) const { return doc_.HasMember(name) && !doc_[name].IsNull(); }

    /// A string field; absent, null and "" (after trimming) read as nullopt.
    std::optional<std::string> text(const char* name, std::size_t max_len = 200,
                                    const std::regex* format = nullptr,
                                    const char* format_name = "", bool multiline = false) const {
        if (!has(name)) return std::nullopt;
        const auto& v = doc_[name];
        if (!v.IsString()) fail(std::string("payload field \"") + name + "\" must be a string");
        std::string s(v.GetString(), v.GetStringLength());
        if (!multiline) s = trim_space(s);
        if (s.empty() && !multiline) return std::nullopt;
        if (s.size() > max_len) {
            fail(std::string("payload field \"") + name + "\" is longer than " +
                 std::to_string(max_len) + " bytes");
        }
        if (s.find('\0') != std::string::npos || has_control(s, multiline)) {
            fail(std::string("payload field \"") + name + "\" must not contain control characters");
        }
        if (format && !std::regex_match(s, *format)) {
            fail(std::string("payload field \"") + name + "\" must be " + format_name);
        }
        return s;
    }

    std::string required(const char* name, std::size_t max_len = 200,
                         const std::regex* format = nullptr, const char* format_name = "",
                         bool multiline = false) const {
        auto v = text(name, max_len, format, format_name, multiline);
        if (!v || v->empty()) {
            fail(std::string("payload field \"") + name + "\" is required (a non-empty string)");
        }
        return *v;
    }

    std::string one_of(const char* name, const std::vector<std::string>& allowed,
                       const std::string& fallback) const {
        auto v = text(name, 64);
        if (!v) return fallback;
        if (std::find(allowed.begin(), allowed.end(), *v) == allowed.end()) {
            std::string list;
            for (std::size_t i = 0; i < allowed.size(); ++i) {
                list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
            }
            fail(std::string("payload field \"") + name + "\" must be " + list + ", got \"" + *v +
                 "\"");
        }
        return *v;
    }

    std::optional<long> integer(const char* name, long min, long max) const {
        if (!has(name)) return std::nullopt;
        const auto& v = doc_[name];
        if (!v.IsInt64()) fail(std::string("payload field \"") + name + "\" must be an integer");
        const long n = static_cast<long>(v.GetInt64());
        if (n < min || n > max) {
            fail(std::string("payload field \"") + name + "\" must be between " +
                 std::to_string(min) + " and " + std::to_string(max));
        }
        return n;
    }

    const rj::Value* value(const char* name) const { return has(name) ? &doc_[name] : nullptr; }

private:
    std::string action_;
    rj::Document doc_;
};

std::string to_json(const rj::Value& v) {
    rj::StringBuffer buf;
    rj::Writer<rj::StringBuffer> w(buf);
    v.Accept(w);
    return {buf.GetString(), buf.GetSize()};
}

std::string agent_slug_of(const command_row& cmd, const payload& p) {
    std::optional<std::string> slug = cmd.agent_slug;
    if (!slug || slug->empty()) slug = p.text("agent_slug", 128);
    if (!slug || slug->empty()) p.fail("the command needs an agent (agent_slug or agent_id)");
    if (!std::regex_match(*slug, kAgentSlug) || slug->find("..") != std::string::npos) {
        p.fail("agent slug \"" + *slug + "\" is not a safe slug ([A-Za-z0-9._-], no \"..\")");
    }
    return *slug;
}

const std::vector<std::string> kChannels = {"telegram", "discord", "slack", "none"};
const std::vector<std::string> kChatChannels = {"telegram", "discord", "slack"};
const std::vector<std::string> kThinking = {"none", "low", "medium", "high"};

std::string script(const runner_config& cfg, const char* name) {
    return (cfg.scripts_dir.empty() ? std::string(".") : cfg.scripts_dir) + "/" + name;
}

plan spawn_plan(const runner_config& cfg, std::vector<std::string> argv) {
    plan p;
    p.timeout = cfg.command_timeout();
    p.steps.push_back(step{std::move(argv), std::nullopt});
    return p;
}

plan spawn_plan(const runner_config& cfg, runtime::call c) {
    plan p;
    p.timeout = cfg.command_timeout();
    p.steps.push_back(step{std::move(c.argv), std::move(c.stdin_data)});
    return p;
}

/// The runtime's id of the command's agent (refuses slugs the runtime cannot hold).
std::string runtime_id(const payload& p, const std::string& slug) {
    try {
        return runtime::agent_id(slug);
    } catch (const core::error& e) {
        p.fail(e.what());
    }
}

/// The runtime's id of the command row's agent, when the command names one.
std::optional<std::string> row_agent_id(const command_row& cmd, const payload& p) {
    if (!cmd.agent_slug || cmd.agent_slug->empty()) return std::nullopt;
    return runtime_id(p, agent_slug_of(cmd, p));
}

/// A plan of one host operation (see step::host_operation).
plan host_plan(const runner_config& cfg, std::vector<std::string> argv) {
    plan p = spawn_plan(cfg, std::move(argv));
    p.steps.back().host_operation = true;
    return p;
}

std::vector<std::string> compose(const runner_config& cfg, std::vector<std::string> rest) {
    std::vector<std::string> argv = {"docker", "compose", "-p", cfg.compose_project};
    argv.insert(argv.end(), rest.begin(), rest.end());
    return argv;
}

plan plan_provision(const command_row& cmd, const runner_config& cfg, const payload& p) {
    const std::string slug = agent_slug_of(cmd, p);
    plan out;
    out.kind = plan_kind::provision;
    out.timeout = cfg.command_timeout();
    out.sync_secrets_first = true;
    out.fields["agent_slug"] = slug;
    out.fields["agent_id"] = runtime_id(p, slug);
    out.fields["channel"] = p.one_of("channel", kChannels, "telegram");
    const auto put = [&](const char* key, const std::optional<std::string>& v) {
        if (v) out.fields[key] = *v;
    };
    put("discord_server_id", p.text("discord_server_id", 32, &kDigits, "a numeric Discord id"));
    put("discord_user_id", p.text("discord_user_id", 32, &kDigits, "a numeric Discord id"));
    if (const auto tmpl = p.text("source_template", 120)) {
        try {
            out.fields["source_template"] = template_name(*tmpl);
        } catch (const invalid_command& e) {
            p.fail(e.what());
        }
    }
    put("name", p.text("name", 200));
    put("description", p.text("description", 2000));
    put("emoji", p.text("emoji", 32));
    put("model", p.text("model", 300, &kModel, "a full model id <provider>/<model_name>"));
    put("owner_name", p.text("owner_name", 200));
    put("owner_preferred_name", p.text("owner_preferred_name", 200));
    put("owner_timezone",
        p.text("owner_timezone", 100, &kTimezone, "an IANA time zone such as Europe/Berlin"));
    return out;
}

std::string profile_id(const std::string& provider, const std::string& profile_name) {
    return provider + ":" + profile_name;
}

}  // namespace

std::string template_name(const std::string& given) {
    // The templates endpoint lists each with "id" <name> and "branch" template/<name>: both
    // name the same template.
    std::string name = given;
    if (name.rfind("template/", 0) == 0) name = name.substr(9);
    if (!std::regex_match(name, kTemplate) || name.find("..") != std::string::npos) {
        throw invalid_command(
            "payload field \"source_template\" must be a template's branch (template/<name>) or "
            "name ([A-Za-z0-9._-], no \"..\"), as GET /api/agents/templates lists them; got \"" +
            given + "\"");
    }
    return name;
}

std::string trim_space(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    const auto e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

bool is_uuid(const std::string& s) { return std::regex_match(s, kUuid); }
bool is_agent_slug(const std::string& s) {
    return std::regex_match(s, kAgentSlug) && s.find("..") == std::string::npos;
}

plan plan_command(const command_row& cmd, const runner_config& cfg) {
    const payload p(cmd);
    const std::string& a = cmd.action;
    const runtime::cli& rt = cfg.runtime;

    if (a == "provision") return plan_provision(cmd, cfg, p);
    if (a == "approve_pairing") {
        const std::string code = p.required("pairing_code", 100, &kPairingCode,
                                            "letters, digits, '_' or '-' (at most 100)");
        const std::string channel = p.one_of("channel", kChatChannels, "telegram");
        return spawn_plan(cfg, rt.approve_pairing(channel, code));
    }
    if (a == "update")
        return spawn_plan(cfg, {script(cfg, "update-agent.sh"), agent_slug_of(cmd, p)});
    if (a == "remove") {
        // The runtime unregisters the agent and prunes its workspace; awp drops the channel
        // token files it wrote for it (the secrets sync drops the env file with the row).
        const std::string slug = agent_slug_of(cmd, p);
        const std::string id = runtime_id(p, slug);
        plan out = spawn_plan(cfg, rt.delete_agent(id));
        out.fields["agent_slug"] = slug;
        out.fields["agent_id"] = id;
        std::vector<std::string> rm = {"rm", "-f", "--"};
        for (const auto& ch : kChatChannels)
            rm.push_back(cfg.channel_token_dir() + "/" + id + "." + ch + ".token");
        out.steps.push_back({std::move(rm), std::nullopt});
        return out;
    }
    if (a == "update_all") return spawn_plan(cfg, {script(cfg, "update-all-agents.sh")});
    if ((a == "restart_gateway" || a == "restart_dispatcher" || a == "update_gateway") &&
        cfg.mode == runtime_mode::service_manager && !cfg.host_ops_dir.empty()) {
        // The host's awp-host-ops helper runs it with the rights this runner's unit has not
        // (deploy/systemd: system units restart and update as root). Nothing else is asked.
        const char* op = a == "restart_gateway"      ? "restart-runtime"
                         : a == "restart_dispatcher" ? "restart-dispatcher"
                                                     : "update";
        plan out = host_plan(cfg, {script(cfg, "host-op.sh"), op});
        // An update pulls, renders and restarts: more than a command's usual time.
        if (a == "update_gateway") out.timeout = std::max(out.timeout, std::chrono::seconds(600));
        return out;
    }
    if (a == "restart_gateway") {
        if (cfg.mode == runtime_mode::container) {
            return host_plan(cfg, compose(cfg, {"restart", "agent-runtime"}));
        }
        plan out = spawn_plan(cfg, rt.restart_gateway());
        out.json_output = true;
        out.fields["check"] = "gateway_restart";  // runtime::restart_failure
        return out;
    }
    if (a == "restart_dispatcher") {
        if (cfg.mode == runtime_mode::container) {
            return host_plan(cfg, compose(cfg, {"restart", "awp-inbox-dispatcher"}));
        }
        return host_plan(cfg, {"systemctl", "--user", "restart", "awp-inbox-dispatcher"});
    }
    if (a == "update_gateway") {
        plan out = spawn_plan(cfg, std::vector<std::string>{});
        out.steps.clear();
        if (cfg.mode == runtime_mode::container) {
            out.steps.push_back({compose(cfg, {"pull"}), std::nullopt, true});
            out.steps.push_back({compose(cfg, {"up", "-d"}), std::nullopt, true});
        } else {
            const std::string repo = cfg.repo_dir.empty() ? "." : cfg.repo_dir;
            out.steps.push_back({{"git", "-C", repo, "pull", "--ff-only"}, std::nullopt, true});
            // The installer of this layout, in its update mode (deploy/install-systemd.sh).
            out.steps.push_back(
                {{repo + "/deploy/install-systemd.sh", "--update"}, std::nullopt, true});
        }
        return out;
    }
    if (a == "set_agent_model") {
        plan out;
        out.kind = plan_kind::set_agent_model;
        out.timeout = cfg.command_timeout();
        auto slug = p.text("agent_slug", 128);
        if (!slug) slug = cmd.agent_slug;
        if (!slug || !is_agent_slug(*slug)) {
            p.fail("payload field \"agent_slug\" is required (a safe agent slug)");
        }
        const bool has_model = p.has("model"), has_thinking = p.has("thinking");
        const auto model = p.text("model", 300, &kModel, "a full model id <provider>/<model_name>");
        std::optional<std::string> thinking;
        if (has_thinking && p.text("thinking", 16)) thinking = p.one_of("thinking", kThinking, "");
        if (!model && !thinking) p.fail("needs \"model\" or \"thinking\" (at least one)");
        out.fields["agent_slug"] = *slug;
        out.fields["agent_id"] = runtime_id(p, *slug);
        if (has_model) out.fields["model"] = model.value_or("");
        if (has_thinking) out.fields["thinking"] = thinking.value_or("");
        return out;
    }
    if (a == "list_models") {
        const auto provider = p.text("provider", 64, &kProvider, "a provider id ([a-z0-9._-])");
        if (!provider) {
            // The spec: all connected providers, not the runtime's whole catalogue.
            plan out;
            out.kind = plan_kind::list_models;
            out.timeout = cfg.command_timeout();
            out.json_output = true;
            return out;
        }
        plan out = spawn_plan(cfg, rt.list_models(provider));
        out.json_output = true;
        return out;
    }
    if (a == "auth_set_api_key") {
        const std::string provider =
            p.required("provider", 64, &kProvider, "a provider id ([a-z0-9._-])");
        const std::string key = p.required("api_key", 4096);
        if (key.find_first_of(" \t") != std::string::npos)
            p.fail("payload field \"api_key\" must not contain spaces");
        const std::string name =
            p.text("profile_name", 64, &kProfileName, "a profile name ([A-Za-z0-9._-])")
                .value_or("default");
        const auto base_url = p.text("base_url", 2048, &kUrl, "an http:// or https:// URL");
        plan out = spawn_plan(
            cfg, rt.paste_api_key(provider, profile_id(provider, name), key, row_agent_id(cmd, p)));
        if (base_url) {
            // The CLI has no flag for it: the provider's base URL is its config entry.
            runtime::call set{{rt.program(), "config", "set",
                               "models.providers." + provider + ".baseUrl", *base_url},
                              std::nullopt};
            out.steps.push_back({std::move(set.argv), std::nullopt});
        }
        out.success_stdout = "Saved " + provider + " API key as profile " +
                             profile_id(provider, name) +
                             (base_url ? " with a custom base URL" : "");
        return out;
    }
    if (a == "auth_start") {
        plan out;
        out.kind = plan_kind::auth_start;
        out.timeout = std::chrono::seconds(cfg.auth_timeout_s);
        out.fields["provider"] =
            p.required("provider", 64, &kProvider, "a provider id ([a-z0-9._-])");
        out.fields["profile_name"] =
            p.text("profile_name", 64, &kProfileName, "a profile name ([A-Za-z0-9._-])")
                .value_or("default");
        out.fields["mode"] = p.one_of("mode", {"oauth_paste", "device_code"}, "oauth_paste");
        auto login = rt.login(out.fields["provider"],
                              profile_id(out.fields["provider"], out.fields["profile_name"]),
                              out.fields["mode"] == "device_code", row_agent_id(cmd, p));
        out.steps.push_back({std::move(login.argv), std::nullopt});
        return out;
    }
    if (a == "auth_paste") {
        plan out;
        out.kind = plan_kind::auth_paste;
        out.timeout = cfg.command_timeout();
        out.fields["parent_command_id"] =
            p.required("parent_command_id", 64, &kUuid, "a command id (uuid)");
        out.fields["value"] = p.required("value", 8192);
        return out;
    }
    if (a == "auth_list" || a == "auth_refresh") {
        std::optional<std::string> id;
        if (a == "auth_refresh")
            id = p.text("profile_id", 130, &kProfileId, "provider:profile_name");
        plan out = spawn_plan(cfg, rt.auth_status(id));
        out.json_output = true;
        return out;
    }
    if (a == "auth_remove") {
        plan out;
        out.kind = plan_kind::auth_remove;
        out.timeout = cfg.command_timeout();
        out.fields["profile_id"] =
            p.required("profile_id", 130, &kProfileId, "provider:profile_name");
        return out;
    }
    if (a == "auth_set_default") {
        const std::string provider =
            p.required("provider", 64, &kProvider, "a provider id ([a-z0-9._-])");
        const std::string name =
            p.text("profile_name", 64, &kProfileName, "a profile name ([A-Za-z0-9._-])")
                .value_or("default");
        plan out;
        out.kind = plan_kind::auth_set_default;
        out.timeout = cfg.command_timeout();
        out.json_output = true;
        out.fields["provider"] = provider;
        out.fields["profile_name"] = name;
        if (auto id = row_agent_id(cmd, p)) out.fields["agent_id"] = *id;
        // awp's own field: which of the provider's models becomes the default (else the
        // current one when it is the provider's, else the first its catalogue offers).
        if (auto m = p.text("model", 300, &kModel, "a full model id <provider>/<model_name>")) {
            if (m->rfind(provider + "/", 0) != 0)
                p.fail("payload field \"model\" must be a model of provider \"" + provider + "\"");
            out.fields["model"] = *m;
        }
        return out;
    }
    if (a == "source_write") {
        plan out;
        out.kind = plan_kind::source_write;
        out.timeout = cfg.command_timeout();
        out.fields["connection_id"] =
            p.required("connection_id", 64, &kUuid, "a source connection id (uuid)");
        out.fields["action"] =
            p.required("action", 64, &kSourceAction, "an action name ([a-z0-9_.-])");
        const rj::Value* params = p.value("params");
        if (!params || !params->IsObject())
            p.fail("payload field \"params\" is required (a JSON object)");
        out.fields["params"] = to_json(*params);
        return out;
    }
    if (a == "start_session" || a == "end_session" || a == "restart_session") {
        // The runtime's sessions live in its gateway: created, reset and deleted there.
        const std::string id = runtime_id(p, agent_slug_of(cmd, p));
        const auto session =
            p.text("session_id", 128, &kSessionId, "a session id ([A-Za-z0-9._:-])");
        if (a == "start_session") return spawn_plan(cfg, rt.session_create(id, session));
        if (a == "end_session") return spawn_plan(cfg, rt.session_delete(id, session));
        return spawn_plan(cfg, rt.session_reset(id, session));
    }
    if (a == "execute_prompt") {
        const std::string id = runtime_id(p, agent_slug_of(cmd, p));
        const std::string prompt = p.required("prompt", 100 * 1024, nullptr, "", true);
        const auto session =
            p.text("session_id", 128, &kSessionId, "a session id ([A-Za-z0-9._:-])");
        const auto model = p.text("model", 300, &kModel, "a full model id <provider>/<model_name>");
        std::optional<std::string> thinking;
        if (p.has("thinking")) thinking = p.one_of("thinking", kThinking, "");
        const auto t = p.integer("timeout_seconds", 1, cfg.command_timeout_s);
        plan out = spawn_plan(
            cfg, rt.agent_turn(id, prompt, session, model, thinking,
                               t ? std::optional<int>(static_cast<int>(*t)) : std::nullopt));
        if (t) out.timeout = std::chrono::seconds(*t);
        return out;
    }
    if (a == "send_message") {
        const std::string channel = p.one_of("channel", kChatChannels, "telegram");
        const std::string target = p.required("target", 200);
        const std::string message = p.required("message", 16 * 1024, nullptr, "", true);
        return spawn_plan(cfg, rt.send_message(channel, target, message, row_agent_id(cmd, p)));
    }
    if (a == "run_shell") {
        const rj::Value* args = p.value("argv");
        if (!args || !args->IsArray() || args->Empty()) {
            p.fail(
                "payload field \"argv\" is required (a non-empty array of strings: program, then "
                "arguments)");
        }
        if (args->Size() > 256) p.fail("payload field \"argv\" has more than 256 elements");
        std::vector<std::string> argv;
        for (const auto& e : args->GetArray()) {
            if (!e.IsString()) p.fail("payload field \"argv\" must contain strings only");
            std::string s(e.GetString(), e.GetStringLength());
            if (s.find('\0') != std::string::npos)
                p.fail("payload field \"argv\" must not contain NUL bytes");
            if (s.size() > 64 * 1024)
                p.fail("an element of payload field \"argv\" is longer than 65536 bytes");
            argv.push_back(std::move(s));
        }
        if (argv[0].empty()) p.fail("payload field \"argv\" must start with a program name");
        plan out = spawn_plan(cfg, std::move(argv));
        if (auto t = p.integer("timeout_seconds", 1, cfg.command_timeout_s))
            out.timeout = std::chrono::seconds(*t);
        if (cmd.agent_slug && !cmd.agent_slug->empty()) {
            out.fields["cwd"] = cfg.workspace(agent_slug_of(cmd, p));
        }
        return out;
    }
    if (a == "upload_file") {
        plan out;
        out.kind = plan_kind::upload_file;
        out.timeout = cfg.command_timeout();
        const std::string slug = agent_slug_of(cmd, p);
        const std::string path = p.required("path", 1024);
        if (path.front() == '/' || path.find('\\') != std::string::npos) {
            p.fail("payload field \"path\" must be a relative path inside the agent's workspace");
        }
        std::size_t start = 0;
        while (start <= path.size()) {
            const auto end = std::min(path.find('/', start), path.size());
            const std::string part = path.substr(start, end - start);
            if (part.empty() || part == "." || part == "..") {
                p.fail("payload field \"path\" must not contain empty, \".\" or \"..\" parts");
            }
            start = end + 1;
        }
        const rj::Value* content = p.value("content");
        if (!content || !content->IsString())
            p.fail("payload field \"content\" is required (a string)");
        std::string bytes(content->GetString(), content->GetStringLength());
        if (p.one_of("encoding", {"utf8", "base64"}, "utf8") == "base64") {
            try {
                bytes = core::crypto::base64_decode(bytes);
            } catch (const std::exception&) {
                p.fail("payload field \"content\" is not valid base64");
            }
        }
        if (bytes.size() > 10u * 1024 * 1024) p.fail("the file is larger than 10 MiB");
        out.fields["dir"] = cfg.workspace(slug);
        out.fields["path"] = path;
        out.fields["content"] = std::move(bytes);
        out.fields["mode"] =
            p.text("mode", 4, &kFileMode, "an octal file mode such as 0644").value_or("0644");
        return out;
    }
    throw invalid_command("unknown action \"" + a + "\": this runner does not implement it");
}

}  // namespace awp::runner
