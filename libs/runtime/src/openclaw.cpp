// The openclaw CLI adapter (see openclaw.hpp and docs/runtime.md): the version check, agent ids,
// terminal codes and error lines, and every argv the runtime accepts, per version dialect, in
// one file so a new runtime version is one place to read. What it prints as JSON is read in
// output.cpp; its lock and auth store in runtime_state.cpp.
#include "awp/runtime/openclaw.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/child_env.hpp"
#include "awp/core/json.hpp"
#include "awp/core/process.hpp"

namespace awp::runtime {

namespace rj = rapidjson;
namespace fs = std::filesystem;

namespace {

std::string json_string(const std::string& s) {
    rj::StringBuffer buf;
    rj::Writer<rj::StringBuffer> w(buf);
    w.String(s.c_str(), static_cast<rj::SizeType>(s.size()));
    return {buf.GetString(), buf.GetSize()};
}

/// {"k": "v", ...} of the given non-empty string members, in order.
std::string json_object(const std::vector<std::pair<std::string, std::optional<std::string>>>& m) {
    std::string out = "{";
    for (const auto& [k, v] : m) {
        if (!v) continue;
        if (out.size() > 1) out += ",";
        out += json_string(k);
        out += ":";
        out += json_string(*v);
    }
    out += "}";
    return out;
}

}  // namespace

std::optional<version> parse_version(std::string_view text) {
    static const std::regex re(R"((?:^|\s)v?([0-9]{4})\.([0-9]{1,2})\.([0-9]{1,3})(?:[\s(-]|$))");
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(text.begin(), text.end(), m, re)) return std::nullopt;
    version v;
    v.year = std::stoi(m[1].str());
    v.month = std::stoi(m[2].str());
    v.patch = std::stoi(m[3].str());
    v.text = m[1].str() + "." + m[2].str() + "." + m[3].str();
    return v;
}

std::optional<dialect> dialect_of(const version& v) {
    if (v.year == 2026 && v.month == 6) return dialect::v2026_6;
    if (v.year == 2026 && v.month == 9) return dialect::v2026_9;
    return std::nullopt;
}

std::string supported_versions() { return "2026.6.x, 2026.9.x"; }

std::string thinking_level(const std::string& level) {
    if (level.empty()) return "";
    if (level == "none") return "off";
    if (level == "low" || level == "medium" || level == "high") return level;
    throw core::error("thinking level \"" + level + "\" is not one of none, low, medium, high");
}

std::string agent_id(const std::string& slug) {
    std::string id;
    bool dash = false;
    for (char ch : slug) {
        const auto c = static_cast<unsigned char>(ch);
        const char l = static_cast<char>(std::tolower(c));
        if ((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '_' || l == '-') {
            if (dash) id += '-';
            dash = false;
            id += l;
        } else {
            dash = true;
        }
    }
    // A run of other characters becomes one '-' (kept only between kept characters, as the
    // runtime strips leading and trailing dashes); then the runtime's own trim of '-' runs.
    const auto b = id.find_first_not_of('-');
    id = b == std::string::npos ? "" : id.substr(b, id.find_last_not_of('-') - b + 1);
    if (id.size() > 64) {
        id.resize(64);
        const auto e = id.find_last_not_of('-');
        id.resize(e == std::string::npos ? 0 : e + 1);
    }
    if (id.empty() || id == "main") {
        throw core::error(
            "agent slug \"" + slug + "\" maps to the runtime's agent id \"" +
            (id.empty() ? std::string("main") : id) +
            "\", which the runtime reserves for its default agent; choose another slug");
    }
    return id;
}

std::string strip_terminal(std::string_view in) {
    std::string out;
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        const auto c = static_cast<unsigned char>(in[i]);
        if (c == 0x1b) {
            if (i + 1 < in.size() && in[i + 1] == '[') {  // CSI: ESC [ params final(0x40-0x7e)
                i += 2;
                while (i < in.size() && !(in[i] >= 0x40 && in[i] <= 0x7e)) ++i;
            } else if (i + 1 < in.size() && in[i + 1] == ']') {  // OSC: until BEL or ESC backslash
                i += 2;
                while (i < in.size() && in[i] != '\a' &&
                       !(in[i] == 0x1b && i + 1 < in.size() && in[i + 1] == '\\'))
                    ++i;
                if (i < in.size() && in[i] == 0x1b) ++i;
            } else {
                ++i;  // a two-byte escape
            }
            continue;
        }
        if (c == '\r') {
            // "\r\n" is a line end; a bare "\r" rewrites the line: keep what came after it.
            if (i + 1 < in.size() && in[i + 1] == '\n') continue;
            const auto nl = out.rfind('\n');
            out.resize(nl == std::string::npos ? 0 : nl + 1);
            continue;
        }
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) continue;
        out.push_back(static_cast<char>(c));
    }
    return out;
}

