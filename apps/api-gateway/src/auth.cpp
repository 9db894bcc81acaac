// Authentication: who a request is. Access tokens from the Authorization header or session
// cookies (awp and @supabase/ssr formats), the service-role key, the data API's caller as
// PostgREST decides it, the database a session is bound to, same-origin checks; and, for every
// user token on every route, the session module's revocation check (sessions.hpp: a memory
// lookup). Why one file: every way a request proves who it is is read here against one
// principal type; a reviewer of authentication reads one file. Passwords: passwords.cpp; the
// sign-in routes: api_auth.cpp and gotrue.cpp.
#include <algorithm>

#include "awp/core/crypto.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "awp/core/uuid.hpp"
#include "awp/rest/error.hpp"
#include "gateway.hpp"
#include "json.hpp"
#include "registry.hpp"
#include "sessions.hpp"

namespace awp::api {

namespace crypto = core::crypto;
using http::http_error;

http_error unauthorized(const std::string& message) {
    http_error e(401, "unauthenticated", message);
    e.extra.add("WWW-Authenticate", "Bearer");
    return e;
}

namespace {

/// The access token inside an @supabase/ssr cookie value (after joining chunks).
std::string token_from_ssr_value(std::string value) {
    if (value.rfind("base64-", 0) == 0) {
        const auto b64 = value.substr(7);
        try {
            value = crypto::base64url_decode(b64);
        } catch (const std::exception&) {
            try {
                value = crypto::base64_decode(b64);
            } catch (const std::exception&) {
                return {};
            }
        }
    } else if (value.find('%') != std::string::npos) {
        if (auto d = http::percent_decode(value)) value = *d;
    }
    if (value.empty()) return {};
    if (value.front() != '{' && value.front() != '[' && value.front() != '"') return value;
    rapidjson::Document d;
    try {
        d = core::json::parse(value, core::json::kSmall);
    } catch (const core::json::parse_error&) {
        return {};
    }
    if (d.IsString()) return d.GetString();
    if (d.IsObject()) {
        auto it = d.FindMember("access_token");
        if (it != d.MemberEnd() && it->value.IsString()) return it->value.GetString();
        return {};
    }
    if (d.IsArray() && !d.Empty() && d[0].IsString()) return d[0].GetString();  // older ssr
    return {};
}

/// The awp_workspace claim of a token, read BEFORE its signature is checked, only to choose
/// the key to check it with: "" when absent; nullopt when the token is not a JWT with a JSON
/// object payload (the verification below says why).
std::optional<std::string> unverified_workspace_claim(std::string_view token) {
    const auto a = token.find('.');
    const auto b = a == std::string_view::npos ? a : token.find('.', a + 1);
    if (b == std::string_view::npos || b - a - 1 > 16 * 1024) return std::nullopt;
    std::string payload;
    try {
        payload = crypto::base64url_decode(token.substr(a + 1, b - a - 1));
    } catch (const std::exception&) {
        return std::nullopt;
    }
    auto d = core::json::try_parse(payload, core::json::kSmall);
    if (!d || !d->IsObject()) return std::nullopt;
    auto it = d->FindMember(kWorkspaceClaim);
    if (it == d->MemberEnd()) return std::string();
    if (!it->value.IsString()) return std::nullopt;
    return std::string(it->value.GetString(), it->value.GetStringLength());
}

http_error forbidden(const char* code, const std::string& message) {
    return http_error(403, code, message);
}

/// An /api login of an awp older than its sessions (sql/0032): issued by awp ("iss": "awp") with
/// a token id and no session_id. It names no session that could be ended, so it is refused (sign
/// in again) rather than left valid until it expires. awpctl's tokens carry no jti.
bool pre_session_login(const rapidjson::Value& claims) {
    auto has = [&](const char* k) {
        auto it = claims.FindMember(k);
        return it != claims.MemberEnd() && it->value.IsString() && it->value.GetStringLength() > 0;
    };
    auto iss = claims.FindMember("iss");
    return has("jti") && !has("session_id") && iss != claims.MemberEnd() && iss->value.IsString() &&
           std::string_view(iss->value.GetString(), iss->value.GetStringLength()) == "awp";
}

bool is_ssr_cookie_base(std::string_view name) {
    if (name.rfind("sb-", 0) == 0 && name.size() > 14 &&
        name.substr(name.size() - 11) == "-auth-token") {
        return true;
    }
    if (name.rfind("hq-", 0) == 0 && name.size() == 11) {  // the original UI: hq-<workspace id8>
        return name.substr(3).find_first_not_of("0123456789abcdef") == std::string_view::npos;
    }
    return false;
}

}  // namespace

std::string token_from_cookies(const request& r) {
    auto jar = r.cookies();
    if (auto it = jar.find(kSessionCookie); it != jar.end() && !it->second.empty()) {
        return it->second;
    }
    for (const auto& [name, value] : jar) {
        if (is_ssr_cookie_base(name)) {
            auto t = token_from_ssr_value(value);
            if (!t.empty()) return t;
        }
        // Chunked: <base>.0, <base>.1, ... joined in order.
        if (name.size() > 2 && name.substr(name.size() - 2) == ".0" &&
            is_ssr_cookie_base(std::string_view(name).substr(0, name.size() - 2))) {
            const auto base = name.substr(0, name.size() - 2);
            std::string joined;
            for (int i = 0; i < 32; ++i) {
                auto c = jar.find(base + "." + std::to_string(i));
                if (c == jar.end()) break;
                joined += c->second;
            }
            auto t = token_from_ssr_value(joined);
            if (!t.empty()) return t;
        }
    }
    return {};
}

std::optional<principal> token_cache::find(const std::string& token, double now, double leeway) {
    std::lock_guard lock(mu_);
    auto it = map_.find(token);
    if (it == map_.end()) return std::nullopt;
    if (now >= it->second.exp + leeway || now + leeway < it->second.nbf) {
        map_.erase(it);  // the full check below says why it is refused
        return std::nullopt;
    }
    return it->second.p;
}

void token_cache::put(const std::string& token, const principal& p, double exp, double nbf,
                      double now) {
    std::lock_guard lock(mu_);
    if (map_.size() >= kMax) {
        std::erase_if(map_, [&](const auto& kv) { return kv.second.exp <= now; });
        if (map_.size() >= kMax) map_.clear();
    }
    map_.insert_or_assign(token, entry{p, exp, nbf});
}

std::optional<principal> gateway::token_principal(std::string_view token, bool& service_key) const {
    service_key = false;
    if (!cfg_.service_role_key.empty() &&
        crypto::constant_time_equal(token, cfg_.service_role_key)) {
        service_key = true;
        return std::nullopt;
    }
    constexpr double kLeeway = 5;
    const auto now = static_cast<double>(core::now_unix_ms()) / 1000.0;
    const std::string text(token);
    // Revocation is checked by the caller, after the token's database is known (admit).
    if (auto hit = tokens_.find(text, now, kLeeway)) return hit;
    // A session awp issued for a registered workspace is signed with that workspace's key
    // (crypto::workspace_session_key); anything else with JWT_SECRET. The claim only picks the
    // key: a token that names workspace A but is signed for B (or with JWT_SECRET) fails below.
    auto ws_claim = unverified_workspace_claim(token);
    std::string key = cfg_.jwt_secret;
    if (ws_claim && !ws_claim->empty()) {
        if (!core::is_valid_uuid(*ws_claim)) throw unauthorized("the token's workspace is invalid");
        key = crypto::workspace_session_key(cfg_.jwt_secret, *ws_claim);
    }
    std::string claims;
    try {
        crypto::jwt_verify_options o;
        o.require_exp = true;
        o.leeway = std::chrono::seconds(static_cast<long>(kLeeway));
        claims = crypto::jwt_verify_hs256(token, key, o);
    } catch (const crypto::token_error& e) {
        throw unauthorized(std::string("invalid access token: ") + e.what());
    }
    rapidjson::Document d;
    try {
        d = core::json::parse_object(claims, core::json::kSmall);
    } catch (const core::json::parse_error&) {
        throw unauthorized("invalid access token claims");
    }
    principal p;
    p.claims_json = claims;
    auto str = [&](const rapidjson::Value& o, const char* k) -> std::string {
        auto it = o.FindMember(k);
        return it != o.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
    };
    auto number = [&](const char* k, double fallback) {
        auto it = d.FindMember(k);
        return it != d.MemberEnd() && it->value.IsNumber() ? it->value.GetDouble() : fallback;
    };
    const double exp = number("exp", 0);  // verified present
    const double nbf = number("nbf", -1e18);
    const auto role = str(d, "role");
    p.role = role;
    p.workspace_id = str(d, kWorkspaceClaim);
    if (role == "service_role") {
        // The platform-wide role: only a token of the gateway's own secret carries it.
        if (!p.workspace_id.empty())
            throw unauthorized("a workspace session cannot be service_role");
        p.who = principal::kind::service;
        p.is_operator = true;
        tokens_.put(text, p, exp, nbf, now);
        return p;
    }
    if (role != "authenticated") {
        throw unauthorized(role.empty() ? "the token has no role"
                                        : "an anon token is not a session");
    }
    p.sub = str(d, "sub");
    p.email = str(d, "email");
    p.jti = str(d, "jti");
    p.session_id = str(d, "session_id");
    p.iat = static_cast<long long>(number("iat", 0));
    if (pre_session_login(d)) {
        throw unauthorized(
            "this session was issued before sessions could be signed out; sign in "
            "again");
    }
    if (auto am = d.FindMember("app_metadata"); am != d.MemberEnd() && am->value.IsObject()) {
        p.tenant_id = str(am->value, "tenant_id");
        p.is_operator = str(am->value, "awp_role") == "operator";
    }
    if (p.tenant_id.empty()) p.tenant_id = str(d, "tenant_id");
    if (p.sub.empty()) throw unauthorized("the token has no subject");
    // No tenant, no data: never a default tenant (SQL's current_tenant_id() agrees).
    if (p.tenant_id.empty()) {
        throw forbidden("no_tenant",
                        "the session has no tenant (app_metadata.tenant_id); an administrator "
                        "must assign the user to a tenant");
    }
    if (!core::is_valid_uuid(p.tenant_id)) throw unauthorized("the token's tenant is not a UUID");
    p.exp = static_cast<long long>(exp);
    // Only tokens that passed every check are remembered; failures are never cached.
    tokens_.put(text, p, exp, nbf, now);
    return p;
}

void gateway::admit(const principal& p) const {
    switch (sessions_->check(p)) {
        case session_state::live:
            return;
        case session_state::revoked:
            throw unauthorized("the session has been signed out");
        case session_state::unknown:
            break;
    }
    // Fail closed: a session signed out before this process read its database must not pass.
    // When the database cannot be used at all, what a request on it would be told (502 ...).
    if (auto why = sessions_->unknown_because(p)) throw *why;
    http_error e(503, "sessions_unavailable",
                 "the signed-out sessions of this session's database are not loaded yet; try "
                 "again in a moment");
    e.extra.add("Retry-After", "1");
    throw e;
}

// ---- the data API's caller ------------------------------------------------------------------

namespace {

/// PostgREST's refusal of a token (Error.hs, JwtError): 401, its code and message, and
/// WWW-Authenticate: Bearer error="invalid_token" with the message.
rest::api_error jwt_refused(const char* code, const std::string& message,
                            const std::string& details = {}) {
    rest::api_error e(401, code, message, details);
    e.headers.emplace_back(
        "WWW-Authenticate",
        "Bearer error=\"invalid_token\", error_description=" + http::json_quote(message));
    return e;
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

data_principal to_data(const principal& p) {
    data_principal d;
    d.role = p.role;
    d.claims_json = p.claims_json;
    // PostgREST answers an insufficient privilege (42501) with 403 when the role is not the
    // anon role, else with 401 (App.hs: authed = role /= db-anon-role).
    d.has_jwt = p.role != "anon";
    d.sub = p.sub;
    d.session_id = p.session_id;
    return d;
}

/// PostgREST's answer while the database cannot be asked (here: its signed-out sessions).
rest::api_error sessions_unavailable() {
    rest::api_error e(503, "PGRST000",
                      "Could not read the database's signed-out sessions yet. Retrying.");
    e.headers.emplace_back("Retry-After", "1");
    return e;
}

}  // namespace

data_principal gateway::data_api_principal(const request& r) const {
    // As PostgREST behind the platform's gateway: Authorization: Bearer <jwt> (another scheme is
    // no token), else the apikey header as the token, else the anon role.
    std::string token;
    bool bearer_sent = false;
    if (auto h = r.header.get("authorization")) {
        std::string_view v = *h;
        const auto sp = v.find(' ');
        if (iequals(v.substr(0, sp), "bearer")) {
            bearer_sent = true;
            auto rest_of = sp == std::string_view::npos ? std::string_view{} : v.substr(sp);
            while (!rest_of.empty() && (rest_of.front() == ' ' || rest_of.front() == '\t'))
                rest_of.remove_prefix(1);
            if (rest_of.empty()) {
                throw jwt_refused("PGRST301", "Empty JWT is sent in Authorization header");
            }
            token = std::string(rest_of);
        }
    }
    if (!bearer_sent) {
        if (auto k = r.header.get("apikey")) token = std::string(*k);
    }
    if (token.empty()) return data_principal{};
    if (!cfg_.service_role_key.empty() &&
        crypto::constant_time_equal(token, cfg_.service_role_key)) {
        data_principal d;
        d.role = "service_role";
        d.claims_json = R"({"role":"service_role"})";
        d.has_jwt = true;
        return d;
    }
    constexpr double kSkew = 30;  // PostgREST's allowed clock skew
    const auto now = static_cast<double>(core::now_unix_ms()) / 1000.0;
    // Every hit and every fresh verification asks the session module (a memory lookup).
    auto revoked = [&](const principal& p) {
        switch (sessions_->check(p)) {
            case session_state::live:
                return;
            case session_state::revoked:
                throw jwt_refused("PGRST303", "JWT session has been signed out");
            case session_state::unknown:
                throw sessions_unavailable();
        }
    };
    if (auto hit = data_tokens_.find(token, now, kSkew)) {
        revoked(*hit);
        return to_data(*hit);
    }
    const auto parts = 1 + std::count(token.begin(), token.end(), '.');
    if (parts != 3) {
        throw jwt_refused("PGRST301", "Expected 3 parts in JWT; got " + std::to_string(parts));
    }
    if (auto ws = unverified_workspace_claim(token); ws && !ws->empty()) {
        throw jwt_refused("PGRST303",
                          "a session of a registered workspace is not accepted here: the data "
                          "API serves the gateway's own database; sign in with /auth/v1");
    }
    std::string claims;
    std::optional<std::pair<const char*, std::string>> failure;
    try {
        crypto::jwt_verify_options o;
        o.leeway = std::chrono::seconds(static_cast<long>(kSkew));
        claims = crypto::jwt_verify_hs256(token, cfg_.jwt_secret, o);
    } catch (const crypto::token_error& e) {
        const std::string what = e.what();
        switch (e.reason()) {
            case crypto::token_failure::expired:
                failure.emplace("PGRST303", "JWT expired");
                break;
            case crypto::token_failure::not_yet_valid:
                failure.emplace("PGRST303", "JWT not yet valid");
                break;
            case crypto::token_failure::bad_algorithm:
                failure.emplace("PGRST301", "Wrong or unsupported encoding algorithm");
                break;
            case crypto::token_failure::malformed:
                if (what.find("claim exp") != std::string::npos) {
                    failure.emplace("PGRST303", "The JWT 'exp' claim must be a number");
                } else if (what.find("claim nbf") != std::string::npos) {
                    failure.emplace("PGRST303", "The JWT 'nbf' claim must be a number");
                } else if (what.find("claims") != std::string::npos) {
                    failure.emplace("PGRST303", "Parsing claims failed");
                } else {
                    failure.emplace("PGRST301", "JWT cryptographic operation failed");
                }
                break;
            default:
                failure.emplace("PGRST301", "JWT cryptographic operation failed");
        }
    }
    if (failure) throw jwt_refused(failure->first, failure->second);
    rapidjson::Document d;
    try {
        d = core::json::parse_object(claims, core::json::kSmall);
    } catch (const core::json::parse_error&) {
        throw jwt_refused("PGRST303", "Parsing claims failed");
    }
    if (auto it = d.FindMember("iat"); it != d.MemberEnd()) {
        if (!it->value.IsNumber())
            throw jwt_refused("PGRST303", "The JWT 'iat' claim must be a number");
        if (it->value.GetDouble() > now + kSkew)
            throw jwt_refused("PGRST303", "JWT issued at future");
    }
    if (auto it = d.FindMember("aud"); it != d.MemberEnd()) {
        bool ok = it->value.IsString();
        if (it->value.IsArray()) {
            ok = std::all_of(it->value.Begin(), it->value.End(),
                             [](const rapidjson::Value& v) { return v.IsString(); });
        }
        if (!ok) {
            throw jwt_refused("PGRST303",
                              "The JWT 'aud' claim must be a string or an array of strings");
        }
    }
    auto str = [&](const char* k) -> std::string {
        auto it = d.FindMember(k);
        return it != d.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
    };
    principal p;
    if (pre_session_login(d)) {
        throw jwt_refused("PGRST303", "JWT session is too old to be signed out; sign in again");
    }
    auto role_it = d.FindMember("role");
    if (role_it == d.MemberEnd()) {
        // PostgREST: a token without a role claim is the anon role, and the claims say so.
        d.AddMember("role", "anon", d.GetAllocator());
        p.role = "anon";
        p.claims_json = core::json::to_string(d);
    } else {
        p.role = role_it->value.IsString() ? role_it->value.GetString() : "";
        p.claims_json = claims;
    }
    if (p.role != "anon" && p.role != "authenticated" && p.role != "service_role") {
        throw jwt_refused("PGRST303",
                          "The JWT 'role' claim must be anon, authenticated or service_role");
    }
    p.who = p.role == "service_role" ? principal::kind::service : principal::kind::user;
    p.sub = str("sub");
    p.jti = str("jti");
    p.session_id = str("session_id");
    auto number = [&](const char* k, double fallback) {
        auto it = d.FindMember(k);
        return it != d.MemberEnd() && it->value.IsNumber() ? it->value.GetDouble() : fallback;
    };
    p.iat = static_cast<long long>(number("iat", 0));
    // A token without exp is kept an hour at most: the cache must not hold it for ever.
    data_tokens_.put(token, p, number("exp", now + 3600), number("nbf", -1e18), now);
    revoked(p);
    return to_data(p);
}

void gateway::retain_workspaces(const registry_snapshot& snap) const {
    if (db_->retained_generation() == snap.generation &&
        sessions_->retained_generation() == snap.generation) {
        return;
    }
    std::map<std::string, std::string> live;
    for (const auto& w : snap.all) live.emplace(w.id, database_of(w));
    db_->retain(snap.generation, live);
    sessions_->retain(snap.generation, live);
}

void gateway::pick_database(const request& r, principal& p) const {
    const std::string session_ws = p.who == principal::kind::user ? p.workspace_id : "";
    p.workspace_id.clear();
    p.workspace_url.clear();
    p.registry_error.clear();
    std::shared_ptr<const registry_snapshot> snap;
    try {
        snap = registry_->snapshot();
    } catch (const registry_error& e) {
        // Which database the caller means is unknown: database routes answer 500 rather than
        // guess (the gateway's own database may hold another workspace's data).
        p.registry_error = e.what();
        p.workspace_id = session_ws;
        return;
    }
    retain_workspaces(*snap);
    if (p.who == principal::kind::user) {
        // A session is bound to the workspace it was issued for; no cookie moves it.
        if (session_ws.empty()) return;  // the gateway's own database
        for (const auto& w : snap->all) {
            if (w.id == session_ws) {
                p.workspace_id = w.id;
                p.workspace_url = database_of(w);
                return;
            }
        }
        throw unauthorized("the session's workspace is no longer registered; sign in again");
    }
    auto ws = snap->pick(r.cookie(kActiveWorkspaceCookie));
    if (!ws) return;  // no workspace registered: the gateway's own DATABASE_URL
    p.workspace_id = ws->id;
    p.workspace_url = database_of(*ws);
}

std::optional<workspace> gateway::login_workspace(const request& r,
                                                  const std::optional<std::string>& wanted) const {
    auto snap = registry_->snapshot();  // registry_error: the caller reports it
    if (wanted) {
        for (const auto& w : snap->all) {
            if (w.id == *wanted) return w;
        }
        throw http_error(404, "not_found", "no such workspace");
    }
    return snap->pick(r.cookie(kActiveWorkspaceCookie));
}

namespace {

std::string bearer(const request& r) {
    auto h = r.header.get("authorization");
    if (!h) return {};
    std::string_view v = *h;
    if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ")) {
        return std::string(v.substr(7));
    }
    throw unauthorized("the Authorization header must be a Bearer token");
}

}  // namespace

std::string gateway::session_workspace(const request& r) const {
    try {
        auto token = bearer(r);
        if (token.empty()) token = token_from_cookies(r);
        if (token.empty()) return {};
        bool service_key = false;
        auto p = token_principal(token, service_key);
        if (!p || p->who != principal::kind::user || p->workspace_id.empty()) return {};
        retain_workspaces(*registry_->snapshot());  // a workspace just added or changed
        return p->workspace_id;
    } catch (const std::exception&) {
        return {};  // the handler says what is wrong with the token or the registry
    }
}

principal gateway::require_session(const request& r) const {
    auto token = bearer(r);
    if (token.empty()) token = token_from_cookies(r);
    if (token.empty()) throw unauthorized("a session is required");
    bool service_key = false;
    auto p = token_principal(token, service_key);
    if (service_key || (p && p->who == principal::kind::service)) {
        throw http_error(403, "forbidden", "this route needs a user session, not the service role");
    }
    pick_database(r, *p);
    admit(*p);
    return *p;
}

principal gateway::require_service(const request& r) const {
    auto token = bearer(r);
    if (token.empty()) throw unauthorized("the service-role key is required");
    bool service_key = false;
    std::optional<principal> p;
    try {
        p = token_principal(token, service_key);
    } catch (const http_error&) {
        throw unauthorized("the service-role key is required");
    }
    if (service_key || (p && p->who == principal::kind::service)) {
        principal s;
        s.who = principal::kind::service;
        pick_database(r, s);
        return s;
    }
    throw http_error(403, "forbidden", "this route needs the service-role key, not a user session");
}

principal gateway::require_session_or_service(const request& r) const {
    auto token = bearer(r);
    if (token.empty()) token = token_from_cookies(r);
    if (token.empty()) throw unauthorized("a session or the service-role key is required");
    bool service_key = false;
    auto p = token_principal(token, service_key);
    if (service_key) {
        p.emplace();
        p->who = principal::kind::service;
        p->is_operator = true;
    }
    pick_database(r, *p);
    admit(*p);
    return *p;
}

principal gateway::require_operator(const request& r) const {
    auto p = require_session_or_service(r);
    if (!p.is_operator) {
        throw forbidden("operator_required",
                        "only an operator may change the host's configuration (awpctl user add "
                        "--operator, or the service-role key)");
    }
    return p;
}

void gateway::check_same_origin(const request& r) const {
    if (auto site = r.header.get("sec-fetch-site")) {
        if (*site != "same-origin" && *site != "none") {
            throw http_error(403, "cross_site", "cross-site requests are refused");
        }
    }
    auto origin = r.header.get("origin");
    if (!origin) return;
    std::string_view o = *origin;
    for (const auto& a : cfg_.allowed_origins) {
        if (o == a) return;
    }
    auto host = r.header.get("host");
    auto scheme_end = o.find("://");
    if (host && scheme_end != std::string_view::npos && o.substr(scheme_end + 3) == *host) return;
    throw http_error(403, "cross_site", "the Origin does not match this server");
}

}  // namespace awp::api
