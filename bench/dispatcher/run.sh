#!/usr/bin/env bash
# Dispatcher benchmark, one run, figures side by side: inbox pickup latency (insert -> runtime
# started) p50/p99; drain of 10,000 items over 1,000 agents with MAX_CONCURRENT=8 and a runtime
# that exits at once; idle RSS of awp-inbox-dispatcher and awp-scheduler; and the Postgres limit
# from ../shared/bench/pg-limit.sh (DUR=5) on the same machine in the same run.
# Its own throwaway PG15 cluster under /tmp (port 55436, fsync and synchronous_commit on, as
# pg-limit's). Usage: bench/dispatcher/run.sh [build dir]   (needs the bench targets built)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-${AWP_BUILD_DIR:-$REPO/build}}
BIN=$BUILD/bin
PG_LIMIT=${PG_LIMIT:-$REPO/../shared/bench/pg-limit.sh}
[ -f "$PG_LIMIT" ] || PG_LIMIT=/work/shared/bench/pg-limit.sh
for b in awp-inbox-dispatcher awp-scheduler awpctl awp-bench-dispatch awp-bench-wake-stamp; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: cmake --build $BUILD --target $b" >&2; exit 1; }
done
PGBIN=/usr/lib/postgresql/15/bin
BASE=$(mktemp -d /tmp/awp-bench-disp.XXXXXX)
PORT=${PORT:-55436}
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  as_pg "$PGBIN/pg_ctl -D $BASE/data -m fast stop" >/dev/null 2>&1 || true
  rm -rf "$BASE"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] && chown postgres: "$BASE"
as_pg "$PGBIN/initdb -D $BASE/data -U postgres --auth=trust -E UTF8 --no-locale" >/dev/null
as_pg "$PGBIN/pg_ctl -D $BASE/data -l $BASE/pg.log -w start -o \"-p $PORT -k $BASE -c listen_addresses=127.0.0.1 -c shared_buffers=256MB -c max_wal_size=2GB\"" >/dev/null
DSN="host=127.0.0.1 port=$PORT user=postgres dbname=awp"
psql -X -q -h 127.0.0.1 -p $PORT -U postgres -d postgres -c 'CREATE DATABASE awp'
"$BIN/awpctl" --database-url "$DSN" migrate >/dev/null
q() { psql -X -q -At -d "$DSN" -c "$1"; }
T=00000000-0000-0000-0000-000000000000
q "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('$T', 'bench', 'bench', 'ready')"
GW=$(q "SELECT id FROM gateways WHERE slug = 'bench'")
mkdir -p "$BASE/stamps"

start_dispatcher() {  # $1 max concurrent, $2 log
  DATABASE_URL="$DSN" GATEWAY_ID=bench AGENT_RUNTIME="$BIN/awp-bench-wake-stamp" MAX_CONCURRENT=$1 \
    BENCH_STAMP_DIR="$BASE/stamps" LOG_LEVEL=warn "$BIN/awp-inbox-dispatcher" 2>"$2" &
  DISPATCHER=$!
  pids+=("$DISPATCHER")
  sleep 1
}
stop() { kill -TERM "$1"; wait "$1" 2>/dev/null || true; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

echo "== awp-inbox-dispatcher benchmark ($(nproc) cores, PostgreSQL $(q 'show server_version'), fsync on, synchronous_commit on)"

# 1. Idle RSS: both daemons connected and listening, nothing to do.
start_dispatcher 2 "$BASE/idle-d.log"
DATABASE_URL="$DSN" LOG_LEVEL=warn "$BIN/awp-scheduler" 2>"$BASE/idle-s.log" &
SCHED=$!; pids+=("$SCHED")
sleep 3
IDLE_D=$(rss_kb "$DISPATCHER"); IDLE_S=$(rss_kb "$SCHED")
stop "$SCHED"

# 2. Pickup latency: 300 sequential inserts over 10 agents.
q "INSERT INTO agents (tenant_id, name, slug, gateway_id) SELECT '$T', 'lat-' || n, 'lat-' || lpad(n::text, 2, '0'), '$GW' FROM generate_series(1, 10) n"
LAT=$("$BIN/awp-bench-dispatch" latency "$DSN" "$BASE/stamps")
stop "$DISPATCHER"

# 3. Drain: 10,000 items over 1,000 agents, queued before the dispatcher starts.
q "DELETE FROM agent_inbox_items"
q "INSERT INTO agents (tenant_id, name, slug, gateway_id) SELECT '$T', 'd-' || n, 'd-' || n, '$GW' FROM generate_series(1, 1000) n"
q "SELECT count(awp_enqueue_inbox_item('$T', a.id, 'heartbeat', 'd-' || a.slug || '-' || k, 't', 's')) FROM agents a, generate_series(1, 10) k WHERE a.slug LIKE 'd-%'" >/dev/null
q "VACUUM ANALYZE agent_inbox_items"
start_dispatcher 8 "$BASE/drain.log"
DRAIN=$("$BIN/awp-bench-dispatch" drain "$DSN" 10000 240)
BUSY_D=$(rss_kb "$DISPATCHER")
stop "$DISPATCHER"

# 4. The Postgres limit on this machine, now.
LIMIT=$(DUR=${DUR:-5} bash "$PG_LIMIT" 2>&1 | grep -E '^(PostgreSQL|update|lease)' || true)

echo
echo "-- awp-inbox-dispatcher"
echo "$LAT   (target p50 <= 5 ms, p99 <= 20 ms)"
echo "$DRAIN   (MAX_CONCURRENT=8, 1,000 agents, runtime exits at once; each item = lease tx + spawn + complete tx)"
echo "idle RSS: awp-inbox-dispatcher ${IDLE_D} kB, awp-scheduler ${IDLE_S} kB (target <= 10240 kB each); dispatcher RSS after the drain ${BUSY_D} kB"
echo
echo "-- Postgres limit (pg-limit.sh, DUR=${DUR:-5}; lease = claim tx + complete tx per job, jobs/s = tps)"
echo "$LIMIT"
