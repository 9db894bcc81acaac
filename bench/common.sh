# shellcheck shell=bash
# Sourced by the benchmarks that use the project's Postgres (bench/runner, bench/api): on a fresh
# checkout, one command is enough. bench_prepare <build dir> <target ...> builds those targets
# (scripts/build.sh: nothing to do when they are current), starts the project's cluster when it is
# not running (scripts/pg-cluster.sh up: created, migrated), loads its settings, and makes the
# migrated template database the benchmarks clone when the test suite has not made it yet.
bench_prepare() {
  local repo build
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  build=$1
  shift
  AWP_BUILD_DIR=$build AWP_BUILD_TARGETS="awpctl $*" "$repo/scripts/build.sh" >/dev/null
  if ! "$repo/scripts/pg-cluster.sh" status >/dev/null 2>&1 || [[ ! -f $repo/.awp/cluster.env ]]; then
    AWPCTL=$build/bin/awpctl "$repo/scripts/pg-cluster.sh" up >/dev/null
  fi
  set -a
  # shellcheck disable=SC1091
  . "$repo/.awp/cluster.env"
  set +a
  if ! psql -X -qAt "$AWP_PG_ADMIN_DSN" -c "SELECT 1 FROM pg_database WHERE datname = 'awp_test_template'" | grep -q 1; then
    bash "$repo/tests/support/make-template.sh" "$build/bin/awpctl"
  fi
}
