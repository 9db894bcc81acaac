#!/usr/bin/env bash
# The project's own throwaway PostgreSQL 15 cluster: create, start, stop, destroy, status, env.
# Data lives under .awp/pg (git-ignored); it listens on a unix socket and on 127.0.0.1:$AWP_PG_PORT.
# As root the server runs as the `postgres` OS user. `up` also creates the database, the NOLOGIN
# API roles, the login roles of the daemons, the api-gateway and its realtime reader (awp_realtime,
# REPLICATION), applies the migrations and writes the connection settings to .awp/cluster.env
# (mode 0600). The cluster runs with wal_level=logical and a cap on the WAL a replication slot may
# hold (AWP_PG_SLOT_WAL_KEEP, default 1GB): docs/realtime-capture.md.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_BIN=/usr/lib/postgresql/15/bin
PORT=${AWP_PG_PORT:-54329}
STATE=${AWP_STATE_DIR:-$REPO/.awp}
DBNAME=${AWP_PG_DATABASE:-awp}
ENV_FILE=$STATE/cluster.env
# The most WAL the realtime slot may hold back before Postgres invalidates it (max_slot_wal_keep_size).
SLOT_WAL_KEEP=${AWP_PG_SLOT_WAL_KEEP:-1GB}
AWPCTL=${AWPCTL:-$REPO/build/bin/awpctl}

