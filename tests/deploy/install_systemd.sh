#!/usr/bin/env bash
# deploy/install-systemd.sh staged into a scratch root, in system and in user mode: units land
# where systemd looks, settings files are 0600 with generated secrets, a second run keeps them,
# and a package's units are used instead of rendering copies into /etc. The host-operations
# helper is installed with the units: its script a copy outside the checkout (it runs as root),
# its settings naming this checkout for update_gateway.
# Usage: install_systemd.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
script=$src/deploy/install-systemd.sh
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
mode_of() { stat -c %a "$1"; }

if command -v shellcheck >/dev/null; then
  shellcheck -S warning "$script" "$src/deploy/compose/initdb/10-awp-roles.sh" "$src"/tests/deploy/*.sh || bad "shellcheck"
fi

# System mode.
bash "$script" --system --root "$root/sys" --bindir "$build/bin" 2>"$root/log"
for u in awp.target awp-api-gateway.service awp-command-runner.service awp-inbox-dispatcher.service \
         awp-embedder.service awp-scheduler.service awp-wake.service awp-agent-runtime.service \
         awp-host-ops.service awp-host-ops.path; do
  [[ -f $root/sys/etc/systemd/system/$u ]] || bad "system: $u not written"
done
env=$root/sys/etc/awp/awp.env
[[ -f $env ]] || bad "system: awp.env not written"
[[ $(mode_of "$env") == 600 ]] || bad "system: awp.env mode $(mode_of "$env"), want 600"
[[ $(mode_of "$root/sys/etc/awp") == 700 ]] || bad "system: /etc/awp mode $(mode_of "$root/sys/etc/awp")"
[[ $(mode_of "$root/sys/etc/awp/command-runner.env") == 600 ]] || bad "system: command-runner.env not 600"
# The wake relay: its unit and settings are written, but the target does not start it.
[[ $(mode_of "$root/sys/etc/awp/wake.env") == 600 ]] || bad "system: wake.env not 600"
grep -q '^#WAKE_BIND=' "$root/sys/etc/awp/wake.env" || bad "system: wake.env has no example settings"
grep -q 'awp-wake' "$root/sys/etc/systemd/system/awp.target" && bad "system: awp.target wants awp-wake"
grep -q '@' <(grep -E '^(JWT_SECRET|SERVICE_ROLE_KEY)=' "$env") && bad "system: secrets left as placeholders"
grep -qE '^JWT_SECRET=[0-9a-f]{64}$' "$env" || bad "system: JWT_SECRET not generated"
first=$(grep '^JWT_SECRET=' "$env")
bash "$script" --system --root "$root/sys" --bindir "$build/bin" 2>>"$root/log"
[[ $(grep '^JWT_SECRET=' "$env") == "$first" ]] || bad "system: a second run replaced the secrets"
grep -qx 'User=awp' "$root/sys/etc/systemd/system/awp-scheduler.service" || bad "system: units do not run as awp"
# The helper runs as root: the unit runs the installed copy, never the checkout's script.
[[ -x $root/sys/usr/local/lib/awp/host-ops.sh ]] || bad "system: host-ops.sh not installed to /usr/local/lib/awp"
cmp -s "$root/sys/usr/local/lib/awp/host-ops.sh" "$src/deploy/systemd/host-ops.sh" || bad "system: the installed host-ops.sh differs from the checkout's"
grep -qx 'ExecStart=/usr/local/lib/awp/host-ops.sh %S/awp-host-ops' "$root/sys/etc/systemd/system/awp-host-ops.service" \
  || bad "system: awp-host-ops does not run the installed copy"
for f in host-ops.env agent-runtime.env; do
  [[ $(mode_of "$root/sys/etc/awp/$f") == 600 ]] || bad "system: $f not 600"
done
grep -qx "AWP_REPO_DIR=$(cd "$src" && pwd)" "$root/sys/etc/awp/host-ops.env" || bad "system: host-ops.env does not name this checkout"
grep -qx 'AGENT_RUNTIME=openclaw' "$root/sys/etc/awp/agent-runtime.env" || bad "system: agent-runtime.env has no AGENT_RUNTIME"
grep -qE '^(JWT_SECRET|SERVICE_ROLE_KEY|DATABASE_URL)=' "$root/sys/etc/awp/agent-runtime.env" && bad "system: agent-runtime.env holds a daemon secret"
# The gateway's own login: a 0600 file read by the gateway daemons only, after awp.env.
[[ $(mode_of "$root/sys/etc/awp/gateway.env") == 600 ]] || bad "system: gateway.env not 600"
for u in command-runner inbox-dispatcher embedder; do
  grep -A1 -x 'EnvironmentFile=-%E/awp/gateway.env' "$root/sys/etc/systemd/system/awp-$u.service" \
    | grep -qx "EnvironmentFile=-%E/awp/$u.env" || bad "system: awp-$u does not read gateway.env before $u.env"
done
for u in api-gateway scheduler wake; do
  grep -q '/awp/gateway.env' "$root/sys/etc/systemd/system/awp-$u.service" && bad "system: awp-$u reads the gateway's login"
done

# User mode: ~/.config/awp and ~/.config/systemd/user under the scratch home.
home=$root/home/op
mkdir -p "$home"
HOME=$home XDG_CONFIG_HOME='' bash "$script" --user --root "$root/usr" --bindir "$build/bin" 2>>"$root/log"
ucfg=$root/usr$home/.config
[[ -f $ucfg/systemd/user/awp-inbox-dispatcher.service ]] || bad "user: units not in ~/.config/systemd/user"
[[ $(mode_of "$ucfg/awp/awp.env") == 600 ]] || bad "user: awp.env not 600"
grep -q '^User=' "$ucfg/systemd/user/awp-scheduler.service" && bad "user: units set User="
[[ -d $root/usr$home/.openclaw ]] || bad "user: ~/.openclaw (the runtime's writable home) not created"
[[ -f $ucfg/systemd/user/awp-host-ops.path ]] || bad "user: no awp-host-ops.path"
grep -qx "ExecStart=$src/deploy/systemd/host-ops.sh %S/awp-host-ops" "$ucfg/systemd/user/awp-host-ops.service" \
  || grep -qx "ExecStart=$(cd "$src" && pwd)/deploy/systemd/host-ops.sh %S/awp-host-ops" "$ucfg/systemd/user/awp-host-ops.service" \
  || bad "user: awp-host-ops does not run the checkout's host-ops.sh"

# A packaged install: units already in /usr/lib/systemd/system are used, nothing goes to /etc.
mkdir -p "$root/pkg/usr/lib/systemd/system"
bash "$script" --render-only "$root/pkg/usr/lib/systemd/system" --system --bindir /usr/bin
bash "$script" --system --root "$root/pkg" --bindir /usr/bin 2>>"$root/log"
[[ -e $root/pkg/etc/systemd/system/awp.target ]] && bad "packaged: units copied to /etc over the package's"
grep -q 'using the units installed in' "$root/log" || bad "packaged: not reported"

# Refusals.
bash "$script" --bogus >/dev/null 2>&1 && bad "an unknown option was accepted"
if [[ $(id -u) -ne 0 ]]; then
  bash "$script" --system --bindir "$build/bin" >/dev/null 2>&1 && bad "system mode ran without root"
fi

((fail == 0)) && echo "install-systemd: system, user and packaged layouts checked"
exit $fail
