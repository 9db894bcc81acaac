#!/usr/bin/env bash
# host-op.sh <operation>: what the command runner runs for restart_dispatcher (restart-dispatcher),
# restart_gateway (restart-runtime) and update_gateway (update) in service_manager mode when the
# host has the awp-host-ops helper (AWP_HOST_OPS_DIR, set by the units of deploy/systemd): leaves
# a request in <dir>/requests, waits for the helper's answer in <dir>/results and reports it as its
# own output and exit code. The helper runs it with rights the runner's unit does not have.
set -euo pipefail
die() { echo "host-op.sh: $*" >&2; exit 2; }
[[ $# -eq 1 ]] || die "usage: host-op.sh restart-dispatcher|restart-runtime|update"
op=$1
case $op in restart-dispatcher | restart-runtime | update) ;; *) die "unknown operation: $op" ;; esac
dir=${AWP_HOST_OPS_DIR:?AWP_HOST_OPS_DIR is not set}
[[ -d $dir/requests && -w $dir/requests ]] ||
  die "no awp-host-ops helper on this host ($dir/requests is missing or not writable): install the units with deploy/install-systemd.sh"
id=$(date +%s%N)-$$
result=$dir/results/$id
: >"$dir/requests/.$id.tmp"
mv -f -- "$dir/requests/.$id.tmp" "$dir/requests/$id.$op"
# The runner's COMMAND_TIMEOUT ends the wait; the helper answers an update within 15 minutes.
for ((i = 0; i < ${AWP_HOST_OP_WAIT:-9000}; i++)); do
  if [[ -f $result ]]; then
    code=$(head -n1 "$result")
    tail -n +2 "$result"
    [[ $code =~ ^exit\ ([0-9]+)$ ]] || die "unreadable answer from awp-host-ops: $code"
    exit "${BASH_REMATCH[1]}"
  fi
  sleep 0.1
done
rm -f -- "$dir/requests/$id.$op"
die "awp-host-ops did not answer $op within $((${AWP_HOST_OP_WAIT:-9000} / 10)) s (is awp-host-ops.path active?)"
