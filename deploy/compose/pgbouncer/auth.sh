#!/bin/sh
# Compose profile pgbouncer, service pgbouncer-auth: the login PgBouncer looks passwords up with
# (awp_pgbouncer) and its SECURITY DEFINER lookup, in the awp database and in template1 (so a
# database made later has it too). Idempotent. Runs as the superuser (PG* from the compose file).
set -eu
: "${AWP_PG_PGBOUNCER_PASSWORD:?set AWP_PG_PGBOUNCER_PASSWORD in .env}"
psql -v ON_ERROR_STOP=1 -v pw="$AWP_PG_PGBOUNCER_PASSWORD" -d postgres <<'SQL'
SELECT 'CREATE ROLE awp_pgbouncer LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'awp_pgbouncer') \gexec
ALTER ROLE awp_pgbouncer PASSWORD :'pw';
SQL
for db in "$PGDATABASE" template1; do
  psql -v ON_ERROR_STOP=1 -d "$db" <<'SQL'
CREATE SCHEMA IF NOT EXISTS pgbouncer;
REVOKE ALL ON SCHEMA pgbouncer FROM PUBLIC;
GRANT USAGE ON SCHEMA pgbouncer TO awp_pgbouncer;
-- Login roles that are neither superusers nor the auth user itself.
CREATE OR REPLACE FUNCTION pgbouncer.get_auth(p_usename text)
RETURNS TABLE (usename name, passwd text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog
AS $$
  SELECT a.rolname, CASE WHEN a.rolvaliduntil < now() THEN NULL ELSE a.rolpassword END
    FROM pg_catalog.pg_authid a
   WHERE a.rolname = p_usename AND a.rolcanlogin AND NOT a.rolsuper
     AND a.rolname <> 'awp_pgbouncer'
$$;
REVOKE ALL ON FUNCTION pgbouncer.get_auth(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgbouncer.get_auth(text) TO awp_pgbouncer;
SQL
done
