# shellcheck shell=bash
# Shared by the agent scripts the command runner calls (sourced, not run). The runner passes
# OPENCLAW_STATE_DIR (the runtime's state: openclaw.json, agents/, workspace-<slug>/),
# AWP_SECRETS_DIR, AWP_TEMPLATES_DIR and AWP_TEMPLATES_REPO; every value arrives as its own argv
# element, never through a shell string. These scripts never edit the runtime's files: the
# runtime's CLI does, through awp::runtime. They run as the agent user (AGENT_USER) when the
# runner has one.
set -euo pipefail
RUNTIME_HOME=${OPENCLAW_STATE_DIR:-${AWP_RUNTIME_HOME:-$HOME/.openclaw}}
# The agents' workspaces: AWP_WORKSPACES_DIR when the runner has one, else in the runtime's state.
WORKSPACES=${AWP_WORKSPACES_DIR:-$RUNTIME_HOME}
# The templates (one folder each) and the git repository they are published to: a branch
# template/<name> each, a new commit whenever a folder changed (docs/runtime.md, "Templates").
TEMPLATES=${AWP_TEMPLATES_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/templates}
TEMPLATES_REPO=${AWP_TEMPLATES_REPO:-$RUNTIME_HOME/awp-templates.git}
# The remote every templated workspace has, and the branch of the agent's own files.
TEMPLATE_REMOTE=awp-template

die() { echo "$(basename "$0"): $*" >&2; exit 2; }

# The agents.slug rule of the schema: no '/', never '..' (the slug names a folder).
check_slug() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ && $1 != *..* ]] || die "unsafe agent slug: $1"
}
template_name_ok() { [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$ && $1 != *..* ]]; }

# git without anything a workspace's own config could run (hooks, fsmonitor), with awp's name
# on the commits it makes, never prompting.
git_() {
  GIT_TERMINAL_PROMPT=0 git -c core.hooksPath=/dev/null -c core.fsmonitor=false \
    -c user.name=awp -c user.email=awp@localhost -c init.defaultBranch=main \
    -c advice.detachedHead=false "$@"
}

# Publishes every template folder to its branch template/<name> of the templates repository:
# a commit when the folder's files differ from the branch's last one, none otherwise. The folder
# is only read (it may be a read-only install); one publisher at a time.
publish_templates() {
  [[ -d $TEMPLATES ]] || return 0
  if [[ ! -d $TEMPLATES_REPO ]]; then
    mkdir -p "$(dirname "$TEMPLATES_REPO")"
    git_ init -q --bare "$TEMPLATES_REPO"
  fi
  local dir name
  exec 9>>"$TEMPLATES_REPO/awp-publish.lock"
  flock 9
  for dir in "$TEMPLATES"/*/; do
    name=$(basename "$dir")
    template_name_ok "$name" || continue
    publish_template "$name" "${dir%/}"
  done
  exec 9>&-
}

publish_template() {
  local name=$1 dir=$2 ref="refs/heads/template/$1" index tree old parent=() commit
  index=$(mktemp -u "${TMPDIR:-/tmp}/awp-template-index.XXXXXX")
  tree=$(export GIT_DIR=$TEMPLATES_REPO GIT_WORK_TREE=$dir GIT_INDEX_FILE=$index
         git_ add -A -- . && git_ write-tree)
  rm -f "$index"
  old=$(git_ --git-dir="$TEMPLATES_REPO" rev-parse -q --verify "$ref" 2>/dev/null || true)
  if [[ -n $old ]]; then
    [[ $(git_ --git-dir="$TEMPLATES_REPO" rev-parse "$old^{tree}") == "$tree" ]] && return 0
    parent=(-p "$old")
  fi
  commit=$(git_ --git-dir="$TEMPLATES_REPO" commit-tree "$tree" "${parent[@]}" \
             -m "template $name: published from $dir")
  git_ --git-dir="$TEMPLATES_REPO" update-ref "$ref" "$commit" "$old"
}

# Brings one workspace to its branch's newest version: the template's (or any upstream's) new
# commits merged into the agent's own, the agent's changes to tracked files committed first so
# the merge is three-way. A conflict, or a new template file where the agent has a file of its
# own, changes nothing and fails naming the paths. A workspace without an upstream (no template)
# has nothing to update.
update_workspace() {
  local slug=$1 ws="$WORKSPACES/workspace-$1" upstream remote behind head added f collide=() conflicts
  [[ -d $ws ]] || { echo "agent $slug has no workspace on this gateway" >&2; return 1; }
  if [[ ! -e $ws/.git ]]; then
    echo "agent $slug: workspace is not a git checkout (no template), nothing to update"
    return 0
  fi
  if ! upstream=$(git_ -C "$ws" rev-parse --abbrev-ref --symbolic-full-name '@{u}' 2>/dev/null); then
    echo "agent $slug: no template or upstream branch, nothing to update"
    return 0
  fi
  remote=${upstream%%/*}
  [[ $remote == "$TEMPLATE_REMOTE" ]] && publish_templates
  git_ -C "$ws" fetch -q "$remote"
  behind=$(git_ -C "$ws" rev-list --count 'HEAD..@{u}')
  if ((behind == 0)); then
    echo "agent $slug: up to date with $upstream ($(git_ -C "$ws" rev-parse --short '@{u}'))"
    return 0
  fi
  if ! git_ -C "$ws" diff --quiet HEAD --; then
    git_ -C "$ws" commit -q -a -m "awp: the agent's own changes, before updating from $upstream"
  fi
  # A file the new version adds, where the agent already has one the branch does not track.
  head=$(git_ -C "$ws" rev-parse HEAD)
  while IFS= read -r -d '' f; do
    added=$ws/$f
    if [[ -e $added || -L $added ]] && ! git_ -C "$ws" ls-files --error-unmatch -- "$f" >/dev/null 2>&1; then
      collide+=("$f")
    fi
  done < <(git_ -C "$ws" diff -z --name-only --diff-filter=A "$head...@{u}")
  if ((${#collide[@]})); then
    echo "agent $slug: update from $upstream would overwrite the agent's own files: ${collide[*]}; nothing was changed (move them, then update again)" >&2
    return 1
  fi
  if ! git_ -C "$ws" merge -q --no-edit -m "awp: update from $upstream" '@{u}' >/dev/null 2>&1; then
    conflicts=$(git_ -C "$ws" diff --name-only --diff-filter=U | paste -sd ' ' -)
    git_ -C "$ws" merge --abort >/dev/null 2>&1 || git_ -C "$ws" reset -q --merge
    echo "agent $slug: update from $upstream conflicts with the agent's own changes in: ${conflicts:-(unknown: the merge failed)}; nothing was changed (resolve them in the workspace, then update again)" >&2
    return 1
  fi
  echo "agent $slug updated to $upstream $(git_ -C "$ws" rev-parse --short '@{u}') ($behind new commit(s))"
}
