#!/usr/bin/env bash
# Realtime (/realtime/v1, issue 33): commit -> client event through the unmodified
# @supabase/supabase-js, at 1, 100 and 1,000 subscribers (SIZES), one socket and one channel each
# (postgres_changes INSERT on tasks; MODE=agent filters each to one of 100 agents' tasks, as the
# UI's per-agent views do; MODE=tenant takes every task RLS lets it see), two tenants, ten users
# (ten claim groups: five per tenant) spread over the sockets; pgbench inserts RATE tasks/s (200)
# for DUR s (20) into random agents of both tenants. Per size: events delivered/s, latency p50 /
# p90 / p99 / max (arrival - the event's commit_timestamp), the Postgres server's CPU per change
# (bench_server_cpu_ticks) beside the same writes with no subscriber (what the writes cost
# themselves, capture included), and the gateway's memory per idle subscribed socket (RSS after
# the sockets joined, before any change, minus RSS before, / sockets). Anchor in the same table:
# the platform's published figures for database-originated messages (median 46 ms, p99 159 ms).
# Usage: bench/realtime/run.sh [build dir]. Results in $OUT (/tmp/awp-realtime-bench).
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-${AWP_BUILD_DIR:-$REPO/build}}
OUT=${OUT:-/tmp/awp-realtime-bench}
API_PORT=${API_PORT:-38183}
DUR=${DUR:-20}
RATE=${RATE:-200}
MODE=${MODE:-agent}
read -r -a SIZES <<<"${SIZES:-1 100 1000}"
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
for t in psql curl; do
  command -v "$t" >/dev/null || { echo "missing $t (scripts/install-deps.sh)" >&2; exit 1; }
done
mkdir -p "$OUT"
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-api-gateway
BIN=$BENCH_BIN_run
node=$("$REPO/tests/data-api/install.sh")
# ES modules resolve packages beside the importing file: the client script runs from $OUT/client,
# where node_modules is the data-API suite's install.
mkdir -p "$OUT/client"
ln -sfn "$REPO/tests/data-api/node_modules" "$OUT/client/node_modules"
cp "$REPO/bench/realtime/subscribers.mjs" "$OUT/client/"
[[ -n ${AWP_REALTIME_DATABASE_URL:-} ]] || { echo "no AWP_REALTIME_DATABASE_URL in .awp/cluster.env: scripts/pg-cluster.sh up makes it" >&2; exit 1; }
wal=$(psql -X -qAt "$AWP_PG_ADMIN_DSN" -c "SHOW wal_level")
[[ $wal == logical ]] || { echo "wal_level is $wal: restart the cluster with scripts/pg-cluster.sh (it sets logical)" >&2; exit 1; }

db=awp_bench_rt_$$
slot=awp_bench_rt_$$
gw_pid=
cleanup() {
  [ -n "$gw_pid" ] && kill "$gw_pid" 2>/dev/null && wait "$gw_pid" 2>/dev/null
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null 2>&1 || true
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
  return 0
}
trap cleanup EXIT
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
ADMIN="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$db}"
[[ $ADMIN == *"dbname=$db"* ]] || ADMIN="$AWP_PG_ADMIN_DSN dbname=$db"
API_DSN="postgresql://awp_api:${AWP_PG_API_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
RT_DSN=$(printf '%s' "$AWP_REALTIME_DATABASE_URL" | sed -E "s#/[^/?]+(\?|$)#/$db\1#")

# Two tenants, a gateway and 50 agents each; bench.agents numbers the 100 agents for pgbench.
psql -X -q -v ON_ERROR_STOP=1 "$ADMIN" <<SQL >/dev/null
INSERT INTO tenants (id, name, slug) VALUES
  ('aaaaaaaa-0000-0000-0000-000000000001', 'A', 'bench-a'),
  ('bbbbbbbb-0000-0000-0000-000000000002', 'B', 'bench-b');
INSERT INTO gateways (tenant_id, slug, label, status)
SELECT t, 'gw-' || s, 'Gateway ' || s, 'ready'
FROM (VALUES ('aaaaaaaa-0000-0000-0000-000000000001'::uuid, 'a'),
             ('bbbbbbbb-0000-0000-0000-000000000002'::uuid, 'b')) v(t, s);
INSERT INTO agents (tenant_id, gateway_id, name, slug)
SELECT g.tenant_id, g.id, 'Agent ' || i, g.slug || '-agent-' || i
FROM gateways g, generate_series(1, 50) i WHERE g.slug IN ('gw-a', 'gw-b');
CREATE SCHEMA bench;
CREATE TABLE bench.agents AS
  SELECT row_number() OVER (ORDER BY slug) AS n, id, tenant_id FROM agents;
CREATE UNIQUE INDEX ON bench.agents (n);
ANALYZE;
SQL
cat >"$OUT/insert.sql" <<'SQL'
\set a random(1, 100)
INSERT INTO tasks (tenant_id, title, status, assignee_type, assignee_agent_id)
SELECT tenant_id, 'bench', 'todo', 'agent', id FROM bench.agents WHERE n = :a;
SQL

JWT_SECRET=bench-jwt-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export JWT_SECRET
ANON=$("$BIN/awpctl" token --anon --ttl 7200)
# Ten users, five per tenant, each with the agents of its tenant.
{
  echo "["
  for u in $(seq 0 9); do
    if ((u % 2)); then t=bbbbbbbb-0000-0000-0000-000000000002; else t=aaaaaaaa-0000-0000-0000-000000000001; fi
    tok=$("$BIN/awpctl" token --user-id "$(cat /proc/sys/kernel/random/uuid)" --tenant-id "$t" \
      --email "bench$u@example.com" --ttl 7200)
    agents=$(psql -X -qAt "$ADMIN" -c "SELECT string_agg('\"' || id || '\"', ',' ORDER BY n) FROM bench.agents WHERE tenant_id = '$t'")
    ((u > 0)) && echo ","
    printf '{"token":"%s","tenant":"%s","agents":[%s]}\n' "$tok" "$t" "$agents"
  done
  echo "]"
} >"$OUT/users.json"

