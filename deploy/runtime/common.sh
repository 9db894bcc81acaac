# Shared by the agent scripts the command runner calls (sourced, not run). The runner passes
# OPENCLAW_STATE_DIR (the runtime's state: openclaw.json, agents/, workspace-<slug>/) and
# AWP_SECRETS_DIR; every value arrives as its own argv element, never through a shell string.
# These scripts never edit the runtime's files: the runtime's CLI does, through awp::runtime.
set -euo pipefail
RUNTIME_HOME=${OPENCLAW_STATE_DIR:-${AWP_RUNTIME_HOME:-$HOME/.openclaw}}
# The agents' workspaces: AWP_WORKSPACES_DIR when the runner has one, else in the runtime's state.
WORKSPACES=${AWP_WORKSPACES_DIR:-$RUNTIME_HOME}

die() { echo "$(basename "$0"): $*" >&2; exit 2; }

# The agents.slug rule of the schema: no '/', never '..' (the slug names a folder).
check_slug() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ && $1 != *..* ]] || die "unsafe agent slug: $1"
}

# Pulls one workspace: fast-forward only, from its upstream; none is not an error.
update_workspace() {
  local slug=$1 ws="$WORKSPACES/workspace-$1"
  [[ -d $ws ]] || { echo "agent $slug has no workspace on this gateway" >&2; return 1; }
  if [[ ! -e $ws/.git ]]; then
    echo "agent $slug: workspace is not a git checkout, nothing to pull"
    return 0
  fi
  if ! git -C "$ws" rev-parse --abbrev-ref --symbolic-full-name '@{u}' >/dev/null 2>&1; then
    echo "agent $slug: no upstream branch, nothing to pull"
    return 0
  fi
  git -C "$ws" pull --ff-only
  echo "agent $slug updated"
}
