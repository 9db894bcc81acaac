// Sources routes: validate credentials and browse a connection through its connector's HTTP
// JSON API, and connect a provider with OAuth 2 authorization code + PKCE (S256). Tokens are
// stored as enc:v1 gateway secrets named <PROVIDER>_SOURCE_<ID8>, as the command runner reads
// them; they never reach a log line, a response or a redirect.
// Why one file: validate, browse and the OAuth start/callback are one feature, the
// source connectors' HTTP side, and share the private helpers above them (the sealed state
// cookie, upstream calls, stored credentials, secret-safe error text); about half is those
// helpers, which no other part of the gateway may use.
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

namespace awp::api {

namespace crypto = core::crypto;
namespace log = core::log;
using http::http_error;

namespace {

constexpr std::size_t kMaxParam = 2048;

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
std::string safe_text(std::string_view s, std::string_view secret, std::size_t limit = 200) {
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

struct oauth_state {
    std::string state;
    std::string verifier;
    std::string provider;
    std::string sub;
    std::string tenant;
    std::string gateway_id;
    std::string connection_id;  // empty: a new connection
    std::string redirect_uri;
    long long exp = 0;
};

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

struct upstream_answer {
    bool answered = false;
    bool timed_out = false;
    bool refused = false;  // the outbound policy refused the address (nothing was sent)
    std::string failure;
    unsigned status = 0;
    std::string content_type;
    std::string body;
};

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
                                  const std::string& what, const std::string& clear = {}) {
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

struct stored_connection {
    std::string id;
    std::string provider;
    std::string connector;
    std::string status;
    std::string token;
};

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

struct token_answer {
    std::string access_token;
    std::string refresh_token;
    std::string token_type;
    std::string scope;
    std::optional<long long> expires_in;
    std::string error;
    std::string error_description;
    std::string account_label;
};

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

}  // namespace

// ---- validate -------------------------------------------------------------------------------

net::awaitable<response> gateway::sources_validate(request r) {
    auto p = require_session(r);
    if (r.media_type() != "application/json") {
        throw http_error(415, "unsupported_media_type", "send application/json");
    }
    auto body = parse_object_body(r.body);
    auto provider = opt_string(body, "provider");
    auto connection_id = opt_string(body, "connection_id");
    const auto creds = body.FindMember("credentials");
    const bool has_creds = creds != body.MemberEnd() && !creds->value.IsNull();
    if (has_creds && connection_id) {
        throw http_error(422, "invalid_field", "send credentials or connection_id, not both");
    }
    if (!has_creds && !connection_id) {
        throw http_error(422, "invalid_field", "credentials (or connection_id) is required");
    }
    std::string token;
    std::string extra_json = "{}";
    std::string connector_id;
    if (connection_id) {
        const auto id = require_uuid(connection_id, "connection_id");
        const auto key = secrets_key(cfg_);
        auto conn = co_await load_connection(*db_, p, id, key);
        if (provider && *provider != conn.connector) {
            throw http_error(
                422, "invalid_field",
                "provider does not match the connection's connector \"" + conn.connector + "\"");
        }
        connector_id = conn.connector;
        token = std::move(conn.token);
    } else {
        if (!provider || provider->empty()) {
            throw http_error(422, "invalid_field", "provider is required");
        }
        connector_id = *provider;
        (void)usable_connector(*connectors_, connector_id);  // 404 before looking at credentials
        if (!creds->value.IsObject()) {
            throw http_error(422, "invalid_field", "credentials must be an object");
        }
        json_out extra;
        extra.w.StartObject();
        for (auto m = creds->value.MemberBegin(); m != creds->value.MemberEnd(); ++m) {
            const std::string k(m->name.GetString(), m->name.GetStringLength());
            if (!m->value.IsString()) {
                throw http_error(422, "invalid_field", "credentials." + k + " must be a string");
            }
            const std::string v(m->value.GetString(), m->value.GetStringLength());
            if (v.size() > 8192) {
                throw http_error(422, "invalid_field", "credentials." + k + " is too long");
            }
            if (k == "api_key" || k == "access_token") {
                if (token.empty()) token = v;
            } else if (k != "refresh_token") {
                extra.kv(k, v);
            }
        }
        extra.w.EndObject();
        if (token.find_first_not_of(" \t\r\n") == std::string::npos) {
            throw http_error(422, "invalid_field", "credentials.api_key is required");
        }
        if (token.find_first_of("\r\n") != std::string::npos) {
            throw http_error(422, "invalid_field", "credentials.api_key must be one line");
        }
        extra_json = extra.str();
    }
    const auto& c = usable_connector(*connectors_, connector_id);
    auto up = api_request(c, c.validate, token);
    if (c.validate.method == "POST") {
        up.header.add("Content-Type", "application/json");
        up.body = extra_json;
    }
    up.check = outbound_check(http::outbound_scope::internet);
    auto a = co_await call_upstream(std::move(up));
    if (!a.answered) transport_error(a, c, "validate");
    if (a.status < 200 || a.status >= 300) provider_status_error(a, c, token);
    std::optional<std::string> account;
    auto d = core::json::try_parse(a.body, core::json::kDocument).value_or(rapidjson::Document{});
    if (d.IsObject()) {
        for (const char* k : {"ok", "valid"}) {
            if (const auto* v = json_at(d, k); v && v->IsBool() && !v->GetBool()) {
                const auto why = json_scalar_text(json_at(d, "error")).value_or("");
                const auto reason = safe_text(why, token);
                throw http_error(
                    422, "credentials_rejected",
                    c.label + " refused the credentials" + (reason.empty() ? "" : ": " + reason));
            }
        }
        if (!c.validate_account_field.empty()) {
            if (auto v = json_scalar_text(json_at(d, c.validate_account_field))) {
                account = safe_text(*v, token);
            }
        }
    }
    if (connection_id) {
        // The stored credentials were just confirmed: the connection's last_verified_at.
        auto t = co_await db_->begin(p);
        co_await t.query_and_commit(
            "UPDATE public.source_connections SET last_verified_at = now() WHERE id = $1::uuid",
            *connection_id);
    }
    json_out o;
    o.w.StartObject();
    o.key("ok");
    o.w.Bool(true);
    o.kv("provider", c.id);
    o.kv_opt("account", account);
    o.w.EndObject();
    co_return response::json(200, o.str());
}

// ---- browse ---------------------------------------------------------------------------------

net::awaitable<response> gateway::sources_browse(request r) {
    auto p = require_session(r);
    std::optional<std::string> connection_id;
    std::optional<std::string> path;
    std::optional<std::string> cursor;
    if (r.method == "POST") {  // cross-site POSTs are refused by the router (routes())
        if (r.media_type() != "application/json") {
            throw http_error(415, "unsupported_media_type", "send application/json");
        }
        auto body = parse_object_body(r.body);
        connection_id = opt_string(body, "connection_id");
        path = opt_string(body, "path");
        if (!path) path = opt_string(body, "parent_id");
        cursor = opt_string(body, "cursor");
    } else {
        connection_id = r.query_param("connection_id");
        path = r.query_param("path");
        if (!path) path = r.query_param("parent_id");
        cursor = r.query_param("cursor");
    }
    const auto id = require_uuid(connection_id, "connection_id");
    path = bounded(path, "path");
    cursor = bounded(cursor, "cursor");
    const auto key = secrets_key(cfg_);
    auto conn = co_await load_connection(*db_, p, id, key);
    if (conn.status == "revoked") {
        throw http_error(409, "connection_revoked", "the connection was revoked; connect again");
    }
    const auto& c = usable_connector(*connectors_, conn.connector);
    auto up = api_request(c, c.browse, conn.token);
    if (c.browse.method == "POST") {
        json_out b;
        b.w.StartObject();
        if (path && !c.browse_path_param.empty()) b.kv(c.browse_path_param, *path);
        if (cursor && !c.browse_cursor_param.empty()) b.kv(c.browse_cursor_param, *cursor);
        b.w.EndObject();
        up.header.add("Content-Type", "application/json");
        up.body = b.str();
    } else {
        std::string q;
        if (path && !c.browse_path_param.empty()) {
            q += c.browse_path_param + "=" + http::percent_encode(*path);
        }
        if (cursor && !c.browse_cursor_param.empty()) {
            q += (q.empty() ? "" : "&") + c.browse_cursor_param + "=" +
                 http::percent_encode(*cursor);
        }
        if (!q.empty()) up.url = with_query(up.url, q);
    }
    up.check = outbound_check(http::outbound_scope::internet);
    auto a = co_await call_upstream(std::move(up));
    if (!a.answered) transport_error(a, c, "browse");
    if (a.status < 200 || a.status >= 300) provider_status_error(a, c, conn.token);
    co_return response::json(200, normalise_items(c, a.body));
}

// ---- OAuth 2 + PKCE -------------------------------------------------------------------------

net::awaitable<response> gateway::oauth_start(request r) {
    auto p = require_session(r);
    const auto provider = r.param("provider");
    const auto* c = connectors_->find(provider);
    if (!c) throw http_error(404, "unknown_provider", "no connector named \"" + provider + "\"");
    if (!c->oauth2) {
        throw http_error(400, "oauth_not_supported", c->oauth_unavailable);
    }
    if (!c->oauth_unavailable.empty()) {
        throw http_error(503, "oauth_not_configured",
                         c->label + " OAuth is not configured: " + c->oauth_unavailable);
    }
    (void)secrets_key(cfg_);  // 503 now rather than after the user approved
    auto gateway_param = bounded(r.query_param("gateway"), "gateway");
    auto connection_param = bounded(r.query_param("connection_id"), "connection_id");
    if (connection_param && !core::is_valid_uuid(*connection_param)) {
        throw http_error(422, "invalid_field", "connection_id must be a UUID");
    }
    std::string base = cfg_.public_url;
    if (base.empty()) {
        const auto host = std::string(r.header.get("host").value_or(""));
        if (host.empty() ||
            host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789.-:[]") != std::string::npos) {
            throw http_error(400, "bad_host", "set API_PUBLIC_URL or send a valid Host header");
        }
        base = "http://" + host;
    }
    oauth_state st;
    st.provider = provider;
    st.sub = p.sub;
    st.tenant = p.tenant_id;
    st.redirect_uri = base + "/api/sources/oauth/" + provider + "/callback";
    auto t = co_await db_->begin(p);
    std::string preferred_gateway;
    if (connection_param) {
        auto row = co_await t.query(
            "SELECT coalesce(config->>'connector', provider), coalesce(config->>'gateway_id', '') "
            "FROM public.source_connections WHERE id = $1::uuid",
            *connection_param);
        if (row.empty()) throw http_error(404, "not_found", "source connection not found");
        if (row.get<std::string>(0, 0) != provider) {
            throw http_error(
                422, "invalid_field",
                "connection_id belongs to connector \"" + row.get<std::string>(0, 0) + "\"");
        }
        st.connection_id = *connection_param;
        preferred_gateway = row.get<std::string>(0, 1);
    }
    if (gateway_param) {
        auto row = co_await t.query(
            "SELECT id::text FROM public.gateways WHERE id::text = $1 OR slug = $1 LIMIT 1",
            *gateway_param);
        if (row.empty()) throw http_error(404, "gateway_not_found", "no such gateway");
        st.gateway_id = row.get<std::string>(0, 0);
    } else {
        auto row = co_await t.query(
            "SELECT id::text FROM public.gateways ORDER BY (id::text = $1) DESC, created_at, id "
            "LIMIT 1",
            preferred_gateway);
        if (row.empty()) {
            throw http_error(409, "no_gateway",
                             "the workspace has no gateway to keep the credentials on");
        }
        st.gateway_id = row.get<std::string>(0, 0);
    }
    co_await t.commit();
    st.state = crypto::base64url_encode(crypto::random_bytes(32));
    st.verifier = crypto::base64url_encode(crypto::random_bytes(32));
    const auto ttl = static_cast<long long>(cfg_.oauth_state_ttl_s);
    st.exp = core::now_unix_ms() / 1000 + ttl;
    const auto challenge = crypto::base64url_encode(crypto::sha256(st.verifier));
    std::string scope;
    for (const auto& s : c->scopes) scope += (scope.empty() ? "" : c->scope_separator) + s;
    std::string q = "response_type=code&client_id=" + http::percent_encode(c->client_id) +
                    "&redirect_uri=" + http::percent_encode(st.redirect_uri);
    if (!scope.empty()) q += "&scope=" + http::percent_encode(scope);
    q += "&state=" + http::percent_encode(st.state) +
         "&code_challenge=" + http::percent_encode(challenge) + "&code_challenge_method=S256";
    for (const auto& [k, v] : c->extra_params) {
        q += "&" + http::percent_encode(k) + "=" + http::percent_encode(v);
    }
    response res;
    res.status = 302;
    res.header.add("Location", with_query(c->authorize_url, q));
    http::cookie_options co;
    co.path = "/api/sources/oauth/" + provider;
    co.max_age = ttl;
    co.secure = cfg_.cookie_secure;
    co.same_site = "Lax";  // sent on the provider's top-level redirect back to us
    res.header.add("Set-Cookie",
                   http::set_cookie(cookie_name(provider), seal_state(st, state_key(cfg_)), co));
    log::info("source oauth started",
              {{"connector", provider}, {"tenant_id", p.tenant_id}, {"gateway_id", st.gateway_id}});
    co_return res;
}

net::awaitable<response> gateway::oauth_callback(request r) {
    auto p = require_session(r);
    const auto provider = r.param("provider");
    const auto* c = connectors_->find(provider);
    if (!c) throw http_error(404, "unknown_provider", "no connector named \"" + provider + "\"");
    const auto clear = clear_state_cookie(cfg_, provider);
    if (!c->oauth2 || !c->oauth_unavailable.empty()) {
        flow_error(503, "oauth_not_configured", c->label + " OAuth is not configured", clear);
    }
    const auto cookie = r.cookie(cookie_name(provider));
    std::optional<oauth_state> st;
    if (cookie && !cookie->empty()) st = open_state(*cookie, state_key(cfg_), provider);
    const auto state_param = r.query_param("state").value_or("");
    const bool state_matches = st && !state_param.empty() &&
                               crypto::constant_time_equal(state_param, st->state) &&
                               st->sub == p.sub && st->tenant == p.tenant_id;

    // The provider refused (the user said no): nothing is stored, back to the UI.
    if (auto err = r.query_param("error")) {
        if (state_matches) (void)connectors_->consume_state(st->state, st->exp);
        const auto code = safe_code(*err);
        log::info("source oauth refused by the provider",
                  {{"connector", provider}, {"error", code}});
        response res;
        res.status = 302;
        res.header.add("Location", with_query(cfg_.sources_redirect,
                                              "error=" + http::percent_encode(code) +
                                                  "&provider=" + http::percent_encode(provider)));
        res.header.add("Set-Cookie", clear);
        res.header.add("Content-Type", "application/json");
        res.body = R"({"ok":false,"error":{"code":"oauth_denied","message":)" +
                   http::json_quote(c->label + " refused the authorization: " + code) + "}}";
        co_return res;
    }
    const auto code = r.query_param("code").value_or("");
    if (code.empty() || code.size() > 4096) {
        flow_error(400, "invalid_request", "the callback has no authorization code", clear);
    }
    if (state_param.empty())
        flow_error(400, "oauth_state_missing", "the callback has no state", clear);
    if (!cookie || cookie->empty()) {
        flow_error(400, "oauth_state_missing",
                   "no OAuth state cookie: the flow expired or was started in another browser",
                   clear);
    }
    if (!st) flow_error(400, "oauth_state_invalid", "the OAuth state cookie is not valid", clear);
    if (st->exp < core::now_unix_ms() / 1000) {
        flow_error(400, "oauth_state_expired", "the OAuth flow expired; start again", clear);
    }
    if (!state_matches) {
        flow_error(400, "oauth_state_mismatch",
                   "the state does not match the flow this session started", clear);
    }
    if (!connectors_->consume_state(st->state, st->exp)) {
        flow_error(400, "oauth_state_replayed", "this OAuth state was used already", clear);
    }
    const auto key = secrets_key(cfg_);

    auto exchange = token_request(*c, code, st->verifier, st->redirect_uri);
    exchange.check = outbound_check(http::outbound_scope::internet);
    auto a = co_await call_upstream(std::move(exchange));
    if (!a.answered) transport_error(a, *c, "token", clear);
    const auto tok = parse_token_answer(*c, a);
    if (a.status == 400 || a.status == 401 || a.status == 403 ||
        (a.status >= 200 && a.status < 300 && !tok.error.empty())) {
        const auto why = tok.error.empty() ? std::string("HTTP ") + std::to_string(a.status)
                                           : safe_code(tok.error);
        log::warn("source oauth code refused", {{"connector", provider}, {"error", why}});
        flow_error(422, "oauth_grant_rejected",
                   c->label + " refused the authorization code (" + why + "); start again", clear);
    }
    if (a.status < 200 || a.status >= 300) {
        log::warn("source oauth token endpoint failed",
                  {{"connector", provider}, {"status", a.status}});
        flow_error(502, "provider_error",
                   c->label + "'s token endpoint answered HTTP " + std::to_string(a.status), clear);
    }
    if (tok.access_token.empty()) {
        flow_error(502, "provider_bad_answer", c->label + " answered without an access token",
                   clear);
    }
    const auto enc_access = crypto::encrypt_secret_with_key(tok.access_token, key);
    const auto enc_refresh = tok.refresh_token.empty()
                                 ? std::string()
                                 : crypto::encrypt_secret_with_key(tok.refresh_token, key);
    const std::string label =
        tok.account_label.empty() ? c->label : safe_text(tok.account_label, tok.access_token);
    const auto config = connection_config(*c, *st, tok);

    auto t = co_await db_->begin(p);
    std::string conn_id = st->connection_id;
    const bool is_new = conn_id.empty();
    if (is_new) {
        // A fresh id whose 8-character secret name no other connection of this gateway uses.
        for (int i = 0; i < 8; ++i) {
            conn_id = core::uuid::generate_v4().to_string();
            auto taken = co_await t.query(
                "SELECT 1 FROM public.secrets WHERE gateway_id = $1::uuid AND agent_id IS NULL "
                "AND key = $2",
                st->gateway_id, secret_name(c->runner_provider, conn_id));
            if (taken.empty()) break;
        }
    } else {
        auto row = co_await t.query(
            "SELECT 1 FROM public.source_connections WHERE id = $1::uuid FOR UPDATE", conn_id);
        if (row.empty()) flow_error(404, "not_found", "the source connection was deleted", clear);
    }
    const auto name = secret_name(c->runner_provider, conn_id);
    const std::string upsert =
        "INSERT INTO public.secrets (gateway_id, key, name, encrypted_value, category, note) "
        "VALUES ($1::uuid, $2, $3, $4, 'integration', $5) "
        "ON CONFLICT (tenant_id, gateway_id, key) WHERE agent_id IS NULL DO UPDATE SET "
        "encrypted_value = EXCLUDED.encrypted_value, name = EXCLUDED.name, note = EXCLUDED.note, "
        "updated_at = now() RETURNING id::text";
    const std::string secret_label = c->label + " (" + label + ")";
    const std::string note = "OAuth access token of source connection " + conn_id;
    auto secret = co_await t.query(upsert, st->gateway_id, name, secret_label, enc_access, note);
    const auto secret_id = secret.get<std::string>(0, 0);
    const std::string refresh_name = core::secrets::source_field_name(name, "refresh_token");
    if (!enc_refresh.empty()) {
        const std::string refresh_note = "OAuth refresh token of source connection " + conn_id;
        co_await t.query(upsert, st->gateway_id, refresh_name, secret_label, enc_refresh,
                         refresh_note);
    } else {
        co_await t.query(
            "DELETE FROM public.secrets WHERE gateway_id = $1::uuid AND agent_id IS NULL AND "
            "key = $2",
            st->gateway_id, refresh_name);
    }
    // The provider just accepted these credentials (last_verified_at), and a first sync with
    // them is due now (next_sync_at), as in the original product (sql/0029).
    if (is_new) {
        co_await t.query(
            "INSERT INTO public.source_connections (id, provider, account_label, status, "
            "writable, secret_id, config, next_sync_at, last_verified_at) VALUES ($1::uuid, $2, "
            "$3, 'active', false, $4::uuid, $5::jsonb, now(), now())",
            conn_id, c->runner_provider, label, secret_id, config);
    } else {
        co_await t.query(
            "UPDATE public.source_connections SET secret_id = $2::uuid, status = 'active', "
            "last_error = NULL, account_label = $3, config = config || $4::jsonb, "
            "next_sync_at = now(), last_verified_at = now(), updated_at = now() "
            "WHERE id = $1::uuid",
            conn_id, secret_id, label, config);
    }
    co_await t.commit();
    log::info("source connected", {{"connector", provider},
                                   {"connection_id", conn_id},
                                   {"tenant_id", p.tenant_id},
                                   {"gateway_id", st->gateway_id},
                                   {"new", is_new}});
    response res;
    res.status = 302;
    res.header.add("Location",
                   with_query(cfg_.sources_redirect, "connected=" + http::percent_encode(provider) +
                                                         "&connection_id=" + conn_id));
    res.header.add("Set-Cookie", clear);
    res.header.add("Content-Type", "application/json");
    json_out o;
    o.w.StartObject();
    o.key("ok");
    o.w.Bool(true);
    o.kv("provider", provider);
    o.kv("connection_id", conn_id);
    o.key("created");
    o.w.Bool(is_new);
    o.w.EndObject();
    res.body = o.str();
    co_return res;
}

}  // namespace awp::api
