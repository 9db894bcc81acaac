// /auth/v1: the subset of GoTrue (Supabase Auth) that @supabase/supabase-js's auth client needs,
// served from app_users: password and refresh-token grants, sign-up (off unless the operator
// turns it on), the user, sign-out with its scopes, settings, health; sessions and rotated
// refresh tokens in app_sessions / app_refresh_tokens; errors in GoTrue's shape; CORS as on the
// hosted platform. docs/data-api.md, "Signing in".
#include <algorithm>
#include <cctype>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "auth_policy.hpp"
#include "awp/core/crypto.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "awp/core/uuid.hpp"
#include "gateway.hpp"
#include "json.hpp"
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

std::string lower(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
}

/// A new refresh token: 256 random bits, base64url. Only its SHA-256 is stored.
std::string new_refresh_token() { return crypto::base64url_encode(crypto::random_bytes(32)); }

/// The child of a used refresh token, sealed so that only a holder of the used token can open
/// it (the reuse interval's answer): AES-256-GCM under HKDF(used token).
std::string seal_child(const std::string& parent, const std::string& child) {
    const auto key = crypto::hkdf_sha256(parent, "awp-refresh-child-v1", "child", 32);
    auto g = crypto::aes256_gcm_encrypt(key, child);
    return crypto::hex_encode(g.iv + g.tag + g.ciphertext);
}

std::optional<std::string> open_child(const std::string& parent, const std::string& sealed_hex) {
    try {
        const auto raw = crypto::hex_decode(sealed_hex);
        if (raw.size() <= crypto::kGcmIvSize + crypto::kGcmTagSize) return std::nullopt;
        const auto key = crypto::hkdf_sha256(parent, "awp-refresh-child-v1", "child", 32);
        return crypto::aes256_gcm_decrypt(key, raw.substr(0, crypto::kGcmIvSize),
                                          raw.substr(crypto::kGcmIvSize, crypto::kGcmTagSize),
                                          raw.substr(crypto::kGcmIvSize + crypto::kGcmTagSize));
    } catch (const crypto::crypto_error&) {
        return std::nullopt;
    }
}

/// The client's address as Postgres' inet, or nullopt.
std::optional<std::string> inet_of(const std::string& remote) {
    boost::system::error_code ec;
    auto a = net::ip::make_address(remote, ec);
    if (ec) return std::nullopt;
    return a.to_string();
}

/// The User-Agent, printable ASCII only (it goes into a text column), at most 512 bytes.
std::string user_agent_of(const request& r) {
    std::string out;
    for (char c : r.header.get("user-agent").value_or("")) {
        if (c >= 0x20 && c < 0x7f) out += c;
        if (out.size() >= 512) break;
    }
    return out;
}