std::string error_line(std::string_view err, std::string_view out, std::size_t max) {
    auto last = [](const std::string& text) -> std::string {
        std::istringstream in(text);
        std::string line, best, reason, error;
        while (std::getline(in, line)) {
            const auto b = line.find_first_not_of(" \t");
            if (b == std::string::npos) continue;
            line = line.substr(b);
            if (line.rfind("[openclaw] ", 0) == 0) line = line.substr(11);
            // The CLI's own hints after an error are not the error.
            if (line.rfind("Debug: ", 0) == 0 || line.rfind("Try: ", 0) == 0 ||
                line.rfind("Help: ", 0) == 0 || line.rfind("Fix: ", 0) == 0 ||
                line.rfind("Config: ", 0) == 0 || line.rfind("Docs: ", 0) == 0 ||
                line.find("Installed Gateway service state and config paths could not be") !=
                    std::string::npos)
                continue;
            if (line.rfind("Reason: ", 0) == 0) reason = line.substr(8);
            // Frames and rules of the CLI's boxes (│ ─ ╯ …) say nothing.
            if (std::none_of(line.begin(), line.end(),
                             [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }))
                continue;
            best = line;
            // The line that names the failure, where the CLI prints one ("…Error: …",
            // "… failed …"), beats the advice printed after it.
            std::string lower = line;
            for (char& c : lower)
                c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            if (lower.find("error") != std::string::npos ||
                lower.find("failed") != std::string::npos ||
                lower.find("cannot") != std::string::npos ||
                lower.find("not found") != std::string::npos)
                error = line;
        }
        if (!reason.empty()) return reason;
        return error.empty() ? best : error;
    };
    std::string line = last(strip_terminal(err));
    if (line.empty()) line = last(strip_terminal(out));
    if (line.size() > max) {
        std::size_t n = max;
        while (n > 0 && (static_cast<unsigned char>(line[n]) & 0xC0) == 0x80) --n;
        line.resize(n);
        line += "...";
    }
    return line;
}

cli::cli() : cli("openclaw", "2026.6.1") {}

cli::cli(std::string program, version v, dialect d)
    : program_(std::move(program)), version_(std::move(v)), dialect_(d) {}

cli::cli(std::string program, const std::string& version_text) : program_(std::move(program)) {
    const auto v = parse_version(version_text);
    const auto d = v ? dialect_of(*v) : std::nullopt;
    if (!d)
        throw unsupported_runtime("openclaw " + version_text +
                                  " is not supported; supported: " + supported_versions());
    version_ = *v;
    dialect_ = *d;
}

cli cli::detect(const std::string& program, std::chrono::milliseconds timeout) {
    core::process::spawn_options o;
    o.argv = {program, "--version"};
    o.timeout = timeout;
    o.max_output = 4096;
    core::child_env::apply(o);
    core::process::process_result r;
    try {
        r = core::process::run(o);
    } catch (const core::process::spawn_error& e) {
        throw unsupported_runtime("agent runtime " + program + ": " + e.what() +
                                  " (AGENT_RUNTIME; install one with scripts/install-runtime.sh)");
    }
    const std::string said = error_line(r.out, r.err, 200);
    if (!r.success()) {
        throw unsupported_runtime("agent runtime " + program + " --version failed" +
                                  (r.timed_out ? std::string(" (timed out)") : "") +
                                  (said.empty() ? "" : ": " + said));
    }
    const auto v = parse_version(r.out);
    if (!v) {
        throw unsupported_runtime("agent runtime " + program + " printed no version (\"" + said +
                                  "\"); supported: " + supported_versions());
    }
    const auto d = dialect_of(*v);
    if (!d) {
        throw unsupported_runtime("agent runtime " + program + " is openclaw " + v->text +
                                  ", which this awp does not support; supported: " +
                                  supported_versions() + " (docs/runtime.md)");
    }
    return cli(program, *v, *d);
}

// ---- agents ---------------------------------------------------------------------------------

call cli::add_agent(const std::string& id, const std::string& workspace,
                    const std::optional<std::string>& model) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(),
                  {"agents", "add", id, "--workspace", workspace, "--non-interactive", "--json"});
    if (model) c.argv.insert(c.argv.end(), {"--model", *model});
    return c;
}