log() { echo "pg-cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# The server's OS user: postgres when we are root (initdb refuses root), else ourselves.
if [[ $(id -u) -eq 0 ]]; then
  id postgres >/dev/null 2>&1 || die "no 'postgres' OS user: run scripts/install-deps.sh first"
  as_server() { runuser -u postgres -- "$@"; }
  SERVER_USER=postgres
else
  as_server() { "$@"; }
  SERVER_USER=$(id -un)
fi

pick_pg_dir() {
  local dir=${AWP_PG_DIR:-$STATE/pg}
  mkdir -p "$dir"
  if [[ $SERVER_USER == postgres && $(id -u) -eq 0 ]]; then
    chown postgres: "$dir"
    # The server must be able to reach its data; a checkout under /root is not reachable. The
    # folder instead is named after the one asked for: two clusters (another AWP_STATE_DIR, as
    # the data API's restart drills use) never share one.
    if ! runuser -u postgres -- test -x "$dir"; then
      local alt
      alt=/var/tmp/awp-pg-$(echo -n "$dir" | sha256sum | cut -c1-12)
      # Before 2026-11-29 the folder was named after the checkout: the project's own cluster
      # stays where it is.
      local legacy
      legacy=/var/tmp/awp-pg-$(echo -n "$REPO" | sha256sum | cut -c1-12)
      if [[ $dir == "$REPO/.awp/pg" && -d $legacy/data && ! -d $alt/data ]]; then alt=$legacy; fi
      log "$dir is not reachable by the postgres user; keeping the cluster in $alt"
      mkdir -p "$alt" && chown postgres: "$alt"
      dir=$alt
    fi
  fi
  echo "$dir"
}

PGDIR=$(pick_pg_dir)
DATA=$PGDIR/data
RUN=$PGDIR/run
LOGFILE=$PGDIR/postgres.log
ADMIN_DSN="host=$RUN port=$PORT user=postgres dbname=$DBNAME"

is_running() { [[ -f $DATA/postmaster.pid ]] && as_server "$PG_BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }
psql_admin() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "host=$RUN port=$PORT user=postgres dbname=${1:-postgres}" "${@:2}"; }

create() {
  if [[ -f $DATA/PG_VERSION ]]; then return 0; fi
  log "initdb in $DATA"
  mkdir -p "$DATA" "$RUN"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$DATA" "$RUN"
  chmod 0700 "$DATA"
  as_server "$PG_BIN/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >/dev/null
  cat >>"$DATA/postgresql.conf" <<CONF
# awp throwaway cluster
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$RUN'
unix_socket_permissions = 0700
max_connections = 300
shared_buffers = 256MB
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
CONF
}

# The realtime settings live in their own file, rewritten at every start (AWP_PG_SLOT_WAL_KEEP
# takes effect on the next start); postgresql.conf includes it. A cluster made before they existed
# gets the include line now: wal_level changes only when the server starts.
realtime_conf() {
  grep -q "awp-realtime.conf" "$DATA/postgresql.conf" \
    || echo "include_if_exists = 'awp-realtime.conf'" >>"$DATA/postgresql.conf"
  cat >"$DATA/awp-realtime.conf" <<CONF
# Written by scripts/pg-cluster.sh at every start: realtime's change capture (a logical slot read
# by awp-api-gateway). Edit AWP_PG_SLOT_WAL_KEEP instead of this file.
wal_level = logical
max_wal_senders = 32
max_replication_slots = 32
max_slot_wal_keep_size = '$SLOT_WAL_KEEP'
CONF
  [[ $(id -u) -eq 0 ]] && chown postgres: "$DATA/awp-realtime.conf"
  return 0
}

start() {
  create
  realtime_conf
  if is_running; then
    if [[ $(psql_admin postgres -tAc "SHOW wal_level") != logical ]]; then
      log "wal_level is not logical yet: realtime stays off until the cluster restarts ($0 stop; $0 up)"
    fi
    psql_admin postgres -tAc "SELECT pg_reload_conf()" >/dev/null  # max_slot_wal_keep_size
    return 0
  fi
  mkdir -p "$RUN"
  [[ $(id -u) -eq 0 ]] && chown postgres: "$RUN" && touch "$LOGFILE" && chown postgres: "$LOGFILE"
  as_server "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOGFILE" -w -t 60 start >/dev/null \
    || { tail -n 20 "$LOGFILE" >&2; die "postgres did not start"; }
  log "running on 127.0.0.1:$PORT and $RUN"
}

stop() {
  if is_running; then
    as_server "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null
    log "stopped"
  fi
}

destroy() {
  stop
  rm -rf "$PGDIR" "$ENV_FILE"
  log "destroyed"
}

password_for() {  # stable per cluster: kept in the env file
  local var=$1
  if [[ -f $ENV_FILE ]] && grep -q "^$var=" "$ENV_FILE"; then
    grep "^$var=" "$ENV_FILE" | head -n1 | cut -d= -f2- | tr -d "'"
  else
    openssl rand -hex 18
  fi
}

provision() {
  local daemon_pw api_pw realtime_pw
  daemon_pw=$(password_for AWP_PG_DAEMON_PASSWORD)
  api_pw=$(password_for AWP_PG_API_PASSWORD)
  realtime_pw=$(password_for AWP_PG_REALTIME_PASSWORD)
  psql_admin postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DBNAME'" | grep -q 1 \
    || psql_admin postgres -c "CREATE DATABASE \"$DBNAME\""
  # The API roles exist on Supabase already; here the first migration would create them too,
  # but the login roles below need them first.
  psql_admin postgres -v daemon_pw="$daemon_pw" -v api_pw="$api_pw" -v realtime_pw="$realtime_pw" <<'SQL'
SELECT format('CREATE ROLE %I NOLOGIN %s', r, CASE WHEN r = 'service_role' THEN 'BYPASSRLS' ELSE '' END)
  FROM unnest(ARRAY['anon', 'authenticated', 'service_role']) AS r
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) \gexec
SELECT 'CREATE ROLE awp_daemon LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'awp_daemon') \gexec
SELECT 'CREATE ROLE awp_api LOGIN NOINHERIT' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'awp_api') \gexec
SELECT 'CREATE ROLE awp_realtime LOGIN REPLICATION' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'awp_realtime') \gexec
ALTER ROLE awp_daemon PASSWORD :'daemon_pw';
ALTER ROLE awp_api PASSWORD :'api_pw';
-- The realtime reader's login: it streams the database's changes (a logical replication slot)
-- and nothing else: no membership, no grant (docs/realtime-capture.md).
ALTER ROLE awp_realtime LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS
  PASSWORD :'realtime_pw';