/// The verified claims of an /auth/v1 route's bearer token (GET/PUT /user, /logout).
struct bearer_session {
    std::string sub;
    std::string session_id;  // "" = a token of no /auth/v1 session (awpctl token, /api login)
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

/// The gateway's own database as the service role: /auth/v1 serves that database only.
principal own_service() {
    principal p;
    p.who = principal::kind::service;
    return p;
}

long long unix_now() { return core::now_unix_ms() / 1000; }

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

// ---- sessions -------------------------------------------------------------------------------

std::string gateway::access_token(const app_user& u, const std::string& session_id,
                                  long long auth_time, long long now, const request& r) const {
    json_out c;
    c.w.StartObject();
    c.kv("aud", "authenticated");
    c.key("exp");
    c.w.Int64(now + static_cast<long long>(cfg_.jwt_expiry_s));
    c.key("iat");
    c.w.Int64(now);
    c.kv("iss", public_base_url(r) + "/auth/v1");
    c.kv("sub", u.id);
    c.kv("email", u.email);
    c.kv("phone", "");
    c.key("app_metadata");
    c.raw(app_metadata_json(u));
    c.key("user_metadata");
    c.raw(u.user_metadata);
    c.kv("role", "authenticated");
    c.kv("aal", "aal1");
    c.key("amr");
    c.w.StartArray();
    c.w.StartObject();
    c.kv("method", "password");
    c.key("timestamp");
    c.w.Int64(auth_time);
    c.w.EndObject();
    c.w.EndArray();
    c.kv("session_id", session_id);
    c.key("is_anonymous");
    c.w.Bool(false);
    c.w.EndObject();
    return crypto::jwt_sign_hs256(c.str(), cfg_.jwt_secret);
}

net::awaitable<std::string> gateway::start_session(std::string user_id, request r) {
    const auto session_id = core::uuid::generate_v4().to_string();
    const auto refresh = new_refresh_token();
    const auto now = unix_now();
    const auto expiry = static_cast<long long>(cfg_.jwt_expiry_s);
    const auto ip = inet_of(r.remote);
    const auto agent = user_agent_of(r);
    const auto refresh_hash = crypto::sha256_hex(refresh);
    const long long valid_until = now + expiry;
    // One statement: the session, its first refresh token and the user's last sign-in.
    const auto sql = std::string(
                         "WITH u AS (UPDATE public.app_users u SET last_login_at = now() "
                         "WHERE u.id = $1::uuid RETURNING ") +
                     kAppUserColumns +
                     "), s AS (INSERT INTO public.app_sessions (id, user_id, tokens_valid_until, "
                     "user_agent, ip) SELECT $2::uuid, u.id::uuid, to_timestamp($3), "
                     "NULLIF($4, ''), $5::inet FROM u "
                     "RETURNING extract(epoch FROM created_at)::bigint AS auth_time), "
                     "t AS (INSERT INTO public.app_refresh_tokens (token_sha256, session_id, "
                     "user_id) SELECT decode($6, 'hex'), $2::uuid, $1::uuid FROM s) "
                     "SELECT u.*, s.auth_time FROM u, s";
    auto t = co_await db_->begin(own_service());
    auto row =
        co_await t.query_and_commit(sql, user_id, session_id, valid_until, agent, ip, refresh_hash);
    if (row.empty()) throw gotrue_error(404, "user_not_found", "User not found");
    const auto u = app_user_at(row, 0);
    const auto auth_time = row.get<long long>(0, "auth_time");
    const auto token = access_token(u, session_id, auth_time, now, r);
    core::log::info("auth session started", {{"user_id", u.id}, {"session_id", session_id}});
    co_return session_json(token, expiry, now + expiry, refresh, u);
}

net::awaitable<std::size_t> gateway::sign_out(std::string user_id, std::string session_id,
                                              std::string scope, std::string reason) {
    std::optional<std::string> session;
    if (!session_id.empty()) session = session_id;
    auto t = co_await db_->begin(own_service());
    auto rows = co_await t.query_and_commit(
        "WITH s AS (UPDATE public.app_sessions SET revoked_at = now(), revoked_reason = $4 "
        "WHERE user_id = $1::uuid AND revoked_at IS NULL AND CASE $3 "
        "WHEN 'local' THEN id = $2::uuid WHEN 'others' THEN id IS DISTINCT FROM $2::uuid "
        "ELSE true END RETURNING id, tokens_valid_until), "
        "t AS (UPDATE public.app_refresh_tokens SET revoked = true, revoked_at = now() "
        "WHERE session_id IN (SELECT id FROM s) AND NOT revoked) "
        "SELECT id::text, ceil(extract(epoch FROM tokens_valid_until))::bigint FROM s",
        user_id, session, scope, reason);
    std::vector<std::pair<std::string, long long>> gone;
    for (int i = 0; i < rows.size(); ++i) {
        gone.emplace_back(rows.get<std::string>(i, 0), rows.get<long long>(i, 1) + kLeeway);
    }
    revoke_sessions(gone);
    if (!gone.empty()) {
        core::log::info("auth sessions signed out",
                        {{"user_id", user_id}, {"count", gone.size()}, {"reason", reason}});
    }
    co_return gone.size();
}

net::awaitable<void> gateway::load_revoked_sessions() {
    // Until this ran, a session signed out before the start is known only to the database
    // (docs/security.md, "Sessions of /auth/v1"): retried while the database is unreachable.
    net::steady_timer wait(ioc_);
    for (int attempt = 0; !stopping_; ++attempt) {
        std::string failure;
        bool no_table = false;
        try {
            auto t = co_await db_->begin(own_service());
            auto rows = co_await t.query_and_commit(
                "SELECT id::text, ceil(extract(epoch FROM tokens_valid_until))::bigint "
                "FROM public.app_sessions WHERE revoked_at IS NOT NULL "
                "AND tokens_valid_until > now() - interval '1 minute'");
            std::vector<std::pair<std::string, long long>> gone;
            for (int i = 0; i < rows.size(); ++i) {
                gone.emplace_back(rows.get<std::string>(i, 0), rows.get<long long>(i, 1) + kLeeway);
            }
            revoke_sessions(gone);
            revocations_loaded_ = true;
            core::log::info("signed-out sessions loaded", {{"count", gone.size()}});
            co_return;
        } catch (const pg::sql_error& e) {
            no_table = e.sqlstate() == "42P01";  // a database older than sql/0028
            failure = e.what();
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (no_table) {
            core::log::warn("no app_sessions table: /auth/v1 needs awpctl migrate");
            co_return;
        }
        if (attempt == 0 || attempt % 30 == 0) {
            core::log::warn("cannot load signed-out sessions yet; retrying", {{"error", failure}});
        }
        wait.expires_after(std::chrono::seconds(2));
        co_await wait.async_wait(net::as_tuple(net::use_awaitable));
    }
}

// ---- POST /token ----------------------------------------------------------------------------

net::awaitable<response> gateway::auth_token(request r) {
    const auto grant = r.query_param("grant_type").value_or("");
    if (grant == "password") co_return co_await password_grant(std::move(r));
    if (grant == "refresh_token") co_return co_await refresh_grant(std::move(r));
    throw gotrue_error(400, "validation_failed",
                       "unsupported_grant_type: this server takes password and refresh_token");
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
    auto result = co_await sign_in(own_service(), lower(email), password, r.remote);
    if (result.retry_after > 0) {
        gotrue_error e(429, "over_request_rate_limit", "Request rate limit reached");
        e.retry_after = result.retry_after;
        throw e;
    }
    if (!result.verified) {
        core::log::warn("auth sign-in failed", {{"remote", r.remote}});
        throw invalid;
    }
    // Only the holder of the right password learns that the account is disabled.
    if (result.user.disabled) throw gotrue_error(400, "user_banned", "User is banned");
    const auto user_id = result.user.id;
    auto session = co_await start_session(user_id, std::move(r));
    co_return response::json(200, std::move(session));
}

net::awaitable<response> gateway::refresh_grant(request r) {
    auto body = body_of(r);
    const auto presented = field(body, "refresh_token");
    const gotrue_error not_found(400, "refresh_token_not_found",
                                 "Invalid Refresh Token: Refresh Token Not Found");
    if (presented.empty() || presented.size() > 512) throw not_found;
    const auto presented_hash = crypto::sha256_hex(presented);
    // The token and its session, locked: two refreshes of one token run one after the other.
    const auto sql = std::string("SELECT ") + kAppUserColumns +
                     ", rt.id AS token_id, rt.revoked, "
                     "COALESCE(extract(epoch FROM now() - rt.revoked_at), 0)::float8 "
                     "AS revoked_for, encode(rt.child_sealed, 'hex') AS child_sealed, "
                     "rt.session_id::text AS session_id, "
                     "s.revoked_at IS NOT NULL AS session_revoked, "
                     "COALESCE(s.not_after < now(), false) AS session_expired, "
                     "extract(epoch FROM s.created_at)::bigint AS auth_time "
                     "FROM public.app_refresh_tokens rt "
                     "JOIN public.app_sessions s ON s.id = rt.session_id "
                     "JOIN public.app_users u ON u.id = rt.user_id "
                     "WHERE rt.token_sha256 = decode($1, 'hex') FOR UPDATE OF rt, s";
    auto t = co_await db_->begin(own_service());
    auto row = co_await t.query(sql, presented_hash);
    if (row.empty() || row.get<bool>(0, "session_revoked")) {
        co_await t.commit();
        throw not_found;
    }
    auto user = app_user_at(row, 0);
    const auto token_id = row.get<long long>(0, "token_id");
    const auto session_id = row.get<std::string>(0, "session_id");
    const auto auth_time = row.get<long long>(0, "auth_time");
    if (row.get<bool>(0, "session_expired")) {
        co_await t.commit();
        throw gotrue_error(400, "session_expired", "Invalid Refresh Token: Session Expired");
    }
    if (user.disabled) {
        co_await t.commit();
        throw gotrue_error(400, "user_banned", "User is banned");
    }
    const auto now = unix_now();
    const auto expiry = static_cast<long long>(cfg_.jwt_expiry_s);
    std::string refresh;  // the token the answer carries
    if (row.get<bool>(0, "revoked")) {
        // Used before. Within the reuse interval (two tabs refreshing at once) the answer is the
        // token its first use gave (or the live one further down the chain); after it, the
        // token was stolen or replayed: the whole session is signed out.
        if (row.get<double>(0, "revoked_for") <= cfg_.refresh_reuse_interval_s) {
            auto sealed = row.get_optional<std::string>(0, "child_sealed");
            std::string current = presented;
            for (int step = 0; step < 8 && sealed; ++step) {
                auto child = open_child(current, *sealed);
                if (!child) break;
                const auto child_hash = crypto::sha256_hex(*child);
                auto next = co_await t.query(
                    "SELECT revoked, encode(child_sealed, 'hex') FROM public.app_refresh_tokens "
                    "WHERE token_sha256 = decode($1, 'hex') AND session_id = $2::uuid FOR UPDATE",
                    child_hash, session_id);
                if (next.empty()) break;
                if (!next.get<bool>(0, 0)) {
                    refresh = *child;
                    break;
                }
                current = *child;
                sealed = next.get_optional<std::string>(0, 1);
            }
        }
        if (refresh.empty()) {
            auto gone = co_await t.query_and_commit(
                "WITH s AS (UPDATE public.app_sessions SET revoked_at = now(), "
                "revoked_reason = 'refresh_token_reuse' WHERE id = $1::uuid "
                "AND revoked_at IS NULL RETURNING id, tokens_valid_until), "
                "t AS (UPDATE public.app_refresh_tokens SET revoked = true, revoked_at = now() "
                "WHERE session_id = $1::uuid AND NOT revoked) "
                "SELECT id::text, ceil(extract(epoch FROM tokens_valid_until))::bigint FROM s",
                session_id);
            std::vector<std::pair<std::string, long long>> revoked;
            for (int i = 0; i < gone.size(); ++i) {
                revoked.emplace_back(gone.get<std::string>(i, 0),
                                     gone.get<long long>(i, 1) + kLeeway);
            }
            revoke_sessions(revoked);
            core::log::warn(
                "refresh token reused: session signed out",
                {{"user_id", user.id}, {"session_id", session_id}, {"remote", r.remote}});
            throw gotrue_error(400, "refresh_token_already_used",
                               "Invalid Refresh Token: Already Used");
        }
        const long long valid_until = now + expiry;
        co_await t.query_and_commit(
            "UPDATE public.app_sessions SET refreshed_at = now(), tokens_valid_until = "
            "greatest(tokens_valid_until, to_timestamp($2)) WHERE id = $1::uuid",
            session_id, valid_until);
    } else {
        // Rotation: the presented token is used up; its child is the session's next.
        refresh = new_refresh_token();
        const auto sealed = seal_child(presented, refresh);
        const auto refresh_hash = crypto::sha256_hex(refresh);
        const long long valid_until = now + expiry;
        co_await t.query_and_commit(
            "WITH used AS (UPDATE public.app_refresh_tokens SET revoked = true, "
            "revoked_at = now(), child_sealed = decode($2, 'hex') WHERE id = $1), "
            "child AS (INSERT INTO public.app_refresh_tokens (token_sha256, session_id, "
            "user_id, parent_id) VALUES (decode($3, 'hex'), $4::uuid, $5::uuid, $1)) "
            "UPDATE public.app_sessions SET refreshed_at = now(), tokens_valid_until = "
            "greatest(tokens_valid_until, to_timestamp($6)) WHERE id = $4::uuid",
            token_id, sealed, refresh_hash, session_id, user.id, valid_until);
    }
    const auto token = access_token(user, session_id, auth_time, now, r);
    co_return response::json(200, session_json(token, expiry, now + expiry, refresh, user));
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
        auto t = co_await db_->begin(own_service());
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
    auto session = co_await start_session(user_id, std::move(r));
    co_return response::json(200, std::move(session));
}

// ---- /user ----------------------------------------------------------------------------------

net::awaitable<response> gateway::auth_user_get(request r) {
    const auto b = verify_bearer(r, cfg_.jwt_secret);
    principal probe;
    probe.session_id = b.session_id;
    if (is_revoked(probe)) throw session_not_found();
    std::optional<std::string> session;
    if (!b.session_id.empty()) session = b.session_id;
    const auto sql = std::string("SELECT ") + kAppUserColumns +
                     ", (SELECT s.revoked_at IS NULL FROM public.app_sessions s "
                     "WHERE s.id = $2::uuid AND s.user_id = u.id) AS session_live "
                     "FROM public.app_users u WHERE u.id = $1::uuid";
    auto t = co_await db_->begin(own_service());
    auto row = co_await t.query_and_commit(sql, b.sub, session);
    if (row.empty()) {
        throw gotrue_error(404, "user_not_found", "User from sub claim in JWT does not exist");
    }
    if (session && !row.get_optional<bool>(0, "session_live").value_or(false)) {
        throw session_not_found();
    }
    co_return response::json(200, user_json(app_user_at(row, 0)));
}

net::awaitable<response> gateway::auth_user_put(request r) {
    const auto b = verify_bearer(r, cfg_.jwt_secret);
    principal probe;
    probe.session_id = b.session_id;
    if (is_revoked(probe)) throw session_not_found();
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
    std::optional<std::string> session;
    if (!b.session_id.empty()) session = b.session_id;
    const auto sql = std::string("SELECT ") + kAppUserColumns +
                     ", u.password_hash, (SELECT s.revoked_at IS NULL FROM public.app_sessions s "
                     "WHERE s.id = $2::uuid AND s.user_id = u.id) AS session_live "
                     "FROM public.app_users u WHERE u.id = $1::uuid";
    auto t = co_await db_->begin(own_service());
    auto row = co_await t.query_and_commit(sql, b.sub, session);
    if (row.empty()) {
        throw gotrue_error(404, "user_not_found", "User from sub claim in JWT does not exist");
    }
    if (session && !row.get_optional<bool>(0, "session_live").value_or(false)) {
        throw session_not_found();
    }
    auto user = app_user_at(row, 0);
    if (!email.empty() && lower(email) != lower(user.email)) {
        throw gotrue_error(422, "email_change_not_supported",
                           "Changing the e-mail address is not supported by this server: an "
                           "operator changes it");
    }
    std::optional<std::string> new_hash;
    if (password_given) {
        auto old_hash = row.get<std::string>(0, "password_hash");
        if (co_await verify_password(std::move(old_hash), password)) {
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
        auto t2 = co_await db_->begin(own_service());
        auto updated = co_await t2.query_and_commit(update, b.sub, data, new_hash, limit);
        if (updated.empty()) {
            throw gotrue_error(422, "validation_failed",
                               "user metadata would be larger than " +
                                   std::to_string(kMaxMetadata / 1024) + " KiB");
        }
        user = app_user_at(updated, 0);
    }
    if (new_hash) {
        // As GoTrue: a new password signs out every other session of the user.
        co_await sign_out(user.id, b.session_id, "others", "password_changed");
        core::log::info("auth password changed", {{"user_id", user.id}});
    }
    co_return response::json(200, user_json(user));
}

// ---- POST /logout ---------------------------------------------------------------------------

net::awaitable<response> gateway::auth_logout(request r) {
    const auto scope = r.query_param("scope").value_or("global");
    if (scope != "global" && scope != "local" && scope != "others") {
        throw gotrue_error(400, "validation_failed",
                           "Unsupported logout scope \"" + scope.substr(0, 32) + "\"");
    }
    const auto b = verify_bearer(r, cfg_.jwt_secret);
    principal probe;
    probe.session_id = b.session_id;
    if (is_revoked(probe)) throw session_not_found();
    const std::string reason = scope == "global"  ? "logout_global"
                               : scope == "local" ? "logout"
                                                  : "logout_others";
    co_await sign_out(b.sub, b.session_id, scope, reason);
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
