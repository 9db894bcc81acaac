#!/usr/bin/env bash
# One benchmark run of awp-api-gateway, printed side by side with its peer, a minimal Next.js
# route handler (bench/api/next-app: `next build` + `next start`, GET /api/health -> {ok, ts},
# as the original UI serves it), on the same machine with the same wrk settings:
#   GET /api/health requests/s and p50/p99 of both (wrk -t2 -c100 -d10s --latency, after a
#     3 s warm-up of each);
#   GET /api/auth/session with a real JWT minted by awpctl: token verified, then one round trip
#     to Postgres - a libpq pipeline of set_config(role, claims, local) and the tenant's row
#     read under RLS, one implicit transaction ended by the pipeline's Sync - at 10 and at 100
#     connections, each beside Postgres alone running the same statements in the same shape
#     (pgbench \startpipeline ... \endpipeline, 10 clients, and 16 = the gateway's pool), with
#     the ratio gateway / Postgres alone; and Postgres alone running the old four-round-trip
#     shape (BEGIN; set_config; read; COMMIT) for comparison;
#   idle RSS of awp-api-gateway and of next-server, after start-up, before any load.
# Its own database: a clone of the test template on the project cluster, dropped at exit.
# Usage: bench/api/run.sh [build dir]   (on a fresh checkout too: it builds awp-api-gateway and
# awpctl, starts the project's cluster and makes the template database when missing;
# bench/common.sh. Needs wrk, node and npm: scripts/install-deps.sh with AWP_DEPS=full.) npm
# installs the Next.js app's packages from the registry on first run (node_modules and .next are
# git-ignored; without the registry the peer cannot be built and the run stops, saying so).
# DUR: seconds per wrk or pgbench cell (10). AWP_BENCH_BIN=<dir>: awp-api-gateway from that
# folder. SESSION_ONLY=1: only the authenticated route and Postgres alone (no Next.js, no health).
# API_DB_POOL: the gateway's pool (16, its default) and the pgbench clients beside 100 conns.
# Results also go to $OUT (default /tmp/awp-api-bench).
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-${AWP_BUILD_DIR:-$REPO/build}}
APP=$REPO/bench/api/next-app
OUT=${OUT:-/tmp/awp-api-bench}
API_PORT=${API_PORT:-38180}
NEXT_PORT=${NEXT_PORT:-38181}
DUR=${DUR:-10}
SESSION_ONLY=${SESSION_ONLY:-0}
POOL=${API_DB_POOL:-16}  # the gateway's pool; Postgres alone runs as many clients beside 100 conns
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
tools=(wrk psql); [ "$SESSION_ONLY" = 1 ] || tools+=(node npm)
for t in "${tools[@]}"; do
  command -v "$t" >/dev/null || { echo "missing $t (scripts/install-deps.sh with AWP_DEPS=full)" >&2; exit 1; }
done
mkdir -p "$OUT"
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-api-gateway
BIN=$BENCH_BIN_run
AWPCTL=$BUILD/bin/awpctl

