// Integration-test databases: each test gets a fresh clone of the migrated template database.
#pragma once

#include <optional>
#include <string>

#include "awp/core/pg.hpp"

namespace awp::test {

/// The template every test database is cloned from (made by tests/support/make-template.sh).
inline constexpr const char* kTemplateDatabase = "awp_test_template";

/// A random lowercase name with a prefix, for databases, channels, slugs.
std::string random_name(const std::string& prefix);

/// A fresh database cloned from the template, dropped (WITH FORCE) when it goes out of scope.
/// Needs AWP_PG_ADMIN_DSN (superuser, keyword form), AWP_PG_PORT and the role passwords from
/// .awp/cluster.env (scripts/test.sh exports them).
class scoped_database {
public:
    scoped_database();
    ~scoped_database();
    scoped_database(const scoped_database&) = delete;
    scoped_database& operator=(const scoped_database&) = delete;

    const std::string& name() const noexcept { return name_; }
    /// Superuser on this database (unix socket).
    std::string admin_dsn() const;
    /// awp_daemon: a login member of service_role, as the daemons connect (TCP, password).
    std::string daemon_dsn() const;
    /// awp_api: NOINHERIT login that may SET ROLE anon/authenticated/service_role (api-gateway).
    std::string api_dsn() const;
    /// The gateway's own login (sql/0023: awp_gw_<id>, made or re-bound here through
    /// awp_gateway_role as the superuser), as a gateway host's daemons connect: it reaches that
    /// gateway's rows only. `gateway` is its id or slug.
    std::string gateway_dsn(const std::string& gateway) const;

    /// A gateway host on the shared pool login (sql/0026): `dsn` is the pool login
    /// awp_pool_test (the cluster's, made here through awp_gateway_pool_role), `key` the gateway's
    /// key, made once per gateway and database in this process (a second key would retire the
    /// first) through awp_gateway_key as the superuser. `gateway` is its id or slug.
    struct pool_host {
        std::string dsn;
        std::string key;
    };
    pool_host pool_login(const std::string& gateway) const;
    core::pg::connection admin() const { return core::pg::connection::connect(admin_dsn()); }
    core::pg::connection daemon() const { return core::pg::connection::connect(daemon_dsn()); }
    core::pg::connection api() const { return core::pg::connection::connect(api_dsn()); }

private:
    std::string name_;
};

/// For a gateway's own login as gateway_dsn makes it (keyword form, the tests' gateway password):
/// the same gateway and database on the pool login with the gateway's key
/// (scoped_database::pool_login). nullopt for any other DSN, a wrong password included.
std::optional<scoped_database::pool_host> pool_login_of(const std::string& gateway_dsn);

/// Session-level: act as an authenticated user of `tenant_id` (SET ROLE authenticated and
/// request.jwt.claims with sub, role and app_metadata.tenant_id), as the api-gateway does.
void as_user(core::pg::connection& c, const std::string& tenant_id, const std::string& user_id);
/// Session-level: act as anon (no claims).
void as_anon(core::pg::connection& c);
/// Session-level: act as service_role.
void as_service(core::pg::connection& c);
/// Back to the login role, claims cleared.
void reset_role(core::pg::connection& c);

/// Environment variable or a Catch2 failure naming it.
std::string require_env(const char* name);

}  // namespace awp::test
