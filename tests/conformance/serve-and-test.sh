#!/usr/bin/env bash
# The second half of a conformance run (lib.sh, conformance_serve_and_test): awp-api-gateway on
# 127.0.0.1:54321 for the scratch database, then jest on the copy of the package — unmodified
# tests, --ci (a snapshot that does not match fails; none is ever written), --runInBand — with
# its JSON results and the tests that reached the gateway, then the summary (summarize.mjs).
# Usage (from lib.sh, its variables exported): serve-and-test.sh NAME=value ... -- <jest config>
# <suite> [jest arguments]
set -euo pipefail
log() { echo "conformance: $*" >&2; }
die() {
  log "$*"
  exit 2
}

settings=()
while (($#)) && [[ $1 != -- ]]; do
  settings+=("$1")
  shift
done
(($#)) || die "usage: serve-and-test.sh NAME=value ... -- <jest config> <suite> [jest arguments]"
shift
config=$1 suite=$2
shift 2

if [[ -n ${AWP_CONFORMANCE_NETNS:-} ]]; then
  ip link set lo up || die "cannot bring up the loopback of the network namespace"
elif (exec 3<>"/dev/tcp/127.0.0.1/$API_PORT") 2>/dev/null; then
  die "port $API_PORT is taken (another conformance run, or a local Supabase): the suites need it"
fi

# Run through a link of another name: a run takes minutes, and on a shared machine a cleanup by
# process name (pkill awp-api-gateway) elsewhere would stop this gateway half-way through.
ln -sf "$BIN/awp-api-gateway" "$WORK/conformance-server"
# Over the cluster's unix socket: it is reachable from any network namespace. The request rates
# are off below: a suite sends hundreds of requests a second from one address, not one client.
dsn="host=$AWP_PG_SOCKET_DIR port=$AWP_PG_PORT user=awp_api password=$AWP_PG_API_PASSWORD dbname=$DB"
env -i PATH=/usr/bin:/bin HOME="$WORK" \
  AWP_API_DATABASE_URL="$dsn" API_BIND=127.0.0.1 API_PORT="$API_PORT" API_THREADS=2 API_DB_POOL=8 \
  AWP_CONFIG_DIR="$WORK/config" OPENCLAW_STATE_DIR="$WORK/openclaw" \
  API_TEMPLATES_DIR="$REPO/deploy/templates" API_CONNECTORS_DIR="$REPO/deploy/connectors" \
  EMBEDDER_URL=http://127.0.0.1:9 LOG_LEVEL=info \
  API_RATE_REST_ADDRESS=off API_RATE_REST_USER=off API_RATE_AUTH_ADDRESS=off API_RATE_AUTH_USER=off \
  "${settings[@]}" "$WORK/conformance-server" 2>"$OUT/gateway.log" &
gateway=$!
stop() {
  kill -TERM "$gateway" 2>/dev/null || true
  wait "$gateway" 2>/dev/null || true
}
trap stop EXIT
up=0
for _ in $(seq 1 150); do
  if curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$API_PORT/api/health" 2>/dev/null; then
    up=1
    break
  fi
  kill -0 "$gateway" 2>/dev/null || break
  sleep 0.1
done
if ((!up)); then
  tail -n 20 "$OUT/gateway.log" >&2
  die "awp-api-gateway did not come up on port $API_PORT"
fi

results=$OUT/jest-results.json
hits=$OUT/server-tests.jsonl
rm -f "$results" "$hits"
log "jest --ci --runInBand ($suite, $TAG) against awp-api-gateway on 127.0.0.1:$API_PORT"
set +e
(cd "$PKG" && AWP_CONFORMANCE_PKG=$PKG AWP_CONFORMANCE_HITS=$hits \
  AWP_CONFORMANCE_SERVER="http://localhost:$API_PORT,http://127.0.0.1:$API_PORT" \
  "$NODE" "$CONF/node_modules/jest/bin/jest.js" --config "$CONF/$config" --ci --runInBand \
  --json --outputFile="$results" "$@" >"$OUT/jest.log" 2>&1)
jest_status=$?
set -e
# A gateway that is gone before jest ended (crashed, or killed from outside) turns every later
# test into a refused connection: say so beside the numbers.
note=
if ! kill -0 "$gateway" 2>/dev/null; then
  wait "$gateway" 2>/dev/null && gw_status=0 || gw_status=$?
  note="awp-api-gateway exited (status $gw_status) before jest ended: later tests could not reach it; see $OUT/gateway.log"
  log "$note"
fi
if [[ ! -s $results ]]; then
  tail -n 40 "$OUT/jest.log" >&2
  die "jest gave no results (exit $jest_status): see $OUT/jest.log"
fi
AWP_CONFORMANCE_NOTE=$note "$NODE" "$CONF/summarize.mjs" "$results" "$hits" "$OUT/summary.json" "$suite" "$PKG"
