#!/usr/bin/env bash
# Installs every build and runtime dependency of awp from Debian bookworm packages, and builds
# pgvector from the Debian source package when CREATE EXTENSION vector is not available.
# Idempotent: a second run with everything present only checks and returns.
set -euo pipefail

PG_MAJOR=15
PG_CONFIG=/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libpq-dev rapidjson-dev libcli11-dev catch2 libjwt-dev libssl-dev
  libopenblas-dev libsodium-dev
  libicu-dev
  postgresql-${PG_MAJOR} postgresql-client-${PG_MAJOR} postgresql-server-dev-${PG_MAJOR}
  curl procps iproute2 python3
)
# Extra packages for tests and benchmarks only (AWP_DEPS=full): browser, load generator, unit checker.
TEST_PACKAGES=(chromium wrk systemd docker-compose)

need_root() {
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else
      echo "install-deps: run as root (or install sudo)" >&2; exit 1
    fi
  else SUDO=; fi
}

missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

install_packages() {
  local missing
  mapfile -t missing < <(missing_packages "$@")
  ((${#missing[@]} == 0)) && return 0
  echo "install-deps: installing ${missing[*]}"
  need_root
  if [[ ! -f /var/lib/apt/periodic/awp-updated ]] || ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    $SUDO mkdir -p /var/lib/apt/periodic && $SUDO touch /var/lib/apt/periodic/awp-updated
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

pgvector_installed() {
  [[ -f "$($PG_CONFIG --sharedir)/extension/vector.control" ]]
}

install_pgvector() {
  pgvector_installed && return 0
  need_root
  echo "install-deps: building pgvector from the Debian source package"
  local work
  work=$(mktemp -d)
  # A private apt configuration: a deb-src line for trixie, without touching the system's sources.
  mkdir -p "$work/apt/sources" "$work/apt/lists/partial"
  cat >"$work/apt/sources/trixie-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  local opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/apt/sources"
              -o "Dir::State::Lists=$work/apt/lists" -o APT::Sandbox::User=root)
  $SUDO apt-get "${opts[@]}" update -qq
  (cd "$work" && $SUDO apt-get "${opts[@]}" source --download-only pgvector >/dev/null)
  local orig
  orig=$(ls "$work"/pgvector_*.orig.tar.* | head -n1)
  mkdir -p "$work/src" && tar -xf "$orig" -C "$work/src" --strip-components=1
  # OPTFLAGS="" keeps the build portable (no -march=native) so a cached install works elsewhere.
  make -C "$work/src" -s USE_PGXS=1 PG_CONFIG=$PG_CONFIG OPTFLAGS="" -j"$(nproc)" >/dev/null
  $SUDO make -C "$work/src" -s USE_PGXS=1 PG_CONFIG=$PG_CONFIG install >/dev/null
  rm -rf "$work"
  pgvector_installed
}

main() {
  install_packages "${PACKAGES[@]}"
  if [[ ${AWP_DEPS:-} == full ]]; then install_packages "${TEST_PACKAGES[@]}"; fi
  install_pgvector
  echo "install-deps: ok"
}

main "$@"
