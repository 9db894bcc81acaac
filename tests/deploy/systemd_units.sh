#!/usr/bin/env bash
# The systemd units: systemd-analyze verify passes without a single warning for the system and the
# user rendering (pointed at this build's binaries), and every unit keeps the operating contract:
# Type=notify, Restart=on-failure, RestartPreventExitStatus=78, a stop timeout above the drain
# deadline, the env files, hardening, and writable paths only where the daemon writes. The wake
# relay awp-wake keeps the same contract, but awp.target does not want it (enabled by hand). The
# runner's host operations (restart_dispatcher, restart_gateway, update_gateway) go through the
# awp-host-ops helper the target starts: the runner writes only its request folder, the helper
# (root for system units) reads nothing else of the runner's; the runtime's gateway
# (awp-agent-runtime) runs as the agent user and never reads awp.env's secrets.
# Usage: systemd_units.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
units=$build/deploy/units-build
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze missing (AWP_DEPS=full scripts/install-deps.sh)"; exit 77; }
daemons=(awp-api-gateway awp-command-runner awp-inbox-dispatcher awp-embedder awp-scheduler)
optional=(awp-wake)
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for d in "${daemons[@]}" "${optional[@]}"; do
  [[ -x $build/bin/$d ]] || { echo "FAIL: $build/bin/$d not built (verify needs every ExecStart)"; exit 1; }
done

# Re-render from the current templates (the configure step may be older than an edit).
for mode in system user; do
  bash "$src/deploy/install-systemd.sh" --render-only "$units/$mode" --$mode \
    --bindir "$build/bin" --datadir "$src/deploy" --docdir "$src/docs"
done

