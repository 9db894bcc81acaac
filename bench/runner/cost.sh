#!/usr/bin/env bash
# The cost of a command against its bounds, in one run (issue 41; bench/runner/RESULTS.md):
#   protocol  the runner's queue statements (runner_bench protocol: lease_and_start_command, then
#             each command's finish_and_lease_command, as the runner sends them), 1 and 4
#             leasers, beside Postgres alone running one SKIP LOCKED claim + complete per job
#             (pgbench, the claim + complete script of ../shared/bench/pg-limit.sh) on the same
#             cluster, the same socket, at the same concurrency: goal >= 0.90;
#   e2e       the real awp-command-runner with a runtime that exits at once (awp-bench-wake-stamp)
#             beside the spawns of that same runtime alone: goal >= 0.70, out of reach for a
#             runner that starts a command only once its start is durable; so also beside the
#             serial bound of such a runner, the spawns alone and Postgres alone's commit that
#             ends one job and claims the next (chain.sql), one after the other: goal >= 0.70,
#             the issue's proportion of what is reachable (docs/command-runner.md, "One command
#             at a time, and its bound");
#   hosted    HOSTS gateway hosts as docs/scale.md deploys them: a real awp-command-runner and a
#             real awp-inbox-dispatcher per host, through PgBouncer (transaction mode, the shipped
#             reset after every transaction) on one pool login, each host with its gateway's key,
#             wake-ups from a real awp-wake; run_shell ["true"] commands written at RATE per second
#             through the same PgBouncer; the database's CPU per command (every server process,
#             from the first write until the last command is done) beside Postgres alone running
#             the same insert, claim and finish of a job through the same PgBouncer at the same
#             rate (pgbench): goal <= 2.0.
# One command on a fresh checkout: it builds what it runs and starts its own throwaway cluster
# (scripts/pg-cluster.sh, state in .awp/cost) and PgBouncer (scripts/pgbouncer.sh), both stopped
# at the end, so nothing depends on the project's cluster.
# Usage: bench/runner/cost.sh [build dir]
#   COST_PG_PORT (54341), COST_PGBOUNCER_PORT (6441), COST_WAKE_PORT (8097): its ports
#   PROTO_N (10000) commands per protocol run; PG_SECONDS (10) per Postgres-alone protocol cell
#   E2E_N (2000) commands end to end and spawns
#   HOSTS ("1 20") gateway hosts per hosted point; RATE (100) commands/s; SECONDS_PER (20)
#   COST_STEPS ("protocol e2e hosted"): the parts to run; COST_ROUNDS (1): runs of each, the
#   summary gives the median ratio and every run's
#   COST_STATEMENTS=1  a diagnosis, not a measurement: pg_stat_statements (nested statements and
#                      planning, which costs CPU of its own), top statements per part in $OUT
#   COST_NO_FLUSH=1    a diagnosis on a machine whose disk is the bottleneck (a shared one):
#                      synchronous_commit=off for both sides, so commits do not wait for the flush
#   AWP_BENCH_BIN=<dir>  the daemons and awpctl from that folder (an older build's bin/: its awpctl
#                      migrates the databases with its own sql/), runner_bench and the stand-in
#                      runtime from the build: the figures of that older version on this machine
#   COST_BUILD=0       runs the programs in [build dir]/bin as they are, without building them
#   OUT (/tmp/awp-cost-bench): logs and results
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$REPO/build}
OUT=${OUT:-/tmp/awp-cost-bench}
PROTO_N=${PROTO_N:-10000}; PG_SECONDS=${PG_SECONDS:-10}; E2E_N=${E2E_N:-2000}
HOSTS=${HOSTS:-"1 20"}; RATE=${RATE:-100}; SECONDS_PER=${SECONDS_PER:-20}
STEPS=${COST_STEPS:-"protocol e2e hosted"}
ROUNDS=${COST_ROUNDS:-1}
STATEMENTS=${COST_STATEMENTS:-0}
WAKE_PORT=${COST_WAKE_PORT:-8097}
export AWP_PG_PORT=${COST_PG_PORT:-54341}
export AWP_PGBOUNCER_PORT=${COST_PGBOUNCER_PORT:-6441}
export AWP_STATE_DIR=${COST_STATE_DIR:-$REPO/.awp/cost}
mkdir -p "$OUT"
rm -f "$OUT"/*.txt
: >"$OUT/results.txt"

if [[ ${COST_BUILD:-1} != 0 ]]; then
  AWP_BUILD_DIR=$BUILD AWP_BUILD_TARGETS="awpctl awp-command-runner awp-inbox-dispatcher awp-wake runner_bench awp-bench-wake-stamp" \
    "$REPO/scripts/build.sh" >/dev/null
fi
BIN=${AWP_BENCH_BIN:-$BUILD/bin}    # the daemons and awpctl
TOOLS=$BUILD/bin                    # runner_bench and the stand-in runtime
export AWPCTL=$BIN/awpctl
STAMP=$TOOLS/awp-bench-wake-stamp

cluster() { "$REPO/scripts/pg-cluster.sh" "$@"; }
bouncer() { AWP_PGBOUNCER_POOL_SIZE=20 AWP_PGBOUNCER_MAX_DB_CONNECTIONS=40 "$REPO/scripts/pgbouncer.sh" "$@"; }
cluster up >/dev/null 2>&1 || cluster up
set -a
# shellcheck disable=SC1091
. "$AWP_STATE_DIR/cluster.env"
set +a
PGA="host=$AWP_PG_SOCKET_DIR port=$AWP_PG_PORT user=postgres"
q() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$PGA dbname=${DB:-postgres}" "$@"; }
qa() { PGOPTIONS="-c client_min_messages=warning" psql -X -qAt -v ON_ERROR_STOP=1 "$PGA dbname=${DB:-postgres}" "$@"; }
if ((STATEMENTS)); then
  q -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
else
  q -c "ALTER SYSTEM RESET shared_preload_libraries"
fi
if [[ ${COST_NO_FLUSH:-0} == 1 ]]; then
  q -c "ALTER SYSTEM SET synchronous_commit = off"
else
  q -c "ALTER SYSTEM RESET synchronous_commit"
fi
cluster stop >/dev/null
cluster start >/dev/null
if ((STATEMENTS)); then
  q -c "ALTER SYSTEM SET pg_stat_statements.track = 'all'" \
    -c "ALTER SYSTEM SET pg_stat_statements.track_planning = on" -c "SELECT pg_reload_conf()" >/dev/null
fi
bash "$REPO/tests/support/make-template.sh" "$AWPCTL"
PM=$(head -1 "$(qa -c 'SHOW data_directory')/postmaster.pid")

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  bouncer down >/dev/null 2>&1 || true
  cluster stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# CPU ticks of every server process: the postmaster, its live children and the ones it reaped.
pg_ticks() {
  local s t
  s=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$PM/stat")
  for p in $(pgrep -P "$PM"); do
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) && s=$((s + t))
  done
  echo "$s"
}
TICK=$(getconf CLK_TCK)
per_ms() { awk -v t="$1" -v n="$2" -v k="$TICK" 'BEGIN { if (n > 0) printf "%.3f", 1000 * t / k / n; else print "nan" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
result() { echo "$*" | tee -a "$OUT/results.txt"; }
statements() {  # $1 label, $2 database: the top statements since the last reset (COST_STATEMENTS=1)
  ((STATEMENTS)) || return 0
  DB=$2 q -c "SELECT calls, round(total_exec_time::numeric, 1) AS exec_ms, round(total_plan_time::numeric, 1) AS plan_ms,
          round((1000 * (total_exec_time + total_plan_time) / NULLIF(calls, 0))::numeric, 1) AS us_per_call, toplevel,
          left(regexp_replace(query, '\s+', ' ', 'g'), 120) AS query
        FROM pg_stat_statements WHERE query !~* 'password' ORDER BY total_exec_time + total_plan_time DESC LIMIT 60" >"$OUT/statements-$1.txt"
}
reset_statements() { ((STATEMENTS)) && DB=$1 q -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null; return 0; }
new_db() {  # $1 name: a database from the migrated template
  q -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1 TEMPLATE awp_test_template"
}
# The queue of Postgres alone (../shared/bench/pg-limit.sh): a small hot table, one partial index.
make_q() {
  DB=$1 q <<'SQL'
CREATE TABLE q (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
                run_at timestamptz NOT NULL DEFAULT now(), leased_by int, lease_until timestamptz,
                attempts int NOT NULL DEFAULT 0, payload jsonb);
CREATE INDEX q_ready ON q (run_at, id) WHERE state = 'ready';
INSERT INTO q (payload) SELECT jsonb_build_object('i', g) FROM generate_series(1, 1000) g;
GRANT ALL ON q TO awp_daemon;
VACUUM ANALYZE q;
SQL
}
cat >"$OUT/lease.sql" <<'SQL'
UPDATE q SET state = 'leased', leased_by = :client_id, lease_until = now() + interval '30 seconds', attempts = attempts + 1
 WHERE id = (SELECT id FROM q WHERE state = 'ready' AND run_at <= now() ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
 RETURNING id \gset
UPDATE q SET state = 'ready', leased_by = NULL, lease_until = NULL, run_at = now() WHERE id = :id AND leased_by = :client_id;
SQL
# A job of the hosted comparison: written, claimed, finished; three transactions, as a command's
# insert, lease and finish are.
cat >"$OUT/job.sql" <<'SQL'
INSERT INTO q (state, payload) VALUES ('ready', '{"argv": ["true"]}');
UPDATE q SET state = 'leased', leased_by = :client_id, lease_until = now() + interval '30 seconds', attempts = attempts + 1
 WHERE id = (SELECT id FROM q WHERE state = 'ready' AND run_at <= now() ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
 RETURNING id \gset
UPDATE q SET state = 'done', leased_by = NULL, lease_until = NULL WHERE id = :id AND leased_by = :client_id;
SQL
# Postgres alone's end of one job and start of the next, in one statement and one commit (what
# finish_and_lease_command is to the runner): the bound's other half (step_e2e).
cat >"$OUT/chain.sql" <<'SQL'
WITH done AS (UPDATE q SET state = 'ready', leased_by = NULL, lease_until = NULL, run_at = now()
               WHERE id = :id AND leased_by = :client_id RETURNING id)
UPDATE q SET state = 'leased', leased_by = :client_id, lease_until = now() + interval '30 seconds', attempts = attempts + 1
 WHERE id = (SELECT id FROM q WHERE state = 'ready' AND run_at <= now() ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
 RETURNING id, (SELECT count(*) FROM done) AS ended \gset
SQL
tps() { awk '/^tps = / {printf "%.0f", $3}'; }

echo "== the cost of a command ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), $(psql -X -qAt "$PGA dbname=postgres" -c 'SHOW server_version'), synchronous_commit $(qa -c 'SHOW synchronous_commit'))" | tee "$OUT/settings.txt"

# ---- the lease protocol ------------------------------------------------------------------------
step_protocol() {
  local db=awp_cost_p gw n
  new_db $db
  make_q $db
  gw=$(DB=$db qa -c "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('00000000-0000-0000-0000-000000000000', 'bench', 'bench', 'ready') RETURNING id" | head -1)
  for n in 1 4; do
    DB=$db q -c "DELETE FROM agent_commands" -c "VACUUM agent_commands" -c CHECKPOINT
    reset_statements $db
    DATABASE_URL="postgresql://awp_daemon@/$db?host=$AWP_PG_SOCKET_DIR&port=$AWP_PG_PORT" BENCH_GATEWAY=$gw BENCH_GATEWAY_ID=$gw \
      "$TOOLS/runner_bench" protocol "$PROTO_N" "$n" | tee "$OUT/proto$n.txt"
    statements "protocol$n" $db
    DB=$db q -c "VACUUM ANALYZE q" -c CHECKPOINT
    pgbench -n -M prepared -c "$n" -j "$n" -T "$PG_SECONDS" -f "$OUT/lease.sql" "host=$AWP_PG_SOCKET_DIR port=$AWP_PG_PORT user=awp_daemon dbname=$db" 2>&1 | tee "$OUT/pglimit$n.txt" | grep -E '^tps'
    local mine bound
    mine=$(sed -n 's/.*per_second=\([0-9.]*\).*/\1/p' "$OUT/proto$n.txt")
    bound=$(tps <"$OUT/pglimit$n.txt")
    result "protocol leasers=$n commands_per_s=$mine postgres_alone_jobs_per_s=$bound ratio=$(ratio "$mine" "$bound")"
  done
  q -c "DROP DATABASE $db WITH (FORCE)"
}