-- Daemons act as the service role; the api-gateway switches per request, as PostgREST does.
GRANT service_role TO awp_daemon;
GRANT anon, authenticated, service_role TO awp_api;
SQL
  umask 077
  mkdir -p "$STATE"
  cat >"$ENV_FILE" <<ENV
# Written by scripts/pg-cluster.sh: the project's own Postgres. Source it: set -a; . $ENV_FILE
AWP_PG_PORT=$PORT
AWP_PG_SOCKET_DIR='$RUN'
AWP_PG_ADMIN_DSN='host=$RUN port=$PORT user=postgres dbname=$DBNAME'
AWP_PG_DAEMON_PASSWORD='$daemon_pw'
AWP_PG_API_PASSWORD='$api_pw'
AWP_PG_REALTIME_PASSWORD='$realtime_pw'
DATABASE_URL='postgresql://awp_daemon:$daemon_pw@127.0.0.1:$PORT/$DBNAME'
AWP_API_DATABASE_URL='postgresql://awp_api:$api_pw@127.0.0.1:$PORT/$DBNAME'
AWP_REALTIME_DATABASE_URL='postgresql://awp_realtime:$realtime_pw@127.0.0.1:$PORT/$DBNAME'
ENV
}

migrate() {
  [[ -x $AWPCTL ]] || die "$AWPCTL is missing: build first (cmake --build build)"
  "$AWPCTL" migrate --database-url "$ADMIN_DSN"
}

# The seeded gateway's own login (sql/0023): what the runner, the dispatcher and the embedder of
# this host connect with. It reaches that gateway's rows only (docs/security.md).
gateway_credential() {
  local gw_pw url
  gw_pw=$(password_for AWP_PG_GATEWAY_PASSWORD)
  url=$("$AWPCTL" gateway credential default --password-stdin --database-url "$ADMIN_DSN" \
          2>/dev/null <<<"$gw_pw")
  umask 077
  sed -i '/^AWP_PG_GATEWAY_PASSWORD=/d; /^AWP_GATEWAY_DATABASE_URL=/d' "$ENV_FILE"
  cat >>"$ENV_FILE" <<ENV
AWP_PG_GATEWAY_PASSWORD='$gw_pw'
AWP_GATEWAY_DATABASE_URL='$url'
ENV
}

case ${1:-} in
  create) create ;;
  start) start ;;
  stop) stop ;;
  destroy) destroy ;;
  up) start; provision; migrate; gateway_credential; log "DATABASE_URL and friends are in $ENV_FILE" ;;
  status) if is_running; then echo "running on 127.0.0.1:$PORT ($DATA)"; else echo "stopped ($DATA)"; exit 3; fi ;;
  env) [[ -f $ENV_FILE ]] || die "no $ENV_FILE: run '$0 up' first"; cat "$ENV_FILE" ;;
  psql) shift; exec psql -X "host=$RUN port=$PORT user=postgres dbname=$DBNAME" "$@" ;;
  *) cat >&2 <<USAGE
usage: $0 up|start|stop|destroy|status|env|psql
  up       create and start the cluster, create the database and login roles, apply migrations,
           create the default gateway's own login (AWP_GATEWAY_DATABASE_URL)
  start    start (creating the cluster when missing)
  stop     fast shutdown
  destroy  stop and delete every file of the cluster
  status   exit 0 when running, 3 when stopped
  env      print the connection settings (DATABASE_URL, AWP_API_DATABASE_URL,
           AWP_REALTIME_DATABASE_URL, AWP_GATEWAY_DATABASE_URL, AWP_PG_ADMIN_DSN)
  psql     open psql as the superuser on the project's database
environment: AWP_PG_PORT (default 54329), AWP_STATE_DIR (default .awp), AWP_PG_DATABASE (awp),
  AWP_PG_SLOT_WAL_KEEP (default 1GB: the most WAL the realtime slot may hold back)
USAGE
     exit 2 ;;
esac
