#!/usr/bin/env bash
# host-ops.sh <dir>: the awp-host-ops service (deploy/systemd/awp-host-ops.service.in). Answers
# every request the command runner left in <dir>/requests, one file <id>.<operation> each, in
# <dir>/results/<id> ("exit <code>" on the first line, then the output). Only the names are
# read, never the contents, and only these operations run:
#   restart-dispatcher   systemctl restart awp-inbox-dispatcher.service
#   restart-runtime      systemctl restart awp-agent-runtime.service
#   update               git pull --ff-only of AWP_REPO_DIR (as the checkout's owner), then
#                        <AWP_REPO_DIR>/deploy/install-systemd.sh --update
# Runs as root for system units (systemctl of the system manager), as the user for user units
# (systemctl --user). Results older than an hour are removed.
set -uo pipefail
dir=${1:?usage: host-ops.sh <dir>}
requests=$dir/requests results=$dir/results
mkdir -p "$results"
if ((EUID == 0)); then systemctl=(systemctl); scope=--system; else systemctl=(systemctl --user); scope=--user; fi

log() { echo "awp-host-ops: $*" >&2; }

run_update() {
  local repo=${AWP_REPO_DIR:-} owner
  if [[ -z $repo || ! -e $repo/.git ]]; then
    echo "update: this install has no checkout to pull (AWP_REPO_DIR in host-ops.env: ${repo:-unset}); a package is updated with the system's package manager"
    return 3
  fi
  owner=$(stat -c %U "$repo")
  # Never git as root in someone else's checkout: as its owner.
  if ((EUID == 0)) && [[ $owner != root ]]; then
    runuser -u "$owner" -- git -C "$repo" pull --ff-only || return
  else
    git -C "$repo" pull --ff-only || return
  fi
  "$repo/deploy/install-systemd.sh" --update "$scope"
}

run_op() {
  case $1 in
    restart-dispatcher) "${systemctl[@]}" restart awp-inbox-dispatcher.service ;;
    restart-runtime) "${systemctl[@]}" restart awp-agent-runtime.service ;;
    update) run_update ;;
  esac
}

find "$results" -maxdepth 1 -type f -mmin +60 -delete 2>/dev/null
shopt -s nullglob dotglob
for f in "$requests"/*; do
  name=${f##*/}
  # A link or anything else the runner's user planted is only ever removed.
  rm -f -- "$f"
  if [[ ! $name =~ ^([A-Za-z0-9-]{1,64})\.(restart-dispatcher|restart-runtime|update)$ ]]; then
    log "ignored request \"$name\" (not <id>.<operation>)"
    continue
  fi
  id=${BASH_REMATCH[1]} op=${BASH_REMATCH[2]}
  log "$op (request $id)"
  out=$(run_op "$op" 2>&1)
  rc=$?
  printf 'exit %d\n%s\n' "$rc" "$out" >"$results/.$id.tmp"
  mv -f -- "$results/.$id.tmp" "$results/$id"
  log "$op (request $id) ended with exit code $rc"
done
exit 0
