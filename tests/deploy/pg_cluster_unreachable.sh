#!/usr/bin/env bash
# scripts/pg-cluster.sh run by root for a state folder the postgres user cannot reach (a checkout
# under /root, a mktemp folder): the cluster goes to a folder of its own under /var/tmp, and two
# such state folders of one checkout get two folders, never one cluster between them (the data
# API's restart drills run their own cluster beside the project's).
# Usage: pg_cluster_unreachable.sh <source dir> <build dir>
set -euo pipefail
src=$1
[[ $(id -u) -eq 0 ]] && id postgres >/dev/null 2>&1 || { echo "SKIP: needs root and the postgres user"; exit 77; }
a=$(mktemp -d) b=$(mktemp -d)  # 0700: postgres reaches neither
alt_of() {  # (status exits 3: no cluster runs there)
  { AWP_STATE_DIR=$1 "$src/scripts/pg-cluster.sh" status 2>&1 || true; } |
    sed -n 's/.*keeping the cluster in \(.*\)$/\1/p'
}
alt_a=$(alt_of "$a") alt_b=$(alt_of "$b")
trap 'rm -rf "$a" "$b"; [[ -n $alt_a ]] && rmdir "$alt_a" 2>/dev/null; [[ -n $alt_b ]] && rmdir "$alt_b" 2>/dev/null; true' EXIT
fail=0
[[ -n $alt_a && -n $alt_b ]] || { echo "FAIL: no folder instead of the unreachable state ('$alt_a', '$alt_b')"; exit 1; }
[[ $alt_a != "$alt_b" ]] || { echo "FAIL: two state folders share the cluster folder $alt_a"; fail=1; }
[[ $(alt_of "$a") == "$alt_a" ]] || { echo "FAIL: the same state folder moved to another cluster folder"; fail=1; }
[[ $(stat -c %U "$alt_a") == postgres ]] || { echo "FAIL: $alt_a is not the postgres user's"; fail=1; }
exit $fail
