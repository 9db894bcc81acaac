// /auth/v1/admin: GoTrue's admin API (what auth-js's GoTrueAdminApi calls) for the service role
// only: users made, listed, read, changed and removed in app_users, with GoTrue's request and
// answer shapes; the parts awp has no place for (invites and links that need e-mail, MFA, SSO,
// OAuth clients, custom providers, passkeys, the audit log) answered with GoTrue's own refusal
// of a feature that is off. Removing, banning, moving to another tenant or changing the password
// of a user signs out every session of that user. docs/data-api.md, "The admin API".
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <system_error>

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
using http::http_error;

namespace {

/// Where a user made by the service role lands when it names no tenant (and API_SIGNUP_TENANT
/// names none): the tenant the service role's own writes land in (current_tenant_id()), so a
/// single-tenant install's first user sees what the product's UI wrote with the same key.
constexpr const char* kDefaultTenant = "00000000-0000-0000-0000-000000000000";
constexpr const char* kNilUuid = "00000000-0000-0000-0000-000000000000";
constexpr std::int64_t kDefaultPerPage = 50;  // GoTrue's
constexpr std::int64_t kMaxPerPage = 1000;    // GoTrue has none; one answer stays bounded
constexpr std::size_t kMaxFilter = 256;
constexpr double kMaxBanSeconds = 9223372036.0;  // Go's time.Duration: 2^63 ns

/// A refusal in GoTrue's terms (the auth_v1 wrapper writes its body and adds weak_password's
/// reasons).
http_error refuse(unsigned status, std::string code, const std::string& msg) {
    return http_error(status, std::move(code), msg);
}

/// GoTrue's requireAdminCredentials: a bearer token (401 no_authorization without one) that is
/// the service-role key, or an HS256 token of JWT_SECRET (403 bad_jwt otherwise) whose role is
/// service_role (403 not_admin otherwise: the anon key, a user's session). The apikey header
/// alone is not a credential here, as on the platform.
void require_admin(const request& r, const gateway_config& c) {
    std::string token;
    if (auto h = r.header.get("authorization")) {
        std::string_view v = *h;
        if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ")) {
            token = std::string(v.substr(7));
        }
    }
    if (token.empty() || token.find_first_of(" \t") != std::string::npos) {
        throw refuse(401, "no_authorization", "This endpoint requires a valid Bearer token");
    }
    if (!c.service_role_key.empty() && crypto::constant_time_equal(token, c.service_role_key)) {
        return;
    }
    std::string claims;
    std::optional<std::string> refused;
    try {
        crypto::jwt_verify_options o;
        o.leeway = std::chrono::seconds(5);
        claims = crypto::jwt_verify_hs256(token, c.jwt_secret, o);
    } catch (const crypto::token_error& e) {
        refused = e.what();
    }
    if (refused) {
        throw refuse(403, "bad_jwt",
                     "invalid JWT: unable to parse or verify signature, " + *refused);
    }
    auto d = core::json::try_parse(claims, core::json::kSmall);
    if (!d || !d->IsObject() || core::json::string_or(*d, "role") != "service_role" ||
        d->HasMember(kWorkspaceClaim)) {
        throw refuse(403, "not_admin", "User not allowed");
    }
}

/// The body as a JSON object (none = {}); 400 bad_json otherwise.
rapidjson::Document body_object(const request& r) {
    rapidjson::Document d;
    if (r.body.find_first_not_of(" \t\r\n") == std::string::npos) {
        d.SetObject();
        return d;
    }
    try {
        return core::json::parse_object(r.body, core::json::kRequestBody);
    } catch (const core::json::parse_error& e) {
        throw refuse(400, "bad_json",
                     std::string("Could not parse request body as JSON: ") + e.what());
    }
}

bool present(const rapidjson::Value& o, const char* name) {
    return o.FindMember(name) != o.MemberEnd();
}

/// A string member (nullopt when absent or null); 400 bad_json for another type.
std::optional<std::string> text(const rapidjson::Value& o, const char* name) {
    const auto* v = member(o, name);
    if (!v) return std::nullopt;
    if (!v->IsString()) throw refuse(400, "bad_json", std::string(name) + " must be a string");
    return std::string(v->GetString(), v->GetStringLength());
}

bool flag(const rapidjson::Value& o, const char* name) {
    const auto* v = member(o, name);
    if (!v) return false;
    if (!v->IsBool()) throw refuse(400, "bad_json", std::string(name) + " must be a boolean");
    return v->GetBool();
}

