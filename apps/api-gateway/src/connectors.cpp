// Connector manifests: parsing with precise reasons, ${ENV} substitution in URLs, client
// credentials from the environment, and the registry that skips (and logs) bad manifests.
#include "connectors.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "awp/core/error.hpp"
#include "awp/core/json.hpp"
#include "awp/core/log.hpp"
#include "awp/core/secrets.hpp"
#include "awp/core/time.hpp"
#include "awp/http/client.hpp"
#include "json.hpp"

namespace awp::api {

namespace fs = std::filesystem;
namespace log = core::log;
using core::error;

namespace {

const std::regex kId("^[a-z0-9][a-z0-9_-]{0,63}$");
const std::regex kRunnerProvider("^[a-z][a-z0-9_-]{0,63}$");

std::optional<std::string> opt_str(const rapidjson::Value& o, const char* name,
                                   const std::string& where) {
    const auto* v = member(o, name);
    if (!v) return std::nullopt;
    if (!v->IsString()) throw error(where + name + " must be a string");
    return std::string(v->GetString(), v->GetStringLength());
}

std::string req_str(const rapidjson::Value& o, const char* name, const std::string& where) {
    auto v = opt_str(o, name, where);
    if (!v || v->empty()) throw error(where + name + " is required");
    return *v;
}

const rapidjson::Value& req_obj(const rapidjson::Value& o, const char* name,
                                const std::string& where) {
    const auto* v = member(o, name);
    if (!v) throw error(where + name + " is required");
    if (!v->IsObject()) throw error(where + name + " must be an object");
    return *v;
}

/// Replaces ${NAME} with the environment; names that are not set go to `missing`.
std::string substitute(const std::string& text, const env_lookup& env,
                       std::vector<std::string>& missing, const std::string& field) {
    std::string out;
    std::size_t i = 0;
    while (i < text.size()) {
        const auto open = text.find("${", i);
        if (open == std::string::npos) {
            out += text.substr(i);
            break;
        }
        out += text.substr(i, open - i);
        const auto close = text.find('}', open + 2);
        if (close == std::string::npos) throw error(field + ": unterminated ${");
        const std::string name = text.substr(open + 2, close - open - 2);
        if (!core::secrets::is_valid_name(name)) throw error(field + ": bad variable name in ${}");
        auto v = env(name);
        if (!v || v->empty()) {
            if (std::find(missing.begin(), missing.end(), name) == missing.end()) {
                missing.push_back(name);
            }
        } else {
            out += *v;
        }
        i = close + 1;
    }
    return out;
}

bool is_web_url(const std::string& u) {
    return u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0;
}

connector_endpoint parse_endpoint(const rapidjson::Value& o, const std::string& where) {
    connector_endpoint e;
    auto m = opt_str(o, "method", where).value_or("POST");
    std::transform(m.begin(), m.end(), m.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    if (m != "GET" && m != "POST") throw error(where + "method must be GET or POST");
    e.method = m;
    e.path = opt_str(o, "path", where).value_or("");
    if (!e.path.empty() && e.path.front() != '/') throw error(where + "path must start with /");
    if (e.path.find_first_of(" \t\r\n?#") != std::string::npos) {
        throw error(where + "path must be a plain path (no spaces, query or fragment)");
    }
    return e;
}

}  // namespace

connector parse_connector(std::string_view text, std::string_view dir_name, const env_lookup& env) {
    rapidjson::Document d;
    try {
        d = core::json::parse(text, core::json::kSmall);
    } catch (const core::json::parse_error& e) {
        throw error(std::string("not valid JSON: ") + e.what());
    }
    if (!d.IsObject()) throw error("the manifest must be a JSON object");
    connector c;
    c.id = req_str(d, "id", "");
    if (!std::regex_match(c.id, kId)) throw error("id must match [a-z0-9][a-z0-9_-]{0,63}");
    if (c.id != dir_name) throw error("id \"" + c.id + "\" differs from its folder name");
    c.label = req_str(d, "label", "");
    c.runner_provider = opt_str(d, "runner_provider", "").value_or(c.id);
    if (!std::regex_match(c.runner_provider, kRunnerProvider)) {
        throw error("runner_provider must match [a-z][a-z0-9_-]{0,63}");
    }

    const auto& auth = req_obj(d, "auth", "");
    const auto* types = member(auth, "types");
    if (!types || !types->IsArray() || types->Empty()) {
        throw error("auth.types must be a non-empty array of \"oauth2\" and/or \"api_key\"");
    }
    for (const auto& t : types->GetArray()) {
        const std::string v = t.IsString() ? t.GetString() : "";
        if (v == "oauth2") {
            c.oauth2 = true;
        } else if (v == "api_key") {
            c.api_key = true;
        } else {
            throw error("auth.types may hold only \"oauth2\" and \"api_key\"");
        }
    }
    std::vector<std::string> missing;        // env vars the API URLs need
    std::vector<std::string> oauth_missing;  // env vars OAuth needs
    if (c.oauth2) {
        const std::string w = "auth.oauth2.";
        const auto& o = req_obj(auth, "oauth2", "auth.");
        for (const char* forbidden : {"client_id", "client_secret"}) {
            if (member(o, forbidden)) {
                throw error(w + forbidden +
                            " must not be in the manifest: name an environment "
                            "variable in " +
                            forbidden + "_env");
            }
        }
        c.authorize_url =
            substitute(req_str(o, "authorize_url", w), env, oauth_missing, w + "authorize_url");
        c.token_url = substitute(req_str(o, "token_url", w), env, oauth_missing, w + "token_url");
        c.client_id_env = req_str(o, "client_id_env", w);
        if (!core::secrets::is_valid_name(c.client_id_env)) {
            throw error(w + "client_id_env must be an environment variable name");
        }
        c.client_secret_env = opt_str(o, "client_secret_env", w).value_or("");
        if (!c.client_secret_env.empty() && !core::secrets::is_valid_name(c.client_secret_env)) {
            throw error(w + "client_secret_env must be an environment variable name");
        }
        if (const auto* s = member(o, "scopes")) {
            if (!s->IsArray()) throw error(w + "scopes must be an array of strings");
            for (const auto& x : s->GetArray()) {
                if (!x.IsString()) throw error(w + "scopes must be an array of strings");
                c.scopes.emplace_back(x.GetString(), x.GetStringLength());
            }
        }
        c.scope_separator = opt_str(o, "scope_separator", w).value_or(" ");
        const auto ta = opt_str(o, "token_auth", w).value_or("body");
        if (ta != "body" && ta != "basic") throw error(w + "token_auth must be body or basic");
        c.token_auth_basic = ta == "basic";
        if (const auto* x = member(o, "extra_params")) {
            if (!x->IsObject()) throw error(w + "extra_params must be an object of strings");
            for (auto m = x->MemberBegin(); m != x->MemberEnd(); ++m) {
                if (!m->value.IsString())
                    throw error(w + "extra_params must be an object of strings");
                c.extra_params.emplace_back(m->name.GetString(), m->value.GetString());
            }
        }
        c.account_label_field = opt_str(o, "account_label_field", w).value_or("");
        if (oauth_missing.empty()) {
            if (!is_web_url(c.authorize_url))
                throw error(w + "authorize_url must be an http(s) URL");
            if (!is_web_url(c.token_url)) throw error(w + "token_url must be an http(s) URL");
        }
    }

    const auto& api = req_obj(d, "api", "");
    c.base_url = substitute(req_str(api, "base_url", "api."), env, missing, "api.base_url");
    while (!c.base_url.empty() && c.base_url.back() == '/') c.base_url.pop_back();
    if (missing.empty() && !is_web_url(c.base_url))
        throw error("api.base_url must be an http(s) URL");
    if (const auto* t = member(api, "timeout_seconds")) {
        if (!t->IsNumber() || t->GetDouble() < 0.1 || t->GetDouble() > 120) {
            throw error("api.timeout_seconds must be a number from 0.1 to 120");
        }
        c.timeout = std::chrono::milliseconds(static_cast<long>(t->GetDouble() * 1000));
    }
    const auto& v = req_obj(api, "validate", "api.");
    c.validate = parse_endpoint(v, "api.validate.");
    c.validate_account_field = opt_str(v, "account_field", "api.validate.").value_or("");
    const auto& b = req_obj(api, "browse", "api.");
    const std::string bw = "api.browse.";
    c.browse = parse_endpoint(b, bw);
    c.browse_path_param = opt_str(b, "path_param", bw).value_or("path");
    c.browse_cursor_param = opt_str(b, "cursor_param", bw).value_or("cursor");
    c.items_field = opt_str(b, "items_field", bw).value_or("items");
    c.next_cursor_field = opt_str(b, "next_cursor_field", bw).value_or("next_cursor");
    c.default_type = opt_str(b, "default_type", bw).value_or("item");
    c.item_fields = {{"id", "id"}, {"name", "name"}, {"type", "type"}};
    if (const auto* item = member(b, "item")) {
        if (!item->IsObject()) throw error(bw + "item must be an object of strings");
        for (auto m = item->MemberBegin(); m != item->MemberEnd(); ++m) {
            if (!m->value.IsString() || m->value.GetStringLength() == 0) {
                throw error(bw + "item." + m->name.GetString() + " must be a dotted path");
            }
            const std::string key = m->name.GetString();
            auto it = std::find_if(c.item_fields.begin(), c.item_fields.end(),
                                   [&](const auto& kv) { return kv.first == key; });
            if (it != c.item_fields.end()) {
                it->second = m->value.GetString();
            } else {
                c.item_fields.emplace_back(key, m->value.GetString());
            }
        }
    }

    auto join = [](const std::vector<std::string>& names) {
        std::string s;
        for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
        return s;
    };
    if (!missing.empty()) {
        c.unavailable = "the environment does not set " + join(missing);
    } else if (!http::parse_url(c.base_url + c.validate.path)) {
        c.unavailable = "the gateway's HTTP client cannot call " + c.base_url +
                        " (https:// needs TLS support in awp::http)";
    }
    if (!c.oauth2) {
        c.oauth_unavailable = "connector \"" + c.id + "\" has no OAuth 2 flow";
    } else {
        if (auto id = env(c.client_id_env); id && !id->empty()) {
            c.client_id = *id;
        } else {
            oauth_missing.push_back(c.client_id_env);
        }
        if (!c.client_secret_env.empty()) {
            if (auto s = env(c.client_secret_env); s && !s->empty()) {
                c.client_secret = *s;
            } else {
                oauth_missing.push_back(c.client_secret_env);
            }
        }
        if (!oauth_missing.empty()) {
            c.oauth_unavailable =
                "OAuth is not configured: the environment does not set " + join(oauth_missing);
        } else if (!http::parse_url(c.token_url)) {
            c.oauth_unavailable = "the gateway's HTTP client cannot call " + c.token_url +
                                  " (https:// needs TLS support in awp::http)";
        } else if (!c.unavailable.empty()) {
            c.oauth_unavailable = c.unavailable;
        }
    }
    return c;
}

connector_registry::connector_registry(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        log::warn("no connectors directory: sources have no providers", {{"dir", dir}});
        return;
    }
    const env_lookup env = [](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());
        if (!v) return std::nullopt;
        return std::string(v);
    };
    std::vector<fs::path> folders;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (!e.is_directory()) continue;
        const auto name = e.path().filename().string();
        if (name.empty() || name.front() == '.' || name.front() == '_') continue;
        folders.push_back(e.path());
    }
    std::sort(folders.begin(), folders.end());
    for (const auto& folder : folders) {
        const auto name = folder.filename().string();
        const auto file = folder / "connector.json";
        std::ifstream in(file);
        if (!in) {
            log::warn("connector skipped: no connector.json", {{"connector", name}});
            continue;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        try {
            auto c = parse_connector(ss.str(), name, env);
            if (!c.unavailable.empty()) {
                log::warn("connector not usable until configured",
                          {{"connector", c.id}, {"reason", c.unavailable}});
            } else if (c.oauth2 && !c.oauth_unavailable.empty()) {
                log::warn("connector OAuth not usable until configured",
                          {{"connector", c.id}, {"reason", c.oauth_unavailable}});
            }
            connectors_.emplace(c.id, std::move(c));
        } catch (const std::exception& e) {
            log::error("bad connector manifest skipped",
                       {{"connector", name}, {"file", file.string()}, {"error", e.what()}});
        }
    }
    log::info("connectors loaded", {{"count", connectors_.size()}, {"dir", dir}});
}

