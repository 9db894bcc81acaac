#!/usr/bin/env bash
# One benchmark run of awp-command-runner, printed side by side with its peers:
#   pickup latency (insert -> running) over 1,000 commands with the real runner;
#   queue-protocol throughput, 10,000 commands through the runner's statements (lease+start, then
#     each completion with the next lease), 1 and 4 leasers,
#     beside graphile-worker's no-op jobs (peer-graphile.sh) and the Postgres limit (pg-limit.sh),
#     both from $SHARED (default ../shared/bench beside the checkout, else /work/shared/bench;
#     skipped when not found);
#   end-to-end commands/s of the real runner with a runtime that exits at once, beside the cost
#     of the spawns alone;
#   the idle runner's RSS, CPU and wake-ups between safety polls.
# Usage: bench/runner/run.sh [build dir]   (on a fresh checkout too: it builds what it runs, starts
# the project's cluster and makes the template database when missing; bench/common.sh)
# PEERS=0 skips the peer scripts. LAT_N, PROTO_N, E2E_N: commands per figure (1,000, 10,000,
# 2,000); IDLE_S: seconds of the idle sample (20). Results also go to $OUT (default
# /tmp/awp-runner-bench). AWP_BENCH_BIN=<dir>: the programs (awp-command-runner, runner_bench,
# awp-bench-wake-stamp) from that folder; AWP_BENCH_COMPARE=<dir>: that folder and the build
# alternately, then a before/after line per figure (no peers then; bench/common.sh).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$REPO/build}
OUT=${OUT:-/tmp/awp-runner-bench}
SHARED=${SHARED:-$REPO/../shared/bench}
[[ -f $SHARED/pg-limit.sh ]] || SHARED=/work/shared/bench
PEERS=${PEERS:-1}
LAT_N=${LAT_N:-1000}; PROTO_N=${PROTO_N:-10000}; E2E_N=${E2E_N:-2000}; IDLE_S=${IDLE_S:-20}
mkdir -p "$OUT"
rm -rf "$OUT/graphile.txt" "$OUT/pglimit.txt" "$OUT"/*.r[0-9]*  # only this run's results
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-command-runner runner_bench awp-bench-wake-stamp
bench_comparing && PEERS=0
if [[ $PEERS == 1 && ! -f $SHARED/pg-limit.sh ]]; then
  echo "peer scripts not found (set SHARED to the folder of peer-graphile.sh and pg-limit.sh): peers skipped"
  PEERS=0
fi

db=awp_bench_runner_$$
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
cleanup() {
  [[ -n ${runner_pid:-} ]] && kill "$runner_pid" 2>/dev/null && wait "$runner_pid" 2>/dev/null
  PGOPTIONS="-c client_min_messages=warning" psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
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

start_runner() {  # a runtime that exits at once
  DATABASE_URL=$RUNNER_URL GATEWAY_ID=bench AGENT_RUNTIME="$BIN/awp-bench-wake-stamp" AWP_INSTANCE=bench-runner LOG_LEVEL=warn SAFETY_POLL=${1:-30} \
    OPENCLAW_STATE_DIR=$OUT/home SECRETS_DIR=$OUT/secrets AWP_STATE_DIR=$OUT/state \
    "$BIN/awp-command-runner" 2>>"$OUT/runner.log" &
  runner_pid=$!
  sleep 1
}
stop_runner() { kill "$runner_pid"; wait "$runner_pid" || true; runner_pid=; }
val() { sed -n "s/.*$2=\([0-9.]*\).*/\1/p" "$RES/$1" | head -1; }

