// Sources routes: connect a provider with OAuth 2 authorization code + PKCE (S256): the start
// (a sealed state cookie, the provider's authorization URL) and the callback (the state checked,
// the code exchanged, the tokens stored as the connection's enc:v1 gateway secrets). Helpers
// shared with validate and browse: sources_shared.hpp.
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

namespace awp::api {

namespace crypto = core::crypto;
namespace log = core::log;
using http::http_error;
using namespace sources_detail;

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
    st.exp = core::now_unix_s() + ttl;
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
    if (st->exp < core::now_unix_s()) {
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
