#!/usr/bin/env bash
# update-agent.sh <slug>: brings the agent's workspace to its branch's newest version: the
# templates published again, the template's new commits merged into the agent's own branch
# (common.sh, update_workspace). A conflict fails naming the paths and changes nothing; a
# workspace without a template has nothing to update. The runtime's state is not touched.
. "$(dirname "$0")/common.sh"
[[ $# -eq 1 ]] || die "usage: update-agent.sh <slug>"
check_slug "$1"
update_workspace "$1"
