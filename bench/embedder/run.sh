#!/usr/bin/env bash
# Embedder benchmark, one run (awp-bench-embedder on the project cluster): items/s and chunks/s
# indexed with the fallback and with a MiniLM-L6-shaped random model (no weights to download:
# the program writes random fp32 weights of that shape, so the encoder's cost is real and its
# output meaningless); POST /embed p50/p99; the idle RSS of the awp-embedder process; its RSS
# with a backlog of 10,000 items; search_knowledge_items p50/p99 over 100,000 items, HNSW beside
# the exact scan (the limit: what the index saves), with recall@10.
# Usage: bench/embedder/run.sh [awp-bench-embedder options: --only index|http|search|rss|backlog,
# --search-items N, --threads N]   (on a fresh checkout too: it builds what it runs, starts the
# project's cluster and makes the template database when missing; bench/common.sh). The build
# folder is $AWP_BUILD_DIR (default build). Results also go to $OUT (default
# /tmp/awp-embedder-bench). AWP_BENCH_BIN=<dir>: awp-bench-embedder and awp-embedder from that
# folder; AWP_BENCH_COMPARE=<dir>: that folder and the build alternately, section by section
# (SECTIONS, default "index http rss backlog"; search measures the database, not the binary),
# then a before/after line per figure (bench/common.sh). awp-bench-embedder links the embedder's
# library, so an older copy measures the older service in-process too.
# shellcheck disable=SC2317  # step_section runs through bench_each
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${AWP_BUILD_DIR:-$REPO/build}
OUT=${OUT:-/tmp/awp-embedder-bench}
SECTIONS=${SECTIONS:-index http rss backlog}
mkdir -p "$OUT"
rm -rf "$OUT"/*.r[0-9]*  # only this run's results
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
bench_prepare "$BUILD" awp-embedder awp-bench-embedder
cleanup() {
  PGOPTIONS="-c client_min_messages=warning" psql -X -q "$AWP_PG_ADMIN_DSN" -c "DROP DATABASE IF EXISTS awp_bench_embedder_idx WITH (FORCE)" \
    -c "DROP DATABASE IF EXISTS awp_bench_embedder_backlog WITH (FORCE)" \
    -c "DROP DATABASE IF EXISTS awp_bench_embedder_search WITH (FORCE)" >/dev/null
}
trap cleanup EXIT
# The idle-RSS section starts awp-embedder on the indexing section's database; made here so that
# section also measures a connected daemon when it runs alone (--only rss).
cleanup
psql -X -q "$AWP_PG_ADMIN_DSN" -c "CREATE DATABASE awp_bench_embedder_idx TEMPLATE awp_test_template"

# The program's lines as figures: name, value, unit, which way is better.
figures() {
  awk '
    /^indexing / { l = $0; sub(/^indexing /, "", l); sub(/ +[0-9]+ items,.*/, "", l)
      v = $0; sub(/ items\/s.*/, "", v); sub(/.*: +/, "", v)
      printf "indexing, %s\t%s\titems/s\thigher\n", l, v }
    /^POST \/embed / { l = $0; sub(/^POST \/embed /, "", l); sub(/ +p50 .*/, "", l)
      p50 = $0; sub(/.* p50 +/, "", p50); sub(/ ms.*/, "", p50)
      p99 = $0; sub(/.* p99 +/, "", p99); sub(/ ms.*/, "", p99)
      printf "POST /embed p50, %s\t%s\tms\tlower\nPOST /embed p99, %s\t%s\tms\tlower\n", l, p50, l, p99 }
    /idle RSS without a model/ { v = $0; sub(/.*: /, "", v); sub(/ MiB/, "", v)
      printf "awp-embedder idle RSS\t%s\tMiB\tlower\n", v }
    /pending items/ { r = $0; sub(/ items\/s\).*/, "", r); sub(/.*\(/, "", r)
      p = $0; sub(/.*peak /, "", p); sub(/ MiB.*/, "", p)
      printf "awp-embedder with a backlog, items/s\t%s\titems/s\thigher\nawp-embedder with a backlog, peak RSS\t%s\tMiB\tlower\n", r, p }
    /^search_knowledge_items/ { l = $0; sub(/^search_knowledge_items \([^)]*\) /, "", l); sub(/ +p50 .*/, "", l)
      p50 = $0; sub(/.* p50 +/, "", p50); sub(/ ms.*/, "", p50)
      printf "search p50, %s\t%s\tms\tlower\n", l, p50 }' "$1"
}
step_section() {  # $1 section, then the program's options
  local section=$1
  shift
  "$BIN/awp-bench-embedder" --only "$section" "$@" | tee "$RES/$section.txt"
  while IFS=$'\t' read -r name value unit better; do
    bench_figure "$name" "$value" "$unit" "$better"
  done < <(figures "$RES/$section.txt")
}

echo "== awp-embedder benchmark ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ))"
if bench_comparing; then
  for section in $SECTIONS; do bench_each step_section "$section" "$@"; done
  bench_compare_report
  exit 0
fi
RES=$OUT/run.r1 BIN=$BENCH_BIN_run
mkdir -p "$RES"
"$BIN/awp-bench-embedder" "$@" | tee "$RES/all.txt"
# The ratios beside the limit: each HNSW setting's median ÷ the exact scan's; a model ÷ the fallback.
figures "$RES/all.txt" | awk -F'\t' '
  $1 == "search p50, exact scan" { exact = $2 }
  $1 ~ /^search p50, HNSW/ { h[++n] = $1; hv[n] = $2 }
  $1 ~ /^indexing, fallback/ { fb = $2 } $1 ~ /^indexing, MiniLM/ { ml = $2 }
  END {
    for (i = 1; i <= n; i++) if (exact > 0) printf "%s ÷ exact scan: %.3f\n", h[i], hv[i] / exact
    if (fb > 0 && ml > 0) printf "indexing items/s, MiniLM-shaped model ÷ fallback: %.3f\n", ml / fb
  }'
