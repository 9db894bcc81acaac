#!/usr/bin/env bash
# Realtime's restart drills through the real @supabase/supabase-js (ctest label data-api): a
# private Postgres cluster of its own (scripts/pg-cluster.sh under a scratch AWP_STATE_DIR and a
# free port), so restarting Postgres touches no other test; a tenant and a user made the way an
# operator makes them; then tests/data-api/drills/*.mjs, which start and kill the gateway
# themselves. The cluster is destroyed afterwards. Needs a build (AWP_BIN_DIR, default build/bin).
# Usage: tests/data-api/drills.sh
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${AWP_BIN_DIR:-$REPO/build/bin}
log() { echo "drills: $*" >&2; }
for b in awp-api-gateway awpctl; do
  [[ -x $BIN/$b ]] || { log "$BIN/$b is missing: build first (scripts/build.sh)"; exit 1; }
done
node=$("$HERE/install.sh")
scratch=$(mktemp -d "${TMPDIR:-/tmp}/awp-drills.XXXXXX")
free_port() {
  "$node" -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => {
    console.log(s.address().port); s.close() })'
}
export DRILL_STATE_DIR=$scratch/state DRILL_PG_PORT DRILL_API_PORT DRILL_LOG_DIR=$scratch
DRILL_PG_PORT=$(free_port)
DRILL_API_PORT=$(free_port)
status=1
cleanup() {
  # The gateway the drill started last (it writes its pid), should the drill itself have died.
  if [[ -f $scratch/gateway.pid ]]; then kill -KILL "$(cat "$scratch/gateway.pid")" 2>/dev/null || true; fi
  if ((status != 0)) && [[ -f $scratch/gateway.log ]]; then
    log "last lines of gateway.log:"; tail -n 30 "$scratch/gateway.log" >&2
  fi
  AWP_STATE_DIR=$DRILL_STATE_DIR AWP_PG_PORT=$DRILL_PG_PORT "$REPO/scripts/pg-cluster.sh" destroy >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT

AWP_STATE_DIR=$DRILL_STATE_DIR AWP_PG_PORT=$DRILL_PG_PORT AWPCTL=$BIN/awpctl \
  "$REPO/scripts/pg-cluster.sh" up >"$scratch/cluster.log" 2>&1 || { cat "$scratch/cluster.log" >&2; exit 1; }
set -a
# shellcheck disable=SC1091
. "$DRILL_STATE_DIR/cluster.env"
set +a
export DRILL_ADMIN_DSN=$AWP_PG_ADMIN_DSN DRILL_API_DSN=$AWP_API_DATABASE_URL
export DRILL_RT_DSN=$AWP_REALTIME_DATABASE_URL DRILL_BIN=$BIN DRILL_REPO=$REPO
export DRILL_TENANT=d0000000-0000-4000-8000-00000000000d DRILL_EMAIL=drill@dock.test
export DRILL_PASSWORD=drill-suite-password-1 DRILL_JWT_SECRET
DRILL_JWT_SECRET=$(openssl rand -hex 32)
psql -X -q -v ON_ERROR_STOP=1 "$AWP_PG_ADMIN_DSN" \
  -c "INSERT INTO public.tenants (id, name, slug) VALUES ('$DRILL_TENANT', 'Dock', 'dock')" >/dev/null
AWP_USER_PASSWORD=$DRILL_PASSWORD "$BIN/awpctl" --database-url "$AWP_PG_ADMIN_DSN" user add \
  --email "$DRILL_EMAIL" --tenant-id "$DRILL_TENANT" >/dev/null
unset AWP_PG_ADMIN_DSN AWP_API_DATABASE_URL AWP_REALTIME_DATABASE_URL DATABASE_URL

cd "$HERE"
set +e
"$node" --test --test-concurrency=1 --test-reporter=spec "$HERE"/drills/*.mjs
status=$?
set -e
exit $status