# verify exits 0 on unknown keys and bad values: any output at all is a failure.
out=$(systemd-analyze verify "$units"/system/*.service "$units"/system/*.path "$units/system/awp.target" 2>&1) || bad "verify (system) exit $?"
[[ -z $out ]] || bad "verify (system) said: $out"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
out=$(systemd-analyze --user verify "$units"/user/*.service "$units"/user/*.path "$units/user/awp.target" 2>&1) || bad "verify (user) exit $?"
[[ -z $out ]] || bad "verify (user) said: $out"

has() { grep -qxF -- "$2" "$1" || bad "$(basename "$(dirname "$1")")/$(basename "$1") lacks: $2"; }
value_of() { sed -n "s/^$2=//p" "$1" | tail -n1; }
for mode in system user; do
  for d in "${daemons[@]}" "${optional[@]}"; do
    f=$units/$mode/$d.service
    for line in Type=notify Restart=on-failure RestartPreventExitStatus=78 KillMode=mixed \
                NoNewPrivileges=yes ProtectSystem=strict ProtectHome=read-only PrivateTmp=yes \
                PartOf=awp.target WantedBy=awp.target "ExecStart=$build/bin/$d" \
                "EnvironmentFile=-%E/awp/awp.env" "EnvironmentFile=-%E/awp/${d#awp-}.env"; do
      has "$f" "$line"
    done
    stop=$(value_of "$f" TimeoutStopSec)
    if ! [[ $stop =~ ^[0-9]+$ ]] || ((stop < 30)); then
      bad "$mode/$d: TimeoutStopSec=$stop is not 10 s above the 20 s drain deadline"
    fi
    if [[ $mode == system ]]; then has "$f" "User=awp"; elif grep -q '^User=' "$f"; then bad "user/$d sets User="; fi
  done
  has "$units/$mode/awp.target" "WantedBy=$([[ $mode == system ]] && echo multi-user.target || echo default.target)"
  for d in "${daemons[@]}"; do
    grep -q "^Wants=.*\b$d.service" "$units/$mode/awp.target" || bad "$mode/awp.target does not want $d"
  done
  # The relay is off by default: the target never pulls it in; once enabled it also starts at
  # boot on a host that runs only the relay.
  for d in "${optional[@]}"; do
    grep -qE "^(Wants|Requires|BindsTo)=.*\b$d\.service" "$units/$mode/awp.target" && bad "$mode/awp.target pulls in $d"
    has "$units/$mode/$d.service" "WantedBy=$([[ $mode == system ]] && echo multi-user.target || echo default.target)"
  done
done

# Writable paths: only the daemons that write get any.
for d in awp-embedder awp-scheduler awp-wake; do
  for mode in system user; do
    grep -qE '^(StateDirectory|ReadWritePaths)=' "$units/$mode/$d.service" && bad "$mode/$d has writable paths"
  done
done
has "$units/system/awp-api-gateway.service" "StateDirectory=awp/api-gateway"
# The runtime's state is the agent user's (the installer makes it): no StateDirectory= may name it,
# or systemd would give it back to awp at every start.
grep -q '^StateDirectory=.*openclaw' "$units"/system/*.service && bad "a StateDirectory names the runtime's state"
for d in awp-api-gateway awp-command-runner awp-inbox-dispatcher; do
  has "$units/system/$d.service" "ReadWritePaths=-/var/lib/awp/.openclaw"
done
# Agents run as awp-agent: the runner and the dispatcher switch to it and hold only that power.
for d in awp-command-runner awp-inbox-dispatcher; do
  has "$units/system/$d.service" "Environment=AGENT_USER=awp-agent"
  has "$units/system/$d.service" "AmbientCapabilities=CAP_SETUID CAP_SETGID"
  has "$units/system/$d.service" "CapabilityBoundingSet=CAP_SETUID CAP_SETGID"
  grep -q '^AmbientCapabilities' "$units/user/$d.service" && bad "user/$d asks for capabilities"
done
for d in awp-api-gateway awp-embedder awp-scheduler awp-wake; do
  grep -qE '^(AmbientCapabilities|Environment=AGENT_USER)' "$units/system/$d.service" && bad "system/$d has the agent switch"
done
has "$units/system/awp-command-runner.service" "Environment=SECRETS_DIR=/var/lib/awp/secrets"
# The workspaces: one folder the runner and the api-gateway agree on, writable by both.
for d in awp-api-gateway awp-command-runner; do
  has "$units/system/$d.service" "Environment=AWP_WORKSPACES_DIR=/var/lib/awp/workspaces"
  has "$units/system/$d.service" "ReadWritePaths=-/var/lib/awp/workspaces"
done
# The agents' files are the runtime's workspaces: the api-gateway reads the runner's state dir.
has "$units/system/awp-api-gateway.service" "Environment=OPENCLAW_STATE_DIR=%h/.openclaw"
has "$units/user/awp-api-gateway.service" "ReadWritePaths=-%h/.openclaw"
has "$units/system/awp-command-runner.service" "StateDirectory=awp awp/command-runner awp-host-ops/requests"
has "$units/user/awp-command-runner.service" "ReadWritePaths=-%h/.openclaw"
has "$units/user/awp-inbox-dispatcher.service" "ReadWritePaths=-%h/.openclaw"
has "$units/system/awp-command-runner.service" "Environment=RUNTIME_MODE=service_manager"
# Provision finds its templates: the scripts and the templates of this install, both real folders
# (rendered with --datadir <source>/deploy here), the scripts' template check among them.
for mode in system user; do
  f=$units/$mode/awp-command-runner.service
  has "$f" "Environment=AWP_RUNTIME_SCRIPTS=$src/deploy/runtime"
  has "$f" "Environment=AWP_TEMPLATES_DIR=$src/deploy/templates"
done
[[ -x $src/deploy/runtime/templates.sh ]] || bad "deploy/runtime/templates.sh (provision's template check) is missing"
ls -d "$src"/deploy/templates/*/ >/dev/null 2>&1 || bad "deploy/templates has no template"
grep -qx '#AWP_TEMPLATES_SOURCE=.*' "$src/deploy/systemd/awp.env.example" \
  || bad "awp.env.example does not show AWP_TEMPLATES_SOURCE"

# The runner's service_manager mode without the helper runs `systemctl --user restart
# awp-inbox-dispatcher`.
[[ -f $units/user/awp-inbox-dispatcher.service ]] || bad "no user unit awp-inbox-dispatcher"

# The host operations: the runner asks, the helper does (docs/operations.md).
for mode in system user; do
  u=$units/$mode
  grep -q '^Wants=.*\bawp-agent-runtime\.service' "$u/awp.target" || bad "$mode/awp.target does not want awp-agent-runtime"
  grep -q '^Wants=.*\bawp-host-ops\.path' "$u/awp.target" || bad "$mode/awp.target does not want awp-host-ops.path"
  has "$u/awp-command-runner.service" "Environment=AWP_HOST_OPS_DIR=%S/awp-host-ops"
  has "$u/awp-command-runner.service" "StateDirectory=awp awp/command-runner awp-host-ops/requests"
  has "$u/awp-host-ops.path" "DirectoryNotEmpty=%S/awp-host-ops/requests"
  has "$u/awp-host-ops.path" "Unit=awp-host-ops.service"
  has "$u/awp-host-ops.path" "WantedBy=awp.target"
  has "$u/awp-host-ops.service" "Type=oneshot"
  has "$u/awp-host-ops.service" "StateDirectory=awp-host-ops/results"
  has "$u/awp-host-ops.service" "EnvironmentFile=-%E/awp/host-ops.env"
  grep -qx "ExecStart=$src/deploy/systemd/host-ops.sh %S/awp-host-ops" "$u/awp-host-ops.service" || bad "$mode/awp-host-ops runs something else than host-ops.sh"
  # The helper reads its own settings only: never the daemons' (no secret, no runner setting
  # decides what it runs).
  grep -qE '^EnvironmentFile=.*/awp/(awp|gateway|command-runner)\.env' "$u/awp-host-ops.service" && bad "$mode/awp-host-ops reads the daemons' settings"
  # The runtime's gateway: loopback only, its own settings file only.
  grep -q -- '--bind loopback' "$u/awp-agent-runtime.service" || bad "$mode/awp-agent-runtime does not bind loopback"
  [[ $(grep -c '^EnvironmentFile=' "$u/awp-agent-runtime.service") == 1 ]] && has "$u/awp-agent-runtime.service" "EnvironmentFile=-%E/awp/agent-runtime.env" \
    || bad "$mode/awp-agent-runtime reads more than agent-runtime.env"
  has "$u/awp-agent-runtime.service" "NoNewPrivileges=yes"
done
grep -q '^User=' "$units/system/awp-host-ops.service" && bad "system/awp-host-ops does not run as root (it restarts system units)"
has "$units/system/awp-agent-runtime.service" "User=awp-agent"
has "$units/system/awp-agent-runtime.service" "Environment=OPENCLAW_STATE_DIR=/var/lib/awp/.openclaw"
grep -q '^User=' "$units/user/awp-agent-runtime.service" && bad "user/awp-agent-runtime sets User="

# The relay holds a socket per stream: its file limit is above WAKE_MAX_STREAMS (20000).
for mode in system user; do
  nofile=$(value_of "$units/$mode/awp-wake.service" LimitNOFILE)
  [[ $nofile =~ ^[0-9]+$ ]] && ((nofile > 20000)) || bad "$mode/awp-wake: LimitNOFILE=$nofile holds fewer than WAKE_MAX_STREAMS sockets"
done
# The relay is no gateway's daemon: it never reads the gateway's login.
grep -q '/awp/gateway.env' "$units/system/awp-wake.service" && bad "awp-wake reads the gateway's login"

((fail == 0)) && echo "systemd units: 20 files verified, contract checked"
exit $fail
