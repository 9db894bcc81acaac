#!/usr/bin/env bash
# Runs the embedding benchmark (builds nothing): sentences/s at 32 and 128 tokens on a
# MiniLM-shaped random model, the sgemm GFLOP/s of the same run, % of that limit, RSS.
# usage: bench/embed/run.sh [--threads N] [--model DIR]   (BUILD_DIR defaults to build)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BUILD_DIR:-$repo/build}/bin/awp-bench-embed
if [[ ! -x $bin ]]; then
  echo "run.sh: $bin not found; build it first: cmake --build build --target awp-bench-embed" >&2
  exit 1
fi
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$bin" "$@"
