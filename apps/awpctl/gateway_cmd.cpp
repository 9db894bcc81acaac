// awpctl gateway token: issue a single-use, expiring registration token for a new gateway host
// (its runner exchanges it once through consume_gateway_token). The token is printed once.
// awpctl gateway credential: create (or rotate) the gateway's own Postgres login role, the one
// credential its host needs (sql/0023, docs/security.md "Gateway credentials").
// awpctl gateway key / pool-login: a gateway's key and the shared pool login that hosts present
// it on, for many hosts behind one PgBouncer (sql/0026, docs/security.md "Gateway keys").
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <libpq-fe.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/crypto.hpp"
#include "awp/core/error.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/uuid.hpp"
#include "commands.hpp"

namespace awp::ctl {
namespace {

constexpr const char* kIssueSql = R"SQL(
SELECT t.token, t.token_id::text, t.tenant_id::text, t.expires_at::text
  FROM public.issue_gateway_token($1::uuid, $2, $3::integer, $4) t
)SQL";

// $2 is the password's SCRAM verifier, never the password: nothing the server logs or keeps
// (log_statement, pg_stat_statements) holds it.
constexpr const char* kRoleSql = R"SQL(
SELECT r.role_name, r.gateway_id::text, r.tenant_id::text, r.slug,
       pg_catalog.current_setting('port'), pg_catalog.current_database()
  FROM public.awp_gateway_role($1, $2, $3) r
)SQL";

// --create: a new gateway (status provisioning until its first heartbeat) when the slug is free.
constexpr const char* kCreateSql = R"SQL(
INSERT INTO public.gateways (tenant_id, slug, label)
SELECT coalesce($2::uuid, '00000000-0000-0000-0000-000000000000'::uuid), $1, $1
 WHERE NOT EXISTS (SELECT 1 FROM public.gateways g WHERE g.slug = $1 OR g.id::text = lower($1))
)SQL";

struct credential_options {
    std::string gateway;
    std::string role;
    std::string tenant_id;
    bool password_stdin = false;
    bool create = false;
};

// Unreserved URL characters only, so the password goes into a DSN as it is.
bool url_safe(const std::string& s) {
    for (const unsigned char c : s) {
        if (!std::isalnum(c) && c != '-' && c != '.' && c != '_' && c != '~') return false;
    }
    return true;
}

// A login's password: read from stdin (--password-stdin), else 24 random bytes in hex.
std::string new_password(bool from_stdin) {
    if (!from_stdin) return core::crypto::hex_encode(core::crypto::random_bytes(24));
    std::string password;
    std::getline(std::cin, password);
    if (password.size() < 24 || password.size() > 128 || !url_safe(password)) {
        throw core::config_error(
            "--password-stdin: the password must be 24 to 128 characters of A-Z a-z 0-9 - . _ ~");
    }
    return password;
}

// The SCRAM-SHA-256 verifier of the password, computed here by libpq (the role name plays no
// part in a SCRAM verifier); the server stores it as it is.
std::string scram_verifier(core::pg::connection& conn, const std::string& password) {
    char* v = PQencryptPasswordConn(conn.native(), password.c_str(), "", "scram-sha-256");
    if (v == nullptr) {
        throw core::error(std::string("cannot hash the password: ") +
                          PQerrorMessage(conn.native()));
    }
    std::string out(v);
    PQfreemem(v);
    return out;
}

// Creates the gateway first when asked (awpctl gateway credential --create does the same).
void create_if_asked(core::pg::connection& conn, const std::string& gateway, bool create,
                     const std::string& tenant_id) {
    if (!create) return;
    if (!tenant_id.empty() && !core::is_valid_uuid(tenant_id)) {
        throw core::config_error("--tenant-id must be a UUID");
    }
    std::optional<std::string> tenant;
    if (!tenant_id.empty()) tenant = tenant_id;
    if (conn.exec(kCreateSql, {gateway, tenant}).affected() == 1) {
        std::cerr << "created gateway " << gateway << "\n";
    }
}

