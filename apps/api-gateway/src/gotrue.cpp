// /auth/v1: the subset of GoTrue (Supabase Auth) that @supabase/supabase-js's auth client needs,
// served from app_users: password and refresh-token grants, sign-up (off unless the operator
// turns it on), the user, a password change (a live session, re-authenticated when it signed in
// long ago), sign-out with its scopes, settings, health; errors in GoTrue's shape; CORS as on
// the hosted platform. The sessions are the session module's (sessions.hpp), the same as /api's.
// docs/data-api.md, "Signing in".
#include <algorithm>
#include <cctype>

#include "auth_policy.hpp"
#include "awp/core/crypto.hpp"
#include "awp/core/log.hpp"
#include "awp/core/uuid.hpp"
#include "gateway.hpp"
#include "json.hpp"
#include "sessions.hpp"
#include "users.hpp"

namespace awp::api {

namespace crypto = core::crypto;

namespace {

using auth_policy::kMaxEmail;  // the policy every /auth/v1 route applies (auth_policy.hpp)
using auth_policy::kMaxMetadata;
using auth_policy::kMaxPassword;
using auth_policy::kMinPassword;
using auth_policy::plausible_email;
constexpr long long kLeeway = 5;  // as the /api routes

/// A refusal in GoTrue's terms: HTTP status, error code (auth-js's ErrorCode), message.
class gotrue_error : public core::error {
public:
    gotrue_error(unsigned status, std::string code, const std::string& msg)
        : core::error(msg), status_(status), code_(std::move(code)) {}
    [[nodiscard]] unsigned status() const noexcept { return status_; }
    [[nodiscard]] const std::string& code() const noexcept { return code_; }
    std::vector<std::string> weak_reasons;  // weak_password
    long retry_after = 0;                   // over_request_rate_limit

private:
    unsigned status_;
    std::string code_;
};

gotrue_error weak_password() {
    gotrue_error e(422, "weak_password", auth_policy::weak_password_message());
    e.weak_reasons.emplace_back("length");
    return e;
}

gotrue_error bad_json(const std::string& why) {
    return gotrue_error(400, "bad_json", "Could not parse request body as JSON: " + why);
}

/// The client asked for API version 2024-01-01 or later (auth-js always does,
/// X-Supabase-Api-Version): GoTrue then answers errors as {"code": "<error code>", "msg"} and
/// names the version it used in the same header; older clients get {"code": <status>,
/// "error_code", "msg"}.
bool api_2024(const http::headers& h) {
    auto v = h.get("x-supabase-api-version");
    if (!v || v->size() != 10 || (*v)[4] != '-' || (*v)[7] != '-') return false;
    for (std::size_t i : {0U, 1U, 2U, 3U, 5U, 6U, 8U, 9U}) {
        if ((*v)[i] < '0' || (*v)[i] > '9') return false;
    }
    return *v >= "2024-01-01";
}

struct failure {
    unsigned status = 500;
    std::string code = "unexpected_failure";
    std::string msg = "internal error";
    std::vector<std::string> weak_reasons;
    long retry_after = 0;
};

response error_response(const http::headers& req, const failure& f) {
    const bool v2024 = api_2024(req);
    json_out o;
    o.w.StartObject();
    if (v2024) {
        o.kv("code", f.code);
    } else {
        o.key("code");
        o.w.Uint(f.status);
        o.kv("error_code", f.code);
    }
    o.kv("msg", f.msg);
    if (!f.weak_reasons.empty()) {
        o.key("weak_password");
        o.w.StartObject();
        o.key("reasons");
        o.w.StartArray();
        for (const auto& reason : f.weak_reasons) o.str(reason);
        o.w.EndArray();
        o.w.EndObject();
    }
    o.w.EndObject();
    auto res = response::json(f.status, o.str());
    if (v2024) res.header.set("X-Supabase-Api-Version", "2024-01-01");
    if (f.retry_after > 0) res.header.set("Retry-After", std::to_string(f.retry_after));
    return res;
}

/// The body as a JSON object (none = {}); 400 bad_json otherwise.
rapidjson::Document body_of(const request& r) {
    rapidjson::Document d;
    if (r.body.find_first_not_of(" \t\r\n") == std::string::npos) {
        d.SetObject();
        return d;
    }
    try {
        return core::json::parse_object(r.body, core::json::kRequestBody);
    } catch (const core::json::parse_error& e) {
        throw bad_json(e.what());
    }
}

/// A string member ("" when absent or null); 400 bad_json for another type.
std::string field(const rapidjson::Value& o, const char* name) {
    auto it = o.FindMember(name);
    if (it == o.MemberEnd() || it->value.IsNull()) return {};
    if (!it->value.IsString()) throw bad_json(std::string(name) + " must be a string");
    return {it->value.GetString(), it->value.GetStringLength()};
}

bool has_field(const rapidjson::Value& o, const char* name) {
    auto it = o.FindMember(name);
    return it != o.MemberEnd() && !it->value.IsNull();
}

/// The `data` member (user metadata) as JSON text: nullopt when absent or null; 400 bad_json
/// when not an object, 422 when larger than kMaxMetadata.
std::optional<std::string> metadata_field(const rapidjson::Value& o) {
    auto it = o.FindMember("data");
    if (it == o.MemberEnd() || it->value.IsNull()) return std::nullopt;
    if (!it->value.IsObject()) throw bad_json("data must be an object");
    auto text = core::json::to_string(it->value);
    if (text.size() > kMaxMetadata) {
        throw gotrue_error(
            422, "validation_failed",
            "data (user metadata) is larger than " + std::to_string(kMaxMetadata / 1024) + " KiB");
    }
    return text;
}

/// The verified claims of an /auth/v1 route's bearer token (GET/PUT /user, /logout,
/// /reauthenticate): a session's (either face's) or a token of no session (awpctl token).
struct bearer_session {
    std::string sub;
    std::string session_id;  // "" = a token of no session
    long long iat = 0;
};

bearer_session verify_bearer(const request& r, const std::string& secret) {
    std::string token;
    if (auto h = r.header.get("authorization")) {
        std::string_view v = *h;
        if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ")) {
            token = std::string(v.substr(7));
        }
    }
    if (token.empty()) {
        throw gotrue_error(401, "no_authorization", "This endpoint requires a valid Bearer token");
    }
    std::string claims;
    std::optional<std::string> refused;
    try {
        crypto::jwt_verify_options o;
        o.require_exp = true;
        o.leeway = std::chrono::seconds(kLeeway);
        claims = crypto::jwt_verify_hs256(token, secret, o);
    } catch (const crypto::token_error& e) {
        refused = e.what();
    }
    if (refused) {
        throw gotrue_error(403, "bad_jwt",
                           "invalid JWT: unable to parse or verify signature, " + *refused);
    }
    auto d = core::json::parse_object(claims, core::json::kSmall);  // verified an object
    bearer_session s;
    s.sub = core::json::string_or(d, "sub");
    s.session_id = core::json::string_or(d, "session_id");
    if (auto it = d.FindMember("iat"); it != d.MemberEnd() && it->value.IsNumber()) {
        s.iat = static_cast<long long>(it->value.GetDouble());
    }
    if (core::json::string_or(d, "role") != "authenticated" || !core::is_valid_uuid(s.sub)) {
        throw gotrue_error(403, "bad_jwt", "invalid claim: missing sub claim");
    }
    if (!s.session_id.empty() && !core::is_valid_uuid(s.session_id)) {
        throw gotrue_error(403, "bad_jwt", "invalid claim: session_id claim must be a UUID");
    }
    return s;
}

gotrue_error session_not_found() {
    return gotrue_error(403, "session_not_found",
                        "Session from session_id claim in JWT does not exist");
}

std::string session_json(const std::string& access, long long expires_in, long long expires_at,
                         const std::string& refresh, const app_user& u) {
    json_out o;
    o.w.StartObject();
    o.kv("access_token", access);
    o.kv("token_type", "bearer");
    o.key("expires_in");
    o.w.Int64(expires_in);
    o.key("expires_at");
    o.w.Int64(expires_at);
    o.kv("refresh_token", refresh);
    o.key("user");
    o.raw(user_json(u));
    o.w.EndObject();
    return o.str();
}

gotrue_error rate_limited(long retry_after) {
    gotrue_error e(429, "over_request_rate_limit", "Request rate limit reached");
    e.retry_after = retry_after;
    return e;
}

}  // namespace

