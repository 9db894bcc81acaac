#!/usr/bin/env bash
# A PgBouncer (Debian 12's 1.18) in transaction pool mode in front of the project's cluster
# (scripts/pg-cluster.sh), for the tests and for trying a deployment's topology on one machine.
# Its own state under .awp/pgbouncer (ini, auth file, log, pid), not the system service.
#
#   up     write the config, install the auth lookup in the cluster, start it, print the env
#   down   stop it
#   env    print the URLs to use (also kept in .awp/pgbouncer.env, mode 0600)
#   status exit 0 when running, 3 when not
#
# Authentication is real: clients log in with their own Postgres password (SCRAM). PgBouncer
# looks the secret up with auth_query as the login `awp_pgbouncer`, through a SECURITY DEFINER
# function `pgbouncer.get_auth(name)` installed in every database of the cluster and in
# template1 (so databases made later, the tests' clones, have it too); then it logs in to
# Postgres as that same user. So the per-gateway logins (awp_gw_*) made at any time work.
# Transaction mode, and after every transaction a reset query that leaves a server connection as
# a new one would be but for its cached plans (a hostile client cannot hand state to the next).
# LISTEN (the daemons' WAKE_DATABASE_URL) and `awpctl migrate` (a session advisory lock) stay
# direct: AWP_PGBOUNCER_WAKE_DATABASE_URL is the direct URL.
#
# environment: AWP_PGBOUNCER_PORT (6439; 6432 is the Debian package's own service), AWP_PGBOUNCER_POOL_SIZE (server connections per
# database and user, 20), AWP_PGBOUNCER_MAX_DB_CONNECTIONS (per database, 50),
# AWP_PGBOUNCER_MAX_CLIENT_CONN (2000; bench/scale raises it), AWP_PG_PORT and AWP_STATE_DIR as for
# scripts/pg-cluster.sh.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${AWP_STATE_DIR:-$REPO/.awp}
DIR=$STATE/pgbouncer
ENV_FILE=$STATE/pgbouncer.env
CLUSTER_ENV=$STATE/cluster.env
PORT=${AWP_PGBOUNCER_PORT:-6439}
POOL_SIZE=${AWP_PGBOUNCER_POOL_SIZE:-20}
MAX_DB=${AWP_PGBOUNCER_MAX_DB_CONNECTIONS:-50}
MAX_CLIENT=${AWP_PGBOUNCER_MAX_CLIENT_CONN:-2000}
AUTH_USER=awp_pgbouncer

log() { echo "pgbouncer: $*" >&2; }
die() { log "$*"; exit 1; }

# PgBouncer refuses to run as root: as root it runs as the `postgres` OS user, as the cluster does.
if [[ $(id -u) -eq 0 ]]; then
  as_server() { runuser -u postgres -- "$@"; }
  OWNER=postgres
else
  as_server() { "$@"; }
  OWNER=$(id -un)
fi

is_running() {
  [[ -f $DIR/pgbouncer.pid ]] && kill -0 "$(cat "$DIR/pgbouncer.pid")" 2>/dev/null
}

load_cluster() {
  [[ -f $CLUSTER_ENV ]] || die "no $CLUSTER_ENV: run scripts/pg-cluster.sh up first"
  set -a
  # shellcheck disable=SC1090
  . "$CLUSTER_ENV"
  set +a
}

password() {  # stable across runs: kept in the env file
  if [[ -f $ENV_FILE ]] && grep -q '^AWP_PGBOUNCER_AUTH_PASSWORD=' "$ENV_FILE"; then
    grep '^AWP_PGBOUNCER_AUTH_PASSWORD=' "$ENV_FILE" | cut -d= -f2- | tr -d "'"
  else
    openssl rand -hex 18
  fi
}

psql_admin() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$AWP_PG_ADMIN_DSN dbname=$1" "${@:2}"; }

