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
# More templates from elsewhere (docs/command-runner.md, "Templates"): a git repository (a path
# or URL, git+<url> as the product writes it) with template/<name> branches, or whose default
# branch keeps templates/<name> folders (templates/_shared layered under each, as the product
# does); or a local folder of template folders (or one with a templates/ folder of them). A
# name the source has wins over the folder's.
TEMPLATES_SOURCE=${AWP_TEMPLATES_SOURCE:-}
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

# Publishes every template to its branch template/<name> of the templates repository: those of
# TEMPLATES_SOURCE first, then each folder of TEMPLATES the source has no template of. A commit
# when a template's files differ from its branch's last one, none otherwise; branches are never
# removed (agents track them). The folders and the source are only read; one publisher at a time.
publish_templates() {
  if [[ ! -d $TEMPLATES_REPO ]]; then
    mkdir -p "$(dirname "$TEMPLATES_REPO")"
    git_ init -q --bare "$TEMPLATES_REPO"
  fi
  exec 9>>"$TEMPLATES_REPO/awp-publish.lock"
  flock 9
  local -A from_source=()
  [[ -n $TEMPLATES_SOURCE ]] && import_source
  [[ -d $TEMPLATES ]] && publish_folders "$TEMPLATES" skip_sourced
  exec 9>&-
}

# Publishes each template folder <root>/<name>, with <root>/_shared under it when there is one.
# With "skip_sourced", a name the source already published is left alone; otherwise each name
# is remembered as the source's.
publish_folders() {
  local root=$1 mode=${2:-} dir name layered
  for dir in "$root"/*/; do
    [[ -d $dir ]] || continue
    name=$(basename "$dir")
    template_name_ok "$name" || continue
    if [[ $mode == skip_sourced ]]; then
      [[ -n ${from_source[$name]:-} ]] && continue
    else
      from_source[$name]=1
    fi
    if [[ -d $root/_shared ]]; then
      layered=$(mktemp -d "${TMPDIR:-/tmp}/awp-template.XXXXXX")
      cp -a "$root/_shared/." "$layered/"
      cp -a "${dir%/}/." "$layered/"
      publish_template "$name" "$layered"
      rm -rf "$layered"
    else
      publish_template "$name" "${dir%/}"
    fi
  done
}

# TEMPLATES_SOURCE into the templates repository (see its comment above).
import_source() {
  local src=${TEMPLATES_SOURCE#git+} refs ref name tree work bare heads
  [[ $src == -* ]] && die "AWP_TEMPLATES_SOURCE must not start with '-': $src"
  # A local folder that is no repository of its own, or a checkout without template branches:
  # its files as they are.
  if [[ -d $src ]]; then
    bare=$(git_ -C "$src" rev-parse --is-bare-repository 2>/dev/null || true)
    heads=$(git_ ls-remote --heads "$src" 'template/*' 2>/dev/null || true)
    if [[ $bare != true && -z $heads ]]; then
      if [[ -d $src/templates ]]; then publish_folders "$src/templates"; else publish_folders "$src"; fi
      return 0
    fi
  fi
  refs=$(git_ ls-remote --heads "$src" 'template/*' 2>&1) \
    || die "cannot read the template source $src: $(grep -m1 '^fatal:' <<<"$refs" || tail -n 1 <<<"$refs")"
  if [[ -n $refs ]]; then
    git_ --git-dir="$TEMPLATES_REPO" fetch -q --no-tags --prune "$src" \
      '+refs/heads/template/*:refs/awp-source/template/*' \
      || die "cannot fetch the template branches of $src"
    while IFS= read -r ref; do
      name=${ref#refs/awp-source/template/}
      template_name_ok "$name" || continue
      tree=$(git_ --git-dir="$TEMPLATES_REPO" rev-parse "$ref^{tree}")
      from_source[$name]=1
      publish_tree "$name" "$tree" "$src"
    done < <(git_ --git-dir="$TEMPLATES_REPO" for-each-ref --format='%(refname)' 'refs/awp-source/template/')
    return 0
  fi
  # No template branches: the default branch's templates/ folder (or its top folders).
  git_ --git-dir="$TEMPLATES_REPO" fetch -q --no-tags --depth 1 "$src" '+HEAD:refs/awp-source/head' \
    || die "cannot fetch the default branch of $src"
  work=$(mktemp -d "${TMPDIR:-/tmp}/awp-template-source.XXXXXX")
  git_ --git-dir="$TEMPLATES_REPO" archive refs/awp-source/head | tar -x -C "$work"
  if [[ -d $work/templates ]]; then publish_folders "$work/templates"; else publish_folders "$work"; fi
  rm -rf "$work"
}

publish_template() {
  local name=$1 dir=$2 index tree
  index=$(mktemp -u "${TMPDIR:-/tmp}/awp-template-index.XXXXXX")
  tree=$(export GIT_DIR=$TEMPLATES_REPO GIT_WORK_TREE=$dir GIT_INDEX_FILE=$index
         git_ add -A -- . && git_ write-tree)
  rm -f "$index"
  publish_tree "$name" "$tree" "$dir"
}

# A commit of <tree> on template/<name> when it differs from the branch's last one.
publish_tree() {
  local name=$1 tree=$2 from=$3 ref="refs/heads/template/$1" old parent=() commit
  old=$(git_ --git-dir="$TEMPLATES_REPO" rev-parse -q --verify "$ref" 2>/dev/null || true)
  if [[ -n $old ]]; then
    [[ $(git_ --git-dir="$TEMPLATES_REPO" rev-parse "$old^{tree}") == "$tree" ]] && return 0
    parent=(-p "$old")
  fi
  commit=$(git_ --git-dir="$TEMPLATES_REPO" commit-tree "$tree" "${parent[@]}" \
             -m "template $name: published from $from")
  git_ --git-dir="$TEMPLATES_REPO" update-ref "$ref" "$commit" "$old"
}

# The templates this gateway knows (its repository's template/<name> branches), one a line.
known_templates() {
  git_ --git-dir="$TEMPLATES_REPO" for-each-ref --format='%(refname:lstrip=3)' 'refs/heads/template/' \
    2>/dev/null | sort
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