// ---- CORS -----------------------------------------------------------------------------------

net::awaitable<response> gateway::data_api_preflight(request r) {
    response res;
    res.status = 204;
    res.header.set("Access-Control-Allow-Origin", "*");
    res.header.set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
    // Every header the client asks to send (apikey, authorization, x-client-info, prefer,
    // range, accept-profile, x-supabase-api-version, ...), when it is a plain list of names.
    const auto asked = r.header.get("access-control-request-headers").value_or("");
    const bool plain = !asked.empty() && asked.size() <= 2048 &&
                       asked.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX"
                           "YZ0123456789-_, ") == std::string_view::npos;
    res.header.set("Access-Control-Allow-Headers",
                   plain ? std::string(asked)
                         : std::string("authorization, apikey, content-type, accept, prefer, "
                                       "range, x-client-info, accept-profile, content-profile, "
                                       "x-supabase-api-version"));
    res.header.set("Access-Control-Max-Age", "86400");
    co_return res;
}

// ---- the wrapper ----------------------------------------------------------------------------

net::awaitable<response> gateway::auth_v1(net::awaitable<response> (gateway::*fn)(request),
                                          request r) {
    const http::headers headers = r.header;
    request for_cors;
    for_cors.header = headers;
    std::optional<response> answer;
    std::optional<failure> failed;
    try {
        answer = co_await (this->*fn)(std::move(r));
    } catch (const gotrue_error& e) {
        failed = failure{e.status(), e.code(), e.what(), e.weak_reasons, e.retry_after};
    } catch (const http::http_error& e) {
        failure f;
        f.status = e.status();
        f.msg = e.what();
        f.code = e.status() >= 500              ? "unexpected_failure"
                 : e.code() == "malformed_json" ? "bad_json"
                                                : e.code();
        // The admin API (gotrue_admin.cpp) refuses a password by the same policy.
        if (f.code == "weak_password") f.weak_reasons.emplace_back("length");
        failed = f;
    } catch (const std::exception& e) {
        core::log::error("auth request failed", {{"error", e.what()}});
        failed = failure{};
    }
    if (failed) answer = error_response(headers, *failed);
    add_data_api_cors(for_cors, *answer);
    co_return std::move(*answer);
}

