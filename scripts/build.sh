#!/usr/bin/env bash
# Configures and builds awp into build/ (Ninja, ccache). Extra arguments go to the configure step.
# AWP_BUILD_DIR: another build folder; AWP_BUILD_TARGETS: a space-separated list of targets.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${AWP_BUILD_DIR:-$REPO/build}
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=${AWP_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
fi
# AWP_BUILD_TARGETS: only these targets (default: all).
targets=()
for t in ${AWP_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD" -j"${AWP_JOBS:-$(nproc)}" "${targets[@]}"
echo "build.sh: ${AWP_BUILD_TARGETS:-all} built in $SECONDS s" >&2
