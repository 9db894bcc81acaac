#!/usr/bin/env bash
# Configures and builds awp into build/ (Ninja, ccache). Extra arguments go to the configure step.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${AWP_BUILD_DIR:-$REPO/build}
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=${AWP_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
fi
cmake --build "$BUILD" -j"${AWP_JOBS:-$(nproc)}"