// ---- the caller of /user, /logout, /reauthenticate ------------------------------------------

net::awaitable<gateway::auth_caller> gateway::auth_caller_of(const request& r, bool for_update) {
    const auto b = verify_bearer(r, cfg_.jwt_secret);
    std::optional<std::string> session;
    if (!b.session_id.empty()) session = b.session_id;
    // The user and, for a token of a session, whether the session is live: the database says,
    // whichever face or process signed it out. As GoTrue: the user first (404), then the session.
    const auto sql = std::string("SELECT ") + kAppUserColumns +
                     (for_update ? ", u.password_hash" : ", NULL::text AS password_hash") +
                     ", s.revoked_at IS NULL AS session_live, "
                     "extract(epoch FROM now() - s.created_at)::float8 AS session_age "
                     "FROM public.app_users u LEFT JOIN public.app_sessions s "
                     "ON s.id = $2::uuid AND s.user_id = u.id WHERE u.id = $1::uuid";
    auto t = co_await db_->begin(principal::service());
    auto row = co_await t.query_and_commit(sql, b.sub, session);
    if (row.empty()) {
        throw gotrue_error(403, "user_not_found", "User from sub claim in JWT does not exist");
    }
    if (session && !row.get_optional<bool>(0, "session_live").value_or(false)) {
        throw session_not_found();
    }
    // And what every route asks (sessions.hpp): a session signed out elsewhere a moment ago, a
    // token of no session whose user was disabled, moved or removed since.
    principal probe;
    probe.sub = b.sub;
    probe.session_id = b.session_id;
    probe.iat = b.iat;
    const auto state = sessions_->check(probe);
    if (state == session_state::revoked) throw session_not_found();
    if (state == session_state::unknown) {
        throw gotrue_error(503, "unexpected_failure",
                           "the signed-out sessions are not loaded yet; try again in a moment");
    }
    auth_caller c;
    c.user = app_user_at(row, 0);
    c.session_id = b.session_id;
    c.session_age_s = row.get_optional<double>(0, "session_age").value_or(0);
    c.password_hash = row.get_optional<std::string>(0, "password_hash").value_or("");
    co_return c;
}

