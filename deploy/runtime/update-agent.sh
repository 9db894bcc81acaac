#!/usr/bin/env bash
# update-agent.sh <slug>: pulls the latest commits of the agent's workspace, then restarts the gateway.
. "$(dirname "$0")/common.sh"
[[ $# -eq 1 ]] || die "usage: update-agent.sh <slug>"
check_slug "$1"
workspace="$RUNTIME_HOME/workspace-$1"
[[ -d $workspace ]] || die "agent $1 has no workspace on this gateway"
if [[ -d $workspace/.git || -f $workspace/.git ]]; then
  git -C "$workspace" pull --ff-only
fi
"$RUNTIME" gateway restart
echo "agent $1 updated"