int issue_credential(const context& ctx, const credential_options& o) {
    const std::string password = new_password(o.password_stdin);
    auto conn = core::pg::connection::connect(ctx.database_url);
    create_if_asked(conn, o.gateway, o.create, o.tenant_id);
    std::optional<std::string> role;
    if (!o.role.empty()) role = o.role;
    const auto r = conn.exec(kRoleSql, {o.gateway, scram_verifier(conn, password), role});
    const std::string url = "postgresql://" + r.get<std::string>(0, 0) + ":" + password +
                            "@127.0.0.1:" + r.get<std::string>(0, 4) + "/" +
                            r.get<std::string>(0, 5);
    if (ctx.json) {
        rapidjson::StringBuffer buf;
        rapidjson::Writer<rapidjson::StringBuffer> w(buf);
        w.StartObject();
        for (const auto& [key, col] : {std::pair{"role", 0}, std::pair{"gateway_id", 1},
                                       std::pair{"tenant_id", 2}, std::pair{"slug", 3}}) {
            w.Key(key);
            const auto v = r.get<std::string>(0, col);
            w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
        }
        w.Key("database_url");
        w.String(url.c_str(), static_cast<rapidjson::SizeType>(url.size()));
        w.EndObject();
        std::cout << buf.GetString() << "\n";
    } else {
        // The DSN alone on stdout: DATABASE_URL=$(awpctl gateway credential edge) works.
        std::cout << url << "\n";
        std::cerr << "login role " << r.get<std::string>(0, 0) << " of gateway "
                  << r.get<std::string>(0, 3) << " (" << r.get<std::string>(0, 1)
                  << "): it reaches this gateway's rows only; the password is not shown again "
                     "(rotate: run this again). Set the host in the URL to the database's "
                     "address as the gateway host sees it.\n";
    }
    return 0;
}

// $2: the SHA-256 of the secret (hex); the secret itself never reaches the server.
constexpr const char* kKeySql = R"SQL(
SELECT k.gateway_id::text, k.tenant_id::text, k.slug
  FROM public.awp_gateway_key($1, decode($2, 'hex')) k
)SQL";

constexpr const char* kPoolSql = R"SQL(
SELECT public.awp_gateway_pool_role($1, $2), pg_catalog.current_setting('port'),
       pg_catalog.current_database()
)SQL";

struct key_options {
    std::string gateway;
    std::string tenant_id;
    bool create = false;
};

void print_json(const std::vector<std::pair<std::string, std::string>>& fields) {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartObject();
    for (const auto& [k, v] : fields) {
        w.Key(k.c_str());
        w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
    }
    w.EndObject();
    std::cout << buf.GetString() << "\n";
}

int issue_key(const context& ctx, const key_options& o) {
    auto conn = core::pg::connection::connect(ctx.database_url);
    create_if_asked(conn, o.gateway, o.create, o.tenant_id);
    const std::string secret = core::crypto::base64url_encode(core::crypto::random_bytes(32));
    const auto r = conn.exec(kKeySql, {o.gateway, core::crypto::sha256_hex(secret)});
    std::string hex = r.get<std::string>(0, 0);
    hex.erase(std::remove(hex.begin(), hex.end(), '-'), hex.end());
    const std::string key = "awpk_" + hex + "_" + secret;
    if (ctx.json) {
        print_json({{"gateway_id", r.get<std::string>(0, 0)},
                    {"tenant_id", r.get<std::string>(0, 1)},
                    {"slug", r.get<std::string>(0, 2)},
                    {"gateway_key", key}});
    } else {
        // The key alone on stdout: GATEWAY_KEY=$(awpctl gateway key edge) works.
        std::cout << key << "\n";
        std::cerr << "key of gateway " << r.get<std::string>(0, 2) << " ("
                  << r.get<std::string>(0, 0)
                  << "): with a pool login's DATABASE_URL (awpctl gateway pool-login) a host "
                     "reaches this gateway's rows only; not shown again, only its hash is "
                     "stored (rotate: run this again; the old key stops working)\n";
    }
    return 0;
}

struct pool_options {
    std::string role = "awp_pool";
    bool password_stdin = false;
};

int issue_pool_login(const context& ctx, const pool_options& o) {
    const std::string password = new_password(o.password_stdin);
    auto conn = core::pg::connection::connect(ctx.database_url);
    const auto r = conn.exec(kPoolSql, {scram_verifier(conn, password), o.role});
    const std::string url = "postgresql://" + r.get<std::string>(0, 0) + ":" + password +
                            "@127.0.0.1:" + r.get<std::string>(0, 1) + "/" +
                            r.get<std::string>(0, 2);
    if (ctx.json) {
        print_json({{"role", r.get<std::string>(0, 0)}, {"database_url", url}});
    } else {
        std::cout << url << "\n";
        std::cerr << "pool login " << r.get<std::string>(0, 0)
                  << ": shared by gateway hosts, it reaches nothing without a gateway key "
                     "(GATEWAY_KEY); the password is not shown again. Point the URL at "
                     "PgBouncer as the hosts see it.\n";
    }
    return 0;
}

struct gateway_token_options {
    std::string tenant_id;
    std::string label;
    int ttl_s = 3600;
};

std::string created_by() {
    const char* user = std::getenv("USER");
    return std::string("awpctl:") + (user && *user ? user : "unknown");
}