// ---- POST /token ----------------------------------------------------------------------------

net::awaitable<response> gateway::auth_token(request r) {
    const auto grant = r.query_param("grant_type").value_or("");
    if (grant == "password") co_return co_await password_grant(std::move(r));
    if (grant == "refresh_token") co_return co_await refresh_grant(std::move(r));
    throw gotrue_error(400, "validation_failed",
                       "unsupported_grant_type: this server takes password and refresh_token");
}

net::awaitable<response> gateway::start_auth_session(std::string user_id, request r) {
    // Named, not temporaries in the co_await (docs/coroutines.md: GCC 12 frees some twice).
    const session_db own;
    const auto client = client_of(r);
    const auto issuer = public_base_url(r) + "/auth/v1";
    auto g =
        co_await sessions_->issue(own, std::move(user_id), session_face::auth_v1, client, issuer);
    // Gone or disabled since its password was checked (a race with an operator).
    if (!g) throw gotrue_error(400, "user_banned", "User is banned");
    const auto expiry = static_cast<long long>(cfg_.jwt_expiry_s);
    co_return response::json(
        200, session_json(g->access_token, expiry, g->expires_at, g->refresh_token, g->user));
}

net::awaitable<response> gateway::password_grant(request r) {
    auto body = body_of(r);
    const auto email = field(body, "email");
    const auto phone = field(body, "phone");
    const auto password = field(body, "password");
    if (!email.empty() && !phone.empty()) {
        throw gotrue_error(400, "validation_failed",
                           "Only an email address or phone number should be provided on login.");
    }
    if (email.empty() && !phone.empty()) {
        throw gotrue_error(422, "phone_provider_disabled", "Phone logins are disabled");
    }
    if (email.empty()) throw gotrue_error(400, "validation_failed", "missing email or phone");
    if (email.size() > kMaxEmail || password.size() > kMaxPassword) {
        throw gotrue_error(400, "validation_failed", "email or password is too long");
    }
    const gotrue_error invalid(400, "invalid_credentials", "Invalid login credentials");
    if (password.empty()) throw invalid;
    auto result =
        co_await sign_in(principal::service(), auth_policy::lower(email), password, r.remote);
    if (result.retry_after > 0) throw rate_limited(result.retry_after);
    if (!result.verified) {
        core::log::warn("auth sign-in failed", {{"remote", r.remote}});
        throw invalid;
    }
    // Only the holder of the right password learns that the account is disabled.
    if (result.user.disabled) throw gotrue_error(400, "user_banned", "User is banned");
    co_return co_await start_auth_session(result.user.id, std::move(r));
}