# The real runner: idle RSS and CPU over IDLE_S s strictly between two safety polls (30 s),
# wake-ups = context switches; then pickup latency and end to end.
step_runner() {
  start_runner 30
  sleep 2
  local c0 c1 t0 t1 rss_kb
  ctx() { cat /proc/"$runner_pid"/task/*/status | awk '/voluntary_ctxt_switches/ {s += $2} END {print s}'; }
  cpu() { awk '{print $14 + $15}' /proc/"$runner_pid"/stat; }
  c0=$(ctx); t0=$(cpu); sleep "$IDLE_S"; c1=$(ctx); t1=$(cpu)
  rss_kb=$(awk '/VmRSS/ {print $2}' /proc/"$runner_pid"/status)
  echo "rss_kb=$rss_kb wakeups=$((c1 - c0)) cpu_ticks=$((t1 - t0))" >"$RES/idle.txt"
  psql -X -q "$ADMIN" -c "DELETE FROM agent_commands"
  "$BIN/runner_bench" latency "$LAT_N" | tee "$RES/latency.txt"
  psql -X -q "$ADMIN" -c "DELETE FROM agent_commands"
  "$BIN/runner_bench" e2e "$E2E_N" | tee "$RES/e2e.txt"
  stop_runner
  bench_figure "idle RSS" "$(val idle.txt rss_kb)" kB lower
  bench_figure "idle wake-ups in ${IDLE_S} s" "$(val idle.txt wakeups)" count lower
  bench_figure "idle CPU in ${IDLE_S} s" "$(val idle.txt cpu_ticks)" ticks lower
  bench_figure "pickup latency p50" "$(val latency.txt p50_ms)" ms lower
  bench_figure "pickup latency p99" "$(val latency.txt p99_ms)" ms lower
  bench_figure "end to end, runtime exits at once" "$(val e2e.txt per_second)" cmd/s higher
}
step_spawn() {
  "$BIN/runner_bench" spawn "$E2E_N" | tee "$RES/spawn.txt"
  bench_figure "spawns of the runtime alone" "$(val spawn.txt per_second)" spawn/s higher
}
# Queue protocol, on the footing of graphile-worker's peer script (a new cluster and schema, the
# jobs added, a checkpoint, then the queue drained): every run gets a new database from the
# template with 10,000 pending commands and a checkpoint. Over the Unix socket (the peer's
# transport) and over TCP (a runner on another host).
pdb=${db}_p
proto_db() {
  PGOPTIONS="-c client_min_messages=warning" psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $pdb WITH (FORCE)" \
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
  DATABASE_URL=$url BENCH_LEASE_URL=$lease_url BENCH_GATEWAY_ID=$PGW "$BIN/runner_bench" protocol "$PROTO_N" "$1" | tee "$RES/$3"
}
step_proto() {  # $1 leasers, $2 transport
  proto_db
  proto "$1" "$2" "proto$1-$2.txt"
  bench_figure "protocol, $1 leaser(s), $2" "$(val "proto$1-$2.txt" per_second)" cmd/s higher
}
# The same after 30,000 commands went through the table with no vacuum since (autovacuum off for
# it, so the figure does not depend on when autovacuum happens to run): every lease walks the
# dead entries that the pending index keeps until a vacuum; then again after a VACUUM.
step_history() {
  proto_db
  psql -X -q "$PADMIN" -c "ALTER TABLE agent_commands SET (autovacuum_enabled = off)"
  for warm in 1 2 3; do proto 4 socket "proto-warm$warm.txt" >/dev/null; done
  proto 4 socket proto4-history.txt
  psql -X -q "$PADMIN" -c "VACUUM agent_commands"
  proto 4 socket proto4-vacuumed.txt
  bench_figure "protocol, 4 leasers, after $((3 * PROTO_N)) commands, no vacuum" "$(val proto4-history.txt per_second)" cmd/s higher
  bench_figure "protocol, 4 leasers, the same after VACUUM" "$(val proto4-vacuumed.txt per_second)" cmd/s higher
}

echo "== awp-command-runner benchmark ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ))"
bench_each step_runner
bench_each step_spawn
for leasers in 1 4; do
  for transport in socket tcp gateway; do bench_each step_proto "$leasers" "$transport"; done
done
bench_each step_history
psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $pdb WITH (FORCE)"
if bench_comparing; then
  bench_compare_report
  exit 0
fi

if [[ $PEERS == 1 ]]; then
  JOBS=$PROTO_N CONCS="1 4" LAT_SAMPLES=200 bash "$SHARED/peer-graphile.sh" >"$OUT/graphile.txt" 2>&1 || echo "graphile peer failed (see $OUT/graphile.txt)"
  DUR=10 CLIENTS="1 4" bash "$SHARED/pg-limit.sh" >"$OUT/pglimit.txt" 2>&1 || echo "pg-limit failed (see $OUT/pglimit.txt)"
fi


RES=$OUT/run.r1
echo
echo "== results"
printf '%-52s %s\n' "pickup latency p50 / p99 (target <= 3 / 15 ms)" "$(val latency.txt p50_ms) / $(val latency.txt p99_ms) ms"
printf '%-52s %s\n' "protocol, 1 leaser" "$(val proto1-socket.txt per_second) commands/s (Unix socket), $(val proto1-tcp.txt per_second) (TCP)"
printf '%-52s %s\n' "protocol, 4 leasers" "$(val proto4-socket.txt per_second) commands/s (Unix socket), $(val proto4-tcp.txt per_second) (TCP)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
printf '%-52s %s\n' "protocol as the gateway's own login (RLS), TCP" "1 leaser $(val proto1-gateway.txt per_second) commands/s ($(ratio "$(val proto1-gateway.txt per_second)" "$(val proto1-tcp.txt per_second)") x awp_daemon), 4 leasers $(val proto4-gateway.txt per_second) ($(ratio "$(val proto4-gateway.txt per_second)" "$(val proto4-tcp.txt per_second)") x)"
printf '%-52s %s\n' "  4 leasers, after 30,000 commands, no vacuum" "$(val proto4-history.txt per_second) commands/s (Unix socket); after VACUUM: $(val proto4-vacuumed.txt per_second)"
if [[ -f $OUT/graphile.txt ]]; then
  echo "graphile-worker (peer-graphile.sh):"; grep -iE 'default|conc|jobs/s' "$OUT/graphile.txt" | sed 's/^/    /' | head -12
fi
if [[ -f $OUT/pglimit.txt ]]; then
  echo "Postgres limit (pg-limit.sh):"; grep -iE 'tps|clients|lease' "$OUT/pglimit.txt" | sed 's/^/    /' | head -12
fi
# The ratios: protocol over Unix socket (the peer's transport) ÷ graphile-worker's default mode,
# net of start-up, at the same concurrency; ÷ pg-limit's synchronous claim+complete line.
peer() {  # file, awk pattern of the line, field regex before the number
  [[ -f $OUT/$1 ]] && awk -v pat="$2" -v pre="$3" '$0 ~ pat { s = $0; if (match(s, pre "[ ]*[0-9.]+")) { s = substr(s, RSTART, RLENGTH); gsub(/[^0-9.]/, "", s); print s; exit } }' "$OUT/$1"
}
for n in 1 4; do
  g=$(peer graphile.txt "^default +conc=$n " ': ' || true)
  l=$(peer pglimit.txt "^lease +synchronous_commit=on +clients=$n " 'tps=' || true)
  mine=$(val "proto$n-socket.txt" per_second)
  line="protocol, $n leaser(s), Unix socket: $mine commands/s"
  [[ -n $g ]] && line+=" = $(ratio "$mine" "$g") x graphile-worker ($g jobs/s)"
  [[ -n $l ]] && line+=", $(ratio "$mine" "$l") x pg-limit's claim+complete ($l jobs/s, two transactions a job)"
  [[ -n $g || -n $l ]] && printf '    %s\n' "$line"
done
printf '%-52s %s\n' "end to end, runtime exits at once" "$(val e2e.txt per_second) commands/s"
printf '%-52s %s\n' "spawns of the runtime alone" "$(val spawn.txt per_second) spawns/s"
rss_kb=$(val idle.txt rss_kb)
printf '%-52s %s\n' "idle RSS (target <= 10 MB)" "$((rss_kb / 1024)).$(( (rss_kb % 1024) * 10 / 1024 )) MB"
printf '%-52s %s\n' "idle CPU over $IDLE_S s" "$(val idle.txt cpu_ticks) ticks ($(getconf CLK_TCK)/s)"
printf '%-52s %s\n' "idle wake-ups in $IDLE_S s between safety polls" "$(val idle.txt wakeups)"
