#!/usr/bin/env bash
# The sanitizer pass CI runs after scripts/test.sh: one clang-16 build with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/, also instrumented for libFuzzer) of the unit and
# integration suites and of the fuzz harnesses; runs both suites through scripts/test.sh (the
# project's Postgres, by label), then every harness for AWP_FUZZ_SECONDS (default 20) on its seed
# corpus (scripts/fuzz.sh). Any sanitizer report fails the run. Usage: scripts/test-sanitize.sh
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export AWP_BUILD_DIR=${AWP_ASAN_BUILD_DIR:-$REPO/build-asan}
AWP_DEPS=full "$REPO/scripts/install-deps.sh"
if [[ ! -f $AWP_BUILD_DIR/build.ninja ]]; then
  # -O1 and line tables only: what sanitizer reports need, at half the compile time of -O2 -g.
  CC=clang-16 CXX=clang++-16 cmake -S "$REPO" -B "$AWP_BUILD_DIR" -G Ninja -DAWP_LINKER=default \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
    -DAWP_FUZZ=ON -DAWP_SANITIZE="address;undefined" -DAWP_STATIC_CXX_RUNTIME=OFF \
    -DAWP_WERROR=OFF >/dev/null
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$REPO/fuzz/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$REPO/fuzz/ubsan.supp}
status=0
AWP_BUILD_TARGETS="unit_tests integration_tests awp_fuzzers" AWP_TEST_TIMEOUT=600 \
  "$REPO/scripts/test.sh" unit integration || status=1
echo "== fuzz: ${AWP_FUZZ_SECONDS:-20} s per harness"
AWP_FUZZ_BUILD_DIR=$AWP_BUILD_DIR "$REPO/scripts/fuzz.sh" "${AWP_FUZZ_SECONDS:-20}" || status=1
exit $status
