#!/usr/bin/env bash
# What a gateway key costs the database per transaction (sql/0026), measured against a gateway's
# own login, and what the new policies cost an own login against the policies before, in one run.
#
# Three databases cloned from the migrated template, one gateway each:
#   before  the sql/0023 policies restored (the binding looked up, no claim): the design before;
#   own     the shipped policies, the gateway's own login (the binding, then COALESCE);
#   key     the shipped policies, the shared pool login presenting the gateway's key in the same
#           pipeline as the statement (pgbench \startpipeline: one round trip, one implicit
#           transaction, as core pg::connection sends it).
# Each transaction is what a runner's lease loop runs most: lease_and_start_command on its queue
# (empty: every policy and the RPC run, no row to start), then a read of its secrets (the sync).
# pgbench, CLIENTS clients, SECONDS_PER s, unnamed statements (-M extended, as through PgBouncer),
# ROUNDS rounds in a rotating order; prints tx/s and the server's CPU per transaction, medians,
# with the ratios own / before and key / own.
#
# Usage: bench/keys/claim-cost.sh [build dir]   ROUNDS (5), SECONDS_PER (10), CLIENTS (4)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$REPO/build}
OUT=${OUT:-/tmp/awp-keys-claim-cost}
ROUNDS=${ROUNDS:-5}; SECONDS_PER=${SECONDS_PER:-10}; CLIENTS=${CLIENTS:-4}
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD"
command -v pgbench >/dev/null || { echo "pgbench not found (postgresql-15)" >&2; exit 1; }
mkdir -p "$OUT"
tenant=00000000-0000-0000-0000-000000000000
password=claim-cost-bench-password-0123456789
sides=(before own key)
q() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
  for v in "${sides[@]}"; do q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS awp_bench_claim_$v WITH (FORCE)" >/dev/null; done
}
trap cleanup EXIT
declare -A url
for v in "${sides[@]}"; do
  db=awp_bench_claim_$v
  q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
  dsn="${AWP_PG_ADMIN_DSN/dbname=awp/dbname=$db}"
  gw=$(psql -X -qAt "$dsn" -c "WITH g AS (INSERT INTO gateways (tenant_id, slug, label, status) VALUES ('$tenant', 'claim-bench', 'claim-bench', 'ready') RETURNING id), a AS (INSERT INTO agents (tenant_id, name, slug, gateway_id, status) SELECT '$tenant', 'A', 'a', id, 'ready' FROM g RETURNING gateway_id) SELECT gateway_id FROM a")
  psql -X -qAt "$dsn" -c "INSERT INTO secrets (tenant_id, gateway_id, key, encrypted_value) SELECT '$tenant', '$gw', 'K' || n, 'enc:v1:aaaa.bbbb.cccc' FROM generate_series(1, 5) n" >/dev/null
  if [[ $v == before ]]; then  # sql/0023's expression: the login's binding only
    q "$dsn" -c "DO \$\$ DECLARE r record; v text; BEGIN
      FOR r IN SELECT p.tablename, p.policyname, p.cmd FROM pg_policies p WHERE p.schemaname = 'public' AND p.policyname IN ('gateway_own', 'gateway_tenant') LOOP
        v := format('%I = (SELECT g.%I FROM public.gateway_roles g WHERE g.role_name = session_user)',
                    CASE WHEN r.tablename = 'gateways' OR r.tablename = 'tenants' THEN 'id' WHEN r.policyname = 'gateway_own' THEN 'gateway_id' ELSE 'tenant_id' END,
                    CASE WHEN r.policyname = 'gateway_own' THEN 'gateway_id' ELSE 'tenant_id' END);
        EXECUTE format('ALTER POLICY %I ON public.%I USING (%s)%s', r.policyname, r.tablename, v,
                       CASE WHEN r.cmd = 'ALL' THEN ' WITH CHECK (' || v || ')' ELSE '' END);
      END LOOP; END \$\$"
  fi
  lease="SELECT count(*) FROM public.lease_and_start_command(60, '$gw', 'bench');"
  read_secrets="SELECT count(*) FROM public.secrets WHERE sync_status IS DISTINCT FROM 'active';"
  if [[ $v == key ]]; then
    q "$dsn" -c "SELECT public.awp_gateway_pool_role('$password', 'awp_pool_claim_bench')" >/dev/null
    secret=$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n' | cut -c1-43)
    q "$dsn" -c "SELECT 1 FROM public.awp_gateway_key('$gw', sha256(convert_to('$secret', 'UTF8')))" >/dev/null
    key="awpk_${gw//-/}_$secret"
    printf '\\startpipeline\nSELECT public.awp_present_gateway_key('"'"'%s'"'"');\n%s\n\\endpipeline\n\\startpipeline\nSELECT public.awp_present_gateway_key('"'"'%s'"'"');\n%s\n\\endpipeline\n' \
      "$key" "$lease" "$key" "$read_secrets" >"$OUT/$v.sql"
    url[$v]="host=127.0.0.1 port=$AWP_PG_PORT dbname=$db user=awp_pool_claim_bench password=$password"
  else
    role=$(psql -X -qAt "$dsn" -c "SELECT role_name FROM public.awp_gateway_role('$gw', '$password', 'awp_gw_claim_bench_$v')")
    printf '%s\n%s\n' "$lease" "$read_secrets" >"$OUT/$v.sql"
    url[$v]="host=127.0.0.1 port=$AWP_PG_PORT dbname=$db user=$role password=$password"
  fi
  # A wrong side would measure errors: each script must run cleanly once first.
  pgbench -n -M extended -t 1 -f "$OUT/$v.sql" "${url[$v]}" >/dev/null
