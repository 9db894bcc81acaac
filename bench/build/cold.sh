#!/usr/bin/env bash
# Cold builds, back to back: each revision cloned into a new folder and built from nothing with
# ccache off (CCACHE_DISABLE=1), as on a fresh machine, in the order scripts/run-stack.sh and
# scripts/test.sh build: configure, then the stack (the five daemons and awpctl), then the rest
# (`all`: test suites, awp-wake). Prints, per revision and phase, the wall clock and the CPU time
# (user + system) of the build, then after / before for each phase when two revisions are given.
# CPU time is the steadier figure on a shared machine; wall is what a newcomer waits on two cores.
# Usage: bench/build/cold.sh [before-rev] [after-rev]   (default: HEAD alone)
#   AWP_JOBS: parallel jobs (default: the number of cores); KEEP=1 keeps the clones and builds;
#   COLD_CMAKE_ARGS: more configure arguments for both, e.g. "-DAWP_DEBUG_INFO=lines";
#   OUT: results folder (default /tmp/awp-cold-build)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-/tmp/awp-cold-build}
JOBS=${AWP_JOBS:-$(nproc)}
STACK="awp-api-gateway awp-command-runner awp-inbox-dispatcher awp-embedder awp-scheduler awpctl"
revs=("$@")
((${#revs[@]})) || revs=(HEAD)
mkdir -p "$OUT"
[[ -x /usr/bin/time ]] || { echo "cold: /usr/bin/time missing (Debian package time)" >&2; exit 1; }

dirs=()
cleanup() { [[ ${KEEP:-0} == 1 ]] || for d in "${dirs[@]}"; do rm -rf "$d"; done; }
trap cleanup EXIT

# phase <name> <rev> <command...>: runs it under /usr/bin/time, appends "rev phase wall cpu".
phase() {
  local name=$1 rev=$2
  shift 2
  /usr/bin/time -f "%e %U %S" -o "$OUT/time.tmp" "$@" >>"$OUT/$rev.log" 2>&1
  read -r wall user sys <"$OUT/time.tmp"
  local cpu
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.1f", u + s}')
  printf '%s %s %s %s\n' "$rev" "$name" "$wall" "$cpu" >>"$OUT/phases.txt"
  printf 'cold: %-10s %-9s wall %7.1f s   cpu %7.1f s   (load %s)\n' "$rev" "$name" "$wall" "$cpu" \
    "$(cut -d' ' -f1 /proc/loadavg)"
}

: >"$OUT/phases.txt"
echo "cold: $(nproc) cores, -j$JOBS, load $(cut -d' ' -f1-3 /proc/loadavg), CCACHE_DISABLE=1"
for rev in "${revs[@]}"; do
  sha=$(git -C "$REPO" rev-parse --short "$rev")
  dir=$(mktemp -d "/tmp/cold-$sha.XXXXXX")
  dirs+=("$dir")
  git clone -q "$REPO" "$dir/src"
  git -C "$dir/src" checkout -q "$sha"
  : >"$OUT/$sha.log"
  export CCACHE_DISABLE=1
  # shellcheck disable=SC2086
  phase configure "$sha" cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    ${COLD_CMAKE_ARGS:-}
  # shellcheck disable=SC2086
  phase stack "$sha" ninja -C "$dir/build" -j"$JOBS" $STACK
  phase rest "$sha" ninja -C "$dir/build" -j"$JOBS"
  echo "cold: $sha: $(($(wc -l <"$dir/build/.ninja_log") - 1)) build steps"
done

if ((${#revs[@]} == 2)); then
  b=$(git -C "$REPO" rev-parse --short "${revs[0]}"); a=$(git -C "$REPO" rev-parse --short "${revs[1]}")
  echo
  printf 'cold: %-10s %17s %17s %21s\n' "phase" "before wall / cpu" "after wall / cpu" "after / before (cpu)"
  for p in configure stack rest; do
    read -r _ _ bw bc < <(grep "^$b $p " "$OUT/phases.txt")
    read -r _ _ aw ac < <(grep "^$a $p " "$OUT/phases.txt")
    printf 'cold: %-10s %8.1f / %6.1f %8.1f / %6.1f %10s (%s)\n' "$p" "$bw" "$bc" "$aw" "$ac" \
      "$(awk -v x="$aw" -v y="$bw" 'BEGIN {printf "%.2f", x / y}')" \
      "$(awk -v x="$ac" -v y="$bc" 'BEGIN {printf "%.2f", x / y}')"
  done
fi
echo "cold: logs in $OUT"
