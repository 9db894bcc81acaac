#!/usr/bin/env bash
# The Dockerfile without a Docker engine: two linters from npm (installed into the build folder,
# not the repository) find nothing; every external base image has a pinned tag; the images end
# as the non-root user awp; and the runtime stage (and the .deb's Depends) install the Debian
# package of every shared library the built executables link directly.
# Usage: docker_image.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
dockerfile=$src/deploy/docker/Dockerfile
tools=${AWP_DEPLOY_TOOLS:-$build/deploy-tools}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

if [[ ! -x $tools/node_modules/.bin/dockerfile-utils || ! -x $tools/node_modules/.bin/dockerfilelint ]]; then
  command -v npm >/dev/null || { echo "SKIP: npm missing"; exit 77; }
  mkdir -p "$tools"
  npm install --silent --no-audit --no-fund --prefix "$tools" dockerfile-utils@0.16.3 dockerfilelint@1.8.0 >/dev/null 2>&1 ||
    { echo "SKIP: could not install the linters from npm"; exit 77; }
fi

# dockerfile-utils (the engine of editors' Dockerfile diagnostics): no error, no warning.
out=$("$tools/node_modules/.bin/dockerfile-utils" lint "$dockerfile" 2>&1) || bad "dockerfile-utils failed"
[[ -z $out ]] || bad "dockerfile-utils: $out"
# dockerfilelint (best practices). It does not know build stages, so it would call
# "FROM runtime AS runner" untagged; the tag rule is checked below instead.
cfg=$(mktemp -d)
trap 'rm -rf "$cfg"' EXIT
printf 'rules:\n  missing_tag: off\n' >"$cfg/.dockerfilelintrc"
"$tools/node_modules/.bin/dockerfilelint" -c "$cfg" "$dockerfile" >"$cfg/out" 2>&1 || { bad "dockerfilelint:"; cat "$cfg/out"; }

# Base images: stages may build on earlier stages; anything else carries an explicit tag.
stages=()
while read -r _ image _ name; do
  known=0
  for s in "${stages[@]}"; do [[ $image == "$s" ]] && known=1; done
  if ((known == 0)); then
    [[ $image == *:* && $image != *:latest ]] || bad "base image $image has no pinned tag"
  fi
  [[ -n ${name:-} ]] && stages+=("$name")
done < <(grep -E '^FROM ' "$dockerfile" | sed -E 's/\$\{DEBIAN_RELEASE\}/bookworm/')
grep -qE '^FROM debian:\$\{DEBIAN_RELEASE\} AS build$' "$dockerfile" || bad "the build stage is not Debian bookworm"
grep -qE '^FROM debian:\$\{DEBIAN_RELEASE\}-slim AS runtime$' "$dockerfile" || bad "the runtime stage is not bookworm-slim"
grep -qE '^ARG DEBIAN_RELEASE=bookworm$' "$dockerfile" || bad "DEBIAN_RELEASE is not bookworm"
for stage in runtime runner; do
  last_user=$(awk -v s="$stage" '$1=="FROM"{cur=$NF} cur==s && $1=="USER"{u=$2} END{print u}' "$dockerfile")
  [[ $last_user == awp ]] || bad "stage $stage ends as user '${last_user:-root}', not awp"
done

# The build stage installs every library package scripts/install-deps.sh builds against.
build_pkgs=$(awk '/^FROM .* AS build$/{r=1} /^FROM .* AS runtime$/{r=0} r && !/^#/' "$dockerfile" | tr -s '[:space:]' '\n')
for pkg in $(sed -n '/^PACKAGES=(/,/)/p' "$src/scripts/install-deps.sh" | tr -s '[:space:]()' '\n' | grep -E '^lib.*-dev$'); do
  grep -qxF "$pkg" <<<"$build_pkgs" || bad "the build stage lacks $pkg (scripts/install-deps.sh has it)"
done

# Runtime libraries: the direct NEEDED entries of every built executable, mapped to packages.
runtime_pkgs=$(awk '/^FROM .* AS runtime$/{r=1} /^FROM runtime AS runner$/{r=0} r && !/^#/' "$dockerfile" |
  tr -s '[:space:]' '\n' | grep -E '^lib[a-z0-9.+-]+$' | sort -u || true)
deb_depends=$(grep -A1 'set(CPACK_DEBIAN_PACKAGE_DEPENDS' "$src/deploy/CMakeLists.txt" |
  tr -c 'a-z0-9.+-' '\n' | grep -E '^lib' | sort -u || true)
base_pkgs="libc6 libstdc++6 libgcc-s1"
checked=0
if command -v objdump >/dev/null && command -v dpkg >/dev/null; then
  ldconfig -p | grep -E 'x86-64|x86_64|aarch64' >"$cfg/ldcache" || true
  for exe in awpctl awp-api-gateway awp-command-runner awp-inbox-dispatcher awp-embedder awp-scheduler awp-wake; do
    [[ -x $build/bin/$exe ]] || { bad "$build/bin/$exe not built"; continue; }
    for so in $(objdump -p "$build/bin/$exe" | awk '$1=="NEEDED"{print $2}'); do
      path=$(awk -v s="$so" '$1==s && !p{p=$NF} END{print p}' "$cfg/ldcache")
      pkg=
      real=$(readlink -f "$path")
      # merged /usr: dpkg may record either spelling of the path
      for p in "$path" "$real" "${real#/usr}" "/usr$path"; do
        pkg=$(dpkg -S "$p" 2>/dev/null | awk -F: 'NR==1{print $1}' || true)
        [[ -n $pkg ]] && break
      done
      [[ -n $pkg ]] || { bad "$exe needs $so, which no package owns"; continue; }
      # libopenblas.so.0 is an alternative: any flavour of the runtime package does.
      [[ $pkg == libopenblas0-* ]] && pkg=libopenblas0-pthread
      case " $base_pkgs " in *" $pkg "*) continue ;; esac
      grep -qxF "$pkg" <<<"$runtime_pkgs" || bad "$exe needs $so ($pkg), not installed in the runtime stage"
      grep -qxF "$pkg" <<<"$deb_depends" || bad "$exe needs $so ($pkg), missing from the .deb Depends"
      checked=$((checked + 1))
    done
  done
fi

((fail == 0)) && echo "Dockerfile: both linters clean; tags pinned; non-root; $checked library links covered"
exit $fail
