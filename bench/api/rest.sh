#!/usr/bin/env bash
# The data API (/rest/v1) of awp-api-gateway beside Postgres alone running the statements the
# gateway generates, in the same run:
#   A. GET /rest/v1/agents?gateway_id=eq.<id>&order=name            (the spec's first pattern)
#   B. GET /rest/v1/tasks?select=*,assignee_agent:agents!${HINT:-tasks_assignee_agent_id_fkey}(id,name,slug)&status=in.(todo,in_progress,blocked)&order=created_at.desc&limit=50
#      (an embedded read, the UI's own embed hint)
# each at 10 and 100 connections (wrk -t2 --latency, a user token of tenant A, rows of two
# tenants in the tables), p50/p99, and Postgres alone running exactly the gateway's setup and main
# statement (bench/api/rest_statement prints them through awp::rest, the code the gateway runs)
# in one pipeline per transaction (pgbench -M extended, 10 clients beside 10 connections, the
# pool's 16 beside 100), with the ratio gateway / Postgres alone; the gateway's CPU per request
# (/proc utime+stime over the cell / requests) and its RSS; and per request in each path the
# whole machine's busy CPU and the client's own (wrk or pgbench), for the arithmetic of what a
# second hop costs on a machine whose cores Postgres, the client and the gateway share.
# Usage: bench/api/rest.sh [build dir]. DUR: seconds per cell (10). AGENTS / TASKS: rows per
# tenant (200 / 2000). Results in $OUT (/tmp/awp-rest-bench).
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-${AWP_BUILD_DIR:-$REPO/build}}
OUT=${OUT:-/tmp/awp-rest-bench}
API_PORT=${API_PORT:-38182}
DUR=${DUR:-10}
AGENTS=${AGENTS:-200}
TASKS=${TASKS:-2000}
POOL=${API_DB_POOL:-16}
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
for t in wrk psql curl; do
  command -v "$t" >/dev/null || { echo "missing $t (scripts/install-deps.sh with AWP_DEPS=full)" >&2; exit 1; }
done
mkdir -p "$OUT"
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-api-gateway rest_statement
BIN=$BENCH_BIN_run
STMT=$BUILD/bin/rest_statement

db=awp_bench_rest_$$
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

# Two tenants, a gateway each, $AGENTS agents and $TASKS tasks each (assigned round-robin).
psql -X -q -v ON_ERROR_STOP=1 "$ADMIN" <<SQL >/dev/null
INSERT INTO tenants (id, name, slug) VALUES
  ('aaaaaaaa-0000-0000-0000-000000000001', 'A', 'bench-a'),
  ('bbbbbbbb-0000-0000-0000-000000000002', 'B', 'bench-b');
INSERT INTO gateways (tenant_id, slug, label, status)
SELECT t, 'gw-' || s, 'Gateway ' || s, 'ready'
FROM (VALUES ('aaaaaaaa-0000-0000-0000-000000000001'::uuid, 'a'),
             ('bbbbbbbb-0000-0000-0000-000000000002'::uuid, 'b')) v(t, s);
INSERT INTO agents (tenant_id, gateway_id, name, slug)
SELECT g.tenant_id, g.id, 'Agent ' || lpad(i::text, 4, '0'), g.slug || '-agent-' || i
FROM gateways g, generate_series(1, $AGENTS) i WHERE g.slug IN ('gw-a', 'gw-b');
INSERT INTO tasks (tenant_id, title, status, assignee_type, assignee_agent_id)
SELECT a.tenant_id, 'Task ' || i, (ARRAY['todo','in_progress','blocked','done']::task_status[])[1 + i % 4],
       'agent', a.id
FROM (VALUES ('aaaaaaaa-0000-0000-0000-000000000001'::uuid),
             ('bbbbbbbb-0000-0000-0000-000000000002'::uuid)) t(id)
CROSS JOIN generate_series(1, $TASKS) i
JOIN LATERAL (SELECT id, tenant_id FROM agents WHERE tenant_id = t.id ORDER BY slug
              OFFSET (i % $AGENTS) LIMIT 1) a ON true;
ANALYZE;
SQL
TENANT=aaaaaaaa-0000-0000-0000-000000000001
GW=$(psql -X -qAt "$ADMIN" -c "SELECT id FROM gateways WHERE slug = 'gw-a'")
JWT_SECRET=bench-jwt-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export JWT_SECRET
USER_ID=$(cat /proc/sys/kernel/random/uuid)
TOKEN=$("$BUILD/bin/awpctl" token --user-id "$USER_ID" --tenant-id "$TENANT" --email bench@example.com --ttl 7200)
# The claims the gateway hands to SQL for that token (the token's payload, verified).
CLAIMS=$(printf '%s' "$TOKEN" | cut -d. -f2 | tr '_-' '/+' | base64 -d 2>/dev/null || true)
[ -n "$CLAIMS" ] || CLAIMS=$(printf '%s==' "$TOKEN" | cut -d. -f2 | tr '_-' '/+' | base64 -d 2>/dev/null || true)

