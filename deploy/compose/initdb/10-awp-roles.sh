#!/usr/bin/env bash
# Runs once, when the postgres container creates its data volume: the API roles (the first
# migration would make them too, but the login roles need them now) and the two login roles,
# awp_daemon (acts as service_role) and awp_api (switches role per request, as PostgREST does);
# with AWP_PG_REALTIME_PASSWORD set, awp_realtime (LOGIN REPLICATION and nothing else: the
# api-gateway's realtime reader, docs/realtime-capture.md). Mirrors scripts/pg-cluster.sh.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v daemon_pw="$AWP_PG_DAEMON_PASSWORD" -v api_pw="$AWP_PG_API_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I NOLOGIN %s', r, CASE WHEN r = 'service_role' THEN 'BYPASSRLS' ELSE '' END)
  FROM unnest(ARRAY['anon', 'authenticated', 'service_role']) AS r
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) \gexec
SELECT 'CREATE ROLE awp_daemon LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'awp_daemon') \gexec
SELECT 'CREATE ROLE awp_api LOGIN NOINHERIT' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'awp_api') \gexec
ALTER ROLE awp_daemon PASSWORD :'daemon_pw';
ALTER ROLE awp_api PASSWORD :'api_pw';
GRANT service_role TO awp_daemon;
GRANT anon, authenticated, service_role TO awp_api;
SQL
if [[ -n ${AWP_PG_REALTIME_PASSWORD:-} ]]; then
  psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v realtime_pw="$AWP_PG_REALTIME_PASSWORD" <<'SQL'
SELECT 'CREATE ROLE awp_realtime LOGIN REPLICATION' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'awp_realtime') \gexec
ALTER ROLE awp_realtime LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS
  PASSWORD :'realtime_pw';
SQL
fi
