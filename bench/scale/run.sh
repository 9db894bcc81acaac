#!/usr/bin/env bash
# N simulated gateway hosts on one PostgreSQL 15, wake-up designs and connection topologies side
# by side (scale_bench.cpp says what one host holds and what each mode does). One command on a
# fresh checkout: it builds what it runs, starts its own throwaway cluster (scripts/pg-cluster.sh
# with its own state folder and a max_connections high enough for N = 1,000) and, for the pooled
# modes, its own PgBouncer (scripts/pgbouncer.sh), makes the migrated template, runs every point
# and prints one table.
# Modes (SCALE_MODES, default "direct wake wake-pooled wake-pooled-gw wake-pooled-keys"):
#   direct          today's single-host design: a LISTEN session per daemon and host, superuser
#   relay, edge     the candidates measured first (an in-process relay; edge-triggered NOTIFY)
#   wake            awp-wake (a real process) and a stream per daemon; each host its own login,
#                   direct connections
#   wake-pooled     awp-wake; every host's connections through PgBouncer (transaction mode) as
#                   one shared work login (the daemons' DATABASE_URL login)
#   wake-pooled-gw  awp-wake; through PgBouncer, each host its own login (a pool per login)
#   wake-pooled-keys  awp-wake; through PgBouncer, one pool login for every host, each host
#                   presenting its own gateway's key in every transaction (sql/0026): each host
#                   confined to its gateway by row-level security, one pool (the hosted topology)
# Usage: bench/scale/run.sh [build dir]
#   SCALE_QUICK=1      N = 1 10 100, 5 s per phase (a smoke run)
#   SCALE_NS="1 10"    the gateway counts; SCALE_MODES as above; SCALE_SECONDS (10)
#   SCALE_RATE (50)    phase B's steady writes/s (pickup latency); SCALE_WRITERS (4)
#   SCALE_SUSTAIN_STEPS (6) phase C's steps: the rates tried in the search for the sustained rate
#   SCALE_REPS (2)     runs of every point below N = 1,000 (interleaved; the table shows their mean;
#                      N = 1,000 runs once: it takes minutes and ~10 GiB)
#   SCALE_IDLE (2)     idle connections per host (the runner's and the dispatcher's housekeeping);
#                      lowered (and said so) when N x 8 backends would not fit in memory
#   SCALE_POOL (80)    PgBouncer's server connections for the database (max_db_connections and
#                      default_pool_size); SCALE_PGBOUNCER_PORT (6440)
#   SCALE_PG_PORT (54335), SCALE_STATE_DIR (.awp/scale), SCALE_KEEP=1 leaves the cluster running
#   SCALE_STATEMENTS=1 a diagnosis, not a measurement: pg_stat_statements (nested statements and
#                      planning too, which costs CPU of its own) and, per point, the statements
#                      by server time in $OUT/statements-<mode>-<N>-<rep>.txt (none that names
#                      a password: a role's ALTER is kept as written)
# Results: $OUT (default /tmp/awp-scale-bench): results.txt (the RESULT lines), table.txt.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$REPO/build}
OUT=${OUT:-/tmp/awp-scale-bench}
if [[ ${SCALE_QUICK:-0} == 1 ]]; then
  NS=${SCALE_NS:-"1 10 100"}; SECONDS_PER=${SCALE_SECONDS:-5}
else
  NS=${SCALE_NS:-"1 10 100 1000"}; SECONDS_PER=${SCALE_SECONDS:-10}
fi
MODES=${SCALE_MODES:-"direct wake wake-pooled wake-pooled-gw wake-pooled-keys"}
POOL=${SCALE_POOL:-80}
pooled=0; [[ " $MODES " == *" wake-pooled"* ]] && pooled=1
SUSTAIN_STEPS=${SCALE_SUSTAIN_STEPS:-6}
RATE=${SCALE_RATE:-50}; WRITERS=${SCALE_WRITERS:-4}; IDLE=${SCALE_IDLE:-2}; REPS=${SCALE_REPS:-2}
export AWP_PG_PORT=${SCALE_PG_PORT:-54335}
export AWP_STATE_DIR=${SCALE_STATE_DIR:-$REPO/.awp/scale}
mkdir -p "$OUT"

# Build (as bench/common.sh does, without the project's default cluster: this one is our own).
AWP_BUILD_DIR=$BUILD AWP_BUILD_TARGETS="awpctl awp-wake scale_bench" "$REPO/scripts/build.sh" >/dev/null
export AWPCTL=$BUILD/bin/awpctl

