#!/usr/bin/env bash
# One benchmark run of awp-command-runner, printed side by side with its peers:
#   pickup latency (insert -> running) over 1,000 commands with the real runner;
#   queue-protocol throughput, 10,000 commands through the runner's statements (lease+start, then
#     each completion with the next lease), 1 and 4 leasers,
#     beside graphile-worker's no-op jobs (../shared/bench/peer-graphile.sh) and the Postgres
#     limit (../shared/bench/pg-limit.sh);
#   end-to-end commands/s of the real runner with a runtime that exits at once, beside the cost
#     of the spawns alone;
#   the idle runner's RSS, CPU and wake-ups between safety polls.
# Usage: bench/runner/run.sh [build dir]   (on a fresh checkout too: it builds what it runs, starts
# the project's cluster and makes the template database when missing; bench/common.sh)
# PEERS=0 skips the peer scripts. Results also go to $OUT (default /tmp/awp-runner-bench).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$REPO/build}
BIN=$BUILD/bin
OUT=${OUT:-/tmp/awp-runner-bench}
SHARED=${SHARED:-$REPO/../shared/bench}
PEERS=${PEERS:-1}
LAT_N=${LAT_N:-1000}; PROTO_N=${PROTO_N:-10000}; E2E_N=${E2E_N:-2000}
mkdir -p "$OUT"
rm -f "$OUT/graphile.txt" "$OUT/pglimit.txt"  # only this run's peers are printed
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-command-runner runner_bench awp-bench-wake-stamp

db=awp_bench_runner_$$
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
cleanup() {
  [[ -n ${runner_pid:-} ]] && kill "$runner_pid" 2>/dev/null && wait "$runner_pid" 2>/dev/null
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
    -c "DROP DATABASE IF EXISTS ${db}_p WITH (FORCE)" >/dev/null
}
trap cleanup EXIT
ADMIN="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$db}"
BENCH_GATEWAY=bench
BENCH_GATEWAY_ID=$(psql -X -qAt "$ADMIN" -c \
  "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('00000000-0000-0000-0000-000000000000', 'bench', 'bench', 'ready') RETURNING id" | head -1)
export BENCH_GATEWAY BENCH_GATEWAY_ID
# The runner connects as deployed: the gateway's own login (sql/0023, row-level security);
# runner_bench's inserts and reads go through the same URL's database as the admin.
gw_role=$(psql -X -qAt "$ADMIN" -c "SELECT role_name FROM awp_gateway_role('bench', '$AWP_PG_GATEWAY_PASSWORD')" | head -1)
export DATABASE_URL="postgresql://awp_daemon:${AWP_PG_DAEMON_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
RUNNER_URL="postgresql://$gw_role:${AWP_PG_GATEWAY_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"

start_runner() {  # a runtime that exits at once: /bin/true
  DATABASE_URL=$RUNNER_URL GATEWAY_ID=bench AGENT_RUNTIME="$BIN/awp-bench-wake-stamp" AWP_INSTANCE=bench-runner LOG_LEVEL=warn SAFETY_POLL=${1:-30} \
    OPENCLAW_STATE_DIR=$OUT/home SECRETS_DIR=$OUT/secrets AWP_STATE_DIR=$OUT/state \
    "$BIN/awp-command-runner" 2>>"$OUT/runner.log" &
  runner_pid=$!
  sleep 1
}
stop_runner() { kill "$runner_pid"; wait "$runner_pid" || true; runner_pid=; }

