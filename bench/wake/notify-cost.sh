#!/usr/bin/env bash
# What raising every per-gateway wake-up twice (its own channel and awp_wake, sql/functions/
# wake.sql) costs a single host, measured against raising it once, in one run.
#
# Two databases cloned from the migrated template: "once" gets a public.awp_notify_gateway that
# only notifies the gateway's own channel (the design before the relay), "both" keeps the shipped
# one. Each has one idle session LISTENing on the gateway's command channel, as the runner does
# on a single host. pgbench then inserts commands (one per transaction, the queue triggers fire)
# with CLIENTS clients for SECONDS seconds, alternating once/both for ROUNDS rounds (order swapped
# each round), and prints tx/s and the server's CPU per insert for each, with the ratio
# both / once of the medians.
#
# Usage: bench/wake/notify-cost.sh [build dir]   ROUNDS (5), SECONDS_PER (10), CLIENTS (4)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$REPO/build}
OUT=${OUT:-/tmp/awp-wake-notify-cost}
ROUNDS=${ROUNDS:-5}; SECONDS_PER=${SECONDS_PER:-10}; CLIENTS=${CLIENTS:-4}
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD"
command -v pgbench >/dev/null || { echo "pgbench not found (postgresql-contrib / postgresql-15)" >&2; exit 1; }
mkdir -p "$OUT"
tenant=00000000-0000-0000-0000-000000000000
cleanup() {
  # Closing the fifos ends the listening psql sessions.
  [[ -n ${fd_once:-} ]] && exec {fd_once}>&-
  [[ -n ${fd_both:-} ]] && exec {fd_both}>&-
  rm -f "$OUT"/fifo-*
  for v in once both; do
    PGOPTIONS="-c client_min_messages=warning" psql -X -q "$AWP_PG_ADMIN_DSN" \
      -c "DROP DATABASE IF EXISTS awp_bench_notify_$v WITH (FORCE)" >/dev/null
  done
}
trap cleanup EXIT
for v in once both; do
  db=awp_bench_notify_$v
  PGOPTIONS="-c client_min_messages=warning" psql -X -q "$AWP_PG_ADMIN_DSN" \
    -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
  dsn="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$db}"
  if [[ $v == once ]]; then
    psql -X -q -v ON_ERROR_STOP=1 "$dsn" -c "CREATE OR REPLACE FUNCTION public.awp_notify_gateway(p_channel text, p_payload text) RETURNS void LANGUAGE sql SET search_path = '' AS \$\$ SELECT pg_catalog.pg_notify(p_channel, coalesce(p_payload, '')); \$\$"
  fi
  read -r gw agent < <(psql -X -qAt -F ' ' "$dsn" -c "WITH g AS (INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('$tenant', 'bench', 'bench', 'ready') RETURNING id), a AS (INSERT INTO agents (tenant_id, name, slug, gateway_id, status) SELECT '$tenant', 'A', 'a', id, 'ready' FROM g RETURNING id, gateway_id) SELECT gateway_id, id FROM a")
  printf "INSERT INTO agent_commands (tenant_id, agent_id, action, payload) VALUES ('%s', '%s', 'update', '{}');\n" "$tenant" "$agent" >"$OUT/insert-$v.sql"
  # The single host's runner: one idle session LISTENing on the gateway's channel.
  ch="awp_commands_${gw//-/}"
  mkfifo "$OUT/fifo-$v" 2>/dev/null || true
  (psql -X -q "$dsn" <"$OUT/fifo-$v" >/dev/null 2>&1 &)
  exec {fd}>"$OUT/fifo-$v"
  echo "LISTEN $ch;" >&$fd
  eval "fd_$v=$fd"
done
sleep 0.5

hz=$(getconf CLK_TCK)
: >"$OUT/rounds.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
  order=(once both); ((r % 2 == 0)) && order=(both once)
  for v in "${order[@]}"; do
    dsn="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=awp_bench_notify_$v}"
    c0=$(bench_server_cpu_ticks)
    tps=$(pgbench -n -c "$CLIENTS" -j 2 -T "$SECONDS_PER" -f "$OUT/insert-$v.sql" "$dsn" 2>/dev/null |
      awk '/^tps/ {print $3; exit}')
    c1=$(bench_server_cpu_ticks)
    us=$(awk -v t="$((c1 - c0))" -v hz="$hz" -v tps="$tps" -v s="$SECONDS_PER" 'BEGIN {printf "%.0f", t / hz * 1e6 / (tps * s)}')
    printf "%s\t%s\t%.0f\t%s\n" "$r" "$v" "$tps" "$us" | tee -a "$OUT/rounds.tsv"
  done
done
awk -F'\t' '
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { if ($2 == "once") { to[++no] = $3; co[no] = $4 } else { tb[++nb] = $3; cb[nb] = $4 } }
  END {
    mto = median(to, no); mtb = median(tb, nb); mco = median(co, no); mcb = median(cb, nb)
    printf "\n%-34s %12s %12s %8s\n", "figure (median of " no " rounds)", "once", "both", "ratio"
    printf "%-34s %12.0f %12.0f %8.3f\n", "insert tx/s (1 listener)", mto, mtb, mtb / mto
    printf "%-34s %12.0f %12.0f %8.3f\n", "server CPU us per insert", mco, mcb, mcb / mco
  }' "$OUT/rounds.tsv"
