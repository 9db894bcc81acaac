#!/usr/bin/env bash
# First run: fresh clone -> stack up. Clones a commit of a repository into a new folder, runs
# scripts/run-stack.sh there under /usr/bin/time -v with ccache off (an honest cold build), waits
# for its "daemons running" line and then for the api-gateway to answer GET /api/health, then
# stops the stack with one SIGTERM (daemons drained, cluster stopped) and removes the clone.
# Prints: wall seconds to the "running" line and to the first health answer, and /usr/bin/time's
# wall, user and system CPU seconds of the whole run (the stop included: a second or two).
# Usage: bench/first-run.sh [commit] [repository]   (default HEAD of this checkout)
# AWP_PG_PORT: the clone's cluster port (default 54340, not the project's, so the two never meet);
# KEEP=1 keeps the clone and its build; OUT: log folder (default /tmp/awp-first-run).
# The stack's api-gateway listens on 127.0.0.1:3000 and the embedder on 8088 (run-stack's
# defaults); these ports must be free.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REV=${1:-HEAD}
SRC=${2:-$REPO}
OUT=${OUT:-/tmp/awp-first-run}
export AWP_PG_PORT=${AWP_PG_PORT:-54340}
sha=$(git -C "$SRC" rev-parse --short "$REV")
dir=$(mktemp -d "/tmp/fresh-$sha.XXXXXX")
chmod 755 "$dir"  # as a checkout normally is: the cluster's data stays in it (postgres reaches it)
log=$OUT/$sha.log
mkdir -p "$OUT"
git clone -q "$SRC" "$dir"
git -C "$dir" checkout -q "$sha"
[[ -x /usr/bin/time ]] || { echo "first-run: /usr/bin/time missing (Debian package time)" >&2; exit 1; }

time_pid=
cleanup() {
  if [[ -n $time_pid ]] && kill -0 "$time_pid" 2>/dev/null; then
    pkill -TERM -P "$time_pid" 2>/dev/null || true
    wait "$time_pid" 2>/dev/null || true
  fi
  # The cluster is stopped by run-stack itself; this is for a run that died half way.
  [[ -d $dir/.awp/pg ]] && AWP_STATE_DIR=$dir/.awp "$dir/scripts/pg-cluster.sh" stop >/dev/null 2>&1
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$dir"
}
trap cleanup EXIT

echo "first-run: $sha in $dir, cluster port $AWP_PG_PORT, CCACHE_DISABLE=1, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s.%N)
( cd "$dir" && CCACHE_DISABLE=1 exec /usr/bin/time -v -o "$OUT/$sha.time" ./scripts/run-stack.sh ) >"$log" 2>&1 &
time_pid=$!
since() { awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN {printf "%.1f", n - s}'; }
running=
while kill -0 "$time_pid" 2>/dev/null; do
  if grep -qs 'daemons running' "$log"; then running=$(since); break; fi
  sleep 0.5
done
[[ -n $running ]] || { echo "first-run: run-stack ended before the stack was up; see $log" >&2; exit 1; }
healthy=
for _ in $(seq 1 600); do
  if curl -fsS -o /dev/null http://127.0.0.1:3000/api/health 2>/dev/null; then healthy=$(since); break; fi
  sleep 0.1
done
# One SIGTERM to run-stack (the child of time): it drains the daemons and stops the cluster.
pkill -TERM -P "$time_pid"
wait "$time_pid" || true
time_pid=
tv() { sed -n "s/^[[:space:]]*$1: //p" "$OUT/$sha.time"; }
echo "first-run: $sha: 'daemons running' after ${running} s, api-gateway health after ${healthy:-never} s"
echo "first-run: $sha: /usr/bin/time: wall $(tv 'Elapsed (wall clock) time (h:mm:ss or m:ss)'), user $(tv 'User time (seconds)') s, system $(tv 'System time (seconds)') s, max RSS $(tv 'Maximum resident set size (kbytes)') kB (log $log)"