# Connections: every host holds 8 (runner: lease, housekeeping, LISTEN; dispatcher: lease,
# housekeeping, 2 slots, LISTEN), so N = 1,000 needs 8,000 backends and a bit more.
maxn=0; for n in $NS; do ((n > maxn)) && maxn=$n; done
MAXCONN=$((maxn * 8 + 200))
((MAXCONN < 300)) && MAXCONN=300
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

cluster() { "$REPO/scripts/pg-cluster.sh" "$@"; }
cluster up >/dev/null 2>&1 || cluster up
set -a
# shellcheck disable=SC1091
. "$AWP_STATE_DIR/cluster.env"
set +a
ADMIN="$AWP_PG_ADMIN_DSN dbname=postgres"
psql -X -q "$ADMIN" -v ON_ERROR_STOP=1 \
  -c "ALTER SYSTEM SET max_connections = $MAXCONN" \
  -c "ALTER SYSTEM SET shared_buffers = '256MB'" \
  -c "ALTER SYSTEM SET max_wal_size = '8GB'" \
  -c "ALTER SYSTEM SET checkpoint_timeout = '30min'"
STATEMENTS=${SCALE_STATEMENTS:-0}
if ((STATEMENTS)); then
  psql -X -q "$ADMIN" -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
else
  psql -X -q "$ADMIN" -v ON_ERROR_STOP=1 -c "ALTER SYSTEM RESET shared_preload_libraries"
fi
cluster stop >/dev/null
cluster start >/dev/null
if ((STATEMENTS)); then  # the library's settings exist once it is loaded
  psql -X -q "$ADMIN" -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET pg_stat_statements.track = 'all'" \
    -c "ALTER SYSTEM SET pg_stat_statements.track_planning = on" -c "SELECT pg_reload_conf()" >/dev/null
fi
bash "$REPO/tests/support/make-template.sh" "$AWPCTL"
# PgBouncer in transaction mode in front of this cluster, with room for every host's clients.
export AWP_PGBOUNCER_PORT=${SCALE_PGBOUNCER_PORT:-6440}
bouncer() {
  AWP_PGBOUNCER_POOL_SIZE=$POOL AWP_PGBOUNCER_MAX_DB_CONNECTIONS=$POOL \
    AWP_PGBOUNCER_MAX_CLIENT_CONN=$MAXCONN "$REPO/scripts/pgbouncer.sh" "$@"
}
((pooled)) && bouncer up >/dev/null
cleanup() {
  psql -X -q "$ADMIN" -c "DROP DATABASE IF EXISTS awp_scale_bench WITH (FORCE)" >/dev/null 2>&1 || true
  ((pooled)) && bouncer down >/dev/null 2>&1 || true
  [[ ${SCALE_KEEP:-0} == 1 ]] || cluster stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

setting() { psql -X -qAt "$ADMIN" -c "SHOW $1"; }
{
  echo "== scale benchmark, $(date -u +%FT%TZ)"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg) (shared with other work)"
  echo "server: $(psql -X -qAt "$ADMIN" -c 'SELECT version()' | cut -d, -f1); max_connections=$(setting max_connections) shared_buffers=$(setting shared_buffers) synchronous_commit=$(setting synchronous_commit) fsync=$(setting fsync) max_wal_size=$(setting max_wal_size) checkpoint_timeout=$(setting checkpoint_timeout); unix socket (hosts of the wake modes: TCP 127.0.0.1, password logins)"
  ((pooled)) && echo "pooler: $(/usr/sbin/pgbouncer --version | head -1), transaction mode, max_db_connections=$POOL default_pool_size=$POOL server_idle_timeout=10 max_client_conn=$MAXCONN, on 127.0.0.1:$AWP_PGBOUNCER_PORT"
  echo "client: ulimit -n $(ulimit -n); gateways N = $NS; modes $MODES; phase A: $WRITERS writers at full speed for ${SECONDS_PER}s; phase B: $RATE writes/s for ${SECONDS_PER}s; phase C: the sustained rate, up to $SUSTAIN_STEPS steps of ${SECONDS_PER}s; half commands, half inbox items; $REPS runs of each point below N = 1,000"
} | tee "$OUT/settings.txt"

