#!/usr/bin/env bash
# Provision finds its templates on every install (docs/command-runner.md, "Templates"): the runner
# of a build tree, given no AWP_RUNTIME_SCRIPTS, uses the source tree's deploy/runtime (and so its
# deploy/templates); scripts/run-stack.sh sets both for the runner it starts; the scripts publish
# the shipped templates, refuse an unknown name listing the known ones and an unsafe one, and
# publish a folder of the product's layout (templates/<name> over templates/_shared) that
# AWP_TEMPLATES_SOURCE names. (The systemd units and the compose stack: systemd_units.sh and
# compose_stack.sh; a provision with the real runtime: tests/e2e/runtime_real_test.cpp.)
# Usage: templates_default.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
command -v git >/dev/null || { echo "SKIP: git missing"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

runner=$build/bin/awp-command-runner
if [[ -x $runner ]]; then
  out=$(env -i PATH=/usr/bin:/bin HOME="$work" AGENT_RUNTIME="$src/tests/fakes/fake-runtime" \
        "$runner" --print-config 2>&1) || bad "awp-command-runner --print-config exited $?: $out"
  grep -q -- "$src/deploy/runtime" <<<"$out" \
    || bad "the runner's default scripts folder is not this tree's deploy/runtime: $(grep -i scripts <<<"$out")"
else
  bad "$runner is not built"
fi

# run-stack.sh hands the runner this checkout's scripts and templates unless stack.env says else.
grep -qF 'AWP_RUNTIME_SCRIPTS=${AWP_RUNTIME_SCRIPTS:-$REPO/deploy/runtime}' "$src/scripts/run-stack.sh" \
  || bad "scripts/run-stack.sh does not set AWP_RUNTIME_SCRIPTS"
grep -qF 'AWP_TEMPLATES_DIR=${AWP_TEMPLATES_DIR:-$REPO/deploy/templates}' "$src/scripts/run-stack.sh" \
  || bad "scripts/run-stack.sh does not set AWP_TEMPLATES_DIR"

# The scripts with nothing set but the runtime's state: the shipped templates.
t() { env -i PATH=/usr/bin:/bin HOME="$work" OPENCLAW_STATE_DIR="$work/oc" "$@" "$src/deploy/runtime/templates.sh" "${args[@]}"; }
args=(list)
known=$(t 2>&1) || bad "templates.sh list: $known"
for n in engineer researcher support-agent; do grep -qx "$n" <<<"$known" || bad "$n is not published: $known"; done
args=(require engineer)
t >/dev/null 2>&1 || bad "templates.sh require engineer failed"
args=(require crm-researcher)
if msg=$(t 2>&1); then bad "an unknown template was accepted"; fi
grep -q 'template "crm-researcher" does not exist on this gateway; known templates: engineer, researcher, support-agent' <<<"$msg" \
  || bad "the refusal does not list the known templates: $msg"
for unsafe in ../x .. a/b -x; do
  args=(require "$unsafe")
  if t >/dev/null 2>&1; then bad "the unsafe name $unsafe was accepted"; fi
done

# The product's layout in a folder: each templates/<name> over templates/_shared; _shared and
# README.md are not templates; a name of the source wins over the shipped one.
lib=$work/library/templates
mkdir -p "$lib/_shared" "$lib/crm-researcher" "$lib/engineer"
echo shared >"$lib/_shared/AGENTS.md"
echo crm >"$lib/crm-researcher/IDENTITY.md"
echo "engineer of the library" >"$lib/engineer/AGENTS.md"
echo readme >"$lib/README.md"
args=(require crm-researcher)
t AWP_TEMPLATES_SOURCE="$work/library" >/dev/null 2>&1 || bad "a template of AWP_TEMPLATES_SOURCE is not found"
repo=$work/oc/awp-templates.git
[[ $(git --git-dir="$repo" show template/crm-researcher:AGENTS.md) == shared ]] || bad "_shared is not under the template"
[[ $(git --git-dir="$repo" show template/engineer:AGENTS.md) == "engineer of the library" ]] || bad "the source's engineer does not win"
git --git-dir="$repo" rev-parse -q --verify refs/heads/template/_shared >/dev/null && bad "_shared was published as a template"
# Published again with nothing changed: no new commit.
before=$(git --git-dir="$repo" rev-parse template/engineer)
t AWP_TEMPLATES_SOURCE="$work/library" >/dev/null 2>&1
[[ $(git --git-dir="$repo" rev-parse template/engineer) == "$before" ]] || bad "an unchanged template got a new commit"
# A source that is not there fails naming it.
args=(list)
if msg=$(t AWP_TEMPLATES_SOURCE="$work/nowhere" 2>&1); then bad "a missing source was accepted"; fi
grep -q "cannot read the template source $work/nowhere" <<<"$msg" || bad "a missing source is not named: $msg"
exit $fail
