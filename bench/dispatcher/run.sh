#!/usr/bin/env bash
# Dispatcher benchmark, one run, figures side by side: inbox pickup latency (insert -> runtime
# started) p50/p99; drain of 10,000 items over 1,000 agents with MAX_CONCURRENT=8 and a runtime
# that exits at once; idle RSS of awp-inbox-dispatcher and awp-scheduler; and the Postgres limit
# from pg-limit.sh (DUR=5; $PG_LIMIT, default ../shared/bench/pg-limit.sh beside the checkout,
# else /work/shared/bench/pg-limit.sh; skipped when not found) on the same machine in the same run.
# Usage: bench/dispatcher/run.sh [build dir]   (on a fresh checkout too: it builds what it runs,
# starts the project's cluster and makes the template database when missing; bench/common.sh)
# A database of its own, cloned from the template, dropped at exit; the dispatcher logs in as
# deployed, with the gateway's own login (sql/0023, row-level security), the scheduler as
# awp_daemon. DRAIN_N: items of the drain (10,000); PEERS=0 skips pg-limit. Results also go to
# $OUT (default /tmp/awp-dispatcher-bench). AWP_BENCH_BIN=<dir>: the programs from that folder;
# AWP_BENCH_COMPARE=<dir>: that folder and the build alternately, then a before/after line per
# figure (no pg-limit then; bench/common.sh).
# shellcheck disable=SC2317  # the step_* functions run through bench_each
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-${AWP_BUILD_DIR:-$REPO/build}}
OUT=${OUT:-/tmp/awp-dispatcher-bench}
PG_LIMIT=${PG_LIMIT:-$REPO/../shared/bench/pg-limit.sh}
[[ -f $PG_LIMIT ]] || PG_LIMIT=/work/shared/bench/pg-limit.sh
PEERS=${PEERS:-1}
DRAIN_N=${DRAIN_N:-10000}
mkdir -p "$OUT"
rm -rf "$OUT"/*.r[0-9]*  # only this run's results
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-inbox-dispatcher awp-scheduler awp-bench-dispatch awp-bench-wake-stamp
bench_comparing && PEERS=0
if [[ $PEERS == 1 && ! -f $PG_LIMIT ]]; then
  echo "pg-limit.sh not found (set PG_LIMIT): the Postgres limit is skipped"
  PEERS=0
fi

db=awp_bench_dispatcher_$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
}
trap cleanup EXIT
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
DSN="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$db}"
q() { psql -X -q -At -d "$DSN" -c "$1"; }
T=00000000-0000-0000-0000-000000000000
q "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('$T', 'bench', 'bench', 'ready')"
GW=$(q "SELECT id FROM gateways WHERE slug = 'bench'")
gw_role=$(q "SELECT role_name FROM awp_gateway_role('bench', '$AWP_PG_GATEWAY_PASSWORD')" | head -1)
DISPATCHER_URL="postgresql://$gw_role:${AWP_PG_GATEWAY_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
SCHEDULER_URL="postgresql://awp_daemon:${AWP_PG_DAEMON_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
# Agents: 10 for the latency samples, 1,000 for the drain.
q "INSERT INTO agents (tenant_id, name, slug, gateway_id) SELECT '$T', 'lat-' || n, 'lat-' || lpad(n::text, 2, '0'), '$GW' FROM generate_series(1, 10) n"
q "INSERT INTO agents (tenant_id, name, slug, gateway_id) SELECT '$T', 'd-' || n, 'd-' || n, '$GW' FROM generate_series(1, 1000) n"

# The runtime's environment is an allowlist (libs/core child_env): BENCH_STAMP_DIR is named in
# AWP_CHILD_ENV_ALLOW so the stand-in runtime gets it.
start_dispatcher() {  # $1 max concurrent, $2 log, $3 stamp folder
  DATABASE_URL="$DISPATCHER_URL" GATEWAY_ID=bench AGENT_RUNTIME="$BIN/awp-bench-wake-stamp" MAX_CONCURRENT=$1 \
    BENCH_STAMP_DIR="$3" AWP_CHILD_ENV_ALLOW=BENCH_STAMP_DIR LOG_LEVEL=warn "$BIN/awp-inbox-dispatcher" 2>"$2" &
  DISPATCHER=$!
  pids+=("$DISPATCHER")
  sleep 1
}
stop() { kill -TERM "$1"; wait "$1" 2>/dev/null || true; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
num() { sed -n "s/.*$2 \([0-9.]*\).*/\1/p" "$RES/$1" | head -1; }