: >"$OUT/results.txt"
mode_args() {  # MODE -> ARGS, scale_bench's flags
  local wake=(--mode awp-wake --wake-bin "$BUILD/bin/awp-wake"
    --auth-url "postgresql://127.0.0.1:$AWP_PG_PORT/awp_scale_bench")
  local pool=(--pooler "host=127.0.0.1 port=$AWP_PGBOUNCER_PORT"
    --pooler-pidfile "$AWP_STATE_DIR/pgbouncer/pgbouncer.pid")
  case $1 in
    direct | relay | edge) ARGS=(--mode "$1") ;;
    wake) ARGS=("${wake[@]}" --login gateway) ;;
    wake-pooled) ARGS=("${wake[@]}" "${pool[@]}" --login shared) ;;  # its DATABASE_URL, from cluster.env
    wake-pooled-gw) ARGS=("${wake[@]}" "${pool[@]}" --login gateway) ;;
    wake-pooled-keys) ARGS=("${wake[@]}" "${pool[@]}" --login pool) ;;
    *) echo "unknown mode $1" >&2; exit 2 ;;
  esac
}
point() {  # N MODE IDLE REP
  local line
  mode_args "$2"
  ((STATEMENTS)) && psql -X -q "$ADMIN" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null
  line=$("$BUILD/bin/scale_bench" --conninfo "host=$AWP_PG_SOCKET_DIR port=$AWP_PG_PORT user=postgres" \
    "${ARGS[@]}" --name "$2" --gateways "$1" --seconds "$SECONDS_PER" --writers "$WRITERS" --rate "$RATE" --sustain-steps "$SUSTAIN_STEPS" \
    --idle-per-gateway "$3" 2>>"$OUT/stderr.txt" | grep '^RESULT' || true)
  [[ -n $line ]] || line="RESULT mode=$2 n=$1 failed=1"
  echo "$line idle=$3 rep=$4" | tee -a "$OUT/results.txt"
  ((STATEMENTS)) && psql -X "$ADMIN" -c "SELECT calls, round(total_exec_time::numeric, 1) AS exec_ms,
      round(total_plan_time::numeric, 1) AS plan_ms, round((1000 * (total_exec_time + total_plan_time) / NULLIF(calls, 0))::numeric, 1) AS us_per_call,
      toplevel, left(regexp_replace(query, '\s+', ' ', 'g'), 110) AS query
    FROM pg_stat_statements WHERE query !~* 'password'
    ORDER BY total_exec_time + total_plan_time DESC LIMIT 40" >"$OUT/statements-$2-$1-$4.txt"
  return 0
}
for n in $NS; do
  idle=$IDLE
  # 8 backends of ~1.8 MiB PSS each per host (measured at N = 30); keep the backends within 60 %
  # of the memory available now (the machine is shared).
  avail_mib=$(awk '/MemAvailable/{print int($2 / 1024)}' /proc/meminfo)
  while ((idle > 0 && n * (6 + idle) * 18 / 10 > avail_mib * 6 / 10)); do idle=$((idle - 1)); done
  ((idle != IDLE)) && echo "N=$n: $idle idle connections per host instead of $IDLE (memory: $avail_mib MiB available)" | tee -a "$OUT/settings.txt"
  reps=$REPS; ((n >= 1000)) && reps=1
  for ((rep = 1; rep <= reps; rep++)); do
    for m in $MODES; do
      # Through the pooler the hosts' idle connections hold no backend: never lowered there.
      if [[ $m == wake-pooled* ]]; then point "$n" "$m" "$IDLE" "$rep"; else point "$n" "$m" "$idle" "$rep"; fi
    done
  done
done