net::awaitable<response> gateway::refresh_grant(request r) {
    auto body = body_of(r);
    const auto presented = field(body, "refresh_token");
    const auto issuer = public_base_url(r) + "/auth/v1";
    std::optional<session_grant> g;
    std::optional<refresh_refusal> refused;
    try {
        g = co_await sessions_->refresh(presented, issuer);
    } catch (const refresh_refused& e) {
        refused = e.why();
    }
    if (refused) {
        switch (*refused) {
            case refresh_refusal::already_used:
                core::log::warn("refresh token reused", {{"remote", r.remote}});
                throw gotrue_error(400, "refresh_token_already_used",
                                   "Invalid Refresh Token: Already Used");
            case refresh_refusal::session_expired:
                throw gotrue_error(400, "session_expired",
                                   "Invalid Refresh Token: Session Expired");
            case refresh_refusal::user_banned:
                throw gotrue_error(400, "user_banned", "User is banned");
            case refresh_refusal::not_found:
                break;
        }
        throw gotrue_error(400, "refresh_token_not_found",
                           "Invalid Refresh Token: Refresh Token Not Found");
    }
    const auto expiry = static_cast<long long>(cfg_.jwt_expiry_s);
    co_return response::json(
        200, session_json(g->access_token, expiry, g->expires_at, g->refresh_token, g->user));
}

// ---- POST /signup ---------------------------------------------------------------------------

net::awaitable<response> gateway::auth_signup(request r) {
    if (!cfg_.signup) {
        throw gotrue_error(422, "signup_disabled", "Signups not allowed for this instance");
    }
    auto body = body_of(r);
    const auto email = field(body, "email");
    const auto phone = field(body, "phone");
    const auto password = field(body, "password");
    const auto data = metadata_field(body);
    if (email.empty() && !phone.empty()) {
        throw gotrue_error(422, "phone_provider_disabled", "Phone signups are disabled");
    }
    if (email.empty()) {
        throw gotrue_error(400, "validation_failed", "To signup, please provide your email");
    }
    if (!plausible_email(email)) {
        throw gotrue_error(400, "email_address_invalid",
                           "Unable to validate email address: invalid format");
    }
    if (password.empty()) {
        throw gotrue_error(400, "validation_failed", "Signup requires a valid password");
    }
    if (password.size() < kMinPassword) throw weak_password();
    if (password.size() > kMaxPassword) {
        throw gotrue_error(422, "validation_failed", "Password is too long");
    }
    auto hash = co_await hash_password(password);
    const auto user_id = core::uuid::generate_v4().to_string();
    std::optional<std::string> tenant;
    if (!cfg_.signup_tenant.empty()) tenant = cfg_.signup_tenant;
    const std::string metadata = data.value_or("{}");
    std::string sqlstate;
    try {
        auto t = co_await db_->begin(principal::service());
        co_await t.query_and_commit(
            "INSERT INTO public.app_users (id, tenant_id, email, password_hash, user_metadata) "
            "VALUES ($1::uuid, $2::uuid, $3, $4, $5::jsonb)",
            user_id, tenant, email, hash, metadata);
    } catch (const pg::sql_error& e) {
        sqlstate = e.sqlstate();
    }
    if (sqlstate == "23505") {
        throw gotrue_error(422, "user_already_exists", "User already registered");
    }
    if (sqlstate == "23503") {
        core::log::error("API_SIGNUP_TENANT names no tenant of the database",
                         {{"tenant_id", cfg_.signup_tenant}});
        throw gotrue_error(500, "unexpected_failure", "sign-up is misconfigured on this server");
    }
    if (!sqlstate.empty()) throw core::error("sign-up failed: SQLSTATE " + sqlstate);
    core::log::info(
        "auth sign-up",
        {{"user_id", user_id}, {"tenant_id", cfg_.signup_tenant}, {"remote", r.remote}});
    co_return co_await start_auth_session(user_id, std::move(r));
}

// ---- /user ----------------------------------------------------------------------------------

net::awaitable<response> gateway::auth_user_get(request r) {
    auto c = co_await auth_caller_of(r, false);
    co_return response::json(200, user_json(c.user));
}

