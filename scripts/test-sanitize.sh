#!/usr/bin/env bash
# The sanitizer pass CI runs after scripts/test.sh: one clang-16 build with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/, also instrumented for libFuzzer) of the unit and
# integration suites and of the fuzz harnesses; runs both suites against the project's Postgres,
# then every harness for AWP_FUZZ_SECONDS (default 20) on its seed corpus (scripts/fuzz.sh).
# Any sanitizer report fails the run. Usage: scripts/test-sanitize.sh
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${AWP_ASAN_BUILD_DIR:-$REPO/build-asan}
AWP_DEPS=full "$REPO/scripts/install-deps.sh"
if [[ ! -f $BUILD/build.ninja ]]; then
  CC=clang-16 CXX=clang++-16 cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAWP_FUZZ=ON -DAWP_SANITIZE="address;undefined" -DAWP_STATIC_CXX_RUNTIME=OFF \
    -DAWP_WERROR=OFF >/dev/null
fi
cmake --build "$BUILD" -j"${AWP_JOBS:-$(nproc)}" --target unit_tests integration_tests awp_fuzzers

started=0
if ! "$REPO/scripts/pg-cluster.sh" status >/dev/null 2>&1; then started=1; fi
cleanup() { if ((started)); then "$REPO/scripts/pg-cluster.sh" stop || true; fi; }
trap cleanup EXIT
AWPCTL=$BUILD/bin/awpctl "$REPO/scripts/pg-cluster.sh" up
set -a
# shellcheck disable=SC1091
. "${AWP_STATE_DIR:-$REPO/.awp}/cluster.env"
set +a
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$REPO/fuzz/ubsan.supp}
status=0
for label in unit integration; do
  echo "== sanitizers: ctest -L $label"
  ctest --test-dir "$BUILD" -L "^$label\$" --output-on-failure -j"${AWP_TEST_JOBS:-2}" \
    --timeout "${AWP_TEST_TIMEOUT:-600}" || status=1
done
echo "== fuzz: ${AWP_FUZZ_SECONDS:-20} s per harness"
AWP_FUZZ_BUILD_DIR=$BUILD "$REPO/scripts/fuzz.sh" "${AWP_FUZZ_SECONDS:-20}" || status=1
exit $status