db=awp_bench_api_$$
gw_pid=; next_pid=
cleanup() {
  [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null
  [ -n "$next_pid" ] && kill -- -"$next_pid" 2>/dev/null && wait "$next_pid" 2>/dev/null
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
  return 0
}
trap cleanup EXIT
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
API_DSN="postgresql://awp_api:${AWP_PG_API_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
JWT_SECRET=bench-jwt-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export JWT_SECRET
TENANT=00000000-0000-0000-0000-000000000000
USER_ID=$(cat /proc/sys/kernel/random/uuid)
TOKEN=$("$AWPCTL" token --user-id "$USER_ID" --tenant-id "$TENANT" --email bench@example.com --ttl 3600)

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
mb() { awk -v k="$1" 'BEGIN {printf "%.1f MB", k / 1024}'; }
# wrk's "Latency Distribution" line for a percentile, in ms.
pct() { awk -v p="$2%" '$1 == p { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
  f = (u == "us") ? 0.001 : (u == "s") ? 1000 : (u == "m") ? 60000 : 1; printf "%.2f", v * f }' "$1"; }
rps() { awk '/^Requests\/sec/ {printf "%.0f", $2}' "$1"; }
errs() { awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' "$1"; }
wait_http() {  # url
  for _ in $(seq 1 150); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.2; done
  echo "no answer from $1" >&2; return 1
}
bench() {  # name, connections, url, extra wrk args...
  local name=$1 c=$2 url=$3; shift 3
  wrk -t2 -c"$c" -d"$DUR"s --latency "$@" "$url" >"$OUT/$name.txt"
}

echo "== awp-api-gateway benchmark ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ))"

# 1. The Next.js peer: packages from the registry, a production build, next start.
NEXT_VERSION=-; next_idle=0
if [ "$SESSION_ONLY" != 1 ]; then
( cd "$APP"
  if [ ! -d node_modules/next ]; then
    # npm ci when the lock file satisfies this npm (newer ones want every platform's optional
    # package listed), else npm install, which keeps to the lock file's versions.
    npm ci --no-audit --no-fund --loglevel=error 2>/dev/null ||
      npm install --no-audit --no-fund --loglevel=error
  fi
  NEXT_TELEMETRY_DISABLED=1 npx --no-install next build >"$OUT/next-build.log" 2>&1 ) ||
  { echo "next build failed (see $OUT/next-build.log)" >&2; exit 1; }
NEXT_VERSION=$(node -p "require('$APP/node_modules/next/package.json').version")
( cd "$APP" && NODE_ENV=production NEXT_TELEMETRY_DISABLED=1 exec setsid node node_modules/next/dist/bin/next start -H 127.0.0.1 -p "$NEXT_PORT" ) >"$OUT/next.log" 2>&1 &
next_pid=$!
wait_http "http://127.0.0.1:$NEXT_PORT/api/health"
sleep 2
next_idle=$(rss_kb "$next_pid")
fi

# 2. awp-api-gateway with its defaults (threads = cores, pool 16, access log on).
rm -rf "$OUT/config"
API_PORT=$API_PORT API_DB_POOL=$POOL AWP_API_DATABASE_URL=$API_DSN AWP_CONFIG_DIR=$OUT/config AGENTS_DIR=$OUT/agents \
  API_TEMPLATES_DIR=$REPO/deploy/templates API_CONNECTORS_DIR=$REPO/deploy/connectors \
  "$BIN/awp-api-gateway" 2>"$OUT/gateway.log" &
gw_pid=$!
wait_http "http://127.0.0.1:$API_PORT/api/health"
sleep 2
gw_idle=$(rss_kb "$gw_pid")
session=$(curl -fsS -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$API_PORT/api/auth/session")
case $session in *'"tenant":{"id":"'$TENANT'"'*) ;; *) echo "unexpected session answer: $session" >&2; exit 1 ;; esac

# 3. Health, both (warm-up first: Node's JIT, both servers' allocators).
if [ "$SESSION_ONLY" != 1 ]; then
DUR=3 bench warm-next 100 "http://127.0.0.1:$NEXT_PORT/api/health"
DUR=3 bench warm-awp 100 "http://127.0.0.1:$API_PORT/api/health"
bench health-next 100 "http://127.0.0.1:$NEXT_PORT/api/health"
bench health-awp 100 "http://127.0.0.1:$API_PORT/api/health"
kill -- -"$next_pid"; wait "$next_pid" 2>/dev/null || true; next_pid=
fi

# 4. The authenticated route: JWT + one round trip per request, each cell beside Postgres alone
#    running the same statements at the same concurrency (the gateway idle meanwhile): the
#    10-connection cell beside 10 pgbench clients, the 100-connection cell beside as many
#    clients as the gateway's pool (16: the gateway never runs more statements at once).
claims="{\"sub\":\"$USER_ID\",\"role\":\"authenticated\",\"app_metadata\":{\"tenant_id\":\"$TENANT\"}}"
set_claims="SELECT set_config('role', 'authenticated', true), set_config('request.jwt.claims', '$claims', true);"
read_row="SELECT public.current_tenant_id()::text AS tenant, (SELECT row_to_json(x) FROM (SELECT t.id, t.name, t.slug FROM public.tenants t WHERE t.id = public.current_tenant_id()) x)::text AS tenant_row;"
# What the gateway sends now: one pipeline, one Sync, no BEGIN/COMMIT (an implicit transaction).
printf '%s\n' '\startpipeline' "$set_claims" "$read_row" '\endpipeline' >"$OUT/session-pipeline.sql"
# What it sent before: four statements, four round trips.
printf '%s\n' 'BEGIN;' "$set_claims" "$read_row" 'COMMIT;' >"$OUT/session-4rt.sql"
pgb() {  # name, clients, script: pgbench -M extended (unnamed statements, as the gateway)
  rm -f "$OUT/pglog-$1".*
  if [ -x "$PGBENCH" ]; then
    "$PGBENCH" -n -M extended -c "$2" -j 2 -T "$DUR" -l --log-prefix="$OUT/pglog-$1" -f "$3" \
      "$API_DSN" >"$OUT/pgbench-$1.txt" 2>&1 || true
  fi
}
pg_tps() { awk '/^tps/ {printf "%.0f", $3}' "$OUT/pgbench-$1.txt" 2>/dev/null; }
# A percentile of pgbench's per-transaction log (3rd field: latency in us), in ms.
pg_pct() { cat "$OUT/pglog-$1".* 2>/dev/null | awk '{print $3}' | sort -n |
  awk -v p="$2" '{a[NR] = $1} END {i = int(NR * p / 100); if (i < 1) i = 1; if (NR) printf "%.2f", a[i] / 1000; else printf "n/a"}'; }
auth=(-H "Authorization: Bearer $TOKEN")
DUR=3 bench warm-session 100 "http://127.0.0.1:$API_PORT/api/auth/session" "${auth[@]}"
DUR=3 pgb warm-pg "$POOL" "$OUT/session-pipeline.sql"
bench session-10 10 "http://127.0.0.1:$API_PORT/api/auth/session" "${auth[@]}"
pgb pipe-10 10 "$OUT/session-pipeline.sql"
bench session-100 100 "http://127.0.0.1:$API_PORT/api/auth/session" "${auth[@]}"
pgb pipe-16 "$POOL" "$OUT/session-pipeline.sql"
pgb old-16 "$POOL" "$OUT/session-4rt.sql"
gw_after=$(rss_kb "$gw_pid")
kill "$gw_pid"; wait "$gw_pid" 2>/dev/null || true; gw_pid=

verdict() { awk -v ok="$1" 'BEGIN {print ok ? "met" : "MISSED"}'; }
pct_of() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.0f", 100 * a / b; else printf "0"}'; }
echo
echo "== results (wrk -t2, pgbench -j2, ${DUR}s per cell; the machine is shared, figures move with its load)"
if [ "$SESSION_ONLY" != 1 ]; then
  awp_rps=$(rps "$OUT/health-awp.txt"); next_rps=$(rps "$OUT/health-next.txt")
  ratio=$(awk -v a="$awp_rps" -v n="$next_rps" 'BEGIN {printf "%.1f", (n > 0) ? a / n : 0}')
  printf '%-44s %-22s %-22s %s\n' "" "awp-api-gateway" "Next.js $NEXT_VERSION" "target"
  printf '%-44s %-22s %-22s %s\n' "GET /api/health req/s, 100 conns" "$awp_rps" "$next_rps" \
    ">= 10x Next: ${ratio}x $(verdict "$(awk -v r="$ratio" 'BEGIN {print (r >= 10)}')")"
  printf '%-44s %-22s %-22s\n' "GET /api/health p50 / p99" \
    "$(pct "$OUT/health-awp.txt" 50) / $(pct "$OUT/health-awp.txt" 99) ms" \
    "$(pct "$OUT/health-next.txt" 50) / $(pct "$OUT/health-next.txt" 99) ms"
  printf '%-44s %-22s %-22s %s\n' "idle RSS after start-up" "$(mb "$gw_idle")" "$(mb "$next_idle")" \
    "<= 15 MB: $(verdict "$(awk -v k="$gw_idle" 'BEGIN {print (k <= 15360)}')")"
else
  printf '%-44s %-22s\n' "idle RSS after start-up" "$(mb "$gw_idle")"
fi
printf '%-44s %-22s\n' "RSS after the runs" "$(mb "$gw_after")"
echo
echo "== GET /api/auth/session beside Postgres alone running the same statements"
s10=$(rps "$OUT/session-10.txt"); s100=$(rps "$OUT/session-100.txt")
p10=$(pg_tps pipe-10); p16=$(pg_tps pipe-16); o16=$(pg_tps old-16)
s10_p99=$(pct "$OUT/session-10.txt" 99)
r10=$(pct_of "$s10" "$p10"); r100=$(pct_of "$s100" "$p16")
printf '%-52s %-14s %-18s %s\n' "" "req/s | tx/s" "p50 / p99" "target"
printf '%-52s %-14s %-18s %s\n' "gateway, 10 conns" "$s10" \
  "$(pct "$OUT/session-10.txt" 50) / $s10_p99 ms" \
  "p99 <= 5 ms: $(verdict "$(awk -v p="$s10_p99" 'BEGIN {print (p <= 5)}')")"
printf '%-52s %-14s %-18s\n' "Postgres alone, 10 clients, 1 round trip (pipeline)" "$p10" \
  "$(pg_pct pipe-10 50) / $(pg_pct pipe-10 99) ms"
printf '%-52s %-14s %-18s %s\n' "  gateway / Postgres alone, 10" "$r10 %" "" \
  ">= 85 %: $(verdict "$(awk -v r="$r10" 'BEGIN {print (r >= 85)}')")"
printf '%-52s %-14s %-18s\n' "gateway, 100 conns" "$s100" \
  "$(pct "$OUT/session-100.txt" 50) / $(pct "$OUT/session-100.txt" 99) ms"
printf '%-52s %-14s %-18s\n' "Postgres alone, $POOL clients (the pool), 1 round trip" "$p16" \
  "$(pg_pct pipe-16 50) / $(pg_pct pipe-16 99) ms"
printf '%-52s %-14s %-18s %s\n' "  gateway / Postgres alone, 100 conns : $POOL clients" "$r100 %" "" \
  ">= 85 %: $(verdict "$(awk -v r="$r100" 'BEGIN {print (r >= 85)}')")"
printf '%-52s %-14s %-18s\n' "Postgres alone, $POOL clients, old 4 round trips" "$o16" \
  "$(pg_pct old-16 50) / $(pg_pct old-16 99) ms"
printf '%-52s %-14s\n' "  gateway (100 conns) / old 4-round-trip shape" "$(pct_of "$s100" "$o16") %"
for f in health-awp health-next session-100 session-10; do
  [ -f "$OUT/$f.txt" ] || continue
  e=$(errs "$OUT/$f.txt"); [ -n "$e" ] && echo "  $f: $e"
done
exit 0
