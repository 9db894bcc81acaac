#!/usr/bin/env bash
# Two builds of awp-api-gateway side by side on one database, rounds interleaved so that the
# machine's load falls on both alike: GET /api/health (100 connections) and the authenticated
# GET /api/auth/session (100 and 10), wrk -t2 for $DUR s per cell, $ROUNDS rounds; prints each
# round and the median of each build with B/A. For "is this change slower?" questions.
# Usage: bench/api/ab.sh <build dir A> <build dir B>   (the cluster up: scripts/pg-cluster.sh up)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
A=${1:?usage: ab.sh <build A> <build B>}; B=${2:?usage: ab.sh <build A> <build B>}
DUR=${DUR:-8}; ROUNDS=${ROUNDS:-3}; OUT=${OUT:-/tmp/awp-api-ab}
PORT_A=${PORT_A:-38190}; PORT_B=${PORT_B:-38191}
mkdir -p "$OUT"
set -a
# shellcheck disable=SC1091
. "$REPO/.awp/cluster.env"
set +a
db=awp_bench_ab_$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
}
trap cleanup EXIT
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE $db TEMPLATE awp_test_template"
DSN="postgresql://awp_api:${AWP_PG_API_PASSWORD}@127.0.0.1:${AWP_PG_PORT}/$db"
JWT_SECRET=bench-jwt-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export JWT_SECRET
TOKEN=$("$B/bin/awpctl" token --user-id "$(cat /proc/sys/kernel/random/uuid)" \
  --tenant-id 00000000-0000-0000-0000-000000000000 --ttl 3600)
start() {  # build port name
  rm -rf "${OUT:?}/$3"
  API_PORT=$2 AWP_API_DATABASE_URL=$DSN AWP_CONFIG_DIR=$OUT/$3/config AGENTS_DIR=$OUT/$3/agents \
    API_TEMPLATES_DIR=$REPO/deploy/templates API_CONNECTORS_DIR=$REPO/deploy/connectors \
    "$1/bin/awp-api-gateway" 2>"$OUT/$3.log" &
  pids+=($!)
  for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$2/api/health" && return 0; sleep 0.1; done
  echo "gateway $3 did not start" >&2; exit 1
}
start "$A" "$PORT_A" a
start "$B" "$PORT_B" b
rps() { wrk -t2 -c"$1" -d"$DUR"s "${@:3}" "$2" | awk '/^Requests\/sec/ {printf "%.0f", $2}'; }
declare -A res
for r in $(seq 1 "$ROUNDS"); do
  for who in a b; do
    port=$PORT_A; [ $who = b ] && port=$PORT_B
    res[$who,health,$r]=$(rps 100 "http://127.0.0.1:$port/api/health")
    res[$who,s100,$r]=$(rps 100 "http://127.0.0.1:$port/api/auth/session" -H "Authorization: Bearer $TOKEN")
    res[$who,s10,$r]=$(rps 10 "http://127.0.0.1:$port/api/auth/session" -H "Authorization: Bearer $TOKEN")
  done
  echo "round $r: health A ${res[a,health,$r]} B ${res[b,health,$r]} | session/100 A ${res[a,s100,$r]} B ${res[b,s100,$r]} | session/10 A ${res[a,s10,$r]} B ${res[b,s10,$r]}"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "== medians of $ROUNDS rounds, req/s (A = $A, B = $B)"
for cell in health s100 s10; do
  a=(); b=()
  for r in $(seq 1 "$ROUNDS"); do a+=("${res[a,$cell,$r]}"); b+=("${res[b,$cell,$r]}"); done
  ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
  printf '%-12s A %-8s B %-8s B/A %s\n' "$cell" "$ma" "$mb" "$(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.2f", b / a}')"
done