/// GoTrue's validateEmail: required, at most 255 bytes, a plausible address; lower-cased.
std::string checked_email(const std::string& email) {
    if (email.empty()) throw refuse(400, "validation_failed", "An email address is required");
    if (email.size() > 255) throw refuse(400, "validation_failed", "An email address is too long");
    if (!auth_policy::plausible_email(email)) {
        throw refuse(400, "validation_failed", "Unable to validate email address: invalid format");
    }
    return auth_policy::lower(email);
}

void check_password(const std::string& password) {
    if (password.size() < auth_policy::kMinPassword) {
        throw refuse(422, "weak_password", auth_policy::weak_password_message());
    }
    if (password.size() > auth_policy::kMaxPassword) {
        throw refuse(422, "validation_failed", "Password is too long");
    }
}

/// user_metadata as JSON text (nullopt when absent or null): an object of at most
/// kMaxMetadata bytes.
std::optional<std::string> user_metadata(const rapidjson::Value& o) {
    const auto* v = member(o, "user_metadata");
    if (!v) return std::nullopt;
    if (!v->IsObject()) throw refuse(400, "bad_json", "user_metadata must be an object");
    auto t = core::json::to_string(*v);
    if (t.size() > auth_policy::kMaxMetadata) {
        throw refuse(422, "validation_failed",
                     "user_metadata is larger than " +
                         std::to_string(auth_policy::kMaxMetadata / 1024) + " KiB");
    }
    return t;
}

/// What app_metadata may say here: awp derives it from the user's row, so only its tenant
/// (tenant_id: a uuid, or null for none) and the operator flag (awp_role: "operator" or null)
/// can be set; provider and providers are awp's own and ignored when given. Any other key is
/// refused rather than dropped.
struct app_metadata_change {
    bool tenant_given = false;
    std::optional<std::string> tenant;  // nullopt with tenant_given: no tenant
    std::optional<bool> is_operator;
};

app_metadata_change app_metadata(const rapidjson::Value& o) {
    app_metadata_change out;
    const auto* v = member(o, "app_metadata");
    if (!v) return out;
    if (!v->IsObject()) throw refuse(400, "bad_json", "app_metadata must be an object");
    for (const auto& m : v->GetObject()) {
        const std::string key(m.name.GetString(), m.name.GetStringLength());
        if (key == "provider" || key == "providers") continue;
        if (key == "tenant_id") {
            out.tenant_given = true;
            if (m.value.IsNull()) continue;
            if (!m.value.IsString() || !core::is_valid_uuid(m.value.GetString())) {
                throw refuse(400, "validation_failed",
                             "app_metadata.tenant_id must be a tenant's uuid, or null for none");
            }
            out.tenant = auth_policy::lower(m.value.GetString());
        } else if (key == "awp_role") {
            if (m.value.IsNull()) {
                out.is_operator = false;
            } else if (m.value.IsString() && std::string_view(m.value.GetString()) == "operator") {
                out.is_operator = true;
            } else {
                throw refuse(400, "validation_failed",
                             "app_metadata.awp_role must be \"operator\", or null for none");
            }
        } else {
            throw refuse(422, "validation_failed",
                         "app_metadata." + key.substr(0, 64) +
                             " cannot be stored here: awp's app_metadata holds tenant_id and "
                             "awp_role only (docs/data-api.md, \"The admin API\")");
        }
    }
    return out;
}

/// GoTrue's ban_duration: "none" lifts a ban; otherwise a Go duration ("24h", "1h30m",
/// "90s", "-1h") from now, "0" lifting it too. Seconds, or nullopt for "none".
struct ban_change {
    bool given = false;
    std::optional<double> seconds;  // nullopt: lift the ban
};

std::optional<double> go_duration(std::string_view s) {
    // time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+, or "0".
    if (s == "0" || s == "+0" || s == "-0") return 0.0;
    if (s.empty() || s.size() > 64) return std::nullopt;
    double sign = 1;
    if (s.front() == '-' || s.front() == '+') {
        if (s.front() == '-') sign = -1;
        s.remove_prefix(1);
    }
    if (s.empty()) return std::nullopt;
    double total = 0;
    while (!s.empty()) {
        std::size_t i = 0;
        while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
        const std::string number(s.substr(0, i));
        if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1)
            return std::nullopt;
        s.remove_prefix(i);
        std::size_t j = 0;
        while (j < s.size() && !((s[j] >= '0' && s[j] <= '9') || s[j] == '.')) ++j;
        const std::string_view unit = s.substr(0, j);
        s.remove_prefix(j);
        double scale = 0;
        if (unit == "ns")
            scale = 1e-9;
        else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs")
            scale = 1e-6;
        else if (unit == "ms")
            scale = 1e-3;
        else if (unit == "s")
            scale = 1;
        else if (unit == "m")
            scale = 60;
        else if (unit == "h")
            scale = 3600;
        else
            return std::nullopt;
        total += std::strtod(number.c_str(), nullptr) * scale;
        if (!std::isfinite(total) || total > kMaxBanSeconds) return std::nullopt;
    }
    return sign * total;
}

