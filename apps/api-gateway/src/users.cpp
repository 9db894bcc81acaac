// Login users as the sign-in paths read them (users.hpp).
#include "users.hpp"

#include "json.hpp"

namespace awp::api {

// Timestamps as RFC 3339 in UTC with microseconds, as GoTrue writes them.
const char* const kAppUserColumns =
    "u.id::text AS id, u.tenant_id::text AS tenant_id, u.email AS email, "
    // A timed ban (sql/0039, the admin API's ban_duration) refuses as disabled does while it
    // lies ahead; read through to_jsonb, so an older schema without the column works too.
    "(u.disabled OR COALESCE((to_jsonb(u) ->> 'banned_until')::timestamptz > now(), false)) "
    "AS disabled, u.is_operator AS is_operator, "
    "COALESCE(to_jsonb(u) -> 'user_metadata', '{}')::text AS user_metadata, "
    "to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS created_at, "
    "to_char(u.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS updated_at, "
    "to_char(u.last_login_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
    "AS last_sign_in_at, "
    "to_char((to_jsonb(u) ->> 'banned_until')::timestamptz AT TIME ZONE 'UTC', "
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS banned_until";

app_user app_user_at(const core::pg::result& r, int row) {
    app_user u;
    u.id = r.get<std::string>(row, 0);
    u.tenant_id = r.get_optional<std::string>(row, 1).value_or("");
    u.email = r.get<std::string>(row, 2);
    u.disabled = r.get<bool>(row, 3);
    u.is_operator = r.get<bool>(row, 4);
    u.user_metadata = r.get<std::string>(row, 5);
    u.created_at = r.get<std::string>(row, 6);
    u.updated_at = r.get<std::string>(row, 7);
    u.last_sign_in_at = r.get_optional<std::string>(row, 8).value_or("");
    u.banned_until = r.get_optional<std::string>(row, 9).value_or("");
    return u;
}

std::string app_metadata_json(const app_user& u) {
    json_out o;
    o.w.StartObject();
    o.kv("provider", "email");
    o.key("providers");
    o.w.StartArray();
    o.str("email");
    o.w.EndArray();
    if (!u.tenant_id.empty()) o.kv("tenant_id", u.tenant_id);
    if (u.is_operator) o.kv("awp_role", "operator");
    o.w.EndObject();
    return o.str();
}

std::string user_json(const app_user& u) {
    json_out o;
    o.w.StartObject();
    o.kv("id", u.id);
    o.kv("aud", "authenticated");
    o.kv("role", "authenticated");
    o.kv("email", u.email);
    // No confirmation e-mail here: an account is confirmed when it is made (mailer_autoconfirm).
    o.kv("email_confirmed_at", u.created_at);
    o.kv("phone", "");
    o.kv("confirmed_at", u.created_at);
    if (!u.last_sign_in_at.empty()) o.kv("last_sign_in_at", u.last_sign_in_at);
    if (!u.banned_until.empty()) o.kv("banned_until", u.banned_until);
    o.key("app_metadata");
    o.raw(app_metadata_json(u));
    o.key("user_metadata");
    o.raw(u.user_metadata);
    o.key("identities");
    o.w.StartArray();
    o.w.EndArray();
    o.kv("created_at", u.created_at);
    o.kv("updated_at", u.updated_at);
    o.key("is_anonymous");
    o.w.Bool(false);
    o.w.EndObject();
    return o.str();
}

}  // namespace awp::api
