#!/usr/bin/env bash
# The runner's queue protocol (runner_bench protocol: 10,000 pending commands through
# lease_and_start_command and finish_and_lease_command) on the schema of another checkout's sql/
# against this one's, alternated round by round on the same cluster: for a change to the SQL
# alone, where AWP_BENCH_COMPARE (two builds) does not apply.
#
# Usage: bench/runner/sql-compare.sh <before sql dir> [build dir]
#   e.g. git worktree add /tmp/before <commit> && bench/runner/sql-compare.sh /tmp/before/sql
#   ROUNDS (3), PROTO_N (10000); configurations: 1 and 4 leasers over the Unix socket as awp_daemon,
#   and over TCP as the gateway's own login (row-level security on every statement).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BEFORE=${1:?usage: sql-compare.sh <before sql dir> [build dir]}
BUILD=${2:-$REPO/build}
ROUNDS=${ROUNDS:-3}; PROTO_N=${PROTO_N:-10000}
OUT=${OUT:-/tmp/awp-sql-compare}
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awpctl runner_bench
q() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$@"; }
admin="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=postgres}"
tpl_before=awp_bench_tpl_before db=awp_bench_sqlcmp
cleanup() {
  q "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" \
    -c "UPDATE pg_database SET datistemplate = false WHERE datname = '$tpl_before'" \
    -c "DROP DATABASE IF EXISTS $tpl_before WITH (FORCE)" >/dev/null
}
trap cleanup EXIT
cleanup
q "$admin" -c "CREATE DATABASE $tpl_before"
AWP_SQL_DIR=$BEFORE "$BUILD/bin/awpctl" --database-url "${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$tpl_before}" migrate >/dev/null
bash "$REPO/tests/support/make-template.sh" "$BUILD/bin/awpctl"  # this checkout's sql/
declare -A tpl=([before]=$tpl_before [after]=awp_test_template)
configs=("1 socket" "4 socket" "1 gateway" "4 gateway")
: >"$OUT/rounds.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
  order=(before after); ((r % 2 == 0)) && order=(after before)
  for side in "${order[@]}"; do
    for c in "${configs[@]}"; do
      read -r leasers how <<<"$c"
      q "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db TEMPLATE ${tpl[$side]}"
      dadmin="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$db}"
      gw=$(psql -X -qAt "$dadmin" -c "INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('00000000-0000-0000-0000-000000000000', 'bench', 'bench', 'ready') RETURNING id" | head -1)
      url="postgresql://awp_daemon@/$db?host=$AWP_PG_SOCKET_DIR&port=$AWP_PG_PORT" lease_url=""
      if [[ $how == gateway ]]; then
        role=$(psql -X -qAt "$dadmin" -c "SELECT role_name FROM awp_gateway_role('$gw', '$AWP_PG_GATEWAY_PASSWORD')" | head -1)
        url="postgresql://awp_daemon:${AWP_PG_DAEMON_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
        lease_url="postgresql://$role:${AWP_PG_GATEWAY_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
      fi
      q "$dadmin" -c CHECKPOINT
      per=$(DATABASE_URL=$url BENCH_LEASE_URL=$lease_url BENCH_GATEWAY=bench BENCH_GATEWAY_ID=$gw "$BUILD/bin/runner_bench" protocol "$PROTO_N" "$leasers" |
        sed -n 's/.*per_second=\([0-9.]*\).*/\1/p' | head -1)
      printf '%s\t%s\t%s\n' "$side" "$leasers leaser(s), $how" "$per" | tee -a "$OUT/rounds.tsv"
    done
  done
done
awk -F'\t' '
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { k = $2; if (!(k in seen)) { seen[k] = 1; order[++m] = k } n[$1, k]++; v[$1, k, n[$1, k]] = $3 }
  END {
    printf "\n%-40s %10s %10s %12s\n", "protocol, commands/s (median of rounds)", "before", "after", "after/before"
    for (i = 1; i <= m; i++) { k = order[i]
      for (j = 1; j <= n["before", k]; j++) b[j] = v["before", k, j]; mb = median(b, n["before", k])
      for (j = 1; j <= n["after", k]; j++) a[j] = v["after", k, j]; ma = median(a, n["after", k])
      printf "%-40s %10.0f %10.0f %12.3f\n", k, mb, ma, ma / mb }
  }' "$OUT/rounds.tsv"
