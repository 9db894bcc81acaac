#!/usr/bin/env bash
# Sets up and runs the whole awp stack on the project's own Postgres cluster: installs the
# Debian packages, builds, starts the cluster (creating it and applying migrations), then runs
# all five daemons in the foreground. Ctrl-C (or SIGTERM) stops every daemon cleanly, then the
# cluster. Settings: .awp/stack.env (created on first run; edit it), then the environment.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${AWP_BUILD_DIR:-$REPO/build}
STATE=${AWP_STATE_DIR:-$REPO/.awp}

# Each step says how long the one before it took, and "awp is up" the total (issue 41: a first
# run in five minutes).
started=$SECONDS
last=$SECONDS
step() {
  (($1 == 1)) || echo "run-stack:       ($((SECONDS - last)) s)" >&2
  last=$SECONDS
  echo "run-stack: [$1/5] $2" >&2
}
step 1 "Debian packages (scripts/install-deps.sh)"
"$REPO/scripts/install-deps.sh"
# The agent runtime the runner and the dispatcher drive (openclaw from npm; they check its
# version at start) downloads while the build compiles: the one waits on the network, the other
# on the CPU. An AGENT_RUNTIME set in .awp/stack.env or the environment wins.
runtime_log=$(mktemp)
"$REPO/scripts/install-runtime.sh" >"$runtime_log.out" 2>"$runtime_log" &
runtime_pid=$!
# Only what the stack runs: the five daemons and awpctl, not the tests and benchmarks.
step 2 "building the daemons and awpctl (scripts/build.sh; the agent runtime downloads meanwhile)"
AWP_BUILD_TARGETS="awp-api-gateway awp-command-runner awp-inbox-dispatcher awp-embedder awp-scheduler awpctl" \
  "$REPO/scripts/build.sh"
step 3 "the agent runtime (scripts/install-runtime.sh)"
if ! wait "$runtime_pid"; then
  cat "$runtime_log" >&2
  echo "run-stack: scripts/install-runtime.sh failed (above)" >&2
  exit 1
fi
cat "$runtime_log" >&2
runtime_wrapper=$(cat "$runtime_log.out")
rm -f "$runtime_log" "$runtime_log.out"
step 4 "the project's Postgres cluster, migrations and logins (scripts/pg-cluster.sh up)"
AWPCTL=$BUILD/bin/awpctl "$REPO/scripts/pg-cluster.sh" up

set -a
# shellcheck disable=SC1091
. "$STATE/cluster.env"
if [[ ! -f $STATE/stack.env ]]; then
  umask 077
  cat >"$STATE/stack.env" <<ENV
# awp stack settings for scripts/run-stack.sh (see README "Configuration" and docs/*.md).
JWT_SECRET=$(openssl rand -hex 32)
SERVICE_ROLE_KEY=$(openssl rand -hex 32)
# The migrations seed the gateway "default" of the default tenant.
GATEWAY_ID=default
API_BIND=127.0.0.1
API_PORT=3000
EMBEDDER_BIND=127.0.0.1
EMBEDDER_PORT=8088
EMBEDDER_URL=http://127.0.0.1:8088
# Everything the daemons write stays under $STATE.
AWP_CONFIG_DIR=$STATE/config
# The agent runtime's state (openclaw.json, agents/, workspace-<slug>/): the runner, the
# dispatcher, the runtime and the api-gateway (agent files) share it (docs/runtime.md).
OPENCLAW_STATE_DIR=$STATE/openclaw
SECRETS_DIR=$STATE/secrets
AWP_STATE_DIR=$STATE/runner
# The files of /storage/v1 (docs/storage.md).
STORAGE_DIR=$STATE/storage
LOG_LEVEL=info
# More agent templates for the runner, published beside deploy/templates (docs/command-runner.md,
# "Templates"): a git repository with template/<name> branches or a templates/<name> folder each
# (git+<url>, a path), or a folder of template folders.
# AWP_TEMPLATES_SOURCE=
ENV
fi
# A stack.env from before /storage/v1: its store goes under $STATE too, not in $HOME.
grep -q '^STORAGE_DIR=' "$STATE/stack.env" || echo "STORAGE_DIR=$STATE/storage" >>"$STATE/stack.env"
# shellcheck disable=SC1091
. "$STATE/stack.env"
# The runner's agent scripts and templates, and the gateway's template list: this checkout's
# (a stack.env of an older run sets none of them).
AWP_RUNTIME_SCRIPTS=${AWP_RUNTIME_SCRIPTS:-$REPO/deploy/runtime}
AWP_TEMPLATES_DIR=${AWP_TEMPLATES_DIR:-$REPO/deploy/templates}
API_TEMPLATES_DIR=${API_TEMPLATES_DIR:-$AWP_TEMPLATES_DIR}
API_CONNECTORS_DIR=${API_CONNECTORS_DIR:-$REPO/deploy/connectors}
AGENT_RUNTIME=${AGENT_RUNTIME:-$runtime_wrapper}
set +a
# The daemons connect as their own roles: the runner, the dispatcher and the embedder as the
# default gateway's own login (AWP_GATEWAY_DATABASE_URL: that gateway's rows only), the scheduler
# as awp_daemon (DATABASE_URL: it sweeps every gateway), the api-gateway as awp_api and its
# realtime reader as awp_realtime (REALTIME_DATABASE_URL: REPLICATION, nothing else). The superuser
# DSN and the role passwords are for the cluster script and migrations only, so they are not in
# any daemon's environment (docs/security.md, "Gateway credentials").
unset AWP_PG_ADMIN_DSN AWP_PG_DAEMON_PASSWORD AWP_PG_API_PASSWORD AWP_PG_GATEWAY_PASSWORD \
  AWP_PG_REALTIME_PASSWORD