# 1. Idle RSS: both daemons connected and listening, nothing to do.
step_idle() {
  mkdir -p "$RES/stamps"
  start_dispatcher 2 "$RES/idle-d.log" "$RES/stamps"
  DATABASE_URL="$SCHEDULER_URL" LOG_LEVEL=warn "$BIN/awp-scheduler" 2>"$RES/idle-s.log" &
  local sched=$!
  pids+=("$sched")
  sleep 3
  echo "dispatcher $(rss_kb "$DISPATCHER") scheduler $(rss_kb "$sched")" >"$RES/idle.txt"
  stop "$sched"
  stop "$DISPATCHER"
  bench_figure "idle RSS, awp-inbox-dispatcher" "$(num idle.txt dispatcher)" kB lower
  bench_figure "idle RSS, awp-scheduler" "$(num idle.txt scheduler)" kB lower
}

# 2. Pickup latency: 300 sequential inserts over 10 agents.
step_latency() {
  q "DELETE FROM agent_inbox_items"
  mkdir -p "$RES/stamps"
  start_dispatcher 2 "$RES/latency.log" "$RES/stamps"
  "$BIN/awp-bench-dispatch" latency "$DSN" "$RES/stamps" | tee "$RES/latency.txt"
  stop "$DISPATCHER"
  bench_figure "pickup latency p50" "$(num latency.txt p50)" ms lower
  bench_figure "pickup latency p99" "$(num latency.txt p99)" ms lower
}

# 3. Drain: DRAIN_N items over 1,000 agents, queued before the dispatcher starts.
step_drain() {
  q "DELETE FROM agent_inbox_items"
  q "SELECT count(awp_enqueue_inbox_item('$T', a.id, 'heartbeat', 'd-' || a.slug || '-' || k, 't', 's')) FROM agents a, generate_series(1, ($DRAIN_N + 999) / 1000) k WHERE a.slug LIKE 'd-%'" >/dev/null
  local total
  total=$(q "SELECT count(*) FROM agent_inbox_items")
  q "VACUUM ANALYZE agent_inbox_items"
  mkdir -p "$RES/stamps"
  start_dispatcher 8 "$RES/drain.log" "$RES/stamps"
  "$BIN/awp-bench-dispatch" drain "$DSN" "$total" 240 | tee "$RES/drain.txt"
  echo "busy_rss $(rss_kb "$DISPATCHER")" >>"$RES/drain.txt"
  stop "$DISPATCHER"
  bench_figure "drain, MAX_CONCURRENT=8" "$(sed -n 's/.* = \([0-9.]*\) items\/s.*/\1/p' "$RES/drain.txt")" items/s higher
  bench_figure "dispatcher RSS after the drain" "$(num drain.txt busy_rss)" kB lower
}

echo "== awp-inbox-dispatcher benchmark ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), PostgreSQL $(q 'show server_version'), fsync on, synchronous_commit on)"
bench_each step_idle
bench_each step_latency
bench_each step_drain
if bench_comparing; then
  bench_compare_report
  exit 0
fi

# 4. The Postgres limit on this machine, now.
LIMIT=
if [[ $PEERS == 1 ]]; then
  LIMIT=$(DUR=${DUR:-5} bash "$PG_LIMIT" 2>&1 | grep -E '^(PostgreSQL|update|lease)' || true)
fi

RES=$OUT/run.r1
echo
echo "-- awp-inbox-dispatcher"
echo "$(grep pickup "$RES/latency.txt")   (target p50 <= 5 ms, p99 <= 20 ms)"
echo "$(grep drain: "$RES/drain.txt")   (MAX_CONCURRENT=8, 1,000 agents, runtime exits at once; each item = lease tx + spawn + complete tx)"
echo "idle RSS: awp-inbox-dispatcher $(num idle.txt dispatcher) kB, awp-scheduler $(num idle.txt scheduler) kB (target <= 10240 kB each); dispatcher RSS after the drain $(num drain.txt busy_rss) kB"
if [[ -n $LIMIT ]]; then
  echo
  echo "-- Postgres limit (pg-limit.sh, DUR=${DUR:-5}; lease = claim tx + complete tx per job, jobs/s = tps)"
  echo "$LIMIT"
  best=$(echo "$LIMIT" | awk '/^lease/ && /synchronous_commit=on/ {sub(/.*tps= */, ""); if ($1 + 0 > m) m = $1 + 0} END {print m + 0}')
  drain=$(sed -n 's/.* = \([0-9.]*\) items\/s.*/\1/p' "$RES/drain.txt")
  awk -v d="${drain:-0}" -v l="$best" 'BEGIN {if (l > 0) printf "drain / the best synchronous lease line: %.0f / %.0f = %.2f of the limit\n", d, l, d / l}'
fi
exit 0
