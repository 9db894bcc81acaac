#!/usr/bin/env bash
# Installs every build and runtime dependency of awp from Debian bookworm packages, builds
# pgvector from the Debian source package when CREATE EXTENSION vector is not available, and
# builds a small static libpq (no LDAP, no GSSAPI) from Debian's postgresql-15 source package
# into /opt/awp-libpq (docs/operations.md, "Static libraries").
# Idempotent: a second run with everything present only checks and returns.
# Usage: scripts/install-deps.sh [--libpq-only]   (--libpq-only: only the static libpq, for the
# Docker build stage, which installs its packages itself; AWP_LIBPQ_REBUILD=1 builds it again)
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
  lld
  pgbouncer
)
# Extra packages for the suites (AWP_DEPS=tests, scripts/test.sh): the browser, the unit file
# checker and the compose checker.
TEST_PACKAGES=(chromium systemd docker-compose)
# And for the sanitizer pass and the benchmarks (AWP_DEPS=full): clang-16 with libFuzzer and the
# sanitizer runtimes (scripts/test-sanitize.sh, scripts/fuzz.sh) and a load generator.
FULL_PACKAGES=(wrk clang-16 libfuzzer-16-dev libclang-rt-16-dev llvm-16)

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

# The static libpq: only what a client over TCP (TLS, SCRAM) or a Unix socket needs. Debian's
# libpq5 also links libldap (and through it GnuTLS, nettle, p11-kit, SASL) and GSSAPI/Kerberos,
# ~3.5 MB of resident memory in every daemon that awp never uses. cmake/Dependencies.cmake links
# $LIBPQ_ROOT/current when it is there (-DAWP_SYSTEM_LIBPQ=ON: Debian's libpq5 instead).
LIBPQ_ROOT=/opt/awp-libpq
LIBPQ_CONFIGURE=(
  --with-ssl=openssl --without-ldap --without-gssapi --without-pam --without-readline
  --without-icu --without-zlib --without-lz4 --without-zstd --without-libxml --without-libxslt
  --without-systemd --without-selinux --disable-nls
  # As Debian's libpq5: pg_service.conf in /etc/postgresql-common, port 5432 (and, by Debian's
  # patch below, the default socket folder /var/run/postgresql).
  --sysconfdir=/etc/postgresql-common --with-pgport=5432
)
# Debian's hardening flags (dpkg-buildflags), plus stack-clash and control-flow protection;
# position-independent code comes from the *_shlib variants of libpgport and libpgcommon and from
# libpq's own shared-library flags.
LIBPQ_CFLAGS="-g -O2 -fstack-protector-strong -fstack-clash-protection -fcf-protection"
LIBPQ_CFLAGS+=" -Wformat -Werror=format-security"
LIBPQ_CPPFLAGS="-Wdate-time -D_FORTIFY_SOURCE=2"
# What the build in $LIBPQ_ROOT/current was made with: a change here builds a new one.
libpq_recipe() {
  printf '%s\n' "recipe 1" "${LIBPQ_CONFIGURE[*]}" "$LIBPQ_CFLAGS" "$LIBPQ_CPPFLAGS"
}

libpq_installed() {
  [[ -f $LIBPQ_ROOT/current/lib/libpq.a && -f $LIBPQ_ROOT/current/RECIPE ]] &&
    [[ $(cat "$LIBPQ_ROOT/current/RECIPE") == "$(libpq_recipe)" ]]
}

