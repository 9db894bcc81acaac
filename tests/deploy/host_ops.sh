#!/usr/bin/env bash
# The host-operations helper without systemd: the runner's side (deploy/runtime/host-op.sh)
# leaves a request and waits; the helper's side (deploy/systemd/host-ops.sh, what
# awp-host-ops.service runs when awp-host-ops.path sees a request) is run here as the path unit
# would. Each operation reaches systemctl or the checkout as documented and its exit code comes
# back to the runner; a request that is not one of the three operations, or a link the runner's
# user planted, runs nothing; an update pulls the checkout named in host-ops.env and runs its
# installer in update mode.
# Usage: host_ops.sh <source dir> <build dir>
set -euo pipefail
src=$1
work=$(mktemp -d)
server=
# The stand-in path unit ends with the script, whatever ends it.
trap 'rc=$?; if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; fi; wait 2>/dev/null || true; rm -rf "$work"; exit $rc' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
client=$src/deploy/runtime/host-op.sh
helper=$src/deploy/systemd/host-ops.sh
ops=$work/ops
mkdir -p "$ops/requests" "$ops/results" "$work/fake"
export FAKE_RUNTIME_DIR=$work/fake AWP_HOST_OPS_DIR=$ops AWP_HOST_OP_WAIT=300
# The test double of systemctl only (git is the real one: the update pulls a real checkout).
mkdir -p "$work/bin"
ln -s "$src/tests/fakes/path/systemctl" "$work/bin/systemctl"
export PATH=$work/bin:$PATH
if ((EUID == 0)); then scope=(); mode=--system; else scope=(--user); mode=--user; fi

# The path unit: the helper runs whenever a request is there, until `stop` appears.
serve() {
  while [[ ! -e $work/stop ]]; do
    if compgen -G "$ops/requests/*" >/dev/null; then bash "$helper" "$ops" 2>>"$work/helper.log"; fi
    sleep 0.05
  done
}
serve &
server=$!

calls() { while read -r line; do for w in $line; do printf '%s ' "$(base64 -d <<<"$w")"; done; echo; done <"$work/fake/calls"; }
run_client() {  # run_client <op>: its exit code in $rc, output in $out
  rc=0
  out=$(bash "$client" "$1" 2>&1) || rc=$?
}

run_client restart-dispatcher
[[ $rc == 0 ]] || bad "restart-dispatcher exited $rc: $out"
run_client restart-runtime
[[ $rc == 0 ]] || bad "restart-runtime exited $rc: $out"
want="systemctl ${scope[*]}${scope:+ }restart awp-inbox-dispatcher.service "
[[ $(calls | sed -n 1p) == "$want" ]] || bad "restart-dispatcher ran: $(calls | sed -n 1p)"
want="systemctl ${scope[*]}${scope:+ }restart awp-agent-runtime.service "
[[ $(calls | sed -n 2p) == "$want" ]] || bad "restart-runtime ran: $(calls | sed -n 2p)"

# Its exit code is the runner's.
echo 5 >"$work/fake/exit.systemctl"
run_client restart-dispatcher
[[ $rc == 5 ]] || bad "a failed restart came back as $rc, not 5"
rm -f "$work/fake/exit.systemctl"

# Anything else in the request folder is removed unread; nothing runs for it, nothing answers.
# Only a request's name counts: a link is removed, never followed.
before=$(wc -l <"$work/fake/calls")
: >"$ops/requests/x1.rm-rf"
: >"$ops/requests/x3.restart-dispatcher.sh"
echo "restart-dispatcher" >"$ops/requests/x4"
ln -s "$work/target" "$ops/requests/x5.restart-runtime"
echo keep >"$work/target"
for _ in $(seq 1 100); do compgen -G "$ops/requests/*" >/dev/null || break; sleep 0.05; done
sleep 0.3
compgen -G "$ops/requests/*" >/dev/null && bad "planted requests were left: $(ls "$ops/requests")"
[[ $(calls | tail -n +$((before + 1))) == "systemctl ${scope[*]}${scope:+ }restart awp-agent-runtime.service " ]] \
  || bad "planted requests ran: $(calls | tail -n +$((before + 1)))"
[[ $(cat "$work/target") == keep && ! -L $work/target ]] || bad "the link's target was touched"
for id in x1 x3 x4; do [[ -e $ops/results/$id ]] && bad "request $id got an answer"; done
grep -q 'ignored request "x1.rm-rf"' "$work/helper.log" || bad "the helper did not say it ignored x1.rm-rf"

# The client refuses what it does not know, and says when there is no helper.
run_client reboot
[[ $rc == 2 && $out == *"unknown operation"* ]] || bad "an unknown operation: $rc $out"
rc=0; out=$(AWP_HOST_OPS_DIR=$work/none bash "$client" update 2>&1) || rc=$?
[[ $rc == 2 && $out == *"no awp-host-ops helper on this host"* ]] || bad "no helper: $rc $out"

# update without a checkout (a package install): refused, saying so.
run_client update
[[ $rc == 3 && $out == *"no checkout to pull"* ]] || bad "update without AWP_REPO_DIR: $rc $out"

# update with a checkout: pulled, then its installer in update mode.
git init -q --bare "$work/upstream.git"
git clone -q "$work/upstream.git" "$work/checkout" 2>/dev/null
mkdir -p "$work/checkout/deploy"
cat >"$work/checkout/deploy/install-systemd.sh" <<'INSTALLER'
#!/usr/bin/env bash
echo "installer $*" >>"$(dirname "$0")/../installer.log"
echo "updated"
INSTALLER
chmod +x "$work/checkout/deploy/install-systemd.sh"
git -C "$work/checkout" add -A
git -C "$work/checkout" -c user.name=t -c user.email=t@t commit -qm one
git -C "$work/checkout" push -q origin HEAD 2>/dev/null
git clone -q "$work/upstream.git" "$work/other" 2>/dev/null
echo two >"$work/other/NEWS"
git -C "$work/other" add NEWS
git -C "$work/other" -c user.name=t -c user.email=t@t commit -qm two
git -C "$work/other" push -q origin HEAD 2>/dev/null
touch "$work/stop"; wait "$server"; server=; rm -f "$work/stop"
AWP_REPO_DIR=$work/checkout serve &
server=$!
run_client update
[[ $rc == 0 ]] || bad "update exited $rc: $out"
[[ -f $work/checkout/NEWS ]] || bad "update did not pull the checkout"
grep -qx "installer --update $mode" "$work/checkout/installer.log" 2>/dev/null || bad "the installer did not run in update mode: $(cat "$work/checkout/installer.log" 2>/dev/null)"
[[ $out == *updated* ]] || bad "the installer's output did not come back: $out"

touch "$work/stop"
wait "$server"
server=
((fail == 0)) && echo "host-ops: restarts, exit codes, refusals and the update checked"
exit $fail
