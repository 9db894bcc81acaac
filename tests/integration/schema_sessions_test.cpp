// sql/0032 against a real server: every way a session ends leaves a row in
// app_token_revocations and a NOTIFY awp_session_revoked naming it, whoever writes it (the
// gateway as service_role, a daemon login, an operator's SQL): a sign-out, a session row removed,
// a user disabled, moved, demoted, given a new password (all but the transaction's
// awp.keep_session) or removed; a change that ends nothing writes nothing; no API role reads or
// writes the table.
#include <chrono>
#include <set>
#include <thread>

#include "awp/core/channels.hpp"
#include "schema_helpers.hpp"

namespace schema_sessions_test {

using namespace awp::schema_test;
using awp::test::scoped_database;
namespace channels = awp::core::channels;

namespace {

const char* const kHash = "$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA";

std::string new_user(pg::connection& admin, const std::string& email) {
    return one(admin,
               "INSERT INTO app_users (tenant_id, email, password_hash, is_operator) VALUES ($1, "
               "$2, $3, true) RETURNING id",
               {std::string(kDefaultTenant), email, std::string(kHash)});
}

std::string new_session(pg::connection& admin, const std::string& user) {
    return one(admin,
               "INSERT INTO app_sessions (id, user_id, tokens_valid_until, via) VALUES "
               "(gen_random_uuid(), $1, now() + interval '1 hour', 'api') RETURNING id",
               {user});
}

/// The ids the revocation NOTIFYs named, until `n` came (or 2 s passed).
std::set<std::string> notified(pg::connection& listener, std::size_t n) {
    std::set<std::string> ids;
    for (int i = 0; i < 100 && ids.size() < n; ++i) {
        for (const auto& x : listener.drain_notifications()) {
            CHECK(x.channel == channels::kSessionRevoked);
            ids.insert(x.payload);
        }
        if (ids.size() < n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ids;
}

}  // namespace

TEST_CASE(
    "sessions in SQL: every way a session ends writes its revocation and notifies "
    "awp_session_revoked with the row's id",
    "[schema][sessions]") {
    scoped_database db;
    auto admin = db.admin();
    auto listener = db.daemon();
    listener.exec("LISTEN " + listener.quote_identifier(std::string(channels::kSessionRevoked)));
    const auto u = new_user(admin, "s1@example.com");
    const auto s1 = new_session(admin, u);
    const auto s2 = new_session(admin, u);
    const auto s3 = new_session(admin, u);

    // A sign-out, as the gateway writes it (service_role through the api login).
    auto api = db.api();
    api.exec("SET ROLE service_role");
    api.exec("UPDATE app_sessions SET revoked_at = now(), revoked_reason = 'logout' WHERE id = $1",
             {s1});
    auto ids = notified(listener, 1);
    REQUIRE(ids.size() == 1);
    CHECK(one(admin, "SELECT session_id || ' ' || reason FROM app_token_revocations WHERE id = $1",
              {*ids.begin()}) == s1 + " logout");
    // It lasts as long as the session's last token could (+ the gateways' leeway).
    CHECK(one(admin,
              "SELECT r.expires_at - s.tokens_valid_until FROM app_token_revocations r JOIN "
              "app_sessions s ON s.id = r.session_id WHERE r.session_id = $1",
              {s1}) == "00:01:00");
    // Signing out again changes nothing and says nothing.
    api.exec("UPDATE app_sessions SET revoked_reason = 'logout_global' WHERE id = $1", {s1});
    CHECK(count(admin, "SELECT count(*) FROM app_token_revocations WHERE session_id = $1", {s1}) ==
          1);

    // A new password from PUT /auth/v1/user: every session but the one that changed it.
    api.exec("BEGIN");
    api.exec("SELECT set_config('awp.keep_session', $1, true)", {s2});
    api.exec("UPDATE app_users SET password_hash = $2 WHERE id = $1",
             {u, kHash + std::string("x")});
    api.exec("COMMIT");
    ids = notified(listener, 1);
    CHECK(ids.size() == 1);
    CHECK(one(admin, "SELECT revoked_reason FROM app_sessions WHERE id = $1", {s3}) ==
          "password_changed");
    CHECK(one(admin, "SELECT revoked_at IS NULL FROM app_sessions WHERE id = $1", {s2}) == "t");
    // No revocation of the user's tokens of no session for a password: they carry none.
    CHECK(count(admin,
                "SELECT count(*) FROM app_token_revocations WHERE user_id = $1 AND session_id IS "
                "NULL",
                {u}) == 0);

    // A live session row removed: revoked too.
    admin.exec("DELETE FROM app_sessions WHERE id = $1", {s2});
    ids = notified(listener, 1);
    CHECK(ids.size() == 1);
    CHECK(count(admin, "SELECT count(*) FROM app_token_revocations WHERE session_id = $1", {s2}) ==
          1);
    // A change of what ends nothing (metadata, last sign-in) writes nothing.
    const auto before = count(admin, "SELECT count(*) FROM app_token_revocations");
    admin.exec(
        "UPDATE app_users SET user_metadata = '{\"a\":1}', last_login_at = now() WHERE id = $1",
        {u});
    CHECK(count(admin, "SELECT count(*) FROM app_token_revocations") == before);
}

TEST_CASE(
    "sessions in SQL: an operator disabling, moving, demoting or removing a user ends all its "
    "sessions and its tokens of no session issued until then",
    "[schema][sessions]") {
    scoped_database db;
    auto admin = db.admin();
    const auto other = new_tenant(admin, "other-tenant");
    struct change {
        std::string what, sql, reason;
    };
    const std::vector<change> changes = {
        {"disabled", "UPDATE app_users SET disabled = true WHERE id = $1", "user_disabled"},
        {"moved", "UPDATE app_users SET tenant_id = '" + other + "' WHERE id = $1", "user_moved"},
        {"demoted", "UPDATE app_users SET is_operator = false WHERE id = $1",
         "operator_role_removed"},
        {"removed", "DELETE FROM app_users WHERE id = $1", "user_removed"},
    };
    for (const auto& c : changes) {
        DYNAMIC_SECTION(c.what) {
            // As a daemon login writes it (awpctl's DSN): a member of service_role.
            auto daemon = db.daemon();
            const auto u = new_user(admin, "op-" + c.what + "@example.com");
            new_session(admin, u);
            new_session(admin, u);
            admin.exec(
                "INSERT INTO app_refresh_tokens (token_sha256, session_id, user_id) SELECT "
                "sha256(id::text::bytea), id, user_id FROM app_sessions WHERE user_id = $1",
                {u});
            daemon.exec(c.sql, {u});
            CHECK(count(admin,
                        "SELECT count(*) FROM app_token_revocations WHERE user_id = $1 AND "
                        "session_id IS NOT NULL AND reason = $2",
                        {u, c.reason}) == 2);
            // Tokens of no session (awpctl token) issued until now; kept 31 days.
            CHECK(one(admin,
                      "SELECT issued_before <= now() AND expires_at > now() + interval '30 days' "
                      "FROM app_token_revocations WHERE user_id = $1 AND session_id IS NULL",
                      {u}) == "t");
            if (c.what != "removed") {
                CHECK(count(admin,
                            "SELECT count(*) FROM app_sessions WHERE user_id = $1 AND "
                            "revoked_reason = $2",
                            {u, c.reason}) == 2);
                CHECK(count(admin,
                            "SELECT count(*) FROM app_refresh_tokens WHERE user_id = $1 AND NOT "
                            "revoked",
                            {u}) == 0);
            }
        }
    }
    // Promoting, renaming, re-enabling end nothing.
    const auto u = new_user(admin, "calm@example.com");
    new_session(admin, u);
    admin.exec("UPDATE app_users SET is_operator = false WHERE id = $1", {u});
    const auto n =
        count(admin, "SELECT count(*) FROM app_token_revocations WHERE user_id = $1", {u});
    admin.exec("UPDATE app_users SET is_operator = true, email = 'calm2@example.com' WHERE id = $1",
               {u});
    CHECK(count(admin, "SELECT count(*) FROM app_token_revocations WHERE user_id = $1", {u}) == n);
}

TEST_CASE("sessions in SQL: app_token_revocations is the service role's only",
          "[schema][sessions]") {
    scoped_database db;
    auto api = db.api();
    for (const char* role : {"anon", "authenticated"}) {
        api.exec(std::string("SET ROLE ") + role);
        CHECK(sqlstate_of([&] { api.exec("SELECT * FROM app_token_revocations"); }) == "42501");
        CHECK(sqlstate_of([&] {
                  api.exec("SELECT awp_revoke_tokens(gen_random_uuid(), NULL, now(), 'x', now())");
              }) == "42501");
        api.exec("RESET ROLE");
    }
    api.exec("SET ROLE service_role");
    CHECK(sqlstate_of([&] { api.exec("SELECT count(*) FROM app_token_revocations"); }).empty());
}

}  // namespace schema_sessions_test
