#!/usr/bin/env bash
# Issue 37, finding 4: how fast the data API answers a hostile request it must refuse, against
# the 50 ms goal, as a ratio. The request of the finding: GET /rest/v1/tasks with 200 embeds
# (a0:agents(*),...,a199:agents(*), 2.9 KB), anonymous and as a signed-in user; it used to make
# Postgres plan 200 joins before privileges were checked (401 after 14.2 s as anon, 57014
# after 31.5 s as a user). Also, for scale, one embed beyond API_REST_MAX_EMBEDS and one request
# within it (served), each N times (curl's time_total: connect, send, answer; one connection per
# request), median and p99 in ms.
# Usage: bench/api/hostile.sh [build dir]. N: requests per row (50). API_PORT: the gateway's port.
# Results in $OUT (/tmp/awp-hostile-bench).
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-${AWP_BUILD_DIR:-$REPO/build}}
OUT=${OUT:-/tmp/awp-hostile-bench}
API_PORT=${API_PORT:-38181}
N=${N:-50}
GOAL_MS=50
for t in psql curl; do
  command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }
done
mkdir -p "$OUT"
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-api-gateway
BIN=$BENCH_BIN_run

db=awp_bench_hostile_$$
gw_pid=
cleanup() {
  [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
  return 0
}
trap cleanup EXIT
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
ADMIN="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$db}"
[[ $ADMIN == *"dbname=$db"* ]] || ADMIN="$AWP_PG_ADMIN_DSN dbname=$db"
API_DSN="postgresql://awp_api:${AWP_PG_API_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
TENANT=aaaaaaaa-0000-0000-0000-000000000001
psql -X -q -v ON_ERROR_STOP=1 "$ADMIN" <<SQL >/dev/null
INSERT INTO tenants (id, name, slug) VALUES ('$TENANT', 'A', 'bench-a');
INSERT INTO agents (tenant_id, name, slug) SELECT '$TENANT', 'Agent ' || i, 'agent-' || i
FROM generate_series(1, 200) i;
INSERT INTO tasks (tenant_id, title, status) SELECT '$TENANT', 'Task ' || i, 'todo'
FROM generate_series(1, 2000) i;
ANALYZE;
SQL
JWT_SECRET=bench-jwt-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export JWT_SECRET
TOKEN=$("$BUILD/bin/awpctl" token --user-id "$(cat /proc/sys/kernel/random/uuid)" --tenant-id "$TENANT" --ttl 7200)

rm -rf "$OUT/config"
# The rates off: this measures the refusal of the request itself, many times from one address.
API_PORT=$API_PORT AWP_API_DATABASE_URL=$API_DSN AWP_CONFIG_DIR=$OUT/config API_ACCESS_LOG=false \
  API_RATE_REST_ADDRESS=off API_RATE_REST_USER=off API_TEMPLATES_DIR=$REPO/deploy/templates \
  API_CONNECTORS_DIR=$REPO/deploy/connectors "$BIN/awp-api-gateway" 2>"$OUT/gateway.log" &
gw_pid=$!
for _ in $(seq 1 150); do curl -fsS -o /dev/null "http://127.0.0.1:$API_PORT/api/health" 2>/dev/null && break; sleep 0.2; done

embeds() {  # n: select=id,a0:agents(*),...
  local s=select=id i
  for ((i = 0; i < $1; i++)); do s+=",a$i:agents(*)"; done
  printf '%s' "$s"
}
base="http://127.0.0.1:$API_PORT/rest/v1/tasks"
hostile="$base?$(embeds 200)"
over="$base?$(embeds 21)"
within="$base?select=id,a:agents!tasks_assignee_agent_id_fkey(id)&limit=10"
# One row: name, url, expected status, auth (anon|user). Prints median and p99 of time_total.
row() {
  local name=$1 url=$2 want=$3 who=$4 i code t
  local hdr=()
  [ "$who" = user ] && hdr=(-H "Authorization: Bearer $TOKEN" -H "apikey: $TOKEN")
  : >"$OUT/$name.times"
  # A first request warms the gateway's schema cache (not counted).
  curl -s -o /dev/null "${hdr[@]}" "$url" || true
  for ((i = 0; i < N; i++)); do
    read -r code t < <(curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "${hdr[@]}" "$url")
    [ "$code" = "$want" ] || { echo "$name: answered $code, expected $want" >&2; exit 1; }
    echo "$t" >>"$OUT/$name.times"
  done
  sort -n "$OUT/$name.times" | awk -v n="$name" -v goal="$GOAL_MS" '
    {a[NR] = $1 * 1000} END {
      m = a[int((NR + 1) / 2)]; p = a[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
      printf "%-52s %8.2f %8.2f   %5.2f of the %d ms goal\n", n, m, p, p / goal, goal }'
}
echo "== finding 4: hostile requests ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), N=$N)"
printf '%-52s %8s %8s   %s\n' "" "p50 ms" "p99 ms" "p99 / goal"
row "200 embeds (2.9 KB), anon -> 400" "$hostile" 400 anon
row "200 embeds (2.9 KB), a user -> 400" "$hostile" 400 user
row "21 embeds (one past the bound), a user -> 400" "$over" 400 user
row "1 embed within the bound, a user -> 200 (served)" "$within" 200 user