net::awaitable<void> gateway::check_reauthentication(const auth_caller& c, std::string current,
                                                     std::string nonce, std::string remote) {
    // A password is changed by a live session only (docs/security.md, "Changing the password").
    if (c.session_id.empty()) {
        throw gotrue_error(403, "session_not_found",
                           "Changing the password needs a session: sign in, then change it");
    }
    // GoTrue's update_password_require_reauthentication: a session signed in longer ago than
    // API_REAUTHENTICATE_AFTER proves it is its user again. GoTrue takes a nonce it sent by
    // e-mail (GET /reauthenticate); this server sends no e-mail and takes the current password
    // instead, as GoTrue's update_password_require_current_password does.
    const bool stale =
        cfg_.reauthenticate_after_s <= 0 || c.session_age_s > cfg_.reauthenticate_after_s;
    if (current.empty()) {
        if (!stale) co_return;
        if (!nonce.empty()) {
            throw gotrue_error(422, "reauthentication_not_valid",
                               "Nonce has expired or is invalid");
        }
        throw gotrue_error(400, "reauthentication_needed",
                           "Password update requires reauthentication: send current_password "
                           "(this server sends no e-mail nonce)");
    }
    if (current.size() > kMaxPassword) {
        throw gotrue_error(400, "current_password_invalid",
                           "Current password required when setting new password.");
    }
    // Through the sign-in limits: a stolen token cannot guess the password here either.
    const auto account = auth_policy::lower(c.user.email);
    auto check = co_await sign_in(principal::service(), account, current, remote);
    if (check.retry_after > 0) throw rate_limited(check.retry_after);
    if (!check.verified || check.user.id != c.user.id) {
        throw gotrue_error(400, "current_password_invalid",
                           "Current password required when setting new password.");
    }
}

net::awaitable<response> gateway::auth_user_put(request r) {
    auto c = co_await auth_caller_of(r, true);
    auto body = body_of(r);
    const auto email = field(body, "email");
    const auto phone = field(body, "phone");
    const bool password_given = has_field(body, "password");
    const auto password = field(body, "password");
    const auto data = metadata_field(body);
    if (!phone.empty()) {
        throw gotrue_error(422, "phone_provider_disabled",
                           "Phone numbers are not supported by this server");
    }
    if (password_given) {
        if (password.size() < kMinPassword) throw weak_password();
        if (password.size() > kMaxPassword) {
            throw gotrue_error(422, "validation_failed", "Password is too long");
        }
    }
    auto user = c.user;
    if (!email.empty() && auth_policy::lower(email) != auth_policy::lower(user.email)) {
        throw gotrue_error(422, "email_change_not_supported",
                           "Changing the e-mail address is not supported by this server: an "
                           "operator changes it");
    }
    std::optional<std::string> new_hash;
    if (password_given) {
        const auto current = field(body, "current_password");
        const auto nonce = field(body, "nonce");
        co_await check_reauthentication(c, current, nonce, r.remote);
        if (co_await verify_password(c.password_hash, password)) {
            throw gotrue_error(422, "same_password",
                               "New password should be different from the old password.");
        }
        new_hash = co_await hash_password(password);
    }
    if (data || new_hash) {
        // GoTrue's merge: each key of `data` set, a key set to null removed.
        const auto update =
            std::string(
                "WITH m AS (SELECT CASE WHEN $2::jsonb IS NULL THEN x.user_metadata "
                "ELSE (x.user_metadata || $2::jsonb) - ARRAY(SELECT e.key FROM "
                "jsonb_each($2::jsonb) e WHERE e.value = 'null'::jsonb) END AS md "
                "FROM public.app_users x WHERE x.id = $1::uuid) "
                "UPDATE public.app_users u SET user_metadata = m.md, "
                "password_hash = COALESCE($3, u.password_hash) FROM m "
                "WHERE u.id = $1::uuid AND octet_length(m.md::text) <= $4 RETURNING ") +
            kAppUserColumns;
        const auto limit = static_cast<long long>(kMaxMetadata);
        auto t = co_await db_->begin(principal::service());
        pg::result updated;
        if (new_hash) {
            // A new password ends every other session of the user, as GoTrue does: the trigger
            // of app_users (sql/0032) ends all but the one this transaction names.
            co_await t.query("SELECT set_config('awp.keep_session', $1, true)", c.session_id);
            updated = co_await t.query(update, user.id, data, new_hash, limit);
            const session_db own;
            co_await sessions_->commit_ended(t, own, user.id);
        } else {
            updated = co_await t.query_and_commit(update, user.id, data, new_hash, limit);
        }
        if (updated.empty()) {
            throw gotrue_error(422, "validation_failed",
                               "user metadata would be larger than " +
                                   std::to_string(kMaxMetadata / 1024) + " KiB");
        }
        user = app_user_at(updated, 0);
    }
    if (new_hash) core::log::info("auth password changed", {{"user_id", user.id}});
    co_return response::json(200, user_json(user));
}