ban_change ban_duration(const rapidjson::Value& o) {
    ban_change out;
    const auto d = text(o, "ban_duration");
    if (!d || d->empty()) return out;
    out.given = true;
    if (*d == "none") return out;
    auto seconds = go_duration(*d);
    if (!seconds) {
        throw refuse(
            400, "validation_failed",
            "invalid format for ban duration: time: invalid duration \"" + d->substr(0, 64) + "\"");
    }
    if (*seconds != 0) out.seconds = seconds;  // 0 lifts the ban, as GoTrue's Ban(0)
    return out;
}

/// Fields awp has no place for: refused when they would change something.
void refuse_unsupported(const rapidjson::Value& body) {
    if (auto phone = text(body, "phone"); phone && !phone->empty()) {
        throw refuse(422, "phone_provider_disabled",
                     "Phone numbers are not supported by this server");
    }
    if (auto role = text(body, "role"); role && !role->empty() && *role != "authenticated") {
        throw refuse(422, "validation_failed",
                     "role: every user of this server has the role authenticated (the "
                     "service role is a key, never a user)");
    }
    if (auto aud = text(body, "aud"); aud && !aud->empty() && *aud != "authenticated") {
        throw refuse(422, "validation_failed", "aud: this server's only audience is authenticated");
    }
    (void)flag(body, "email_confirm");  // every user is confirmed here (mailer_autoconfirm)
    (void)flag(body, "phone_confirm");
}

/// A user's id from the path: 404 validation_failed when it is not a uuid (GoTrue's loadUser).
std::string path_user_id(const request& r) {
    auto id = r.param("id");
    if (!core::is_valid_uuid(id)) {
        throw refuse(404, "validation_failed", "user_id must be an UUID");
    }
    return auth_policy::lower(id);
}

/// A password nobody knows, for a user made without one (GoTrue generates 64 characters).
std::string unknown_password() { return crypto::base64url_encode(crypto::random_bytes(48)); }

/// A positive integer query parameter, `fallback` when absent or empty.
std::int64_t page_param(const request& r, const char* name, std::int64_t fallback) {
    const auto v = r.query_param(name).value_or("");
    if (v.empty()) return fallback;
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc{} || end != v.data() + v.size() || n < 1) {
        throw refuse(
            400, "validation_failed",
            std::string("Bad Pagination Parameters: ") + name + " must be a positive integer");
    }
    return n;
}

}  // namespace

// ---- the users ------------------------------------------------------------------------------

