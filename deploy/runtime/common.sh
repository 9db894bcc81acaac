# Shared by the agent scripts the command runner calls (sourced, not run). The runner passes
# AGENT_RUNTIME (the runtime CLI), AWP_RUNTIME_HOME and AWP_SECRETS_DIR; every value arrives as
# its own argv element, never through a shell string.
set -euo pipefail
RUNTIME=${AGENT_RUNTIME:-openclaw}
RUNTIME_HOME=${AWP_RUNTIME_HOME:-$HOME/.openclaw}
SECRETS_DIR=${AWP_SECRETS_DIR:-$RUNTIME_HOME/secrets}

die() { echo "$(basename "$0"): $*" >&2; exit 2; }

# The agents.slug rule of the schema: no '/', never '..' (the slug names a folder).
check_slug() {
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ && $1 != *..* ]] || die "unsafe agent slug: $1"
}

# Loads the agent's secrets (channel tokens) into the environment without printing them.
load_agent_env() {
  local f="$SECRETS_DIR/agents/$1.env"
  [[ -f $f ]] || f="$SECRETS_DIR/gateway.env"
  if [[ -f $f ]]; then set -a; . "$f"; set +a; fi
}

# Serialises edits of the runtime's configuration with the runner's own (set_agent_model).
with_config_lock() {
  mkdir -p "$RUNTIME_HOME"
  exec 9>"$RUNTIME_HOME/openclaw.json.lock"
  flock 9
}
