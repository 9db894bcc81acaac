#!/usr/bin/env bash
# Sets up everything the tests need (Debian packages, pgvector, a build, the project's own
# Postgres) and runs the suites by label: unit, integration, e2e, data-api (the real
# @supabase/supabase-js in node against the gateway: tests/data-api/README.md), and pgbouncer
# (the daemons' e2e tests again with their DATABASE_URL through PgBouncer in transaction mode, one
# server connection per pool: scripts/pgbouncer.sh, started here and stopped afterwards). Stops
# the cluster afterwards when it was not running before. Usage: scripts/test.sh [label ...]
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${AWP_BUILD_DIR:-$REPO/build}
labels=("$@")
((${#labels[@]})) || labels=(unit integration e2e data-api)

# The time of each phase, printed as it ends and again at the end.
phase_start=$SECONDS
phases=()
phase_done() {
  phases+=("$1 $((SECONDS - phase_start)) s")
  echo "test.sh: $1: $((SECONDS - phase_start)) s" >&2
  phase_start=$SECONDS
}
AWP_DEPS=tests "$REPO/scripts/install-deps.sh"
phase_done "packages"
"$REPO/scripts/build.sh"
phase_done "build"
# The real agent runtime (openclaw from npm) the runtime e2e tests drive; installed above.
AWP_OPENCLAW=${AWP_OPENCLAW:-$("$REPO/scripts/install-runtime.sh")}
export AWP_OPENCLAW

started=0
if ! "$REPO/scripts/pg-cluster.sh" status >/dev/null 2>&1; then started=1; fi
bouncer=0
cleanup() {
  if ((bouncer)); then "$REPO/scripts/pgbouncer.sh" down || true; fi
  if ((started)); then "$REPO/scripts/pg-cluster.sh" stop || true; fi
}
trap cleanup EXIT
AWPCTL=$BUILD/bin/awpctl "$REPO/scripts/pg-cluster.sh" up
set -a
# shellcheck disable=SC1091
. "${AWP_STATE_DIR:-$REPO/.awp}/cluster.env"
set +a

status=0
for label in "${labels[@]}"; do
  if [[ $label == pgbouncer ]] && ! ((bouncer)); then
    # Pool size 1: every client of a database and user shares one server connection, so a
    # named prepared statement or a session SET of one client breaks or shows in another.
    if ! "$REPO/scripts/pgbouncer.sh" status >/dev/null 2>&1; then bouncer=1; fi
    AWP_PGBOUNCER_POOL_SIZE=${AWP_PGBOUNCER_POOL_SIZE:-1} "$REPO/scripts/pgbouncer.sh" up >/dev/null
    set -a
    # shellcheck disable=SC1091
    . "${AWP_STATE_DIR:-$REPO/.awp}/pgbouncer.env"
    set +a
  fi
  # Tests at a time: the integration tests mostly wait on Postgres, timers and leases (their sum
  # is four times the suite's time at 6: 47 s, against 90 s at 2), so 6 there; the e2e tests
  # wait too, but the real runtime's CLI keeps both cores busy at 4 (6 was slower); the data
  # API's five (three shares of the client files, the real runner's file, the restart drills)
  # side by side; 2 elsewhere. AWP_TEST_JOBS sets every label's.
  jobs=2
  [[ $label == integration ]] && jobs=6
  [[ $label == e2e ]] && jobs=4
  [[ $label == data-api ]] && jobs=5
  echo "== ctest -L $label"
  ctest --test-dir "$BUILD" -L "^$label\$" --output-on-failure -j"${AWP_TEST_JOBS:-$jobs}" \
    --timeout "${AWP_TEST_TIMEOUT:-600}" || status=1
  phase_done "ctest -L $label"
done
echo "test.sh: phases: $(printf '%s; ' "${phases[@]}")total $SECONDS s" >&2
exit $status