const connector* connector_registry::find(std::string_view id) const {
    auto it = connectors_.find(id);
    return it == connectors_.end() ? nullptr : &it->second;
}

bool connector_registry::consume_state(const std::string& state, long long expires_unix) {
    std::lock_guard lock(mu_);
    const long long now = core::now_unix_s();
    std::erase_if(used_states_, [&](const auto& kv) { return kv.second < now; });
    return used_states_.emplace(state, expires_unix).second;
}

const rapidjson::Value* json_at(const rapidjson::Value& v, std::string_view dotted) {
    const rapidjson::Value* cur = &v;
    while (!dotted.empty()) {
        const auto dot = dotted.find('.');
        const auto part = dotted.substr(0, dot);
        dotted = dot == std::string_view::npos ? std::string_view{} : dotted.substr(dot + 1);
        if (cur->IsObject()) {
            auto it = cur->FindMember(
                rapidjson::Value(part.data(), static_cast<rapidjson::SizeType>(part.size())));
            if (it == cur->MemberEnd()) return nullptr;
            cur = &it->value;
        } else if (cur->IsArray() && !part.empty() &&
                   part.find_first_not_of("0123456789") == std::string_view::npos &&
                   part.size() < 9) {
            const auto idx = static_cast<rapidjson::SizeType>(std::stoul(std::string(part)));
            if (idx >= cur->Size()) return nullptr;
            cur = &(*cur)[idx];
        } else {
            return nullptr;
        }
    }
    return cur;
}

std::optional<std::string> json_scalar_text(const rapidjson::Value* v) {
    if (!v) return std::nullopt;
    if (v->IsString()) return std::string(v->GetString(), v->GetStringLength());
    if (v->IsInt64()) return std::to_string(v->GetInt64());
    if (v->IsUint64()) return std::to_string(v->GetUint64());
    if (v->IsDouble()) {
        std::ostringstream o;
        o << v->GetDouble();
        return o.str();
    }
    return std::nullopt;
}

}  // namespace awp::api
