#!/usr/bin/env bash
# Embedding benchmark (no database): sentences/s at 32 and 128 tokens on a MiniLM-shaped model,
# beside the sgemm GFLOP/s of the same run (the limit: % of it), and the model's RSS.
# Without --model the program writes a MiniLM-L6-shaped model with random fp32 weights (no
# download; the encoder's cost is that of the real model); --model DIR takes a folder of real
# weights, a Hugging Face sentence-transformers model (all-MiniLM-L6-v2, bge-small-en-v1.5) you
# fetched yourself (docs/embeddings.md). Results: docs/embeddings.md, "Benchmark".
# Usage: bench/embed/run.sh [--threads N] [--model DIR]   (on a fresh checkout too: it builds
# awp-bench-embed first; the build folder is $AWP_BUILD_DIR, else $BUILD_DIR, default build;
# AWP_BENCH_BIN=<dir> runs the program from that folder instead)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${AWP_BUILD_DIR:-${BUILD_DIR:-$REPO/build}}
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
[[ -n ${AWP_BENCH_BIN:-} ]] || bench_build "$BUILD" awp-bench-embed
bin=${AWP_BENCH_BIN:-$BUILD/bin}/awp-bench-embed
echo "host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$bin" "$@"