command add_gateway(CLI::App& root, context& ctx) {
    static gateway_token_options o;
    static credential_options co;
    auto* app = root.add_subcommand("gateway", "Gateway lifecycle");
    app->require_subcommand(1);
    auto* token = app->add_subcommand(
        "token",
        "Issue a single-use registration token that expires (printed once; only its hash is "
        "stored). Start the new host's runner with GATEWAY_TOKEN=<token>");
    token->add_option("--tenant-id", o.tenant_id, "Tenant of the new gateway (default tenant)");
    token->add_option("--label", o.label, "Label of the new gateway (also its slug hint)");
    token->add_option("--ttl", o.ttl_s, "Seconds until the token expires (60 to 2592000)")
        ->check(CLI::Range(60, 30 * 86400))
        ->capture_default_str();
    auto* credential = app->add_subcommand(
        "credential",
        "Create the gateway's own database login (or give it a new password) and print its "
        "DATABASE_URL: with it a host reaches only this gateway's rows. Needs an administrator's "
        "--database-url (CREATEROLE)");
    credential->add_option("gateway", co.gateway, "The gateway's id or slug")->required();
    credential->add_flag("--create", co.create,
                         "Create the gateway (that slug, status provisioning) when it does not "
                         "exist: a new host needs only the printed URL");
    credential->add_option("--tenant-id", co.tenant_id,
                           "With --create: the new gateway's tenant (default tenant)");
    credential->add_option("--role", co.role,
                           "The login role's name, awp_gw_<a-z0-9_> (default awp_gw_<gateway id>)");
    credential->add_flag("--password-stdin", co.password_stdin,
                         "Read the password from stdin (24 to 128 URL-safe characters) instead "
                         "of generating one");
    static key_options ko;
    auto* key = app->add_subcommand(
        "key",
        "Make the gateway's key (or a new one: the old stops working) and print it: a host on "
        "the shared pool login presents it (GATEWAY_KEY) and reaches only this gateway's rows. "
        "Needs an administrator's --database-url");
    key->add_option("gateway", ko.gateway, "The gateway's id or slug")->required();
    key->add_flag("--create", ko.create, "Create the gateway when it does not exist");
    key->add_option("--tenant-id", ko.tenant_id,
                    "With --create: the new gateway's tenant (default tenant)");
    static pool_options po;
    auto* pool = app->add_subcommand(
        "pool-login",
        "Create the login gateway hosts share through PgBouncer (or give it a new password) and "
        "print its DATABASE_URL: it reaches nothing without a gateway key. Needs an "
        "administrator's --database-url (CREATEROLE)");
    pool->add_option("--role", po.role, "The login's name, awp_pool or awp_pool_<a-z0-9_>")
        ->capture_default_str();
    pool->add_flag("--password-stdin", po.password_stdin,
                   "Read the password from stdin (24 to 128 URL-safe characters) instead of "
                   "generating one");
    return {app, [&ctx, token, credential, key, pool] {
                if (credential->parsed()) return issue_credential(ctx, co);
                if (key->parsed()) return issue_key(ctx, ko);
                if (pool->parsed()) return issue_pool_login(ctx, po);
                if (!token->parsed()) return 2;
                if (!o.tenant_id.empty() && !core::is_valid_uuid(o.tenant_id)) {
                    throw core::config_error("--tenant-id must be a UUID");
                }
                auto conn = core::pg::connection::connect(ctx.database_url);
                std::optional<std::string> tenant, label;
                if (!o.tenant_id.empty()) tenant = o.tenant_id;
                if (!o.label.empty()) label = o.label;
                const auto r = conn.exec(kIssueSql, {tenant, label, o.ttl_s, created_by()});
                const auto secret = r.get<std::string>(0, 0);
                if (ctx.json) {
                    rapidjson::StringBuffer buf;
                    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
                    w.StartObject();
                    w.Key("token");
                    w.String(secret.c_str());
                    w.Key("token_id");
                    w.String(r.get<std::string>(0, 1).c_str());
                    w.Key("tenant_id");
                    w.String(r.get<std::string>(0, 2).c_str());
                    w.Key("expires_at");
                    w.String(r.get<std::string>(0, 3).c_str());
                    w.EndObject();
                    std::cout << buf.GetString() << "\n";
                } else {
                    // The token alone on stdout, so GATEWAY_TOKEN=$(awpctl gateway token) works.
                    std::cout << secret << "\n";
                    std::cerr << "single-use gateway token " << r.get<std::string>(0, 1)
                              << " for tenant " << r.get<std::string>(0, 2) << ", expires "
                              << r.get<std::string>(0, 3)
                              << "; it is not shown again (only its hash is stored)\n";
                }
                return 0;
            }};
}

}  // namespace

AWPCTL_COMMAND(add_gateway);

}  // namespace awp::ctl
