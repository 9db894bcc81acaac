# shellcheck shell=bash
# Sourced by the benchmarks (bench/*/run.sh): on a fresh checkout, one command is enough.
#
# bench_build <build dir> <target ...>: builds those targets (scripts/build.sh: nothing to do when
#   they are current).
# bench_prepare <build dir> <target ...>: bench_build, then starts the project's cluster when it is
#   not running (scripts/pg-cluster.sh up: created, migrated), loads its settings, and makes the
#   migrated template database the benchmarks clone when the test suite has not made it yet.
#   It also chooses the binaries the benchmark runs (bench_sides below).
#
# Binaries from elsewhere, for a before/after comparison in one run:
#   AWP_BENCH_BIN=<dir>      run the benchmark's programs from that folder (e.g. a copy of an
#                            older build/bin) instead of the build; only awpctl is built (cluster).
#   AWP_BENCH_COMPARE=<dir>  run that folder ("before") and the build ("after") alternately:
#                            every step of the benchmark runs once per side per round, the order
#                            of the sides swapped each round (before, after; after, before; ...),
#                            on the same database under the same load; at the end one line per
#                            figure: the median of each side and the ratio after/before.
#   AWP_BENCH_ROUNDS=<n>     rounds in a comparison (default 3: the median drops one outlier).
# The database schema is the current checkout's (its awpctl migrates the template), so both sides
# run against the same tables; a comparison across a migration change is not what this measures.
BENCH_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

bench_build() {
  local build=$1
  shift
  AWP_BUILD_DIR=$build AWP_BUILD_TARGETS="$*" "$BENCH_REPO/scripts/build.sh" >/dev/null
}

# bench_sides <build dir> <program ...>: sets BENCH_SIDES (the side names, in order) and
# BENCH_BIN_<side> (its folder), and checks every program is there. Sides: "run" (one run of the
# build or of AWP_BENCH_BIN), or "before" and "after" (AWP_BENCH_COMPARE). Needs OUT (the
# benchmark's result folder).
bench_sides() {
  local build=$1 side p dir
  shift
  mkdir -p "$OUT"
  : >"$OUT/figures.tsv"
  if [[ -n ${AWP_BENCH_COMPARE:-} ]]; then
    BENCH_SIDES=(before after)
    BENCH_BIN_before=$(cd "$AWP_BENCH_COMPARE" && pwd)
    BENCH_BIN_after=$build/bin
  else
    BENCH_SIDES=(run)
    # shellcheck disable=SC2034  # read through ${!dir}
    BENCH_BIN_run=${AWP_BENCH_BIN:-$build/bin}
  fi
  for side in "${BENCH_SIDES[@]}"; do
    dir=BENCH_BIN_$side
    for p in "$@"; do
      [[ -x ${!dir}/$p ]] || { echo "bench: ${!dir}/$p is missing" >&2; exit 1; }
    done
  done
}

bench_prepare() {
  local build=$1
  shift
  if [[ -n ${AWP_BENCH_BIN:-} ]]; then bench_build "$build" awpctl; else bench_build "$build" awpctl "$@"; fi
  bench_sides "$build" "$@"
  if ! "$BENCH_REPO/scripts/pg-cluster.sh" status >/dev/null 2>&1 || [[ ! -f $BENCH_REPO/.awp/cluster.env ]]; then
    AWPCTL=$build/bin/awpctl "$BENCH_REPO/scripts/pg-cluster.sh" up >/dev/null
  fi
  set -a
  # shellcheck disable=SC1091
  . "$BENCH_REPO/.awp/cluster.env"
  set +a
  if ! psql -X -qAt "$AWP_PG_ADMIN_DSN" -c "SELECT 1 FROM pg_database WHERE datname = 'awp_test_template'" | grep -q 1; then
    bash "$BENCH_REPO/tests/support/make-template.sh" "$build/bin/awpctl"
  fi
}

bench_comparing() { [[ ${#BENCH_SIDES[@]} -gt 1 ]]; }

# bench_each <command ...>: runs the command once per side and round, with BIN (that side's
# folder), SIDE, ROUND and RES (a result folder of its own: $OUT/<side>.r<round>) set.
bench_each() {
  local rounds=1 r i n side dir
  bench_comparing && rounds=${AWP_BENCH_ROUNDS:-3}
  n=${#BENCH_SIDES[@]}
  for ((r = 1; r <= rounds; r++)); do
    for ((i = 0; i < n; i++)); do
      if ((r % 2 == 1)); then side=${BENCH_SIDES[i]}; else side=${BENCH_SIDES[n - 1 - i]}; fi
      dir=BENCH_BIN_$side
      # shellcheck disable=SC2034  # BIN, SIDE, ROUND, RES: for the command
      BIN=${!dir} SIDE=$side ROUND=$r RES=$OUT/$side.r$r
      mkdir -p "$RES"
      "$@"
    done
  done
}

# bench_figure <name> <value> <unit> <higher|lower>: one measured figure of the current side and
# round (which way is better), kept in $OUT/figures.tsv for bench_compare_report.
bench_figure() {
  [[ -n $2 ]] || return 0
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$SIDE" "$ROUND" "$1" "$2" "$3" "$4" >>"$OUT/figures.tsv"
}

# One line per figure: median before, median after, after/before, and whether after is faster
# or worse by that ratio (within 5 %: "same"; on a shared machine runs move by more than that,
# so each line ends with every run's value, before | after).
bench_compare_report() {
  echo
  echo "== before/after (before: $BENCH_BIN_before, after: $BENCH_BIN_after; ${AWP_BENCH_ROUNDS:-3} rounds, sides alternated, medians)"
  awk -F'\t' '
    function median(list,   a, k, n, t) {
      n = split(list, a, " ")
      for (i = 2; i <= n; i++) { t = a[i]; for (k = i - 1; k >= 1 && a[k] + 0 > t + 0; k--) a[k + 1] = a[k]; a[k + 1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    !($3 in unit) { order[++count] = $3; unit[$3] = $5; better[$3] = $6 }
    { vals[$1, $3] = vals[$1, $3] " " $4 }
    END {
      printf "%-54s %10s %10s %-8s %s\n", "figure", "before", "after", "unit", "after/before"
      for (j = 1; j <= count; j++) {
        f = order[j]
        if (!((("before", f) in vals) && (("after", f) in vals))) continue
        b = median(vals["before", f]); a = median(vals["after", f])
        if (b == 0 || a == 0) { r = (a == b) ? 1 : 0; verdict = (a == b) ? "same" : "n/a (a zero)" }
        else {
          r = a / b
          good = (better[f] == "higher") ? r : 1 / r
          verdict = (good >= 0.95 && good <= 1.05) ? "same" : (good > 1 ? "better" : "WORSE")
        }
        printf "%-54s %10.4g %10.4g %-8s %.3f (%s is better: %s; runs:%s |%s)\n", f, b, a, unit[f], r, better[f], verdict, vals["before", f], vals["after", f]
      }
    }' "$OUT/figures.tsv"
}

# bench_server_cpu_ticks: CPU clock ticks of the project's whole Postgres server so far: the
#   postmaster, its live children, and the children that ended (a pgbench run's backends exit
#   with it: the postmaster's cutime/cstime). Two readings around a step, divided by
#   getconf CLK_TCK, are the server's CPU seconds for it.
bench_server_cpu_ticks() {
  local pm total p
  pm=$(head -1 "$BENCH_REPO/.awp/pg/data/postmaster.pid")
  total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat")
  for p in $(pgrep -P "$pm"); do
    [[ -r /proc/$p/stat ]] || continue
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
