// Wake message, argv and failure reasons.
#include "wake.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <regex>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/json.hpp"

namespace awp::dispatcher {

namespace {

constexpr std::size_t kMaxContextValue = 500;

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Payload keys that steer the wake, not the agent's reading.
bool is_override_key(const std::string& key) {
    return key == "model_override" || key == "thinking_override";
}

// Producers never put secrets in a payload; this is the belt to that pair of braces.
bool is_secret_key(const std::string& key) {
    const std::string k = lower(key);
    for (const char* word : {"token", "secret", "password", "passwd", "api_key", "apikey",
                             "private_key", "credential", "authorization"}) {
        if (k.find(word) != std::string::npos) return true;
    }
    return false;
}

std::string clip(std::string s, std::size_t max) {
    if (s.size() <= max) return s;
    // Never cut inside a UTF-8 sequence.
    std::size_t n = max;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0U) == 0x80U) --n;
    s.resize(n);
    s += "...";
    return s;
}

std::string json_text(const rapidjson::Value& v) {
    if (v.IsString()) return std::string(v.GetString(), v.GetStringLength());
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    v.Accept(w);
    return std::string(buf.GetString(), buf.GetSize());
}

std::optional<std::string> payload_string(const inbox_item& item, const char* key) {
    auto d = core::json::try_parse(item.payload_json, core::json::kPayload);
    if (!d || !d->IsObject()) return std::nullopt;
    auto it = d->FindMember(key);
    if (it == d->MemberEnd() || !it->value.IsString() || it->value.GetStringLength() == 0) {
        return std::nullopt;
    }
    return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::optional<std::string> non_empty(const std::optional<std::string>& s) {
    if (s && !s->empty()) return s;
    return std::nullopt;
}

}  // namespace

bool wants_blockers(const inbox_item& item) {
    return item.task_id.has_value() &&
           (item.event_type == "task_assignment" || item.event_type == "task_reassignment");
}

std::string build_message(const inbox_item& item, const std::vector<blocker>& blockers) {
    std::string headline = !item.summary.empty() ? item.summary
                           : !item.title.empty() ? item.title
                                                 : item.event_type;
    std::string m = "[inbox] " + clip(headline, 1000) + "\n\n";
    m += "Event: " + item.event_type + "\n";
    m += "Item: " + item.id + " (attempt " + std::to_string(item.attempts) + " of " +
         std::to_string(item.max_attempts) + ")\n";
    if (item.task_id) m += "Task: " + *item.task_id + "\n";

    const auto d = core::json::try_parse(item.payload_json, core::json::kPayload)
                       .value_or(rapidjson::Document{});
    if (d.IsObject() && d.MemberCount() > 0) {
        std::string ctx;
        for (auto it = d.MemberBegin(); it != d.MemberEnd(); ++it) {
            const std::string key(it->name.GetString(), it->name.GetStringLength());
            if (is_override_key(key) || it->value.IsNull()) continue;
            const std::string value = is_secret_key(key) ? "***" : json_text(it->value);
            ctx += "  " + key + ": " + clip(value, kMaxContextValue) + "\n";
        }
        if (!ctx.empty()) m += "Context:\n" + ctx;
    }
    if (!blockers.empty()) {
        m +=
            "\nNote: This task has " + std::to_string(blockers.size()) + " unresolved blocker(s): ";
        for (std::size_t i = 0; i < blockers.size(); ++i) {
            if (i) m += ", ";
            m += "\"" + clip(blockers[i].title, 200) + "\" (" + blockers[i].status + ")";
        }
        m += ". Consider working on unblocked tasks first or doing preparatory work.\n";
    }
    m += "\nHandle this item now. It is marked done when this run exits 0 and retried "
         "otherwise.";
    return clip(std::move(m), kMaxMessage);
}

std::optional<std::string> effective_model(const inbox_item& item) {
    if (auto o = payload_string(item, "model_override")) return o;
    return non_empty(item.model);
}

std::optional<std::string> effective_thinking(const inbox_item& item) {
    if (auto o = payload_string(item, "thinking_override")) return o;
    return non_empty(item.thinking);
}

std::vector<std::string> build_argv(const runtime::cli& cli, const inbox_item& item,
                                    const std::string& message) {
    return cli
        .agent_turn(runtime::agent_id(item.agent_slug), message, std::nullopt,
                    effective_model(item), effective_thinking(item))
        .argv;
}

std::string redact(std::string text, const std::vector<std::string>& secrets) {
    for (const auto& s : secrets) {
        if (s.size() < 4) continue;  // too short to tell from ordinary text
        for (std::size_t pos = text.find(s); pos != std::string::npos;
             pos = text.find(s, pos + 3)) {
            text.replace(pos, s.size(), "***");
        }
    }
    static const std::regex kPairs(
        R"(((?:api[_-]?key|apikey|token|secret|password|passwd|pwd|authorization|access[_-]?key)[A-Za-z0-9_-]*"?\s*[=:]\s*"?)[^\s"',;&]+)",
        std::regex::icase);
    static const std::regex kBearer(R"((bearer\s+)[A-Za-z0-9._~+/=-]+)", std::regex::icase);
    static const std::regex kSk(R"(\b(sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{8,})");
    static const std::regex kUrlPassword(R"((://[^:/@\s]+:)[^@\s]+@)");
    text =
        std::regex_replace(text, kBearer, "$1***");  // before the pairs: "Authorization: Bearer x"
    text = std::regex_replace(text, kPairs, "$1***");
    text = std::regex_replace(text, kSk, "$1-***");
    text = std::regex_replace(text, kUrlPassword, "$1***@");
    return text;
}

std::string failure_reason(const core::process::process_result& r,
                           std::chrono::milliseconds timeout,
                           const std::vector<std::string>& secrets) {
    std::string reason;
    if (r.timed_out) {
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", static_cast<double>(timeout.count()) / 1000.0);
        reason = std::string("wake timed out after ") + secs + " s; process group killed";
    } else if (r.term_signal != 0) {
        const char* name = sigabbrev_np(r.term_signal);
        reason = "wake killed by signal " + std::to_string(r.term_signal) +
                 (name ? std::string(" (SIG") + name + ")" : std::string());
    } else {
        reason = "wake exited with code " + std::to_string(r.exit_code);
    }
    std::string err = redact(r.err, secrets);
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r' || err.back() == ' ')) {
        err.pop_back();
    }
    if (!err.empty()) {
        const std::size_t room =
            kMaxReason > reason.size() + 16 ? kMaxReason - reason.size() - 16 : 0;
        if (err.size() > room) {
            std::size_t start = err.size() - room;
            while (start < err.size() &&
                   (static_cast<unsigned char>(err[start]) & 0xC0U) == 0x80U) {
                ++start;
            }
            err = "..." + err.substr(start);
        }
        reason += "; stderr: " + err;
    }
    return reason;
}

}  // namespace awp::dispatcher
