#!/usr/bin/env bash
# The data API's client tests (ctest label data-api; tests/data-api/README.md): the unmodified
# @supabase/supabase-js in node drives the real awp-api-gateway (and awp-embedder, for the
# knowledge searches) on a scratch database cloned from the test template and seeded with two
# tenants. Needs the project's cluster (scripts/test.sh starts it and exports its settings; run
# alone, this reads .awp/cluster.env) and a build (AWP_BIN_DIR, default build/bin).
# Usage: tests/data-api/run.sh [test file ...]   (default: every *.test.mjs here)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${AWP_BIN_DIR:-$REPO/build/bin}
log() { echo "data-api: $*" >&2; }
die() { log "$*"; exit 1; }

if [[ -z ${AWP_PG_ADMIN_DSN:-} ]]; then
  env_file=${AWP_STATE_DIR:-$REPO/.awp}/cluster.env
  [[ -f $env_file ]] || die "no $env_file: run scripts/test.sh data-api, or scripts/pg-cluster.sh up"
  set -a
  # shellcheck disable=SC1090
  . "$env_file"
  set +a
fi
for b in awp-api-gateway awp-embedder awpctl; do
  [[ -x $BIN/$b ]] || die "$BIN/$b is missing: build first (scripts/build.sh)"
done

# AWP_DATA_API_SHARD=k/n runs the k-th of n shares of the files (node's --test-shard) on this
# run's own database, gateway and embedder: ctest runs the shares side by side (the files mostly
# wait on the gateway and the database).
shard=()
if [[ -n ${AWP_DATA_API_SHARD:-} ]]; then
  [[ $AWP_DATA_API_SHARD =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] &&
    ((BASH_REMATCH[1] <= BASH_REMATCH[2])) ||
    die "AWP_DATA_API_SHARD must be k/n with 1 <= k <= n, not '$AWP_DATA_API_SHARD'"
  shard=(--test-shard="$AWP_DATA_API_SHARD")
fi
# node >= 22 and the pinned client (tests/data-api/install.sh).
node=$("$HERE/install.sh")

q() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$@"; }
admin="$AWP_PG_ADMIN_DSN dbname=postgres"
# ctest's fixture builds the template; run alone, make it when it is missing.
if ! q "$admin" -tAc "SELECT 1 FROM pg_database WHERE datname = 'awp_test_template'" | grep -q 1; then
  log "no template database: making it (tests/support/make-template.sh)"
  "$REPO/tests/support/make-template.sh" "$BIN/awpctl"
fi
# awp_t_ names are swept by the next template build when a killed run leaves one behind.
db=awp_t_data_api_$(openssl rand -hex 5)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/awp-data-api.XXXXXX")
pids=()
status=1
# Realtime's replication slots, the suite's own (REALTIME_SLOT is their prefix, each gateway adds
# its instance; slot names are the cluster's): dropped before its database, which a slot would
# keep from being dropped.
slot=awp_t_rt_$(openssl rand -hex 5)
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  q "$admin" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                 WHERE left(slot_name, length('$slot') + 1) = '${slot}_' AND NOT active" \
    >/dev/null 2>&1 || true
  if ((status != 0)); then
    for f in "$scratch"/*.log; do
      [[ -f $f ]] || continue
      log "last lines of $(basename "$f"):"
      tail -n 40 "$f" >&2
    done
  fi
  q "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
  rm -rf "$scratch"
}
trap cleanup EXIT
q "$admin" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
db_admin="$AWP_PG_ADMIN_DSN dbname=$db"

export AWP_DATA_API_ADMIN_DSN=$db_admin AWPCTL=$BIN/awpctl AWP_DATA_API_README=$REPO/README.md
"$node" "$HERE/lib/seed.mjs"

free_port() {
  "$node" -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => {
    console.log(s.address().port); s.close() })'
}
api_port=$(free_port)
embedder_port=$(free_port)
host=127.0.0.1:$AWP_PG_PORT
# One embedder for every tenant (a service_role member's login and no GATEWAY_ID), with the
# lexical fallback model: the suite needs real vectors of the stored texts, not a good model.
env -i PATH=/usr/bin:/bin HOME="$scratch" \
  DATABASE_URL="postgresql://awp_daemon:$AWP_PG_DAEMON_PASSWORD@$host/$db" \
  EMBEDDER_BIND=127.0.0.1 EMBEDDER_PORT="$embedder_port" EMBEDDING_MODEL_DIR= \
  SAFETY_POLL=2 LOG_LEVEL=info \
  "$BIN/awp-embedder" 2>"$scratch/embedder.log" &
pids+=($!)
# The gateway as scripts/run-stack.sh runs it: awp_api's login, its own secrets, no public URL
# set (so GET /api/config answers the address the request came to). The tests get the JWT
# secret to forge tokens the gateway must refuse (expired, an unknown role).
# The service-role key is the admin API's credential (admin.test.mjs), as the product's
# onboarding is given it; storage.test.mjs acts with it as a gateway host. The object store's
# folder: storage.test.mjs checks that the bytes on disk are exactly the rows' once deletions
# are reaped (a short grace and reaper interval here).
export AWP_DATA_API_JWT_SECRET AWP_DATA_API_SERVICE_ROLE_KEY AWP_DATA_API_STORAGE_DIR
AWP_DATA_API_JWT_SECRET=$(openssl rand -hex 32)
AWP_DATA_API_SERVICE_ROLE_KEY=$(openssl rand -hex 32)
AWP_DATA_API_STORAGE_DIR=$scratch/storage
env -i PATH=/usr/bin:/bin HOME="$scratch" \
  JWT_SECRET="$AWP_DATA_API_JWT_SECRET" SERVICE_ROLE_KEY="$AWP_DATA_API_SERVICE_ROLE_KEY" \
  STORAGE_DIR="$AWP_DATA_API_STORAGE_DIR" STORAGE_DELETE_GRACE=1 STORAGE_REAPER_INTERVAL=1 \
  AWP_API_DATABASE_URL="postgresql://awp_api:$AWP_PG_API_PASSWORD@$host/$db" \
  REALTIME_DATABASE_URL="postgresql://awp_realtime:$AWP_PG_REALTIME_PASSWORD@$host/$db" \
  REALTIME_SLOT="$slot" \
  API_BIND=127.0.0.1 API_PORT="$api_port" API_THREADS=2 API_DB_POOL=4 \
  EMBEDDER_URL="http://127.0.0.1:$embedder_port" \
  AWP_CONFIG_DIR="$scratch/config" OPENCLAW_STATE_DIR="$scratch/openclaw" \
  API_TEMPLATES_DIR="$REPO/deploy/templates" API_CONNECTORS_DIR="$REPO/deploy/connectors" \
  LOG_LEVEL=info \
  "$BIN/awp-api-gateway" 2>"$scratch/gateway.log" &
pids+=($!)

up() { curl -fsS -o /dev/null --max-time 2 "$1"; }
for _ in $(seq 1 150); do
  if up "http://127.0.0.1:$api_port/api/health" && up "http://127.0.0.1:$embedder_port/healthz"; then
    break
  fi
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || die "a daemon exited at start"; done
  sleep 0.1
done
up "http://127.0.0.1:$api_port/api/health" || die "awp-api-gateway did not come up in 15 s"
up "http://127.0.0.1:$embedder_port/healthz" || die "awp-embedder did not come up in 15 s"

export AWP_DATA_API_URL=http://127.0.0.1:$api_port
# For the files that start a daemon of their own (realtime-runner: a command runner with the real
# runtime, AWP_OPENCLAW, for a tenant of its own).
export AWP_BIN_DIR=$BIN AWP_REPO=$REPO
export AWP_DATA_API_DAEMON_DSN="postgresql://awp_daemon:$AWP_PG_DAEMON_PASSWORD@$host/$db"
# For the files that start more gateways on the same database (realtime-gateways: several
# api-gateway processes behind one address), with the suite's slot prefix and a scratch folder.
export AWP_DATA_API_API_DSN="postgresql://awp_api:$AWP_PG_API_PASSWORD@$host/$db"
export AWP_DATA_API_REALTIME_DSN="postgresql://awp_realtime:$AWP_PG_REALTIME_PASSWORD@$host/$db"
export AWP_DATA_API_SLOT=$slot AWP_DATA_API_SCRATCH=$scratch
files=("$@")
((${#files[@]})) || files=("$HERE"/*.test.mjs)
log "gateway on $AWP_DATA_API_URL, database $db; ${#files[@]} test files${shard:+, share $AWP_DATA_API_SHARD}"
# One file at a time: they share the seeded database and some sign users out.
set +e
"$node" --test --test-concurrency=1 "${shard[@]}" --test-reporter=spec --test-timeout=120000 "${files[@]}"
status=$?
set -e
exit $status