QA_PATH=/agents; QA_QUERY="gateway_id=eq.$GW&order=name"
QB_PATH=/tasks
QB_QUERY="select=*,assignee_agent:agents!${HINT:-tasks_assignee_agent_id_fkey}(id,name,slug)&status=in.(todo,in_progress,blocked)&order=created_at.desc&limit=50"

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
pct() { awk -v p="$2%" '$1 == p { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
  f = (u == "us") ? 0.001 : (u == "s") ? 1000 : (u == "m") ? 60000 : 1; printf "%.2f", v * f }' "$1"; }
rps() { awk '/^Requests\/sec/ {printf "%.0f", $2}' "$1"; }
reqs() { awk '/requests in/ {print $1}' "$1"; }
errs() { awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' "$1"; }

rm -rf "$OUT/config"
# The request rates stay on (every request is charged to its address's and its user's bucket)
# but high enough that no request of one client at full speed is refused: the cost of the
# limiter is in the figures, its refusals are not.
API_RATE_REST_ADDRESS=${API_RATE_REST_ADDRESS:-1000000/s} API_RATE_REST_USER=${API_RATE_REST_USER:-1000000/s} \
API_PORT=$API_PORT API_DB_POOL=$POOL AWP_API_DATABASE_URL=$API_DSN AWP_CONFIG_DIR=$OUT/config \
  API_ACCESS_LOG=${API_ACCESS_LOG:-true} API_TEMPLATES_DIR=$REPO/deploy/templates \
  API_CONNECTORS_DIR=$REPO/deploy/connectors "$BIN/awp-api-gateway" 2>"$OUT/gateway.log" &
gw_pid=$!
for _ in $(seq 1 150); do curl -fsS -o /dev/null "http://127.0.0.1:$API_PORT/api/health" 2>/dev/null && break; sleep 0.2; done
URL_A="http://127.0.0.1:$API_PORT/rest/v1$QA_PATH?$QA_QUERY"
URL_B="http://127.0.0.1:$API_PORT/rest/v1$QB_PATH?$QB_QUERY"
hdr=(-H "Authorization: Bearer $TOKEN" -H "apikey: $TOKEN")
n_a=$(curl -fsS "${hdr[@]}" "$URL_A" | grep -o '"slug"' | wc -l)
n_b=$(curl -fsS "${hdr[@]}" "$URL_B" | grep -o '"assignee_agent":{' | wc -l)
[ "$n_a" = "$AGENTS" ] || { echo "query A answered $n_a agents, expected $AGENTS" >&2; exit 1; }
[ "$n_b" = 50 ] || { echo "query B answered $n_b embedded tasks, expected 50" >&2; exit 1; }
gw_idle=$(rss_kb "$gw_pid")

# The gateway's statements for each query, as pgbench scripts.
"$STMT" "$API_DSN" authenticated "$CLAIMS" GET "$QA_PATH" "$QA_QUERY" "$OUT/a.defs" >"$OUT/a.sql"
"$STMT" "$API_DSN" authenticated "$CLAIMS" GET "$QB_PATH" "$QB_QUERY" "$OUT/b.defs" >"$OUT/b.sql"

# The whole machine's busy CPU (every process: Postgres, the client, the gateway, anything else
# running) over a cell, and the client's own (wrk or pgbench: bash's time), so the CPU each
# request costs in each path is printed beside the throughput.
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
client_time() {  # file command...: the command's user+system seconds into file
  local TIMEFORMAT='%U %S'
  { time "${@:2}" ; } 2>"$1.time"
  awk '{printf "%.3f", $1 + $2}' "$1.time" >"$1"
}
bench() {  # name connections url
  local before after b0 b1
  before=$(cpu_ticks "$gw_pid"); b0=$(busy_ticks)
  client_time "$OUT/$1.client" wrk -t2 -c"$2" -d"$DUR"s --latency "${hdr[@]}" "$3" >"$OUT/$1.txt"
  after=$(cpu_ticks "$gw_pid"); b1=$(busy_ticks)
  echo $((after - before)) >"$OUT/$1.cpu"
  echo $((b1 - b0)) >"$OUT/$1.busy"
}
pgb() {  # name clients script defs
  local defs=()
  while IFS= read -r line; do defs+=(-D "$line"); done <"$4"
  local b0 b1
  rm -f "$OUT/pglog-$1".*
  b0=$(busy_ticks)
  client_time "$OUT/pgbench-$1.client" "$PGBENCH" -n -M extended -c "$2" -j 2 -T "$DUR" -l \
    --log-prefix="$OUT/pglog-$1" "${defs[@]}" -f "$3" "$API_DSN" >"$OUT/pgbench-$1.txt" 2>&1 || true
  b1=$(busy_ticks)
  echo $((b1 - b0)) >"$OUT/pgbench-$1.busy"
}
pg_tps() { awk '/^tps/ {printf "%.0f", $3}' "$OUT/pgbench-$1.txt" 2>/dev/null; }
pg_pct() { cat "$OUT/pglog-$1".* 2>/dev/null | awk '{print $3}' | sort -n |
  awk -v p="$2" '{a[NR] = $1} END {i = int(NR * p / 100); if (i < 1) i = 1; if (NR) printf "%.2f", a[i] / 1000; else printf "n/a"}'; }

echo "== data API benchmark ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ))"
DUR=3 bench warm-a 100 "$URL_A"
DUR=3 pgb warm-pa "$POOL" "$OUT/a.sql" "$OUT/a.defs"
for q in a b; do
  url=$URL_A; [ $q = b ] && url=$URL_B
  bench "$q-10" 10 "$url"
  pgb "$q-10" 10 "$OUT/$q.sql" "$OUT/$q.defs"
  bench "$q-100" 100 "$url"
  pgb "$q-$POOL" "$POOL" "$OUT/$q.sql" "$OUT/$q.defs"
done
gw_after=$(rss_kb "$gw_pid")
hz=$(getconf CLK_TCK)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.0f", 100 * a / b; else printf "0"}'; }
cpu_us() { awk -v t="$(cat "$OUT/$1.cpu")" -v n="$(reqs "$OUT/$1.txt")" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.0f", t * 1e6 / hz / n; else printf "n/a"}'; }
# Per request, in microseconds: the machine's busy CPU, and the client's, for a gateway cell
# (requests from wrk) and a Postgres-alone cell (transactions from pgbench).
per_req() { awk -v t="$1" -v n="$2" -v d="$3" 'BEGIN {if (n > 0) printf "%.0f", t * 1e6 / d / n; else printf "n/a"}'; }
busy_us() { per_req "$(cat "$OUT/$1.busy")" "$(reqs "$OUT/$1.txt")" "$hz"; }
client_us() { per_req "$(cat "$OUT/$1.client")" "$(reqs "$OUT/$1.txt")" 1; }
pg_n() { awk '/number of transactions actually processed/ {print $NF}' "$OUT/pgbench-$1.txt" | cut -d/ -f1; }
pg_busy_us() { per_req "$(cat "$OUT/pgbench-$1.busy")" "$(pg_n "$1")" "$hz"; }
pg_client_us() { per_req "$(cat "$OUT/pgbench-$1.client")" "$(pg_n "$1")" 1; }
echo
printf '%-58s %-10s %-18s %-10s %-22s %s\n' "" "req/s" "p50 / p99 ms" "CPU us/req" "machine / client us" "vs Postgres alone"
for q in a b; do
  name="A agents of a gateway by name"; [ $q = b ] && name="B tasks with their assignee (embed)"
  echo "$name"
  g10=$(rps "$OUT/$q-10.txt"); p10=$(pg_tps "$q-10")
  g100=$(rps "$OUT/$q-100.txt"); p16=$(pg_tps "$q-$POOL")
  printf '%-58s %-10s %-18s %-10s %-22s %s\n' "  gateway, 10 conns" "$g10" \
    "$(pct "$OUT/$q-10.txt" 50) / $(pct "$OUT/$q-10.txt" 99)" "$(cpu_us "$q-10")" \
    "$(busy_us "$q-10") / $(client_us "$q-10")" "$(ratio "$g10" "$p10") % (target >= 85 %)"
  printf '%-58s %-10s %-18s %-10s %-22s\n' "  Postgres alone, 10 clients, the same statements" "$p10" \
    "$(pg_pct "$q-10" 50) / $(pg_pct "$q-10" 99)" "" "$(pg_busy_us "$q-10") / $(pg_client_us "$q-10")"
  printf '%-58s %-10s %-18s %-10s %-22s %s\n' "  gateway, 100 conns" "$g100" \
    "$(pct "$OUT/$q-100.txt" 50) / $(pct "$OUT/$q-100.txt" 99)" "$(cpu_us "$q-100")" \
    "$(busy_us "$q-100") / $(client_us "$q-100")" "$(ratio "$g100" "$p16") %"
  printf '%-58s %-10s %-18s %-10s %-22s\n' "  Postgres alone, $POOL clients (the pool)" "$p16" \
    "$(pg_pct "$q-$POOL" 50) / $(pg_pct "$q-$POOL" 99)" "" "$(pg_busy_us "$q-$POOL") / $(pg_client_us "$q-$POOL")"
done
printf 'gateway RSS: idle %.1f MB, after the runs %.1f MB\n' "$(awk -v k="$gw_idle" 'BEGIN {print k / 1024}')" \
  "$(awk -v k="$gw_after" 'BEGIN {print k / 1024}')"
for f in a-10 a-100 b-10 b-100; do
  e=$(errs "$OUT/$f.txt"); [ -n "$e" ] && echo "  $f: $e"
done
exit 0