net::awaitable<response> gateway::admin_users_list(request r) {
    require_admin(r, cfg_);
    const auto page = page_param(r, "page", 1);
    const auto per_page = page_param(r, "per_page", kDefaultPerPage);
    if (per_page > kMaxPerPage) {
        throw refuse(
            400, "validation_failed",
            "Bad Pagination Parameters: per_page must be at most " + std::to_string(kMaxPerPage));
    }
    if (page > (std::int64_t{1} << 40) / per_page) {
        throw refuse(400, "validation_failed", "Bad Pagination Parameters: page is too large");
    }
    // GoTrue's filter: a part of the e-mail address (its LIKE wildcards taken literally).
    auto filter = r.query_param("filter").value_or("");
    if (filter.size() > kMaxFilter) {
        throw refuse(400, "validation_failed", "filter is longer than 256 bytes");
    }
    std::optional<std::string> like;
    if (!filter.empty()) {
        std::string escaped;
        for (char c : filter) {
            if (c == '%' || c == '_' || c == '\\') escaped += '\\';
            escaped += c;
        }
        like = "%" + escaped + "%";
    }
    // Newest first, as GoTrue; the id breaks ties so pages never overlap.
    const auto sql = std::string("SELECT ") + kAppUserColumns +
                     ", count(*) OVER () AS total FROM public.app_users u "
                     "WHERE $1::text IS NULL OR u.email ILIKE $1 "
                     "ORDER BY u.created_at DESC, u.id DESC LIMIT $2 OFFSET $3";
    auto t = co_await db_->begin(principal::service());
    auto rows = co_await t.query(sql, like, per_page, (page - 1) * per_page);
    std::int64_t total = 0;
    if (!rows.empty()) {
        total = rows.get<long long>(0, "total");
    } else {
        auto c = co_await t.query(
            "SELECT count(*) FROM public.app_users u WHERE $1::text IS NULL OR u.email ILIKE $1",
            like);
        total = c.get<long long>(0, 0);
    }
    co_await t.commit();
    json_out o;
    o.w.StartObject();
    o.key("users");
    o.w.StartArray();
    for (int i = 0; i < rows.size(); ++i) o.raw(user_json(app_user_at(rows, i)));
    o.w.EndArray();
    o.kv("aud", "authenticated");
    o.w.EndObject();
    auto res = response::json(200, o.str());
    // GoTrue's Link header, page first in each URL (auth-js reads the digit after the first '=').
    const auto pages = std::max<std::int64_t>(1, (total + per_page - 1) / per_page);
    const auto url = [&](std::int64_t p) {
        return "</auth/v1/admin/users?page=" + std::to_string(p) +
               "&per_page=" + std::to_string(per_page) + ">";
    };
    std::string link;
    if (pages > page) link += url(page + 1) + "; rel=\"next\", ";
    link += url(pages) + "; rel=\"last\"";
    res.header.set("Link", link);
    res.header.set("X-Total-Count", std::to_string(total));
    co_return res;
}

net::awaitable<response> gateway::admin_user_create(request r) {
    require_admin(r, cfg_);
    auto body = body_object(r);
    refuse_unsupported(body);
    const auto email_given = text(body, "email").value_or("");
    if (email_given.empty()) {
        throw refuse(400, "validation_failed",
                     "Cannot create a user without either an email or phone");
    }
    const auto email = checked_email(email_given);
    const auto password = text(body, "password");
    const auto password_hash = text(body, "password_hash");
    if (password && password_hash) {
        throw refuse(400, "validation_failed",
                     "Only a password or a password hash should be provided");
    }
    if (password_hash &&
        (password_hash->rfind("$argon2id$", 0) != 0 || password_hash->size() > 512)) {
        throw refuse(400, "validation_failed",
                     "password_hash: this server takes Argon2id hashes ($argon2id$...) only");
    }
    if (password && !password->empty()) check_password(*password);
    std::string user_id;
    if (auto id = text(body, "id")) {
        if (!core::is_valid_uuid(*id)) {
            throw refuse(400, "validation_failed", "ID must conform to the uuid v4 format");
        }
        if (*id == kNilUuid) throw refuse(400, "validation_failed", "ID cannot be a nil uuid");
        user_id = auth_policy::lower(*id);
    } else {
        user_id = core::uuid::generate_v4().to_string();
    }
    const auto metadata = user_metadata(body).value_or("{}");
    const auto app = app_metadata(body);
    const auto ban = ban_duration(body);
    // Tenant placement (docs/data-api.md, "The admin API"): app_metadata.tenant_id when given
    // (null: none), else API_SIGNUP_TENANT, else the tenant the service role writes to.
    std::optional<std::string> tenant;
    if (app.tenant_given) {
        tenant = app.tenant;
    } else {
        tenant = cfg_.signup_tenant.empty() ? std::string(kDefaultTenant) : cfg_.signup_tenant;
    }
    // A named value, not a conditional around the co_await (docs/coroutines.md: GCC 12).
    std::string hash;
    if (password_hash) {
        hash = *password_hash;
    } else {
        std::string plain = password && !password->empty() ? *password : unknown_password();
        hash = co_await hash_password(std::move(plain));
    }
    const auto sql =
        std::string(
            "INSERT INTO public.app_users AS u (id, tenant_id, email, password_hash, "
            "user_metadata, is_operator, banned_until) VALUES ($1::uuid, $2::uuid, $3, $4, "
            "$5::jsonb, $6, CASE WHEN $7::float8 IS NULL THEN NULL "
            "ELSE now() + make_interval(secs => $7::float8) END) RETURNING ") +
        kAppUserColumns;
    std::string sqlstate, constraint_detail;
    std::optional<app_user> made;
    try {
        auto t = co_await db_->begin(principal::service());
        auto row = co_await t.query_and_commit(sql, user_id, tenant, email, hash, metadata,
                                               app.is_operator.value_or(false), ban.seconds);
        made = app_user_at(row, 0);
    } catch (const pg::sql_error& e) {
        sqlstate = e.sqlstate();
        constraint_detail = e.detail();
    }
    if (sqlstate == "23505") {
        if (constraint_detail.find("(id)") != std::string::npos) {
            throw refuse(422, "validation_failed", "A user with this ID already exists");
        }
        throw refuse(422, "email_exists",
                     "A user with this email address has already been registered");
    }
    if (sqlstate == "23503") {
        throw refuse(422, "validation_failed",
                     "app_metadata.tenant_id names no tenant of this database");
    }
    if (!sqlstate.empty()) throw core::error("admin create user failed: SQLSTATE " + sqlstate);
    core::log::info("auth admin: user created",
                    {{"user_id", made->id}, {"tenant_id", made->tenant_id}});
    co_return response::json(200, user_json(*made));
}