# ---- end to end --------------------------------------------------------------------------------
step_e2e() {
  local db=awp_cost_e gw role url runner
  new_db $db
  gw=$(DB=$db qa -c "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('00000000-0000-0000-0000-000000000000', 'bench', 'bench', 'ready') RETURNING id" | head -1)
  role=$(DB=$db qa -c "SELECT role_name FROM awp_gateway_role('bench', '$AWP_PG_GATEWAY_PASSWORD')" | head -1)
  url="postgresql://$role:${AWP_PG_GATEWAY_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
  mkdir -p "$OUT/e2e"
  DATABASE_URL=$url GATEWAY_ID=bench AGENT_RUNTIME=$STAMP AWP_INSTANCE=cost-e2e LOG_LEVEL=warn \
    OPENCLAW_STATE_DIR=$OUT/e2e/home SECRETS_DIR=$OUT/e2e/secrets AWP_STATE_DIR=$OUT/e2e/state \
    "$BIN/awp-command-runner" 2>>"$OUT/e2e-runner.log" &
  runner=$!
  pids+=("$runner")
  for _ in $(seq 100); do
    [[ $(DB=$db qa -c "SELECT count(*) FROM daemon_heartbeats WHERE gateway_id = '$gw'") == 1 ]] && break
    sleep 0.1
  done
  reset_statements $db
  # Where a command's time goes: the runner's own CPU, its children's (the runtime's spawns) and
  # the server's, per command.
  local r0 r1 c0 c1 p0 p1
  read -r r0 c0 < <(awk '{print $14 + $15, $16 + $17}' "/proc/$runner/stat")
  p0=$(pg_ticks)
  DATABASE_URL="postgresql://awp_daemon:${AWP_PG_DAEMON_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db" BENCH_GATEWAY_ID=$gw \
    "$TOOLS/runner_bench" e2e "$E2E_N" | tee "$OUT/e2e.txt"
  read -r r1 c1 < <(awk '{print $14 + $15, $16 + $17}' "/proc/$runner/stat")
  p1=$(pg_ticks)
  echo "e2e cpu_ms_per_command runner=$(per_ms $((r1 - r0)) "$E2E_N") runtime=$(per_ms $((c1 - c0)) "$E2E_N") postgres=$(per_ms $((p1 - p0)) "$E2E_N")" |
    tee -a "$OUT/e2e.txt"
  statements e2e $db
  kill -TERM "$runner"; wait "$runner" || true
  "$TOOLS/runner_bench" spawn "$E2E_N" "$STAMP" | tee "$OUT/spawn.txt"
  local e s
  e=$(sed -n 's/^e2e commands.*per_second=\([0-9.]*\).*/\1/p' "$OUT/e2e.txt")
  s=$(sed -n 's/.*per_second=\([0-9.]*\).*/\1/p' "$OUT/spawn.txt")
  # The bound of a runner that runs one command at a time and starts none before its start is
  # durable (docs/command-runner.md, "One command at a time, and its bound"): each command costs
  # at least its spawn plus one commit that ends the previous command and starts it. Postgres
  # alone's such commit: one client, one statement per job that completes the job it holds and
  # claims the next (chain.sql), on the same cluster over TCP like the runner's login. So
  # bound = 1 / (1/spawns + 1/chains) commands/s.
  make_q $db
  DB=$db q -c CHECKPOINT
  pgbench -n -M prepared -c 1 -j 1 -T "$PG_SECONDS" -D id=0 -f "$OUT/chain.sql" \
    "host=127.0.0.1 port=$AWP_PG_PORT user=awp_daemon password=$AWP_PG_DAEMON_PASSWORD dbname=$db" >"$OUT/chain.txt" 2>&1
  local c b
  c=$(tps <"$OUT/chain.txt")
  b=$(awk -v s="$s" -v c="$c" 'BEGIN { if (s > 0 && c > 0) printf "%.0f", 1 / (1 / s + 1 / c); else print 0 }')
  result "e2e commands_per_s=$e spawns_per_s=$s ratio=$(ratio "$e" "$s") postgres_alone_chains_per_s=$c serial_bound_per_s=$b bound_over_spawns=$(ratio "$b" "$s") bound_ratio=$(ratio "$e" "$b")"
  q -c "DROP DATABASE $db WITH (FORCE)"
}

