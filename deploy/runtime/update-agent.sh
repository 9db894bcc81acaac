#!/usr/bin/env bash
# update-agent.sh <slug>: pulls the latest commits of the agent's workspace when it is a git
# checkout with an upstream; a workspace without one (the runtime's own seed files) has nothing
# to pull and is left as it is. The runtime's state is not touched (docs/runtime.md).
. "$(dirname "$0")/common.sh"
[[ $# -eq 1 ]] || die "usage: update-agent.sh <slug>"
check_slug "$1"
update_workspace "$1"
