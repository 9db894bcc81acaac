#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12: a new bookworm root (debootstrap, nothing but
# Debian's base system) gets a checkout of one commit and runs scripts/run-stack.sh until "awp is
# up" (then stops it with one SIGTERM), and with TESTS=1 then scripts/test.sh, as a newcomer runs
# them one after the other. Everything a fresh machine lacks is fetched and built inside: the
# Debian packages, pgvector, the static libpq, awp itself with an empty ccache, the agent runtime.
# Prints each script's own phase lines and the wall clock of each command.
# Usage: bench/build/fresh-machine.sh [commit]   (default HEAD; run as root)
#   TESTS=1: run scripts/test.sh after the stack; KEEP=1 keeps the root; OUT: log folder
#   (default /tmp/awp-fresh-machine); MIRROR: Debian mirror (default deb.debian.org).
# The root shares this machine's network, CPU and kernel (a chroot, not a VM): ports 3000, 8088 and
# run-stack's cluster port must be free. Certificate authorities this machine adds to Debian's
# (/usr/local/share/ca-certificates, e.g. a proxy's) and /etc/npmrc are copied in, so that the
# root reaches the npm registry as this machine does.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
REV=${1:-HEAD}
OUT=${OUT:-/tmp/awp-fresh-machine}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
[[ $(id -u) == 0 ]] || { echo "fresh-machine: run as root (debootstrap, chroot, mounts)" >&2; exit 1; }
sha=$(git -C "$REPO" rev-parse --short "$REV")
root=$(mktemp -d "/srv/awp-fresh-$sha.XXXXXX")
chmod 755 "$root"  # a root folder: every user of the root reaches its files
mkdir -p "$OUT"

mounted=()
cleanup() {
  pkill -TERM -f "^bash -c cd /root/awp" 2>/dev/null || true
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  [[ ${KEEP:-0} == 1 ]] || rm -rf --one-file-system "$root"
}
trap cleanup EXIT

command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
echo "fresh-machine: $sha, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), root $root"
t=$SECONDS
debootstrap bookworm "$root" "$MIRROR" >"$OUT/debootstrap.log" 2>&1
echo "fresh-machine: debootstrap (not counted): $((SECONDS - t)) s"
# A Debian 12 machine's sources: the release, its updates and the security archive.
cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
[[ -f /etc/npmrc ]] && cp /etc/npmrc "$root/etc/npmrc"
# A clone, as a newcomer's: the suites check what a checkout (.git) gives, e.g. host-ops.env's
# AWP_REPO_DIR (tests/deploy/install_systemd.sh).
git clone -q "$REPO" "$root/root/awp"
git -C "$root/root/awp" checkout -q "$sha"
for m in proc sys dev dev/pts; do mount --bind "/$m" "$root/$m" && mounted+=("$root/$m"); done
mount -t tmpfs tmpfs "$root/dev/shm" && mounted+=("$root/dev/shm")

# in_root <log> <command>: runs a command in the checkout inside the root, with a login's plain
# environment (nothing of this machine's), in a session of its own.
in_root() {
  local log=$1
  shift
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    setsid bash -c "cd /root/awp && $*" >"$log" 2>&1
}

start=$SECONDS
in_root "$OUT/run-stack.log" ./scripts/run-stack.sh &
pid=$!
up=
while kill -0 "$pid" 2>/dev/null; do
  if grep -q "awp is up" "$OUT/run-stack.log"; then up=$((SECONDS - start)); break; fi
  sleep 1
done
grep -E '^(run-stack|install-deps|build.sh):' "$OUT/run-stack.log" | grep -v -E 'anon key|  URL|next, in|add a user|client library or|awpctl" user|service-role' || true
[[ -n $up ]] || { echo "fresh-machine: run-stack ended before awp was up (log $OUT/run-stack.log)" >&2; exit 1; }
pkill -TERM -f "scripts/run-stack.sh" || true
wait "$pid" || true
echo "fresh-machine: first command, scripts/run-stack.sh: awp is up after $up s"

if [[ ${TESTS:-0} == 1 ]]; then
  start=$SECONDS
  status=0
  in_root "$OUT/test.log" ./scripts/test.sh || status=$?
  grep -E '^test.sh:' "$OUT/test.log" || true
  grep -E 'tests passed|tests failed' "$OUT/test.log" || true
  echo "fresh-machine: second command, scripts/test.sh: $((SECONDS - start)) s, exit $status (log $OUT/test.log)"
fi