# ---- the hosted path ---------------------------------------------------------------------------
# Hosts, each a runner and a dispatcher on the pool login with its gateway's key, through
# PgBouncer, wake-ups from awp-wake; then run_shell ["true"] written at RATE/s for SECONDS_PER s.
step_hosted_point() {  # $1 hosts
  local h=$1 db=awp_cost_h pool_url i slug key gws=() keys=() hpids=() wake t0 t1 x0 x1 done_n failed
  new_db $db
  bouncer up >/dev/null  # (again: installs its lookup in the new database)
  make_q $db
  "$AWPCTL" --database-url "$PGA dbname=$db" gateway pool-login --password-stdin <<<"$AWP_PG_DAEMON_PASSWORD" >/dev/null 2>&1
  pool_url="postgresql://awp_pool:${AWP_PG_DAEMON_PASSWORD}@127.0.0.1:${AWP_PGBOUNCER_PORT}/$db"
  DB=$db q -c "CREATE TABLE bench_gateways (i int PRIMARY KEY, id uuid NOT NULL, tenant_id uuid NOT NULL)" \
    -c "GRANT SELECT ON bench_gateways TO awp_daemon"
  for ((i = 1; i <= h; i++)); do
    slug=cost-$i
    key=$("$AWPCTL" --database-url "$PGA dbname=$db" gateway key "$slug" --create 2>/dev/null)
    DB=$db q -c "UPDATE gateways SET status = 'ready' WHERE slug = '$slug'" \
      -c "INSERT INTO agents (tenant_id, name, slug, gateway_id) SELECT tenant_id, 'agent $i', 'agent-$i', id FROM gateways WHERE slug = '$slug'" \
      -c "INSERT INTO bench_gateways SELECT $i, id, tenant_id FROM gateways WHERE slug = '$slug'"
    gws+=("$slug"); keys+=("$key")
  done
  WAKE_PORT=$WAKE_PORT DATABASE_URL="postgresql://awp_daemon:${AWP_PG_DAEMON_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db" LOG_LEVEL=warn \
    "$BIN/awp-wake" 2>>"$OUT/wake.log" &
  wake=$!
  pids+=("$wake"); hpids+=("$wake")
  sleep 0.5
  for ((i = 0; i < h; i++)); do
    local dir=$OUT/hosts/${gws[$i]}
    mkdir -p "$dir"
    for d in awp-command-runner awp-inbox-dispatcher; do
      DATABASE_URL=$pool_url DATABASE_PREPARED=off GATEWAY_ID=${gws[$i]} GATEWAY_KEY=${keys[$i]} \
        WAKE_URL=http://127.0.0.1:$WAKE_PORT AGENT_RUNTIME=$STAMP AWP_INSTANCE=${gws[$i]}-$d LOG_LEVEL=warn \
        OPENCLAW_STATE_DIR=$dir/home SECRETS_DIR=$dir/secrets AWP_STATE_DIR=$dir/state \
        "$BIN/$d" 2>>"$OUT/hosts.log" &
      pids+=($!); hpids+=($!)
    done
  done
  for _ in $(seq 600); do
    [[ $(DB=$db qa -c "SELECT count(*) FROM daemon_heartbeats") -ge $((2 * h)) ]] && break
    sleep 0.1
  done
  sleep 2
  # One script per host, the host picked at random per write (pgbench -f script@weight): each write
  # an INSERT ... VALUES, the statement Postgres alone's job writes too (a join to look the host
  # up cost the server 33 µs per write, the bench's, not a command's; RESULTS.md 2026-11-29).
  local scripts=()
  while IFS='|' read -r i gid tid; do
    cat >"$OUT/write-$i.sql" <<SQL
INSERT INTO agent_commands (tenant_id, gateway_id, action, payload, status)
  VALUES ('$tid', '$gid', 'run_shell', '{"argv": ["true"]}', 'pending');
SQL
    scripts+=(-f "$OUT/write-$i.sql@1")
  done < <(DB=$db qa -c "SELECT i, id, tenant_id FROM bench_gateways ORDER BY i")
  reset_statements $db
  x0=$(DB=$db qa -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$db'")
  t0=$(pg_ticks)
  pgbench -n -M extended -c 1 -j 1 -R "$RATE" -T "$SECONDS_PER" "${scripts[@]}" \
    "host=127.0.0.1 port=$AWP_PGBOUNCER_PORT user=awp_daemon password=$AWP_PG_DAEMON_PASSWORD dbname=$db" >"$OUT/write-$h.txt" 2>&1
  for _ in $(seq 600); do
    [[ $(DB=$db qa -c "SELECT count(*) FROM agent_commands WHERE status NOT IN ('done', 'failed')") == 0 ]] && break
    sleep 0.1
  done
  t1=$(pg_ticks)
  x1=$(DB=$db qa -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$db'")
  statements "hosted$h" $db
  done_n=$(DB=$db qa -c "SELECT count(*) FROM agent_commands WHERE status = 'done'")
  failed=$(DB=$db qa -c "SELECT count(*) FROM agent_commands WHERE status <> 'done'")
  for p in "${hpids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${hpids[@]}"; do wait "$p" 2>/dev/null || true; done
  # Postgres alone: the same insert, claim and finish of a job through the same PgBouncer.
  DB=$db q -c "DELETE FROM q" -c "VACUUM ANALYZE q" -c CHECKPOINT
  reset_statements $db
  local b0 b1 jobs
  b0=$(pg_ticks)
  pgbench -n -M extended -c 1 -j 1 -R "$RATE" -T "$SECONDS_PER" -f "$OUT/job.sql" \
    "host=127.0.0.1 port=$AWP_PGBOUNCER_PORT user=awp_daemon password=$AWP_PG_DAEMON_PASSWORD dbname=$db" >"$OUT/alone-$h.txt" 2>&1
  b1=$(pg_ticks)
  statements "alone$h" $db
  jobs=$(awk '/number of transactions actually processed/ {split($NF, a, "/"); print a[1]}' "$OUT/alone-$h.txt")
  local mine bound
  mine=$(per_ms $((t1 - t0)) "$done_n")
  bound=$(per_ms $((b1 - b0)) "$jobs")
  result "hosted hosts=$h commands=$done_n not_done=$failed db_cpu_ms_per_command=$mine transactions_per_command=$(awk -v a=$((x1 - x0)) -v n="$done_n" 'BEGIN {printf "%.2f", n ? a / n : 0}') postgres_alone_jobs=$jobs postgres_alone_db_cpu_ms_per_job=$bound ratio=$(ratio "$mine" "$bound")"
  bouncer down >/dev/null
  q -c "DROP DATABASE $db WITH (FORCE)"
}
step_hosted() { for h in $HOSTS; do step_hosted_point "$h"; done; }

for ((round = 1; round <= ROUNDS; round++)); do
  for s in $STEPS; do "step_$s"; done
done

echo
echo "== results ($(nproc) cores, load at the end $(cut -d' ' -f1-3 /proc/loadavg), $ROUNDS round(s): the median, then each round)"
echo "   goals: protocol >= 0.90 x Postgres alone, end to end >= 0.70 x the spawns alone (out of reach: bound/spawns is the most a"
echo "   runner that starts a command only once its start is durable can reach; RESULTS.md), so >= 0.70 x that serial bound,"
echo "   hosted database CPU <= 2.0 x Postgres alone"
awk '
function v(k,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
function median(list,   a, n, i, j, t) {
  n = split(list, a, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ if ($1 == "protocol") k = "lease protocol, " v("leasers") " leaser(s): commands/s / Postgres alone jobs/s"
  else if ($1 == "e2e") {
    k2 = "end to end: commands/s / the serial bound (spawn + Postgres alone commit) per s"
    if (!(k2 in seen)) { seen[k2] = 1; order2[k2] = 1 }
    r[k2] = r[k2] " " v("bound_ratio"); d[k2] = d[k2] " " v("commands_per_s") "/" v("serial_bound_per_s") "(bound/spawns " v("bound_over_spawns") ")"
    k = "end to end: commands/s / spawns alone per s" }
  else if ($1 == "hosted") k = "hosted, " v("hosts") " host(s): DB CPU ms per command / Postgres alone per job"
  else next
  if (!(k in seen)) { seen[k] = 1; order[++n] = k }
  r[k] = r[k] " " v("ratio")
  if ($1 == "protocol") d[k] = d[k] " " v("commands_per_s") "/" v("postgres_alone_jobs_per_s")
  if ($1 == "e2e") d[k] = d[k] " " v("commands_per_s") "/" v("spawns_per_s")
  if ($1 == "hosted") d[k] = d[k] " " v("db_cpu_ms_per_command") "/" v("postgres_alone_db_cpu_ms_per_job") "(" v("transactions_per_command") "tx)" }
END { for (i = 1; i <= n; i++) { k = order[i]; printf "%-78s %5.2f   runs:%s   ratios:%s\n", k, median(r[k]), d[k], r[k]
        if (k ~ /^end to end/) for (k2 in order2) printf "%-78s %5.2f   runs:%s   ratios:%s\n", k2, median(r[k2]), d[k2], r[k2] } }
' "$OUT/results.txt"
