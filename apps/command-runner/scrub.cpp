// Output scrubbing: payload secrets out of rows, secrets redacted from outputs, tails and limits,
// valid text (scrub.hpp).
#include "scrub.hpp"

#include <cstdint>

#include <rapidjson/document.h>

#include "actions.hpp"
#include "awp/core/json.hpp"
#include "awp/runtime/openclaw.hpp"

namespace awp::runner {

namespace rj = rapidjson;

std::string scrub_patch(const command_row& cmd, bool ok) {
    auto parsed = core::json::try_parse(cmd.payload, core::json::kPayload);
    if (!parsed || !parsed->IsObject()) return "";
    const rj::Document& doc = *parsed;
    rj::Document patch(rj::kObjectType);
    auto& al = patch.GetAllocator();
    auto remove = [&](const std::string& key) {
        patch.AddMember(rj::Value(key.c_str(), al), rj::Value(rj::kNullType), al);
    };
    if (cmd.action == "provision") {
        for (const auto& m : doc.GetObject()) {
            const std::string k(m.name.GetString(), m.name.GetStringLength());
            if (k.size() >= 6 && k.compare(k.size() - 6, 6, "_token") == 0) remove(k);
        }
    } else if (cmd.action == "auth_set_api_key") {
        const bool had_url = doc.HasMember("base_url") && doc["base_url"].IsString() &&
                             !trim_space(std::string(doc["base_url"].GetString())).empty();
        if (doc.HasMember("api_key")) remove("api_key");
        if (doc.HasMember("base_url")) remove("base_url");
        patch.AddMember("api_key_scrubbed", true, al);
        // Both flags on every outcome (spec): applied only when one was given and it worked.
        patch.AddMember("base_url_applied", ok && had_url, al);
    } else if (cmd.action == "auth_paste") {
        if (doc.HasMember("value")) remove("value");
        patch.AddMember("value_scrubbed", true, al);
    }
    if (patch.ObjectEmpty()) return "";
    return core::json::to_string(patch);
}

std::vector<std::string> payload_secrets(const command_row& cmd) {
    std::vector<std::string> out;
    auto parsed = core::json::try_parse(cmd.payload, core::json::kPayload);
    if (!parsed || !parsed->IsObject()) return out;
    const rj::Document& doc = *parsed;
    for (const auto& m : doc.GetObject()) {
        const std::string k(m.name.GetString(), m.name.GetStringLength());
        const bool secret =
            (cmd.action == "auth_set_api_key" && (k == "api_key" || k == "base_url")) ||
            (cmd.action == "auth_paste" && k == "value") ||
            (k.size() >= 6 && k.compare(k.size() - 6, 6, "_token") == 0);
        if (secret && m.value.IsString()) {
            std::string v(m.value.GetString(), m.value.GetStringLength());
            out.push_back(v);
            const std::string t = trim_space(v);
            if (t != v) out.push_back(t);
        }
    }
    return out;
}

std::string redact(std::string text, const std::vector<std::string>& secrets) {
    for (const auto& s : secrets) {
        if (s.size() < 4) continue;
        for (auto pos = text.find(s); pos != std::string::npos; pos = text.find(s, pos + 10)) {
            text.replace(pos, s.size(), "[redacted]");
        }
    }
    return text;
}

std::string tail(const std::string& text, std::size_t limit) {
    if (text.size() <= limit) return text;
    std::size_t start = text.size() - limit;
    // Do not start inside a UTF-8 sequence: Postgres text must stay valid.
    while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    return "[... " + std::to_string(start) + " bytes cut ...]\n" + text.substr(start);
}

std::string clean_text(const std::string& in) {
    std::string out;
    out.reserve(in.size());
    const auto* s = reinterpret_cast<const unsigned char*>(in.data());
    const std::size_t n = in.size();
    for (std::size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c == 0) {
            len = 0;
        } else if (c < 0x80) {
            out.push_back(static_cast<char>(c));
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07;
        }
        bool ok = len > 0 && i + len <= n;
        for (std::size_t k = 1; ok && k < len; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) ok = false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (ok) {
            const std::uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
            ok = cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
        }
        if (ok) {
            out.append(in, i, len);
            i += len;
        } else {
            out += "\xEF\xBF\xBD";
            ++i;
        }
    }
    return out;
}

std::string keep(const std::string& text, const std::vector<std::string>& secrets,
                 std::size_t limit) {
    return clean_text(tail(redact(text, secrets), limit));
}

std::string keep_stdout(const std::string& out, const std::vector<std::string>& secrets, bool json,
                        std::size_t limit) {
    std::string kept;
    if (json) {
        // Valid JSON whatever its size: entries are trimmed, never bytes (docs/runtime.md).
        if (auto j = runtime::fit_json(redact(out, secrets), kJsonOutputLimit)) kept = *j;
    }
    if (kept.empty()) kept = keep(runtime::strip_terminal(out), secrets, limit);
    return kept;
}

std::string error_text(const std::string& error) {
    return clean_text(error.size() > kErrorLimit ? error.substr(0, kErrorLimit) + "..." : error);
}

void known_secrets::replace(std::vector<std::string> values) {
    values_.clear();
    for (auto& v : values) {
        if (v.size() >= 6) values_.push_back(std::move(v));
    }
}

std::vector<std::string> known_secrets::for_command(const command_row& cmd) const {
    std::vector<std::string> s = payload_secrets(cmd);
    s.insert(s.end(), values_.begin(), values_.end());
    return s;
}

}  // namespace awp::runner
