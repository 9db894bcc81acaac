// The test suites through PgBouncer: with AWP_TEST_PGBOUNCER=1 (scripts/test.sh pgbouncer) the
// daemons the tests start reach Postgres through scripts/pgbouncer.sh's PgBouncer in transaction
// mode (AWP_PGBOUNCER_PORT), their LISTEN direct (WAKE_DATABASE_URL), as docs/operations.md,
// "Through PgBouncer", deploys them. The tests' own connections stay direct.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace awp::test {

/// True when AWP_TEST_PGBOUNCER=1 (and AWP_PGBOUNCER_PORT is set, else a Catch2-visible error).
bool through_pgbouncer();

/// A DSN (URL or keyword form) to the project's cluster over TCP (127.0.0.1:AWP_PG_PORT) moved
/// to the PgBouncer's port; any other DSN unchanged.
std::string via_pgbouncer(const std::string& dsn);

/// The DSN as a daemon started by the tests gets it: via_pgbouncer(dsn) with
/// through_pgbouncer(), else dsn.
std::string as_given_to_daemons(const std::string& dsn);

/// With through_pgbouncer(): DATABASE_URL and AWP_API_DATABASE_URL of a daemon's environment go
/// through the PgBouncer; a gateway's own login (gateway_dsn, its right password) becomes the
/// shared pool login with GATEWAY_KEY (pool_login_of), as a hosted host runs; WAKE_DATABASE_URL
/// (when not set) is the direct DATABASE_URL, AWP_API_WAKE_DATABASE_URL the direct
/// AWP_API_DATABASE_URL, and DATABASE_PREPARED (when not set) is off, as
/// docs/operations.md deploys them. `awpctl migrate` (a session advisory lock) and awp-wake (its
/// LISTEN) stay direct. Without it: nothing changes.
void route_through_pgbouncer(std::map<std::string, std::string>& env,
                             const std::vector<std::string>& argv = {});

/// The environment of a child process as KEY=VALUE strings: this process's, then `env` over
/// it, then route_through_pgbouncer.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& env,
                                           const std::vector<std::string>& argv = {});

}  // namespace awp::test
