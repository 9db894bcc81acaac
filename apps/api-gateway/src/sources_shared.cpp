// The sources routes' shared helpers (sources_shared.hpp): keys, the sealed OAuth state,
// upstream calls, stored credentials, browse and token answers.
#include <algorithm>
#include <cctype>

#include "awp/core/crypto.hpp"
#include "awp/core/log.hpp"
#include "awp/core/secrets.hpp"
#include "awp/core/time.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/client.hpp"
#include "awp/http/outbound.hpp"
#include "connectors.hpp"
#include "gateway.hpp"
#include "json.hpp"
#include "sources_shared.hpp"

namespace awp::api::sources_detail {

namespace crypto = core::crypto;
namespace log = core::log;
using http::http_error;

// ---- keys and names -------------------------------------------------------------------------

/// The enc:v1 key the command runner decrypts with: HOSTED_SECRETS_KEY, else HKDF of the
/// service-role key. 503 when neither is configured.
std::string secrets_key(const gateway_config& cfg) {
    auto key = core::secrets::encryption_key(cfg.hosted_secrets_key, cfg.service_role_key);
    if (!key.empty()) return key;
    throw http_error(503, "secrets_key_missing",
                     "source credentials need SERVICE_ROLE_KEY or HOSTED_SECRETS_KEY on the "
                     "api-gateway");
}

/// The key that seals the OAuth state cookie (derived from JWT_SECRET, never stored).
std::string state_key(const gateway_config& cfg) {
    return crypto::hkdf_sha256(cfg.jwt_secret, "awp-oauth-state-v1", "aes-256-gcm", 32);
}

/// <PROVIDER>_SOURCE_<first 8 of the id, upper-case>: the runner's credentials variable.
std::string secret_name(const std::string& runner_provider, const std::string& connection_id) {
    return core::secrets::source_secret_name(runner_provider, connection_id);
}

std::string cookie_name(const std::string& provider) { return "awp_oauth_" + provider; }

std::string clear_state_cookie(const gateway_config& cfg, const std::string& provider) {
    http::cookie_options o;
    o.path = "/api/sources/oauth/" + provider;
    o.max_age = 0;
    o.secure = cfg.cookie_secure;
    return http::set_cookie(cookie_name(provider), "", o);
}

/// A failure of the OAuth callback: the state cookie is cleared with the error.
[[noreturn]] void flow_error(unsigned status, std::string code, const std::string& message,
                             const std::string& clear_cookie) {
    http_error e(status, std::move(code), message);
    e.extra.add("Set-Cookie", clear_cookie);
    throw e;
}

/// Printable text from a provider, bounded, and empty when it echoes the credential.
std::string safe_text(std::string_view s, std::string_view secret, std::size_t limit) {
    std::string out;
    for (char ch : s) {
        if (out.size() >= limit) break;
        const auto u = static_cast<unsigned char>(ch);
        out.push_back(u >= 0x20 && u < 0x7f ? ch : ' ');
    }
    if (!secret.empty() && s.find(secret) != std::string_view::npos) return {};
    return out;
}

/// An OAuth error code ([a-z0-9_.-], at most 64 characters).
std::string safe_code(std::string_view s) {
    std::string out;
    for (char ch : s.substr(0, 64)) {
        const auto u = static_cast<unsigned char>(ch);
        if (std::isalnum(u) || ch == '_' || ch == '-' || ch == '.') {
            out.push_back(static_cast<char>(std::tolower(u)));
        }
    }
    return out.empty() ? "unknown_error" : out;
}

std::string with_query(const std::string& url, const std::string& query) {
    return url + (url.find('?') == std::string::npos ? "?" : "&") + query;
}

// ---- the OAuth state cookie -----------------------------------------------------------------

std::string seal_state(const oauth_state& s, const std::string& key) {
    json_out j;
    j.w.StartObject();
    j.kv("s", s.state);
    j.kv("v", s.verifier);
    j.kv("p", s.provider);
    j.kv("u", s.sub);
    j.kv("t", s.tenant);
    j.kv("g", s.gateway_id);
    j.kv("c", s.connection_id);
    j.kv("r", s.redirect_uri);
    j.key("e");
    j.w.Int64(s.exp);
    j.w.EndObject();
    const auto sealed = crypto::aes256_gcm_encrypt(key, j.str(), "awp-oauth:" + s.provider);
    return crypto::base64url_encode(sealed.iv) + "." + crypto::base64url_encode(sealed.tag) + "." +
           crypto::base64url_encode(sealed.ciphertext);
}

/// The state sealed in a cookie value; nullopt when it was altered, is for another provider
/// or is not ours.
std::optional<oauth_state> open_state(const std::string& value, const std::string& key,
                                      const std::string& provider) {
    const auto a = value.find('.');
    const auto b = a == std::string::npos ? a : value.find('.', a + 1);
    if (b == std::string::npos) return std::nullopt;
    std::string plain;
    try {
        plain = crypto::aes256_gcm_decrypt(key, crypto::base64url_decode(value.substr(0, a)),
                                           crypto::base64url_decode(value.substr(a + 1, b - a - 1)),
                                           crypto::base64url_decode(value.substr(b + 1)),
                                           "awp-oauth:" + provider);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    auto d = core::json::try_parse(plain, core::json::kSmall);
    if (!d || !d->IsObject()) return std::nullopt;
    auto str = [&](const char* k) { return core::json::string_or(*d, k); };
    oauth_state s;
    s.state = str("s");
    s.verifier = str("v");
    s.provider = str("p");
    s.sub = str("u");
    s.tenant = str("t");
    s.gateway_id = str("g");
    s.connection_id = str("c");
    s.redirect_uri = str("r");
    auto e = d->FindMember("e");
    if (e == d->MemberEnd() || !e->value.IsInt64()) return std::nullopt;
    s.exp = e->value.GetInt64();
    if (s.provider != provider || s.state.empty() || s.verifier.empty()) return std::nullopt;
    return s;
}

// ---- upstream calls -------------------------------------------------------------------------

net::awaitable<upstream_answer> call_upstream(http::client_request req) {
    upstream_answer out;
    std::optional<http::response> got;
    try {
        got = co_await http::fetch(std::move(req));
    } catch (const http::upstream_error& e) {
        out.timed_out = e.what_kind() == http::upstream_error::kind::timeout;
        out.failure = e.what();
    } catch (const http::outbound_refused& e) {
        out.refused = true;
        out.failure = e.what();
    }
    if (got) {
        out.answered = true;
        out.status = got->status;
        out.content_type = std::string(got->header.get("content-type").value_or(""));
        out.body = std::move(got->body);
    }
    co_return out;
}

/// 504 for a slow provider, 502 for one that cannot be reached or answered garbage.
[[noreturn]] void transport_error(const upstream_answer& a, const connector& c,
                                  const std::string& what, const std::string& clear) {
    log::warn("source provider call failed",
              {{"connector", c.id}, {"call", what}, {"error", a.failure}});
    if (a.refused) {
        const auto message = c.label + " is not contacted: " + a.failure;
        if (!clear.empty()) flow_error(403, "outbound_refused", message, clear);
        throw http_error(403, "outbound_refused", message);
    }
    if (a.timed_out) {
        if (!clear.empty()) {
            flow_error(504, "provider_timeout", c.label + " did not answer in time", clear);
        }
        throw http_error(504, "provider_timeout", c.label + " did not answer in time");
    }
    if (!clear.empty()) flow_error(502, "provider_unreachable", c.label + " is unreachable", clear);
    throw http_error(502, "provider_unreachable", c.label + " is unreachable");
}

http::client_request api_request(const connector& c, const connector_endpoint& e,
                                 const std::string& token) {
    http::client_request r;
    r.method = e.method;
    r.url = c.base_url + e.path;
    r.timeout = c.timeout;
    r.body_limit = 8 * 1024 * 1024;
    r.header.add("Accept", "application/json");
    r.header.add("User-Agent", "awp-api-gateway");
    if (!token.empty()) r.header.add("Authorization", "Bearer " + token);
    return r;
}

const connector& usable_connector(const connector_registry& reg, const std::string& id) {
    const auto* c = reg.find(id);
    if (!c) throw http_error(404, "unknown_provider", "no connector named \"" + id + "\"");
    if (!c->unavailable.empty()) {
        throw http_error(503, "connector_not_configured",
                         "connector \"" + id + "\" is not configured: " + c->unavailable);
    }
    return *c;
}

// ---- stored credentials ---------------------------------------------------------------------

/// The connection as the caller sees it under RLS (404 otherwise) and its decrypted token.
net::awaitable<stored_connection> load_connection(db_pool& db, principal p, std::string id,
                                                  std::string key) {
    auto t = co_await db.begin(p);
    auto row = co_await t.query_and_commit(
        "SELECT c.provider, coalesce(c.config->>'connector', c.provider) AS connector, c.status, "
        "(SELECT s.encrypted_value FROM public.secrets s WHERE s.id = c.secret_id) AS value "
        "FROM public.source_connections c WHERE c.id = $1::uuid",
        id);
    if (row.empty()) throw http_error(404, "not_found", "source connection not found");
    stored_connection out;
    out.id = id;
    out.provider = row.get<std::string>(0, "provider");
    out.connector = row.get<std::string>(0, "connector");
    out.status = row.get<std::string>(0, "status");
    auto value = row.get_optional<std::string>(0, "value");
    if (!value) {
        // Fall back to the runner's naming (a connection whose secret_id was not recorded).
        auto t2 = co_await db.begin(p);
        const auto name = secret_name(out.provider, id);
        auto by_key = co_await t2.query_and_commit(
            "SELECT encrypted_value FROM public.secrets WHERE agent_id IS NULL AND key = $1 "
            "ORDER BY updated_at DESC LIMIT 1",
            name);
        if (!by_key.empty()) value = by_key.get<std::string>(0, 0);
    }
    if (!value) {
        throw http_error(409, "no_credentials", "the connection has no stored credentials");
    }
    try {
        out.token = crypto::decrypt_secret_with_key(*value, key);
    } catch (const std::exception&) {
        out.token.clear();
    }
    if (out.token.empty()) {
        throw http_error(409, "credentials_unreadable",
                         "the stored credentials cannot be decrypted (was the service-role key "
                         "rotated?); connect the source again");
    }
    co_return out;
}

std::string require_uuid(const std::optional<std::string>& v, const char* field) {
    if (!v || v->empty())
        throw http_error(422, "invalid_field", std::string(field) + " is required");
    if (!core::is_valid_uuid(*v)) {
        throw http_error(422, "invalid_field", std::string(field) + " must be a UUID");
    }
    return *v;
}

std::optional<std::string> bounded(std::optional<std::string> v, const char* field) {
    if (v && v->size() > kMaxParam) {
        throw http_error(422, "invalid_field",
                         std::string(field) + " is longer than " + std::to_string(kMaxParam));
    }
    if (v && v->empty()) return std::nullopt;
    return v;
}

// ---- browse answers -------------------------------------------------------------------------

std::string normalise_items(const connector& c, const std::string& body) {
    rapidjson::Document d;
    try {
        d = core::json::parse(body, core::json::kDocument);
    } catch (const core::json::parse_error& e) {
        throw http_error(502, "provider_bad_answer",
                         c.label + " did not answer with JSON (" + e.what() + ")");
    }
    const rapidjson::Value* items = &d;
    if (!c.items_field.empty()) items = d.IsObject() ? json_at(d, c.items_field) : nullptr;
    if (!items || !items->IsArray()) {
        throw http_error(502, "provider_bad_answer",
                         c.label + "'s answer has no item list at \"" + c.items_field + "\"");
    }
    json_out o;
    o.w.StartObject();
    o.key("items");
    o.w.StartArray();
    for (const auto& item : items->GetArray()) {
        if (!item.IsObject()) continue;
        std::optional<std::string> id;
        for (const auto& [name, path] : c.item_fields) {
            if (name == "id") id = json_scalar_text(json_at(item, path));
        }
        if (!id || id->empty()) continue;
        o.w.StartObject();
        for (const auto& [name, path] : c.item_fields) {
            const auto* v = json_at(item, path);
            if (name == "id") {
                o.kv("id", *id);
            } else if (name == "name") {
                o.kv("name", json_scalar_text(v).value_or(*id));
            } else if (name == "type") {
                o.kv("type", json_scalar_text(v).value_or(c.default_type));
            } else if (v) {
                o.key(name);
                v->Accept(o.w);
            }
        }
        o.w.EndObject();
    }
    o.w.EndArray();
    o.key("next_cursor");
    std::optional<std::string> next;
    if (!c.next_cursor_field.empty() && d.IsObject()) {
        next = json_scalar_text(json_at(d, c.next_cursor_field));
    }
    if (next && !next->empty()) {
        o.str(*next);
    } else {
        o.w.Null();
    }
    o.w.EndObject();
    return o.str();
}

/// Maps a provider's refusal of credentials or a request.
[[noreturn]] void provider_status_error(const upstream_answer& a, const connector& c,
                                        const std::string& token) {
    if (a.status == 401 || a.status == 403) {
        throw http_error(
            422, "credentials_rejected",
            c.label + " refused the credentials (HTTP " + std::to_string(a.status) + ")");
    }
    if (a.status >= 400 && a.status < 500) {
        std::string reason;
        auto d = core::json::try_parse(a.body, core::json::kDocument)
                     .value_or(rapidjson::Document{});  // not JSON: no reason to quote
        if (d.IsObject()) {
            for (const char* k : {"error_description", "message", "error"}) {
                if (auto v = json_scalar_text(json_at(d, k))) {
                    reason = safe_text(*v, token);
                    if (!reason.empty()) break;
                }
            }
        }
        throw http_error(a.status == 404 ? 404 : 422,
                         a.status == 404 ? "provider_not_found" : "provider_refused",
                         c.label + " refused the request (HTTP " + std::to_string(a.status) + ")" +
                             (reason.empty() ? "" : ": " + reason));
    }
    throw http_error(502, "provider_error", c.label + " answered HTTP " + std::to_string(a.status));
}

// ---- token answers --------------------------------------------------------------------------

token_answer parse_token_answer(const connector& c, const upstream_answer& a) {
    token_answer t;
    auto d = core::json::try_parse(a.body, core::json::kDocument).value_or(rapidjson::Document{});
    if (d.IsObject()) {
        auto s = [&](const char* k) { return json_scalar_text(json_at(d, k)).value_or(""); };
        t.access_token = s("access_token");
        t.refresh_token = s("refresh_token");
        t.token_type = s("token_type");
        t.scope = s("scope");
        t.error = s("error");
        t.error_description = s("error_description");
        if (const auto* e = json_at(d, "expires_in"); e && e->IsNumber()) {
            t.expires_in = static_cast<long long>(e->GetDouble());
        }
        if (!c.account_label_field.empty()) {
            t.account_label = json_scalar_text(json_at(d, c.account_label_field)).value_or("");
        }
        return t;
    }
    // application/x-www-form-urlencoded answers (GitHub without Accept: application/json).
    for (const auto& [k, v] : http::parse_query(a.body)) {
        if (k == "access_token") t.access_token = v;
        if (k == "refresh_token") t.refresh_token = v;
        if (k == "token_type") t.token_type = v;
        if (k == "scope") t.scope = v;
        if (k == "error") t.error = v;
        if (k == "error_description") t.error_description = v;
        if (k == "expires_in" && !v.empty() &&
            v.find_first_not_of("0123456789") == std::string::npos && v.size() < 12) {
            t.expires_in = std::stoll(v);
        }
    }
    return t;
}

http::client_request token_request(const connector& c, const std::string& code,
                                   const std::string& verifier, const std::string& redirect_uri) {
    http::client_request r;
    r.method = "POST";
    r.url = c.token_url;
    r.timeout = c.timeout;
    r.body_limit = 1024 * 1024;
    r.header.add("Content-Type", "application/x-www-form-urlencoded");
    r.header.add("Accept", "application/json");
    r.header.add("User-Agent", "awp-api-gateway");
    std::string body = "grant_type=authorization_code&code=" + http::percent_encode(code) +
                       "&redirect_uri=" + http::percent_encode(redirect_uri) +
                       "&code_verifier=" + http::percent_encode(verifier);
    if (c.token_auth_basic) {
        r.header.add("Authorization",
                     "Basic " + crypto::base64_encode(http::percent_encode(c.client_id) + ":" +
                                                      http::percent_encode(c.client_secret)));
    } else {
        body += "&client_id=" + http::percent_encode(c.client_id);
        if (!c.client_secret.empty()) {
            body += "&client_secret=" + http::percent_encode(c.client_secret);
        }
    }
    r.body = std::move(body);
    return r;
}

std::string connection_config(const connector& c, const oauth_state& st, const token_answer& tok) {
    json_out j;
    j.w.StartObject();
    j.kv("connector", c.id);
    j.kv("url", c.base_url);  // the runner's http_json provider posts {url}/{action}
    j.kv("gateway_id", st.gateway_id);
    j.key("oauth");
    j.w.Bool(true);
    if (!tok.scope.empty()) j.kv("scope", tok.scope);
    if (!tok.token_type.empty()) j.kv("token_type", tok.token_type);
    j.key("has_refresh_token");
    j.w.Bool(!tok.refresh_token.empty());
    if (tok.expires_in && *tok.expires_in > 0) {
        j.kv("token_expires_at", core::format_iso8601_utc(std::chrono::system_clock::now() +
                                                          std::chrono::seconds(*tok.expires_in)));
    }
    j.kv("connected_at", core::now_iso8601_utc());
    j.w.EndObject();
    return j.str();
}

}  // namespace awp::api::sources_detail
