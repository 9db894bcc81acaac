// The spec's sign-in routes, /api/auth/login, /api/auth/logout and /api/auth/session: a password
// sign-in (passwords.cpp) that starts a session of the session module (sessions.hpp), like any
// other, in the database of the workspace it is for; the session cookie; who the caller is.
#include "awp/core/log.hpp"
#include "awp/core/uuid.hpp"
#include "gateway.hpp"
#include "json.hpp"
#include "registry.hpp"
#include "sessions.hpp"
#include "users.hpp"

namespace awp::api {

using http::http_error;

net::awaitable<response> gateway::login(request r) {
    if (r.media_type() != "application/json") {
        throw http_error(415, "unsupported_media_type", "send application/json");
    }
    auto body = parse_object_body(r.body);
    auto email = req_string(body, "email");
    auto password = opt_string(body, "password").value_or("");
    if (password.empty()) throw http_error(422, "invalid_field", "password is required");
    if (email.size() > 320 || password.size() > 1024) {
        throw http_error(422, "invalid_field", "email or password is too long");
    }
    std::string account = email;
    for (auto& ch : account) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    // Which workspace the session is for: the body's workspaceId, else the browser's active
    // workspace cookie, else the registry's default; none = the gateway's own database.
    std::optional<std::string> wanted = opt_string(body, "workspaceId");
    if (wanted && !core::is_valid_uuid(*wanted)) {
        throw http_error(422, "invalid_field", "workspaceId must be a UUID");
    }
    std::optional<workspace> ws;
    std::optional<http_error> reg_err;
    try {
        ws = login_workspace(r, wanted);
    } catch (const registry_error& e) {
        reg_err = http_error(500, "registry_corrupt", e.what());
    }
    if (reg_err) throw *reg_err;
    principal svc;
    svc.who = principal::kind::service;
    pick_database(r, svc);
    svc.workspace_id = ws ? ws->id : "";
    svc.workspace_url = ws ? database_of(*ws) : "";
    auto result = co_await sign_in(svc, account, password, r.remote);
    if (result.retry_after > 0) {
        http_error e(429, "too_many_attempts", "too many failed sign-in attempts; try again later");
        e.extra.add("Retry-After", std::to_string(result.retry_after));
        throw e;
    }
    if (!result.verified || result.user.disabled) {
        core::log::warn("login failed", {{"remote", r.remote}});
        throw unauthorized("invalid email or password");
    }
    // The session: the session module's, in the workspace's database; the claims from the user
    // row as that statement reads it (a disable that raced this sign-in refuses it).
    const session_db db{svc.workspace_id, svc.workspace_url};
    const auto client = client_of(r);
    const std::string no_issuer;  // /api's tokens name awp
    auto grant =
        co_await sessions_->issue(db, result.user.id, session_face::api, client, no_issuer);
    if (!grant) {
        core::log::warn("login failed", {{"remote", r.remote}});
        throw unauthorized("invalid email or password");
    }
    // Its database's signed-out sessions are read before the token is used (a workspace
    // registered a moment ago, a database that was down at start).
    co_await sessions_->wait_ready(db.workspace_id, std::chrono::seconds(5));
    const auto& user = grant->user;
    const auto ttl = static_cast<long long>(cfg_.session_ttl_s);
    json_out out;
    out.w.StartObject();
    out.key("user");
    out.w.StartObject();
    out.kv("id", user.id);
    out.kv("email", user.email);
    out.key("tenantId");
    if (user.tenant_id.empty()) {
        out.w.Null();
    } else {
        out.str(user.tenant_id);
    }
    out.key("isOperator");
    out.w.Bool(user.is_operator);
    out.w.EndObject();
    out.key("workspaceId");
    if (ws) {
        out.str(ws->id);
    } else {
        out.w.Null();
    }
    out.key("expiresAt");
    out.w.Int64(grant->expires_at);
    out.w.EndObject();
    auto res = response::json(200, out.str());
    http::cookie_options co;
    co.max_age = ttl;
    co.secure = cfg_.cookie_secure;
    res.header.add("Set-Cookie", http::set_cookie(kSessionCookie, grant->access_token, co));
    if (ws) {
        http::cookie_options wc;
        wc.max_age = 31536000;
        wc.secure = cfg_.cookie_secure;
        res.header.add("Set-Cookie", http::set_cookie(kActiveWorkspaceCookie, ws->id, wc));
    }
    core::log::info("login", {{"user_id", user.id}, {"tenant_id", user.tenant_id}});
    co_return res;
}

net::awaitable<response> gateway::logout(request r) {
    // A signed-out token is refused here (401) like everywhere: signing out twice says so.
    auto p = require_session(r);
    // Its session ends in its database, for every route and every gateway process. A token of
    // no session (awpctl token) has none to end: only the cookie goes.
    if (!p.session_id.empty()) {
        const session_db db{p.workspace_id, p.workspace_url};
        const std::string reason = "logout";
        co_await sessions_->revoke(db, p.sub, p.session_id, revoke_scope::local, reason);
    }
    auto res = response::json(200, R"({"ok":true})");
    http::cookie_options co;
    co.max_age = 0;
    co.secure = cfg_.cookie_secure;
    res.header.add("Set-Cookie", http::set_cookie(kSessionCookie, "", co));
    co_return res;
}

net::awaitable<response> gateway::whoami(request r) {
    auto p = require_session(r);
    auto t = co_await db_->begin(p);
    // The tenant's row as RLS lets the caller see it (null when the tenant is not in the
    // active workspace's database).
    auto row = co_await t.query_and_commit(  // one round trip with the role and claims
        "SELECT public.current_tenant_id()::text AS tenant, (SELECT row_to_json(x) FROM "
        "(SELECT t.id, t.name, t.slug FROM public.tenants t WHERE t.id = "
        "public.current_tenant_id()) x)::text AS tenant_row");
    json_out out;
    out.w.StartObject();
    out.kv("userId", p.sub);
    out.kv("tenantId", row.get<std::string>(0, "tenant"));
    out.kv("email", p.email);
    out.key("isOperator");
    out.w.Bool(p.is_operator);
    out.key("tenant");
    if (auto tr = row.get_optional<std::string>(0, "tenant_row")) {
        out.raw(*tr);
    } else {
        out.w.Null();
    }
    out.key("workspaceId");
    if (p.workspace_id.empty()) {
        out.w.Null();
    } else {
        out.str(p.workspace_id);
    }
    out.w.EndObject();
    co_return response::json(200, out.str());
}

}  // namespace awp::api