install_static_libpq() {
  # AWP_LIBPQ_REBUILD=1: build again from the newest source (a postgresql-15 security update).
  [[ ${AWP_LIBPQ_REBUILD:-} != 1 ]] && libpq_installed && return 0
  need_root
  local start=$SECONDS work
  echo "install-deps: building a static libpq (no LDAP, no GSSAPI) from the Debian source package"
  work=$(mktemp -d)
  # A private apt configuration, as for pgvector: bookworm's deb-src lines.
  mkdir -p "$work/apt/sources" "$work/apt/lists/partial"
  cat >"$work/apt/sources/bookworm-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  local opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/apt/sources"
              -o "Dir::State::Lists=$work/apt/lists" -o APT::Sandbox::User=root)
  $SUDO apt-get "${opts[@]}" update -qq
  # The newest postgresql-${PG_MAJOR} source that downloads (a mirror may lack the security pool);
  # apt-get source checks it against the signed index.
  local pkg=postgresql-${PG_MAJOR} version='' v
  for v in $(apt-cache "${opts[@]}" showsrc "$pkg" | awk '/^Version:/ {print $2}' | sort -Vru); do
    if (cd "$work" && $SUDO apt-get "${opts[@]}" source --download-only "$pkg=$v" >/dev/null 2>&1)
    then
      version=$v; break
    fi
    echo "install-deps: $pkg $v could not be downloaded; trying an older one" >&2
  done
  [[ -n $version ]] || { echo "install-deps: no $pkg source package downloads" >&2; return 1; }
  local src=$work/src
  mkdir -p "$src" "$work/debian"
  tar -xf "$work/${pkg}_${version%-*}".orig.tar.* -C "$src" --strip-components=1 \
    --exclude='*/doc' --exclude='*/po' --exclude='*/src/test' --exclude='*/contrib'
  tar -xf "$work/${pkg}_${version}".debian.tar.* -C "$work/debian"
  patch -s -d "$src" -p1 <"$work/debian/debian/patches/51-default-sockets-in-var.patch"
  # configure with the plain compiler (ccache only slows its many small tests down; its warnings
  # about a missing Bison and Flex do not apply, the tarball has their output), make with ccache
  # when there is one, paths relative to the source tree so a rebuild hits the cache.
  local cc=gcc jobs
  command -v ccache >/dev/null && cc="ccache gcc"
  jobs=${AWP_JOBS:-$(nproc)}
  local prefix
  prefix="$LIBPQ_ROOT/$version-$(libpq_recipe | sha256sum | cut -c1-8)"
  if ! (cd "$src" && ./configure --prefix="$prefix" "${LIBPQ_CONFIGURE[@]}" CC=gcc \
          CFLAGS="$LIBPQ_CFLAGS" CPPFLAGS="$LIBPQ_CPPFLAGS" >"$work/configure.log" 2>&1); then
    tail -n 20 "$work/configure.log" >&2
    echo "install-deps: configuring libpq failed (log: $work/configure.log)" >&2
    return 1
  fi
  # Only libpq and the position-independent builds of the two static libraries it needs.
  local CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=true
  export CCACHE_BASEDIR CCACHE_NOHASHDIR
  make -s -C "$src/src/backend" generated-headers >/dev/null
  make -s -C "$src/src/port" -j"$jobs" CC="$cc" pg_config_paths.h libpgport_shlib.a >/dev/null
  make -s -C "$src/src/common" -j"$jobs" CC="$cc" libpgcommon_shlib.a >/dev/null
  make -s -C "$src/src/interfaces/libpq" -j"$jobs" CC="$cc" SHLIB_PREREQS= \
    NO_GENERATED_HEADERS=1 all-static-lib >/dev/null
  local stage=$work/stage
  mkdir -p "$stage/include" "$stage/lib"
  cp "$src"/src/interfaces/libpq/{libpq-fe.h,libpq-events.h} \
     "$src"/src/include/{postgres_ext.h,pg_config_ext.h} "$stage/include/"
  cp "$src/src/interfaces/libpq/libpq.a" "$src/src/common/libpgcommon_shlib.a" \
     "$src/src/port/libpgport_shlib.a" "$stage/lib/"
  libpq_recipe >"$stage/RECIPE"
  printf '%s %s\nbuilt %s from the Debian source package\n' "$pkg" "$version" \
    "$(date -u +%FT%TZ)" >"$stage/VERSION"
  $SUDO rm -rf "$prefix"
  $SUDO mkdir -p "$LIBPQ_ROOT"
  $SUDO cp -r "$stage" "$prefix"
  $SUDO ln -sfn "$(basename "$prefix")" "$LIBPQ_ROOT/current"
  rm -rf "$work"
  echo "install-deps: static libpq $version in $prefix ($((SECONDS - start)) s)"
  libpq_installed
}

main() {
  if [[ ${1:-} == --libpq-only ]]; then
    install_static_libpq
    return
  fi
  case ${AWP_DEPS:-} in
    '') install_packages "${PACKAGES[@]}" ;;
    tests) install_packages "${PACKAGES[@]}" "${TEST_PACKAGES[@]}" ;;
    full) install_packages "${PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${FULL_PACKAGES[@]}" ;;
    *) echo "install-deps: AWP_DEPS is tests, full or unset, not '$AWP_DEPS'" >&2; exit 2 ;;
  esac
  install_pgvector
  install_static_libpq
  # The real agent runtime for the e2e suites (npm, cached; docs/runtime.md).
  if [[ -n ${AWP_DEPS:-} ]]; then "$(dirname "${BASH_SOURCE[0]}")/install-runtime.sh" >/dev/null; fi
  echo "install-deps: ok"
}

main "$@"
