#!/usr/bin/env bash
# checkout-template.sh <slug> <template/name>: makes the agent's workspace (seeded by the runtime)
# a checkout of the template's branch: the template's files over the runtime's seed files, on the
# agent's own branch agent/<slug>, which tracks template/<name> of the templates repository, so
# update-agent.sh merges the template's later versions into it. The seed files the template does
# not have stay, untracked: the agent's own. A workspace already on its agent branch keeps its
# files; only the branch it tracks changes (its next update merges that template).
. "$(dirname "$0")/common.sh"
[[ $# -eq 2 ]] || die "usage: checkout-template.sh <slug> template/<name>"
check_slug "$1"
slug=$1 branch=$2
[[ $branch == template/* ]] && template_name_ok "${branch#template/}" || die "not a template branch: $branch"
ws="$WORKSPACES/workspace-$slug"
[[ -d $ws ]] || die "agent $slug has no workspace on this gateway ($ws)"
publish_templates
git_ --git-dir="$TEMPLATES_REPO" rev-parse -q --verify "refs/heads/$branch" >/dev/null \
  || die "template ${branch#template/} does not exist on this gateway; known templates: $(known_templates | paste -sd ' ' -)"
[[ -e $ws/.git ]] || git_ -C "$ws" init -q
if git_ -C "$ws" remote get-url "$TEMPLATE_REMOTE" >/dev/null 2>&1; then
  git_ -C "$ws" remote set-url "$TEMPLATE_REMOTE" "$TEMPLATES_REPO"
else
  git_ -C "$ws" remote add "$TEMPLATE_REMOTE" "$TEMPLATES_REPO"
fi
git_ -C "$ws" fetch -q "$TEMPLATE_REMOTE"
own=agent/$slug
if git_ -C "$ws" rev-parse -q --verify "refs/heads/$own" >/dev/null; then
  git_ -C "$ws" branch -q --set-upstream-to="$TEMPLATE_REMOTE/$branch" "$own"
  echo "agent $slug: workspace already on $own; it now tracks $branch (update-agent.sh merges it)"
  exit 0
fi
git_ -C "$ws" checkout -q -f -B "$own" "$TEMPLATE_REMOTE/$branch"
git_ -C "$ws" branch -q --set-upstream-to="$TEMPLATE_REMOTE/$branch" "$own"
echo "agent $slug: workspace on $own, tracking $branch at $(git_ -C "$ws" rev-parse --short HEAD)"
