#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, clang-16 with ASan + UBSan) into build-fuzz/ and runs
# each for a given time on a working copy of its checked-in seed corpus (fuzz/corpus/<name>).
# A crash, a sanitizer report, a leak, a timeout (10 s per input) or an out-of-memory input
# fails the run; the input that did it is kept in build-fuzz/findings/<name>/ and printed.
# Usage: scripts/fuzz.sh [seconds per harness, default 60] [harness ...]
#   AWP_FUZZ_JOBS=N  harnesses run N at a time (default: cores)
#   AWP_FUZZ_MERGE=1 merge what each run found back into fuzz/corpus/<name> (minimised)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${AWP_FUZZ_BUILD_DIR:-$REPO/build-fuzz}
SECONDS_EACH=${1:-60}
shift || true
for t in clang++-16 clang-16; do
  command -v "$t" >/dev/null || { echo "fuzz: missing $t (AWP_DEPS=full scripts/install-deps.sh)" >&2; exit 1; }
done
if [[ ! -f $BUILD/build.ninja ]]; then
  CC=clang-16 CXX=clang++-16 cmake -S "$REPO" -B "$BUILD" -G Ninja -DAWP_LINKER=default -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" -DAWP_FUZZ=ON -DAWP_BUILD_TESTS=OFF -DAWP_SANITIZE="address;undefined" \
    -DAWP_STATIC_CXX_RUNTIME=OFF -DAWP_WERROR=OFF >/dev/null
fi
cmake --build "$BUILD" -j"${AWP_JOBS:-$(nproc)}" --target awp_fuzzers
names=("$@")
if ((${#names[@]} == 0)); then
  for f in "$BUILD"/fuzz/fuzz_*; do names+=("$(basename "$f" | sed 's/^fuzz_//')"); done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$REPO/fuzz/ubsan.supp}
for s in /usr/lib/llvm-16/bin/llvm-symbolizer /usr/bin/llvm-symbolizer-16 /usr/bin/llvm-symbolizer; do
  [[ -x $s ]] && { export ASAN_SYMBOLIZER_PATH=$s; export UBSAN_SYMBOLIZER_PATH=$s; break; }
done
run_one() {
  local name=$1 work=$BUILD/corpus/$1 out=$BUILD/findings/$1
  rm -rf "$out"; mkdir -p "$work" "$out"
  cp -n "$REPO/fuzz/corpus/$name/"* "$work/" 2>/dev/null || true
  local log=$BUILD/findings/$name.log
  if "$BUILD/fuzz/fuzz_$name" "$work" -max_total_time="$SECONDS_EACH" -timeout=10 \
      -rss_limit_mb=2048 -max_len=1048576 -artifact_prefix="$out/" -print_final_stats=1 \
      >"$log" 2>&1; then
    echo "fuzz: $name clean: $(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$') runs in ${SECONDS_EACH} s, corpus $(ls "$work" | wc -l)"
    if [[ ${AWP_FUZZ_MERGE:-0} == 1 ]]; then
      "$BUILD/fuzz/fuzz_$name" -merge=1 "$REPO/fuzz/corpus/$name" "$work" >/dev/null 2>&1 || true
    fi
  else
    echo "fuzz: $name FAILED - see $log; input(s): $(ls "$out")" >&2
    grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log" | head -20 >&2
    return 1
  fi
}
export -f run_one
export BUILD REPO SECONDS_EACH
printf '%s\n' "${names[@]}" | xargs -P "${AWP_FUZZ_JOBS:-$(nproc)}" -I{} bash -c 'run_one {}'