std::optional<call> cli::set_identity(const std::string& id, const std::optional<std::string>& name,
                                      const std::optional<std::string>& emoji) const {
    if (!name && !emoji) return std::nullopt;
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"agents", "set-identity", "--agent", id});
    if (name) c.argv.insert(c.argv.end(), {"--name", *name});
    if (emoji) c.argv.insert(c.argv.end(), {"--emoji", *emoji});
    return c;
}

call cli::add_channel(const std::string& channel, const std::string& id,
                      const std::string& token_file) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"channels", "add", "--channel", channel, "--account", id,
                                 "--token-file", token_file});
    return c;
}

call cli::bind(const std::string& id, const std::string& channel) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"agents", "bind", "--agent", id, "--bind", channel + ":" + id});
    return c;
}

call cli::delete_agent(const std::string& id) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"agents", "delete", id, "--force", "--json"});
    return c;
}

call cli::list_agents() const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"agents", "list", "--json"});
    return c;
}

std::vector<call> cli::set_agent_model(const std::string& id, std::optional<std::size_t> index,
                                       const std::optional<std::string>& model,
                                       const std::optional<std::string>& thinking) const {
    const std::string prefix = dialect_ == dialect::v2026_6
                                   ? "agents.list[" + std::to_string(index.value_or(0)) + "]."
                                   : "agents.entries." + id + ".";
    std::string batch = "[";
    std::vector<call> out;
    auto put = [&](const char* key, const std::optional<std::string>& v) {
        if (!v) return;
        if (v->empty()) {
            call c{base(), std::nullopt};
            c.argv.insert(c.argv.end(), {"config", "unset", prefix + key});
            out.push_back(std::move(c));
            return;
        }
        if (batch.size() > 1) batch += ",";
        batch += "{\"path\":" + json_string(prefix + key) + ",\"value\":" + json_string(*v) + "}";
    };
    put("model", model);
    put("thinkingDefault",
        thinking ? std::optional<std::string>(thinking_level(*thinking)) : std::nullopt);
    if (batch.size() > 1) {
        call c{base(), std::nullopt};
        c.argv.insert(c.argv.end(), {"config", "set", "--batch-json", batch + "]"});
        out.insert(out.begin(), std::move(c));
    }
    return out;
}

std::optional<std::size_t> cli::agent_index(const std::string& config_json,
                                            const std::string& id) const {
    auto doc = core::json::try_parse(config_json, core::json::kDocument);
    if (!doc || !doc->IsObject()) return std::nullopt;
    const auto agents = doc->FindMember("agents");
    if (agents == doc->MemberEnd() || !agents->value.IsObject()) return std::nullopt;
    if (dialect_ != dialect::v2026_6) {
        const auto entries = agents->value.FindMember("entries");
        if (entries == agents->value.MemberEnd() || !entries->value.IsObject() ||
            !entries->value.HasMember(id.c_str()))
            return std::nullopt;
        return 0;
    }
    const auto list = agents->value.FindMember("list");
    if (list == agents->value.MemberEnd() || !list->value.IsArray()) return std::nullopt;
    std::size_t i = 0;
    for (const auto& e : list->value.GetArray()) {
        if (e.IsObject() && e.HasMember("id") && e["id"].IsString() && e["id"].GetString() == id)
            return i;
        ++i;
    }
    return std::nullopt;
}

// ---- sessions -------------------------------------------------------------------------------

std::string cli::session_key(const std::string& id, const std::optional<std::string>& session) {
    return "agent:" + id + ":" + (session ? *session : std::string("main"));
}

namespace {
call gateway_call(std::vector<std::string> base, const char* method, const std::string& params) {
    call c{std::move(base), std::nullopt};
    c.argv.insert(c.argv.end(), {"gateway", "call", method, "--json", "--params", params});
    return c;
}
}  // namespace

call cli::session_create(const std::string& id, const std::optional<std::string>& session) const {
    return gateway_call(
        base(), "sessions.create",
        json_object({{"agentId", id},
                     {"key", session ? std::optional<std::string>(session_key(id, session))
                                     : std::nullopt}}));
}

call cli::session_reset(const std::string& id, const std::optional<std::string>& session) const {
    return gateway_call(
        base(), "sessions.reset",
        json_object(
            {{"key", session_key(id, session)}, {"agentId", id}, {"reason", std::string("new")}}));
}

call cli::session_delete(const std::string& id, const std::optional<std::string>& session) const {
    return gateway_call(base(), "sessions.delete",
                        json_object({{"key", session_key(id, session)}, {"agentId", id}}));
}