done

hz=$(getconf CLK_TCK)
: >"$OUT/rounds.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
  # Rotate the order so no side always runs first or last.
  order=("${sides[@]:$((r % 3))}" "${sides[@]:0:$((r % 3))}")
  for v in "${order[@]}"; do
    c0=$(bench_server_cpu_ticks)
    tps=$(pgbench -n -M extended -c "$CLIENTS" -j 2 -T "$SECONDS_PER" -f "$OUT/$v.sql" "${url[$v]}" 2>/dev/null |
      awk '/^tps/ {print $3; exit}')
    c1=$(bench_server_cpu_ticks)
    us=$(awk -v t="$((c1 - c0))" -v hz="$hz" -v tps="$tps" -v s="$SECONDS_PER" 'BEGIN {printf "%.0f", t / hz * 1e6 / (tps * s)}')
    printf "%s\t%s\t%.0f\t%s\n" "$r" "$v" "$tps" "$us" | tee -a "$OUT/rounds.tsv"
  done
done
awk -F'\t' '
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { n[$2]++; T[$2, n[$2]] = $3; C[$2, n[$2]] = $4 }
  END {
    split("before own key", s, " ")
    for (i = 1; i <= 3; i++) { v = s[i]; for (k = 1; k <= n[v]; k++) { t[k] = T[v, k]; c[k] = C[v, k] }
      mt[v] = median(t, n[v]); mc[v] = median(c, n[v]) }
    printf "\n%-44s %10s %10s %10s %12s %10s\n", "figure (median of " n["own"] " rounds)", "before", "own", "key", "own/before", "key/own"
    printf "%-44s %10.0f %10.0f %10.0f %12.3f %10.3f\n", "transactions/s (lease + secrets read, 2 tx)", mt["before"], mt["own"], mt["key"], mt["own"] / mt["before"], mt["key"] / mt["own"]
    printf "%-44s %10.0f %10.0f %10.0f %12.3f %10.3f\n", "server CPU us per transaction", mc["before"], mc["own"], mc["key"], mc["own"] / mc["before"], mc["key"] / mc["own"]
  }' "$OUT/rounds.tsv"
echo "(before: sql/0023 policies, own login; own: sql/0026 policies, own login; key: sql/0026, pool login + key in the same pipeline. pgbench -M extended, $CLIENTS clients, ${SECONDS_PER}s per side per round, direct to Postgres. Rounds: $OUT/rounds.tsv)"