# The auth user and, in one database, the lookup function it calls. Only login roles that are
# neither superusers nor the auth user itself are looked up: a superuser never logs in through
# the pooler.
install_lookup() {
  psql_admin "$1" <<SQL
CREATE SCHEMA IF NOT EXISTS pgbouncer;
REVOKE ALL ON SCHEMA pgbouncer FROM PUBLIC;
GRANT USAGE ON SCHEMA pgbouncer TO $AUTH_USER;
CREATE OR REPLACE FUNCTION pgbouncer.get_auth(p_usename text)
RETURNS TABLE (usename name, passwd text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog
AS \$\$
  SELECT a.rolname, CASE WHEN a.rolvaliduntil < now() THEN NULL ELSE a.rolpassword END
    FROM pg_catalog.pg_authid a
   WHERE a.rolname = p_usename AND a.rolcanlogin AND NOT a.rolsuper
     AND a.rolname <> '$AUTH_USER'
\$\$;
REVOKE ALL ON FUNCTION pgbouncer.get_auth(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgbouncer.get_auth(text) TO $AUTH_USER;
SQL
}

provision() {
  local pw=$1 db dbs
  psql_admin postgres -v pw="$pw" <<SQL
SELECT 'CREATE ROLE $AUTH_USER LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$AUTH_USER') \gexec
ALTER ROLE $AUTH_USER PASSWORD :'pw';
SQL
  mapfile -t dbs < <(psql_admin postgres -tAc \
    "SELECT datname FROM pg_database WHERE datallowconn AND datname NOT IN ('template0', 'postgres')")
  for db in "${dbs[@]}"; do install_lookup "$db"; done
  # The tests' template database refuses connections: open it for the install.
  if psql_admin postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'awp_test_template' AND NOT datallowconn" | grep -q 1; then
    psql_admin postgres -c "ALTER DATABASE awp_test_template ALLOW_CONNECTIONS true"
    install_lookup awp_test_template
    psql_admin postgres -c "ALTER DATABASE awp_test_template ALLOW_CONNECTIONS false"
  fi
}

write_config() {
  local pw=$1
  mkdir -p "$DIR"
  umask 077
  # The auth user's own password, in plain text (allowed with scram-sha-256); every other
  # user comes from auth_query.
  printf '"%s" "%s"\n' "$AUTH_USER" "$pw" >"$DIR/userlist.txt"
  cat >"$DIR/pgbouncer.ini" <<INI
; Written by scripts/pgbouncer.sh: transaction pooling in front of 127.0.0.1:$AWP_PG_PORT.
[databases]
; Every database of the cluster, each its own pool (the tests make databases as they go).
* = host=127.0.0.1 port=$AWP_PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
pool_mode = transaction
; Reset after every transaction: awp leaves nothing of a session behind, but a hostile client
; (a gateway host on a shared pool login) could leave a session SET, a role, a temporary type
; shadowing a built-in one, a lock or a LISTEN for the next client of the server connection
; (docs/security.md, "Gateway keys"). Everything DISCARD ALL resets but the cached plans (kept:
; dropping them would plan every statement of every RPC again) and the sequences' currval.
server_reset_query = CLOSE ALL; RESET ROLE; RESET ALL; DEALLOCATE ALL; UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD TEMP
server_reset_query_always = 1
default_pool_size = $POOL_SIZE
max_db_connections = $MAX_DB
max_client_conn = $MAX_CLIENT
; Each login is its own pool: idle server connections give their place back soon.
server_idle_timeout = 10
auth_type = scram-sha-256
auth_file = $DIR/userlist.txt
auth_user = $AUTH_USER
auth_query = SELECT usename, passwd FROM pgbouncer.get_auth(\$1)
ignore_startup_parameters = extra_float_digits
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
log_connections = 0
log_disconnections = 0
INI
  if [[ $OWNER == postgres ]]; then chown -R postgres: "$DIR"; fi
}

write_env() {
  local pw=$1 through="127.0.0.1:$PORT/"
  local direct="127.0.0.1:$AWP_PG_PORT/"
  umask 077
  cat >"$ENV_FILE" <<ENV
# Written by scripts/pgbouncer.sh: the URLs through PgBouncer (transaction mode) on $PORT.
# Source it: set -a; . $ENV_FILE. LISTEN and awpctl migrate stay direct (WAKE_DATABASE_URL).
AWP_PGBOUNCER_PORT=$PORT
AWP_PGBOUNCER_AUTH_PASSWORD='$pw'
AWP_PGBOUNCER_DATABASE_URL='${DATABASE_URL/$direct/$through}'
AWP_PGBOUNCER_API_DATABASE_URL='${AWP_API_DATABASE_URL/$direct/$through}'
AWP_PGBOUNCER_GATEWAY_DATABASE_URL='${AWP_GATEWAY_DATABASE_URL:+${AWP_GATEWAY_DATABASE_URL/$direct/$through}}'
AWP_PGBOUNCER_WAKE_DATABASE_URL='$DATABASE_URL'
ENV
}

start() {
  is_running && return 0
  rm -f "$DIR/pgbouncer.pid"
  # A file per client: runuser's PAM session sets the soft limit back to 1024, so raise it to
  # the hard limit inside (max_client_conn plus the server connections need that many).
  as_server sh -c 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec /usr/sbin/pgbouncer -d -q "$1"' sh "$DIR/pgbouncer.ini" \
    || { tail -n 20 "$DIR/pgbouncer.log" >&2 2>/dev/null; die "pgbouncer did not start"; }
  for _ in $(seq 50); do
    if is_running && (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
      log "running on 127.0.0.1:$PORT (transaction mode, pool $POOL_SIZE, max_db_connections $MAX_DB)"
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$DIR/pgbouncer.log" >&2 2>/dev/null
  die "pgbouncer did not come up on 127.0.0.1:$PORT"
}

stop() {
  if is_running; then
    local pid
    pid=$(cat "$DIR/pgbouncer.pid")
    kill -INT "$pid"  # immediate shutdown
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    log "stopped"
  fi
  rm -f "$DIR/pgbouncer.pid"
}

command -v /usr/sbin/pgbouncer >/dev/null || die "pgbouncer is not installed: run scripts/install-deps.sh"
case ${1:-} in
  up)
    load_cluster
    pw=$(password)
    provision "$pw"
    write_config "$pw"
    write_env "$pw"
    if is_running; then kill -HUP "$(cat "$DIR/pgbouncer.pid")"; else start; fi  # HUP: reload
    cat "$ENV_FILE"
    ;;
  down) stop ;;
  env) [[ -f $ENV_FILE ]] || die "no $ENV_FILE: run '$0 up' first"; cat "$ENV_FILE" ;;
  status) if is_running; then echo "running on 127.0.0.1:$PORT"; else echo "stopped"; exit 3; fi ;;
  *) cat >&2 <<USAGE
usage: $0 up|down|env|status
  up      configure and start PgBouncer (transaction mode) in front of scripts/pg-cluster.sh's
          cluster, print the URLs (AWP_PGBOUNCER_DATABASE_URL, ..._API_..., ..._GATEWAY_...)
  down    stop it
  env     print the URLs again
  status  exit 0 when running, 3 when stopped
environment: AWP_PGBOUNCER_PORT (6439: not 6432, where the Debian package's own service listens), AWP_PGBOUNCER_POOL_SIZE (20),
AWP_PGBOUNCER_MAX_DB_CONNECTIONS (50), AWP_PG_PORT, AWP_STATE_DIR
USAGE
     exit 2 ;;
esac