mkdir -p "$AWP_CONFIG_DIR" "${OPENCLAW_STATE_DIR:-$STATE/openclaw}" "$SECRETS_DIR" "$AWP_STATE_DIR"

step 5 "starting the five daemons"
daemons=(awp-api-gateway awp-command-runner awp-inbox-dispatcher awp-embedder awp-scheduler)
pids=()
signal_all() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; }
stop_all() {
  # A second Ctrl-C while they drain is passed on as a second SIGTERM: the daemons exit at once
  # (their own rule), and this script still waits for them and stops the cluster.
  trap 'echo "run-stack: second signal, daemons exit at once" >&2; signal_all' INT TERM
  echo "run-stack: stopping daemons (a second Ctrl-C skips the drain)" >&2
  signal_all
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  # stack.env sets AWP_STATE_DIR for the runner; the cluster's own state folder is $STATE.
  AWP_STATE_DIR=$STATE "$REPO/scripts/pg-cluster.sh" stop
  exit 0
}
trap stop_all INT TERM
# Each daemon in a session of its own: Ctrl-C reaches only this script, which sends each daemon
# one SIGTERM (a clean drain). Were they in the terminal's process group they would get the
# SIGINT as well, and the SIGTERM after it would count as a second signal: exit at once.
for d in "${daemons[@]}"; do
  case $d in
    # A gateway host's daemons: their gateway's login, and no platform secret they do not use.
    awp-command-runner | awp-inbox-dispatcher | awp-embedder)
      setsid env -u JWT_SECRET -u AWP_API_DATABASE_URL -u AWP_GATEWAY_DATABASE_URL \
        -u AWP_REALTIME_DATABASE_URL DATABASE_URL="$AWP_GATEWAY_DATABASE_URL" "$BUILD/bin/$d" &
      ;;
    # The change stream's login: the gateway's realtime reader only (docs/realtime-capture.md).
    awp-api-gateway)
      setsid env -u AWP_GATEWAY_DATABASE_URL -u AWP_REALTIME_DATABASE_URL \
        REALTIME_DATABASE_URL="${AWP_REALTIME_DATABASE_URL:-}" "$BUILD/bin/$d" &
      ;;
    *) setsid env -u AWP_GATEWAY_DATABASE_URL -u AWP_REALTIME_DATABASE_URL "$BUILD/bin/$d" & ;;
  esac
  pids+=($!)
done
echo "run-stack: ${#daemons[@]} daemons running (logs: JSON lines on stderr); Ctrl-C stops them" >&2

# Once the gateway answers, say where it is and what to do next (README, "The first five
# minutes"): the URL and anon key a UI or a script gives the client library, from /api/config.
announce() {
  local host=${API_BIND:-127.0.0.1} url config='' anon
  [[ $host == 0.0.0.0 || $host == :: ]] && host=127.0.0.1
  [[ $host == *:* ]] && host="[$host]"
  url="http://$host:${API_PORT:-3000}"
  for _ in $(seq 1 300); do
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || return 0; done
    config=$(curl -fsS --max-time 2 "$url/api/config" 2>/dev/null) && break
    sleep 0.1
  done
  [[ -n $config ]] || { echo "run-stack: the gateway did not answer $url/api/config" >&2; return 0; }
  anon=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["workspace"].get("anonKey") or "")' \
    <<<"$config" 2>/dev/null || true)
  cat >&2 <<EOF
run-stack: awp is up ($((SECONDS - started)) s after the start of run-stack; starting the daemons: $((SECONDS - last)) s)
run-stack:   URL       $url   (the client library's url: /rest/v1, /auth/v1 and /api)
run-stack:   anon key  ${anon:-(none yet: GET $url/api/config)}
run-stack:   service-role key: SERVICE_ROLE_KEY in $STATE/stack.env (a server's secret: never in a browser)
run-stack: next, in another terminal: add a user (type its password, then Enter), then sign in with the
run-stack: client library or curl (README, "The first five minutes"):
run-stack:   (cd "$REPO" && set -a && . "$STATE/cluster.env" && "$BUILD/bin/awpctl" user add --email you@example.com)
EOF
}
announce
# If a daemon dies on its own, stop everything: a half stack is not what the user asked for.
wait -n "${pids[@]}" || true
echo "run-stack: a daemon exited; stopping the rest" >&2
stop_all