net::awaitable<response> gateway::admin_user_get(request r) {
    require_admin(r, cfg_);
    const auto id = path_user_id(r);
    auto t = co_await db_->begin(principal::service());
    auto row = co_await t.query_and_commit(
        std::string("SELECT ") + kAppUserColumns + " FROM public.app_users u WHERE u.id = $1::uuid",
        id);
    if (row.empty()) throw refuse(404, "user_not_found", "User not found");
    co_return response::json(200, user_json(app_user_at(row, 0)));
}

net::awaitable<response> gateway::admin_user_update(request r) {
    require_admin(r, cfg_);
    const auto id = path_user_id(r);
    auto body = body_object(r);
    refuse_unsupported(body);
    std::optional<std::string> email;
    if (auto e = text(body, "email"); e && !e->empty()) email = checked_email(*e);
    const bool password_given = present(body, "password") && member(body, "password");
    const auto password = text(body, "password");
    if (password_given) check_password(*password);
    if (member(body, "password_hash")) {
        throw refuse(400, "validation_failed", "password_hash is taken when a user is made only");
    }
    const auto metadata = user_metadata(body);
    const auto app = app_metadata(body);
    const auto ban = ban_duration(body);

    auto t = co_await db_->begin(principal::service());
    auto before = co_await t.query_and_commit(
        std::string("SELECT ") + kAppUserColumns + " FROM public.app_users u WHERE u.id = $1::uuid",
        id);
    if (before.empty()) throw refuse(404, "user_not_found", "User not found");
    const auto old = app_user_at(before, 0);
    std::optional<std::string> hash;
    if (password_given) hash = co_await hash_password(*password);
    const bool lift = ban.given && !ban.seconds;
    const auto update =
        std::string(
            "WITH m AS (SELECT CASE WHEN $2::jsonb IS NULL THEN x.user_metadata "
            "ELSE (x.user_metadata || $2::jsonb) - ARRAY(SELECT e.key FROM "
            "jsonb_each($2::jsonb) e WHERE e.value = 'null'::jsonb) END AS md "
            "FROM public.app_users x WHERE x.id = $1::uuid) "
            "UPDATE public.app_users u SET user_metadata = m.md, "
            "email = COALESCE($3, u.email), password_hash = COALESCE($4, u.password_hash), "
            "tenant_id = CASE WHEN $5::boolean THEN $6::uuid ELSE u.tenant_id END, "
            "is_operator = COALESCE($7::boolean, u.is_operator), "
            "banned_until = CASE WHEN NOT $8::boolean THEN u.banned_until WHEN $9::float8 IS NULL "
            "THEN NULL "
            "ELSE now() + make_interval(secs => $9::float8) END, "
            "disabled = u.disabled AND NOT $10::boolean "
            "FROM m WHERE u.id = $1::uuid AND octet_length(m.md::text) <= $11 RETURNING ") +
        kAppUserColumns;
    std::string sqlstate;
    std::optional<app_user> user;
    const session_db own;
    try {
        // A new password, another tenant or the operator flag taken away end the user's sessions
        // in the database (the trigger of app_users, sql/0032); commit_ended makes this process
        // refuse their tokens at once.
        auto t2 = co_await db_->begin(principal::service());
        auto row = co_await t2.query(update, id, metadata, email, hash, app.tenant_given,
                                     app.tenant, app.is_operator, ban.given, ban.seconds, lift,
                                     static_cast<long long>(auth_policy::kMaxMetadata));
        if (row.empty()) {
            throw refuse(422, "validation_failed",
                         "user_metadata would be larger than " +
                             std::to_string(auth_policy::kMaxMetadata / 1024) + " KiB");
        }
        user = app_user_at(row, 0);
        co_await sessions_->commit_ended(t2, own, id);
    } catch (const pg::sql_error& e) {
        sqlstate = e.sqlstate();
    }
    if (sqlstate == "23505") {
        throw refuse(422, "email_exists",
                     "A user with this email address has already been registered");
    }
    if (sqlstate == "23503") {
        throw refuse(422, "validation_failed",
                     "app_metadata.tenant_id names no tenant of this database");
    }
    if (!sqlstate.empty()) throw core::error("admin update user failed: SQLSTATE " + sqlstate);
    // What a live session's tokens say, or whether it may go on, changed: every session of the
    // user that the trigger did not end (a ban, an operator flag given) ends too.
    std::string reason;
    if (ban.seconds && *ban.seconds > 0) {
        reason = "user_banned";
    } else if (password_given || user->tenant_id != old.tenant_id ||
               user->is_operator != old.is_operator) {
        reason = "admin_changed";
    }
    std::size_t ended = 0;
    if (!reason.empty()) {
        ended = co_await sessions_->revoke(own, user->id, "", revoke_scope::global, reason);
    }
    core::log::info(
        "auth admin: user changed",
        {{"user_id", user->id}, {"tenant_id", user->tenant_id}, {"sessions_ended", ended}});
    co_return response::json(200, user_json(*user));
}