call cli::session_patch(const std::string& id, const std::optional<std::string>& model,
                        const std::optional<std::string>& thinking) const {
    std::optional<std::string> level;
    if (thinking && !thinking->empty()) level = thinking_level(*thinking);
    std::optional<std::string> m;
    if (model && !model->empty()) m = model;
    return gateway_call(base(), "sessions.patch",
                        json_object({{"key", session_key(id, std::nullopt)},
                                     {"agentId", id},
                                     {"model", m},
                                     {"thinkingLevel", level}}));
}

// ---- turns and messages ---------------------------------------------------------------------

call cli::agent_turn(const std::string& id, const std::string& message,
                     const std::optional<std::string>& session,
                     const std::optional<std::string>& model,
                     const std::optional<std::string>& thinking,
                     std::optional<int> timeout_seconds) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"agent", "--agent", id, "--message", message});
    if (session) c.argv.insert(c.argv.end(), {"--session-id", *session});
    if (model) c.argv.insert(c.argv.end(), {"--model", *model});
    if (thinking && !thinking->empty())
        c.argv.insert(c.argv.end(), {"--thinking", thinking_level(*thinking)});
    if (timeout_seconds)
        c.argv.insert(c.argv.end(), {"--timeout", std::to_string(*timeout_seconds)});
    return c;
}

call cli::send_message(const std::string& channel, const std::string& target,
                       const std::string& message,
                       const std::optional<std::string>& account) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"message", "send", "--channel", channel, "--target", target,
                                 "--message", message});
    if (account) c.argv.insert(c.argv.end(), {"--account", *account});
    return c;
}

call cli::approve_pairing(const std::string& channel, const std::string& code) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"pairing", "approve", channel, code});
    return c;
}

call cli::restart_gateway() const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"gateway", "restart", "--json"});
    return c;
}

// ---- models and auth ------------------------------------------------------------------------

call cli::list_models(const std::optional<std::string>& provider) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"models", "list", "--json"});
    if (provider) {
        c.argv.insert(c.argv.end(), {"--provider", *provider});
    } else {
        c.argv.emplace_back("--all");
    }
    return c;
}

call cli::model_status() const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"models", "status", "--json"});
    return c;
}

call cli::set_default_model(const std::string& model) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"models", "set", model});
    return c;
}

call cli::auth_status(const std::optional<std::string>& profile_id) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"models", "status", "--json", "--probe"});
    if (profile_id) c.argv.insert(c.argv.end(), {"--probe-profile", *profile_id});
    return c;
}

call cli::paste_api_key(const std::string& provider, const std::string& profile_id,
                        const std::string& key, const std::optional<std::string>& agent) const {
    call c{base(), key + "\n"};
    c.argv.insert(c.argv.end(), {"models", "auth"});
    // 2026.6: --agent is an option of `models auth`; 2026.9: of the subcommand.
    if (agent && dialect_ == dialect::v2026_6) c.argv.insert(c.argv.end(), {"--agent", *agent});
    c.argv.insert(c.argv.end(),
                  {"paste-api-key", "--provider", provider, "--profile-id", profile_id});
    if (agent && dialect_ != dialect::v2026_6) c.argv.insert(c.argv.end(), {"--agent", *agent});
    return c;
}

call cli::login(const std::string& provider, const std::string& profile_id, bool device_code,
                const std::optional<std::string>& agent) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"models", "auth"});
    if (agent && dialect_ == dialect::v2026_6) c.argv.insert(c.argv.end(), {"--agent", *agent});
    c.argv.insert(c.argv.end(), {"login", "--provider", provider, "--profile-id", profile_id});
    if (device_code) c.argv.emplace_back("--device-code");
    if (agent && dialect_ != dialect::v2026_6) c.argv.insert(c.argv.end(), {"--agent", *agent});
    return c;
}

call cli::auth_order(const std::string& provider, const std::string& profile_id,
                     const std::optional<std::string>& agent) const {
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(), {"models", "auth", "order", "set", "--provider", provider});
    if (agent) c.argv.insert(c.argv.end(), {"--agent", *agent});
    c.argv.push_back(profile_id);
    return c;
}

std::optional<call> cli::auth_logout(const std::string& profile_id,
                                     const std::string& agent) const {
    if (dialect_ == dialect::v2026_6) return std::nullopt;
    call c{base(), std::nullopt};
    c.argv.insert(c.argv.end(),
                  {"models", "auth", "logout", "--agent", agent, "--yes", profile_id});
    return c;
}

}  // namespace awp::runtime
