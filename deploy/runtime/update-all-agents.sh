#!/usr/bin/env bash
# update-all-agents.sh: update-agent.sh for every workspace on this gateway; reports each, fails
# when one failed (each failure on stderr with its paths).
. "$(dirname "$0")/common.sh"
failed=0; count=0
shopt -s nullglob
for ws in "$WORKSPACES"/workspace-*; do
  slug=${ws##*/workspace-}
  count=$((count + 1))
  update_workspace "$slug" || failed=$((failed + 1))
done
echo "$count agent(s), $failed failed"
[[ $failed -eq 0 ]]