net::awaitable<response> gateway::auth_reauthenticate(request r) {
    (void)co_await auth_caller_of(r, false);
    throw gotrue_error(422, "validation_failed",
                       "Reauthentication by a code sent by e-mail is not available: this server "
                       "sends no e-mail. Send current_password with the new password instead.");
}

// ---- POST /logout ---------------------------------------------------------------------------

net::awaitable<response> gateway::auth_logout(request r) {
    const auto scope = r.query_param("scope").value_or("global");
    if (scope != "global" && scope != "local" && scope != "others") {
        throw gotrue_error(400, "validation_failed",
                           "Unsupported logout scope \"" + scope.substr(0, 32) + "\"");
    }
    auto c = co_await auth_caller_of(r, false);
    // As GoTrue: a token of no session signs the user out everywhere.
    const auto which = scope == "global" || c.session_id.empty() ? revoke_scope::global
                       : scope == "local"                        ? revoke_scope::local
                                                                 : revoke_scope::others;
    const std::string reason = scope == "global"  ? "logout_global"
                               : scope == "local" ? "logout"
                                                  : "logout_others";
    const session_db own;
    co_await sessions_->revoke(own, c.user.id, c.session_id, which, reason);
    response res;
    res.status = 204;
    co_return res;
}

// ---- public ---------------------------------------------------------------------------------

net::awaitable<response> gateway::auth_settings(request) {
    json_out o;
    o.w.StartObject();
    o.key("external");
    o.w.StartObject();
    for (const char* p :
         {"anonymous_users", "apple",    "azure",         "bitbucket",  "discord", "facebook",
          "figma",           "fly",      "github",        "gitlab",     "google",  "keycloak",
          "kakao",           "linkedin", "linkedin_oidc", "notion",     "spotify", "slack",
          "slack_oidc",      "twitch",   "twitter",       "x",          "workos",  "zoom",
          "phone",           "saml",     "web3_ethereum", "web3_solana"}) {
        o.key(p);
        o.w.Bool(false);
    }
    o.key("email");
    o.w.Bool(true);
    o.w.EndObject();
    o.key("disable_signup");
    o.w.Bool(!cfg_.signup);
    o.key("mailer_autoconfirm");
    o.w.Bool(true);
    o.key("phone_autoconfirm");
    o.w.Bool(false);
    o.kv("sms_provider", "");
    o.key("saml_enabled");
    o.w.Bool(false);
    o.w.EndObject();
    co_return response::json(200, o.str());
}

net::awaitable<response> gateway::auth_health(request) {
    co_return response::json(
        200,
        R"json({"version":"awp","name":"GoTrue","description":"awp's GoTrue-compatible sign-in (docs/data-api.md)"})json");
}

net::awaitable<response> gateway::auth_jwks(request) {
    // Tokens are HS256 with a shared secret: no public key to publish (auth-js then verifies
    // a session through GET /user).
    co_return response::json(200, R"({"keys":[]})");
}

response gotrue_refusal(const http::headers& request_headers, unsigned status, std::string code,
                        std::string msg, long retry_after) {
    auto res = error_response(request_headers,
                              failure{status, std::move(code), std::move(msg), {}, retry_after});
    request for_cors;
    for_cors.header = request_headers;
    add_data_api_cors(for_cors, res);
    return res;
}

}  // namespace awp::api
