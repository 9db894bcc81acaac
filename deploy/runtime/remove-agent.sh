#!/usr/bin/env bash
# remove-agent.sh <slug>: unregisters the agent from the runtime and deletes its workspace.
. "$(dirname "$0")/common.sh"
[[ $# -eq 1 ]] || die "usage: remove-agent.sh <slug>"
check_slug "$1"
with_config_lock
"$RUNTIME" agents delete "$1" --force
rm -rf -- "${RUNTIME_HOME:?}/workspace-$1"
rm -f -- "$SECRETS_DIR/agents/$1.env"
"$RUNTIME" gateway restart
echo "agent $1 removed"
