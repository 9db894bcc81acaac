// The session module (sessions.hpp): issue, refresh and end the sessions of both faces, mint
// their access tokens, check tokens against the revocations of their database. The faces
// (api_auth.cpp, gotrue.cpp) parse requests and shape answers; what a session is lives here.
#include "sessions.hpp"

#include <boost/asio/ip/address.hpp>

#include "awp/core/crypto.hpp"
#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "awp/core/uuid.hpp"
#include "awp/http/message.hpp"
#include "json.hpp"
#include "registry.hpp"
#include "users.hpp"

namespace awp::api {

namespace crypto = core::crypto;

namespace {

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

principal service_of(const session_db& db) {
    principal p;
    p.who = principal::kind::service;
    p.workspace_id = db.workspace_id;
    p.workspace_url = db.url;
    return p;
}

/// A workspace database older than sql/0032 cannot hold these sessions.
[[noreturn]] void schema_too_old(const pg::sql_error& e) {
    core::log::error("sessions need awpctl migrate on this database", {{"error", e.what()}});
    throw http::http_error(502, "schema_too_old",
                           "the workspace's database is older than this awp (sessions need "
                           "sql/0032); run awpctl migrate");
}

/// The scope as the sign-out statement reads it.
const char* scope_text(revoke_scope s) {
    switch (s) {
        case revoke_scope::local:
            return "local";
        case revoke_scope::others:
            return "others";
        case revoke_scope::global:
            break;
    }
    return "global";
}

}  // namespace

client_meta client_of(const request& r) {
    client_meta m;
    m.remote = r.remote;
    for (char c : r.header.get("user-agent").value_or("")) {
        if (c >= 0x20 && c < 0x7f) m.user_agent += c;
        if (m.user_agent.size() >= 512) break;
    }
    return m;
}

session_store::session_store(net::io_context& ioc, db_pool& pool, options o)
    : ioc_(ioc), pool_(pool), o_(std::move(o)) {
    own_ = std::make_shared<revocation_watch>(ioc_, pool_, session_db{}, o_.listen_dsn,
                                              o_.safety_poll);
}

session_store::~session_store() = default;

// ---- the check ----------------------------------------------------------------------------

session_state session_store::check(const principal& p) const {
    if (p.who != principal::kind::user || (p.session_id.empty() && p.sub.empty())) {
        return session_state::live;  // the service role, an anon key: no session, no user
    }
    if (p.workspace_id.empty()) return own_->check(p.session_id, p.sub, p.iat);
    std::shared_ptr<revocation_watch> w;
    {
        std::shared_lock lock(mu_);
        auto it = workspaces_.find(p.workspace_id);
        // Not registered (yet): refused until it is. Registered without a database (a platform
        // URL and no databaseUrl): no session can be issued there, nothing to revoke.
        if (it == workspaces_.end()) return session_state::unknown;
        if (it->second.url.empty() || !is_postgres_url(it->second.url)) return session_state::live;
        w = it->second.w;
    }
    // Not being watched (its pool closed): unknown until activate() has read it again.
    return w ? w->check(p.session_id, p.sub, p.iat) : session_state::unknown;
}

std::optional<http::http_error> session_store::unknown_because(const principal& p) const {
    auto w = watch_of(p.workspace_id);
    return w ? w->failure() : std::nullopt;
}

std::shared_ptr<revocation_watch> session_store::watch_of(const std::string& workspace_id) const {
    if (workspace_id.empty()) return own_;
    std::shared_lock lock(mu_);
    auto it = workspaces_.find(workspace_id);
    return it == workspaces_.end() ? nullptr : it->second.w;
}

// ---- tokens -------------------------------------------------------------------------------

std::string session_store::token_for(const session_db& db, session_face face,
                                     const session_grant& g, long long now,
                                     const std::string& issuer) const {
    const auto& u = g.user;
    json_out c;
    c.w.StartObject();
    if (face == session_face::api) {
        // /api's token (docs/api-gateway.md): a workspace's session names its workspace and is
        // signed with that workspace's key, the own database's with JWT_SECRET.
        c.kv("sub", u.id);
        c.kv("role", "authenticated");
        c.kv("aud", "authenticated");
        c.kv("iss", "awp");
        c.kv("email", u.email);
        c.kv("jti", core::uuid::generate_v4().to_string());
        c.kv("session_id", g.session_id);
        c.key("iat");
        c.w.Int64(now);
        c.key("exp");
        c.w.Int64(g.expires_at);
        if (!db.workspace_id.empty()) c.kv(kWorkspaceClaim, db.workspace_id);
        // A user of no tenant gets a session without one: every /api route refuses it (403
        // no_tenant), as it refuses any such token.
        c.key("app_metadata");
        c.w.StartObject();
        if (!u.tenant_id.empty()) c.kv("tenant_id", u.tenant_id);
        if (u.is_operator) c.kv("awp_role", "operator");
        c.w.EndObject();
        c.w.EndObject();
        return crypto::jwt_sign_hs256(
            c.str(), db.workspace_id.empty()
                         ? o_.jwt_secret
                         : crypto::workspace_session_key(o_.jwt_secret, db.workspace_id));
    }
    // GoTrue's claims (docs/data-api.md, "Sessions and access tokens").
    c.kv("aud", "authenticated");
    c.key("exp");
    c.w.Int64(g.expires_at);
    c.key("iat");
    c.w.Int64(now);
    c.kv("iss", issuer);
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
    c.w.Int64(g.auth_time);
    c.w.EndObject();
    c.w.EndArray();
    c.kv("session_id", g.session_id);
    c.key("is_anonymous");
    c.w.Bool(false);
    c.w.EndObject();
    return crypto::jwt_sign_hs256(c.str(), o_.jwt_secret);
}

// ---- issue --------------------------------------------------------------------------------

net::awaitable<std::optional<session_grant>> session_store::issue(session_db db,
                                                                  std::string user_id,
                                                                  session_face face, client_meta m,
                                                                  std::string issuer) {
    const bool api = face == session_face::api;
    session_grant g;
    g.session_id = core::uuid::generate_v4().to_string();
    const auto now = core::now_unix_s();
    g.expires_at = now + static_cast<long long>(api ? o_.api_ttl_s : o_.jwt_expiry_s);
    std::optional<std::string> refresh_hash;
    if (!api) {
        g.refresh_token = new_refresh_token();
        refresh_hash = crypto::sha256_hex(g.refresh_token);
    }
    // One statement: the user as it is now (not disabled nor banned, sql/0039: a sign-in that
    // raced a disable ends here), the session, its first refresh token and the user's last
    // sign-in.
    const auto sql = std::string(
                         "WITH u AS (UPDATE public.app_users u SET last_login_at = now() "
                         "WHERE u.id = $1::uuid AND NOT u.disabled AND "
                         "COALESCE((to_jsonb(u) ->> 'banned_until')::timestamptz <= now(), true) "
                         "RETURNING ") +
                     kAppUserColumns +
                     "), s AS (INSERT INTO public.app_sessions (id, user_id, tokens_valid_until, "
                     "user_agent, ip, via) SELECT $2::uuid, u.id::uuid, to_timestamp($3), "
                     "NULLIF($4, ''), $5::inet, $7 FROM u "
                     "RETURNING extract(epoch FROM created_at)::bigint AS auth_time), "
                     "t AS (INSERT INTO public.app_refresh_tokens (token_sha256, session_id, "
                     "user_id) SELECT decode($6, 'hex'), $2::uuid, $1::uuid FROM s "
                     "WHERE $6 IS NOT NULL) "
                     "SELECT u.*, s.auth_time FROM u, s";
    // Every argument named: no temporary inside a co_await (docs/coroutines.md).
    const auto ip = inet_of(m.remote);
    const std::string via = api ? "api" : "auth/v1";
    pg::result row;
    std::optional<pg::sql_error> old_schema;
    try {
        auto t = co_await pool_.begin(service_of(db));
        row = co_await t.query_and_commit(sql, user_id, g.session_id, g.expires_at, m.user_agent,
                                          ip, refresh_hash, via);
    } catch (const pg::sql_error& e) {
        if (e.sqlstate() != "42703" && e.sqlstate() != "42P01") throw;
        old_schema = e;
    }
    if (old_schema) schema_too_old(*old_schema);
    if (row.empty()) co_return std::nullopt;
    g.user = app_user_at(row, 0);
    g.auth_time = row.get<long long>(0, "auth_time");
    g.access_token = token_for(db, face, g, now, issuer);
    core::log::info("session started", {{"user_id", g.user.id},
                                        {"session_id", g.session_id},
                                        {"workspace_id", db.workspace_id},
                                        {"via", api ? "api" : "auth/v1"}});
    co_return g;
}

// ---- refresh ------------------------------------------------------------------------------

net::awaitable<session_grant> session_store::refresh(std::string presented, std::string issuer) {
    if (presented.empty() || presented.size() > 512) {
        throw refresh_refused(refresh_refusal::not_found);
    }
    const session_db own;
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
    auto t = co_await pool_.begin(service_of(own));
    auto row = co_await t.query(sql, presented_hash);
    std::optional<refresh_refusal> refused;
    session_grant g;
    if (row.empty()) {
        refused = refresh_refusal::not_found;
    } else {
        g.user = app_user_at(row, 0);
        g.session_id = row.get<std::string>(0, "session_id");
        g.auth_time = row.get<long long>(0, "auth_time");
        // As GoTrue: a banned user is told so (disabling ended the session too).
        if (g.user.disabled) {
            refused = refresh_refusal::user_banned;
        } else if (row.get<bool>(0, "session_revoked")) {
            refused = refresh_refusal::not_found;
        } else if (row.get<bool>(0, "session_expired")) {
            refused = refresh_refusal::session_expired;
        }
    }
    if (refused) {
        co_await t.commit();
        throw refresh_refused(*refused);
    }
    const auto token_id = row.get<long long>(0, "token_id");
    const auto now = core::now_unix_s();
    g.expires_at = now + static_cast<long long>(o_.jwt_expiry_s);
    if (row.get<bool>(0, "revoked")) {
        // Used before. Within the reuse interval (two tabs refreshing at once) the answer is the
        // token its first use gave (or the live one further down the chain); after it, the
        // token was stolen or replayed: the whole session is signed out.
        if (row.get<double>(0, "revoked_for") <= o_.refresh_reuse_interval_s) {
            auto sealed = row.get_optional<std::string>(0, "child_sealed");
            std::string current = presented;
            for (int step = 0; step < 8 && sealed; ++step) {
                auto child = open_child(current, *sealed);
                if (!child) break;
                const auto child_hash = crypto::sha256_hex(*child);
                auto next = co_await t.query(
                    "SELECT revoked, encode(child_sealed, 'hex') FROM public.app_refresh_tokens "
                    "WHERE token_sha256 = decode($1, 'hex') AND session_id = $2::uuid FOR UPDATE",
                    child_hash, g.session_id);
                if (next.empty()) break;
                if (!next.get<bool>(0, 0)) {
                    g.refresh_token = *child;
                    break;
                }
                current = *child;
                sealed = next.get_optional<std::string>(0, 1);
            }
        }
        if (g.refresh_token.empty()) {
            co_await t.query(
                "WITH s AS (UPDATE public.app_sessions SET revoked_at = now(), "
                "revoked_reason = 'refresh_token_reuse' WHERE id = $1::uuid "
                "AND revoked_at IS NULL RETURNING id) "
                "UPDATE public.app_refresh_tokens SET revoked = true, revoked_at = now() "
                "WHERE session_id = $1::uuid AND NOT revoked",
                g.session_id);
            co_await commit_ended(t, own, g.user.id);
            core::log::warn("refresh token reused: session signed out",
                            {{"user_id", g.user.id}, {"session_id", g.session_id}});
            throw refresh_refused(refresh_refusal::already_used);
        }
        co_await t.query_and_commit(
            "UPDATE public.app_sessions SET refreshed_at = now(), tokens_valid_until = "
            "greatest(tokens_valid_until, to_timestamp($2)) WHERE id = $1::uuid",
            g.session_id, g.expires_at);
    } else {
        // Rotation: the presented token is used up; its child is the session's next.
        g.refresh_token = new_refresh_token();
        const auto sealed = seal_child(presented, g.refresh_token);
        const auto child_hash = crypto::sha256_hex(g.refresh_token);
        co_await t.query_and_commit(
            "WITH used AS (UPDATE public.app_refresh_tokens SET revoked = true, "
            "revoked_at = now(), child_sealed = decode($2, 'hex') WHERE id = $1), "
            "child AS (INSERT INTO public.app_refresh_tokens (token_sha256, session_id, "
            "user_id, parent_id) VALUES (decode($3, 'hex'), $4::uuid, $5::uuid, $1)) "
            "UPDATE public.app_sessions SET refreshed_at = now(), tokens_valid_until = "
            "greatest(tokens_valid_until, to_timestamp($6)) WHERE id = $4::uuid",
            token_id, sealed, child_hash, g.session_id, g.user.id, g.expires_at);
    }
    g.access_token = token_for(own, session_face::auth_v1, g, now, issuer);
    co_return g;
}

// ---- end ----------------------------------------------------------------------------------

net::awaitable<std::size_t> session_store::revoke(session_db db, std::string user_id,
                                                  std::string session_id, revoke_scope scope,
                                                  std::string reason) {
    std::optional<std::string> session;
    if (!session_id.empty()) session = session_id;
    const std::string which = scope_text(scope);
    auto t = co_await pool_.begin(service_of(db));
    // The trigger of app_sessions writes each ended session's revocation and its NOTIFY.
    auto ended = co_await t.query(
        "WITH s AS (UPDATE public.app_sessions SET revoked_at = now(), revoked_reason = $4 "
        "WHERE user_id = $1::uuid AND revoked_at IS NULL AND CASE $3 "
        "WHEN 'local' THEN id = $2::uuid WHEN 'others' THEN id IS DISTINCT FROM $2::uuid "
        "ELSE true END RETURNING id), "
        "r AS (UPDATE public.app_refresh_tokens SET revoked = true, revoked_at = now() "
        "WHERE session_id IN (SELECT id FROM s) AND NOT revoked) "
        "SELECT id::text FROM s",
        user_id, session, which, reason);
    co_await commit_ended(t, db, user_id);
    if (!ended.empty()) {
        core::log::info("sessions signed out", {{"user_id", user_id},
                                                {"workspace_id", db.workspace_id},
                                                {"count", ended.size()},
                                                {"reason", reason}});
    }
    co_return static_cast<std::size_t>(ended.size());
}

net::awaitable<void> session_store::commit_ended(db_pool::tx& t, const session_db& db,
                                                 std::string user_id) {
    // The revocations this transaction wrote (their created_at is its now()), read before the
    // commit and applied after it: this process refuses the tokens at once, the others when
    // their NOTIFY comes.
    const auto sql = std::string("SELECT ") + kRevocationColumns +
                     " FROM public.app_token_revocations "
                     "WHERE created_at = now() AND user_id = $1::uuid";
    auto rows = co_await t.query_and_commit(sql, user_id);
    if (auto w = watch_of(db.workspace_id)) w->apply(revocations_of(rows));
}

// ---- the databases watched ----------------------------------------------------------------

void session_store::start() { own_->start(); }

// A workspace's database is watched while its pool is open, i.e. while the workspace is in use:
// the watch's LISTEN connection and reads stay within what API_WORKSPACE_POOLS allows. It starts
// when a request of one of its sessions needs it (activate, from the router and the sign-in) and
// stops when the pool closes (db_pool::on_workspace_closed) or the workspace leaves the registry.

void session_store::retain(std::uint64_t generation,
                           const std::map<std::string, std::string>& live) {
    std::unique_lock lock(mu_);
    if (generation < generation_) return;  // a request that read the registry before another
    std::erase_if(stopped_, [](const auto& w) { return w.use_count() == 1; });
    for (auto it = workspaces_.begin(); it != workspaces_.end();) {
        auto l = live.find(it->first);
        if (l != live.end() && l->second == it->second.url) {
            ++it;
            continue;
        }
        if (it->second.w) {
            it->second.w->stop();
            stopped_.push_back(it->second.w);
        }
        it = workspaces_.erase(it);
    }
    for (const auto& [id, url] : live) {
        if (workspaces_.count(id) == 0) workspaces_.emplace(id, watched{url, nullptr});
    }
    generation_ = generation;
    update_idle();
}

void session_store::deactivate(const std::string& workspace_id) {
    std::unique_lock lock(mu_);
    auto it = workspaces_.find(workspace_id);
    if (it == workspaces_.end() || !it->second.w) return;
    it->second.w->stop();
    stopped_.push_back(std::move(it->second.w));
    it->second.w = nullptr;
    update_idle();
}

void session_store::update_idle() {
    std::size_t n = 0;
    for (const auto& [id, w] : workspaces_) {
        if (!w.w && is_postgres_url(w.url)) ++n;
    }
    idle_ = n;
}

net::awaitable<bool> session_store::wait_ready(std::string workspace_id,
                                               std::chrono::milliseconds limit) {
    if (workspace_id.empty()) co_return co_await own_->wait_loaded(limit);
    std::shared_ptr<revocation_watch> w;
    bool made = false;
    {
        std::unique_lock lock(mu_);
        auto it = workspaces_.find(workspace_id);
        if (it == workspaces_.end()) co_return false;
        if (!is_postgres_url(it->second.url)) co_return true;  // nothing to watch
        if (!it->second.w) {
            // Its own DSN: LISTEN needs a session there (through a transaction pooler no NOTIFY
            // arrives: the re-read every safety poll brings revocations, docs/security.md).
            it->second.w = std::make_shared<revocation_watch>(
                ioc_, pool_, session_db{workspace_id, it->second.url}, it->second.url,
                o_.safety_poll);
            made = true;
            update_idle();
        }
        w = it->second.w;
    }
    // Started outside the lock: its first read may close another workspace's pool, whose
    // deactivate() takes the lock.
    if (made) w->start();
    co_return co_await w->wait_loaded(limit);
}

net::awaitable<void> session_store::wait_all_ready(std::chrono::milliseconds limit) {
    co_await own_->wait_loaded(limit);
}

void session_store::stop() {
    own_->stop();
    std::shared_lock lock(mu_);
    for (const auto& [id, w] : workspaces_) {
        if (w.w) w.w->stop();
    }
}

net::awaitable<void> session_store::wait_stopped(std::chrono::milliseconds limit) {
    std::vector<std::shared_ptr<revocation_watch>> all{own_};
    {
        std::shared_lock lock(mu_);
        for (const auto& [id, w] : workspaces_) {
            if (w.w) all.push_back(w.w);
        }
        all.insert(all.end(), stopped_.begin(), stopped_.end());
    }
    for (const auto& w : all) co_await w->wait_stopped(limit);
}

}  // namespace awp::api
