// Sources routes: validate credentials and browse a connection through its connector's HTTP
// JSON API (the OAuth 2 + PKCE connect: sources_oauth.cpp; the helpers both use:
// sources_shared.hpp). Tokens are stored as enc:v1 gateway secrets named
// <PROVIDER>_SOURCE_<ID8>, as the command runner reads them; they never reach a log line, a
// response or a redirect.
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

}  // namespace awp::api