rm -rf "$OUT/config"
# Every subscriber joins from this one address, a thousand at once: the join rates per address
# and per user (API_RATE_JOIN_*) are off here, this measures the fan-out.
API_RATE_JOIN_ADDRESS=off API_RATE_JOIN_USER=off \
API_PORT=$API_PORT AWP_API_DATABASE_URL=$API_DSN AWP_CONFIG_DIR=$OUT/config \
  REALTIME=on REALTIME_DATABASE_URL=$RT_DSN REALTIME_SLOT=$slot \
  API_TEMPLATES_DIR=$REPO/deploy/templates API_CONNECTORS_DIR=$REPO/deploy/connectors \
  "$BIN/awp-api-gateway" 2>"$OUT/gateway.log" &
gw_pid=$!
for _ in $(seq 1 150); do curl -fsS -o /dev/null "http://127.0.0.1:$API_PORT/api/health" 2>/dev/null && break; sleep 0.2; done
# The capture has made its slot and is streaming before anything is measured.
for _ in $(seq 1 100); do
  psql -X -qAt "$AWP_PG_ADMIN_DSN" -c "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'" | grep -q t && break
  sleep 0.2
done

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)
count() { psql -X -qAt "$ADMIN" -c "SELECT count(*) FROM tasks"; }
write() {  # name: RATE inserts/s for DUR s; the server's CPU ticks and rows over it into $OUT/name.*
  local c0 c1 r0 r1
  r0=$(count); c0=$(bench_server_cpu_ticks)
  "$PGBENCH" -n -c 2 -j 1 -R "$RATE" -T "$DUR" -f "$OUT/insert.sql" "$ADMIN" >"$OUT/pgbench-$1.txt" 2>&1
  c1=$(bench_server_cpu_ticks); r1=$(count)
  echo $((c1 - c0)) >"$OUT/$1.ticks"
  echo $((r1 - r0)) >"$OUT/$1.rows"
}
per_change() { awk -v t="$(cat "$OUT/$1.ticks")" -v n="$(cat "$OUT/$1.rows")" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.0f", t * 1e6 / hz / n; else printf "n/a"}'; }

echo "== realtime benchmark ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ); MODE=$MODE, $RATE changes/s for $DUR s)"
write warm
write none
for n in "${SIZES[@]}"; do
  dir=$OUT/run-$n
  rm -rf "$dir"; mkdir -p "$dir"
  before=$(rss_kb "$gw_pid")
  RT_URL=http://127.0.0.1:$API_PORT RT_ANON=$ANON RT_DIR=$dir RT_N=$n RT_MODE=$MODE \
    RT_USERS=$OUT/users.json "$node" "$OUT/client/subscribers.mjs" >"$dir/figures.json" 2>"$dir/node.log" &
  node_pid=$!
  for _ in $(seq 1 1200); do [[ -f $dir/subscribed ]] && break; kill -0 "$node_pid" 2>/dev/null || break; sleep 0.1; done
  [[ -f $dir/subscribed ]] || { echo "$n subscribers: not subscribed (see $dir/node.log)" >&2; cat "$dir/node.log" >&2; exit 1; }
  sleep 1
  after=$(rss_kb "$gw_pid")
  echo $(( (after - before) * 1024 / n )) >"$dir/bytes-per-socket"
  # Warm-up with the subscribers in place (not counted: the client counts from `measure`): the
  # pool's connections for the visibility checks and node's first events are paid here, so the
  # first size of a run is measured like the others (a run of SIZES=1000 alone saw p99 87 ms
  # without it).
  DUR=${WARM:-3} write "warm-$n"
  touch "$dir/measure"
  write "n$n"
  touch "$dir/done"
  wait "$node_pid"
done

echo
printf '%-34s %-9s %-10s %-26s %-16s %-14s %s\n' "" "changes" "events/s" "p50 / p90 / p99 / max ms" "DB CPU us/change" "idle socket" "p99 vs goal"
printf '%-34s %-9s %-10s %-26s %-16s\n' "writes alone (no subscriber)" "$(cat "$OUT/none.rows")" "-" "-" "$(per_change none)"
for n in "${SIZES[@]}"; do
  f=$OUT/run-$n/figures.json
  v() { "$node" -e "const f = JSON.parse(require('fs').readFileSync('$f', 'utf8')); process.stdout.write(String(f['$1']))"; }
  printf '%-34s %-9s %-10s %-26s %-16s %-14s %s\n' "$n subscribers ($MODE)" "$(cat "$OUT/n$n.rows")" "$(v events_per_s)" \
    "$(v p50_ms) / $(v p90_ms) / $(v p99_ms) / $(v max_ms)" "$(per_change "n$n")" \
    "$(awk -v b="$(cat "$OUT/run-$n/bytes-per-socket")" 'BEGIN {printf "%.1f KiB", b / 1024}')" \
    "$(awk -v p="$(v p99_ms)" 'BEGIN {printf "%.0f %% of 50 ms", 100 * p / 50}')"
done
printf '%-34s %-9s %-10s %-26s\n' "the platform (published)" "" "" "46 / - / 159 / - (median, p99)"
printf 'gateway RSS after the runs: %.1f MB\n' "$(awk -v k="$(rss_kb "$gw_pid")" 'BEGIN {print k / 1024}')"
