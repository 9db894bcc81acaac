// The agents row a finished command changes (agent_state.hpp).
#include "agent_state.hpp"

#include <rapidjson/document.h>

#include "awp/core/json.hpp"

namespace awp::runner {

namespace rj = rapidjson;

namespace {

/// A string member of the payload, trimmed; nullopt when absent or not a string.
std::optional<std::string> text(const rj::Document& d, const char* name) {
    const auto m = d.FindMember(name);
    if (m == d.MemberEnd() || !m->value.IsString()) return std::nullopt;
    std::string s(m->value.GetString(), m->value.GetStringLength());
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::string provisioning_state() { return R"({"status":"provisioning","error":null})"; }

std::optional<agent_row_state> agent_state_of(const command_row& cmd, const final_outcome& o) {
    if (o.writes_nothing() || (cmd.action != "provision" && cmd.action != "set_agent_model"))
        return std::nullopt;
    auto doc = core::json::try_parse(cmd.payload, core::json::kPayload);
    if (!doc || !doc->IsObject()) doc.emplace().SetObject();
    std::optional<std::string> slug = cmd.agent_slug;
    // set_agent_model names its agent in the payload first (actions.cpp), provision in the row.
    if (cmd.action == "set_agent_model" || !slug || slug->empty()) {
        if (auto s = text(*doc, "agent_slug"); s && !s->empty()) slug = s;
        if (!slug) slug = cmd.agent_slug;
    }
    if (!slug || slug->empty()) return std::nullopt;
    core::json::writer j;
    j.w.StartObject();
    if (cmd.action == "provision") {
        if (!o.done()) {
            j.kv("status", "error");
            j.kv("error", o.error());
        } else {
            j.kv("status", "ready");
            j.key("error");
            j.w.Null();
            if (auto m = text(*doc, "model"); m && !m->empty()) j.kv("model", *m);
        }
    } else {
        if (!o.done()) return std::nullopt;  // the runtime's config was not changed
        for (const char* k : {"model", "thinking"}) {
            if (!doc->HasMember(k) || (*doc)[k].IsNull()) continue;
            const auto v = text(*doc, k);
            j.key(k);
            if (v && !v->empty()) {
                j.w.String(v->c_str(), static_cast<rj::SizeType>(v->size()));
            } else {
                j.w.Null();  // "" resets to the default (actions.cpp)
            }
        }
    }
    j.w.EndObject();
    return agent_row_state{*slug, j.str()};
}

}  // namespace awp::runner
