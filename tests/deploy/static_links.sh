#!/usr/bin/env bash
# The static links of the daemons and awpctl (docs/operations.md, "Static libraries"): no
# program carries a static copy of a library that it also loads shared (OpenSSL through libjwt,
# the C++ runtime through ICU: two copies, two states), and with the static libpq no program
# loads libpq.so, libldap, GnuTLS or Kerberos.
# Usage: static_links.sh <source dir> <build dir>
set -euo pipefail
build=$2
for tool in nm ldd; do
  command -v $tool >/dev/null || { echo "SKIP: $tool missing"; exit 77; }
done
fail=0
bad() { echo "FAIL: $*"; fail=1; }
static_libpq=0
grep -q '^AWP_LIBPQ_STATIC_BUILD:INTERNAL=ON$' "$build/CMakeCache.txt" && static_libpq=1

programs=(awpctl awp-api-gateway awp-command-runner awp-inbox-dispatcher awp-embedder awp-scheduler awp-wake)
for exe in "${programs[@]}"; do
  bin=$build/bin/$exe
  [[ -x $bin ]] || { bad "$bin not built"; continue; }
  loaded=$(ldd "$bin")
  defined=$(nm --defined-only "$bin" 2>/dev/null || true)
  if grep -qE ' T OPENSSL_init_crypto$' <<<"$defined" && grep -q 'libcrypto\.so' <<<"$loaded"
  then
    bad "$exe has OpenSSL linked in and loads libcrypto.so too (awp_add_executable OPENSSL_SHARED)"
  fi
  if grep -qE ' [TW] _ZNSt6locale7classicEv$' <<<"$defined" && grep -q 'libstdc++\.so' <<<"$loaded"
  then
    bad "$exe has libstdc++ linked in and loads libstdc++.so too (INTERFACE_AWP_CXX_RUNTIME_SHARED)"
  fi
  if ((static_libpq)); then
    for lib in libpq.so libldap libgnutls libgssapi libkrb5; do
      if grep -q "$lib" <<<"$loaded"; then
        bad "$exe loads $lib, though it links the static libpq"
      fi
    done
  fi
done
if ((fail == 0)); then
  what="no library both linked in and loaded"
  ((static_libpq)) && what+=", no libpq.so, LDAP, GnuTLS or Kerberos"
  echo "static links: ${#programs[@]} programs, $what"
fi
exit $fail