net::awaitable<response> gateway::admin_user_delete(request r) {
    require_admin(r, cfg_);
    const auto id = path_user_id(r);
    auto body = body_object(r);
    if (flag(body, "should_soft_delete")) {
        throw refuse(422, "validation_failed",
                     "soft deletion is not supported by this server: remove the user, or ban it "
                     "(ban_duration)");
    }
    auto t = co_await db_->begin(principal::service());
    auto found =
        co_await t.query_and_commit("SELECT 1 FROM public.app_users WHERE id = $1::uuid", id);
    if (found.empty()) throw refuse(404, "user_not_found", "User not found");
    // Signed out first, through the one sign-out path; the removal's trigger (sql/0032) ends a
    // session a sign-in started in between, in the database, and commit_ended applies it here.
    const session_db own;
    auto ended = co_await sessions_->revoke(own, id, "", revoke_scope::global, "user_deleted");
    std::string sqlstate, detail;
    int removed = 0;
    try {
        auto t2 = co_await db_->begin(principal::service());
        auto rows =
            co_await t2.query("DELETE FROM public.app_users WHERE id = $1::uuid RETURNING id", id);
        removed = rows.size();
        co_await sessions_->commit_ended(t2, own, id);
    } catch (const pg::sql_error& e) {
        sqlstate = e.sqlstate();
        detail = e.detail();
    }
    if (sqlstate == "23503") {
        throw refuse(409, "conflict",
                     "the user is still referenced by a row of the database (" +
                         detail.substr(0, 200) + "); its sessions were signed out");
    }
    if (!sqlstate.empty()) throw core::error("admin delete user failed: SQLSTATE " + sqlstate);
    core::log::info("auth admin: user removed",
                    {{"user_id", id}, {"removed", removed}, {"sessions_ended", ended}});
    co_return response::json(200, "{}");
}

net::awaitable<response> gateway::admin_user_factors(request r) {
    require_admin(r, cfg_);
    const auto id = path_user_id(r);
    auto t = co_await db_->begin(principal::service());
    auto found =
        co_await t.query_and_commit("SELECT 1 FROM public.app_users WHERE id = $1::uuid", id);
    if (found.empty()) throw refuse(404, "user_not_found", "User not found");
    if (r.method == "GET") co_return response::json(200, "[]");  // no MFA here: no factors
    throw refuse(404, "mfa_factor_not_found", "Factor not found");
}

// ---- what awp does not serve ----------------------------------------------------------------

net::awaitable<response> gateway::admin_unsupported(request r) {
    require_admin(r, cfg_);
    const std::string what =
        r.path.rfind("/auth/v1/invite", 0) == 0 ? "Invites (they are sent by e-mail) are"
        : r.path.find("/generate_link") != std::string::npos ? "E-mail links (generate_link) are"
                                                             : "This part of the admin API is";
    throw refuse(404, "feature_disabled",
                 what + " not supported by this server (docs/data-api.md, \"The admin API\")");
}

}  // namespace awp::api