echo "== awp-command-runner benchmark ($(nproc) cores, $(date -u +%FT%TZ))"
start_runner 30
# Idle: RSS and CPU over 20 s strictly between two safety polls (30 s), wake-ups = context switches.
sleep 2
ctx() { cat /proc/$runner_pid/task/*/status | awk '/voluntary_ctxt_switches/ {s += $2} END {print s}'; }
cpu() { awk '{print $14 + $15}' /proc/$runner_pid/stat; }
c0=$(ctx); t0=$(cpu); sleep 20; c1=$(ctx); t1=$(cpu)
rss_kb=$(awk '/VmRSS/ {print $2}' /proc/$runner_pid/status)
idle_wakeups=$((c1 - c0)); idle_cpu_ticks=$((t1 - t0))

"$BIN/runner_bench" latency "$LAT_N" | tee "$OUT/latency.txt"
psql -X -q "$ADMIN" -c "DELETE FROM agent_commands"
"$BIN/runner_bench" e2e "$E2E_N" | tee "$OUT/e2e.txt"
stop_runner
"$BIN/runner_bench" spawn "$E2E_N" | tee "$OUT/spawn.txt"
# Queue protocol, on the footing of graphile-worker's peer script (a new cluster and schema, the
# jobs added, a checkpoint, then the queue drained): every run gets a new database from the
# template with 10,000 pending commands and a checkpoint. Over the Unix socket (the peer's
# transport) and over TCP (a runner on another host).
pdb=${db}_p
proto_db() {
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $pdb WITH (FORCE)" \
    -c "CREATE DATABASE $pdb TEMPLATE awp_test_template"
  PADMIN="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$pdb}"
  PGW=$(psql -X -qAt "$PADMIN" -c \
    "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('00000000-0000-0000-0000-000000000000', 'bench', 'bench', 'ready') RETURNING id" | head -1)
}
proto() {  # $1 leasers, $2 socket|tcp|gateway, $3 result file; the database as the last run left it
  local url="postgresql://awp_daemon:${AWP_PG_DAEMON_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$pdb"
  [[ $2 == socket ]] && url="postgresql://awp_daemon@/$pdb?host=$AWP_PG_SOCKET_DIR&port=$AWP_PG_PORT"
  local lease_url=""
  if [[ $2 == gateway ]]; then  # leasers over TCP as the gateway's own login: RLS on every statement
    local role
    role=$(psql -X -qAt "$PADMIN" -c "SELECT role_name FROM awp_gateway_role('$PGW', '$AWP_PG_GATEWAY_PASSWORD')" | head -1)
    lease_url="postgresql://$role:${AWP_PG_GATEWAY_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$pdb"
  fi
  psql -X -q "$PADMIN" -c CHECKPOINT
  DATABASE_URL=$url BENCH_LEASE_URL=$lease_url BENCH_GATEWAY_ID=$PGW "$BIN/runner_bench" protocol "$PROTO_N" "$1" | tee "$OUT/$3"
}
for leasers in 1 4; do
  proto_db; proto $leasers socket "proto$leasers.txt"
  proto_db; proto $leasers tcp "proto$leasers-tcp.txt"
  proto_db; proto $leasers gateway "proto$leasers-gw.txt"
done
# The same after 30,000 commands went through the table with no vacuum since (autovacuum off for
# it, so the figure does not depend on when autovacuum happens to run): every lease walks the
# dead entries that the pending index keeps until a vacuum; then again after a VACUUM.
proto_db
psql -X -q "$PADMIN" -c "ALTER TABLE agent_commands SET (autovacuum_enabled = off)"
for warm in 1 2 3; do proto 4 socket "proto-warm$warm.txt" >/dev/null; done
proto 4 socket proto4-history.txt
psql -X -q "$PADMIN" -c "VACUUM agent_commands"
proto 4 socket proto4-vacuumed.txt
psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $pdb WITH (FORCE)"

if [[ $PEERS == 1 ]]; then
  JOBS=$PROTO_N CONCS="1 4" LAT_SAMPLES=200 bash "$SHARED/peer-graphile.sh" >"$OUT/graphile.txt" 2>&1 || echo "graphile peer failed (see $OUT/graphile.txt)"
  DUR=10 CLIENTS="1 4" bash "$SHARED/pg-limit.sh" >"$OUT/pglimit.txt" 2>&1 || echo "pg-limit failed (see $OUT/pglimit.txt)"
fi

val() { sed -n "s/.*$2=\([0-9.]*\).*/\1/p" "$OUT/$1" | head -1; }
echo
echo "== results"
printf '%-52s %s\n' "pickup latency p50 / p99 (target <= 3 / 15 ms)" "$(val latency.txt p50_ms) / $(val latency.txt p99_ms) ms"
printf '%-52s %s\n' "protocol, 1 leaser" "$(val proto1.txt per_second) commands/s (Unix socket), $(val proto1-tcp.txt per_second) (TCP)"
printf '%-52s %s\n' "protocol, 4 leasers" "$(val proto4.txt per_second) commands/s (Unix socket), $(val proto4-tcp.txt per_second) (TCP)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
printf '%-52s %s\n' "protocol as the gateway's own login (RLS), TCP" "1 leaser $(val proto1-gw.txt per_second) commands/s ($(ratio "$(val proto1-gw.txt per_second)" "$(val proto1-tcp.txt per_second)") x awp_daemon), 4 leasers $(val proto4-gw.txt per_second) ($(ratio "$(val proto4-gw.txt per_second)" "$(val proto4-tcp.txt per_second)") x)"
printf '%-52s %s\n' "  4 leasers, after 30,000 commands, no vacuum" "$(val proto4-history.txt per_second) commands/s (Unix socket); after VACUUM: $(val proto4-vacuumed.txt per_second)"
if [[ -f $OUT/graphile.txt ]]; then
  echo "graphile-worker (peer-graphile.sh):"; grep -iE 'default|conc|jobs/s' "$OUT/graphile.txt" | sed 's/^/    /' | head -12
fi
if [[ -f $OUT/pglimit.txt ]]; then
  echo "Postgres limit (pg-limit.sh):"; grep -iE 'tps|clients|lease' "$OUT/pglimit.txt" | sed 's/^/    /' | head -12
fi
printf '%-52s %s\n' "end to end, runtime exits at once" "$(val e2e.txt per_second) commands/s"
printf '%-52s %s\n' "spawns of /bin/true alone" "$(val spawn.txt per_second) spawns/s"
printf '%-52s %s\n' "idle RSS (target <= 10 MB)" "$((rss_kb / 1024)).$(( (rss_kb % 1024) * 10 / 1024 )) MB"
printf '%-52s %s\n' "idle CPU over 20 s" "$idle_cpu_ticks ticks ($(getconf CLK_TCK)/s)"
printf '%-52s %s\n' "idle wake-ups in 20 s between safety polls" "$idle_wakeups"