# One table: mode x N, the mean of the runs of each point.
awk '
function v(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
function add(name, x) { if (x != "" && x != "nan" && x != "-nan") { S[name, k] += x; C[name, k]++ } }
function m(name, fmt) { return C[name, k] ? sprintf(fmt, S[name, k] / C[name, k]) : "-" }
{ k = v("mode") SUBSEP v("n")
  if (!(k in seen)) { seen[k] = 1; order[++rows] = k; mode[k] = v("mode"); nn[k] = v("n") }
  if (v("failed") == 1) { failed[k]++; next }
  runs[k]++
  add("tps", v("tps")); add("sus", v("sustained_tps")); add("scpu", v("sustained_cpu_ms_per_write")); add("p50", v("p50_ms")); add("p99", v("p99_ms")); add("w50", v("wake_p50_ms"))
  add("w99", v("wake_p99_ms")); add("l50", v("loaded_p50_ms")); add("l99", v("loaded_p99_ms"))
  add("co", v("commit_p50_ms")); add("pk", v("picked_b")); add("wr", v("writes_b")); add("conns", v("conns_db"))
  add("lis", v("listeners")); add("cpu", v("cpu_ms_per_write")); add("cl", v("client_cpu_ms_per_write"))
  add("mem", v("mem_mib")); add("oth", v("other_cpu_pct"))
  add("wk", v("wake_cpu_ms_per_write")); add("pl", v("pooler_cpu_ms_per_write"))
  add("wkm", v("wake_mib")); add("plm", v("pooler_mib")); add("xw", v("xacts_per_write"))
  en = v("edge_notifies"); tot = v("writes_a") + v("writes_b")
  if (en != "" && en >= 0 && tot > 0) add("notif", 100 * en / tot) }
END {
  print "| mode | gateways | runs | sustained writes/s (every row picked up) | ratio to N=1 | writes/s at full speed | ratio to N=1 | DB CPU per write, N=1 / N | the same at the sustained rate | pickup p50 / p99 ms (insert -> lease, steady) | commit -> lease p50 / p99 ms | commit p50 ms | pickup p50 / p99 ms at full speed | picked / written (steady) | connections | listening | writes that NOTIFY | DB CPU ms per write | transactions per write | simulator CPU ms per write | awp-wake / PgBouncer CPU ms per write | server memory MiB (PSS) | awp-wake / PgBouncer MiB | other CPU % |"
  print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for (r = 1; r <= rows; r++) {
    k = order[r]
    if (!runs[k]) { printf "| %s | %s | 0 | failed |\n", mode[k], nn[k]; continue }
    b = mode[k] SUBSEP 1
    sr = C["sus", b] && C["sus", k] ? sprintf("%.2f", (S["sus", k] / C["sus", k]) / (S["sus", b] / C["sus", b])) : "n/a"
    scr = C["scpu", b] && C["scpu", k] ? sprintf("%.2f", (S["scpu", b] / C["scpu", b]) / (S["scpu", k] / C["scpu", k])) : "n/a"
    ratio = C["tps", b] ? sprintf("%.2f", (S["tps", k] / C["tps", k]) / (S["tps", b] / C["tps", b])) : "n/a"
    cr = C["cpu", b] ? sprintf("%.2f", (S["cpu", b] / C["cpu", b]) / (S["cpu", k] / C["cpu", k])) : "n/a"
    printf "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s | %s / %s | %s / %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s / %s | %s |\n",
      mode[k], nn[k], runs[k], m("sus", "%.0f"), sr, m("tps", "%.0f"), ratio, cr, scr, m("p50", "%.1f"), m("p99", "%.1f"), m("w50", "%.1f"), m("w99", "%.1f"),
      m("co", "%.1f"), m("l50", "%.1f"), m("l99", "%.1f"), m("pk", "%.0f"), m("wr", "%.0f"), m("conns", "%.0f"), m("lis", "%.0f"),
      C["notif", k] ? m("notif", "%.0f %%") : "100 %", m("cpu", "%.2f"), m("xw", "%.2f"), m("cl", "%.2f"), m("wk", "%.2f"), m("pl", "%.2f"),
      m("mem", "%.0f"), m("wkm", "%.0f"), m("plm", "%.0f"), m("oth", "%.0f")
  }
}' "$OUT/results.txt" | tee "$OUT/table.txt"
echo "(sustained: phase C, the highest fixed write rate at which every row written was picked up within 0.5 s of the step's end (bisection between 0 and the rate at full speed, $SECONDS_PER s steps); at full speed: phase A, $WRITERS writers as fast as they can, where a host that cannot keep up leaves part of its work after the phase; the same at the sustained rate: from the database's CPU in phase C's highest kept-up step, every row taken as it came; DB CPU per write, N=1 / N: the database's capacity at N relative to N=1 when its CPU is the limit, robust to the other work on a shared machine; pickup: the INSERT sent -> the right gateway's lease returned the row; commit -> lease: from the writer getting its commit's answer (0 when the lease came first); steady = phase B at $RATE writes/s, full speed = phase A with $WRITERS writers; DB CPU per write: every server process, from phase A's start until its rows are leased and finished; transactions per write: the database's commits and rollbacks in phase A (pg_stat_database) per row written, the writer's own included; simulator CPU: this benchmark's own process (writers and every simulated host, on the same cores); awp-wake / PgBouncer: their own processes, phase A; connections: client backends of the database (through PgBouncer: its server connections, the writers and awp-wake's LISTEN); other CPU: the rest of the machine during phase A. Results in $OUT)"
