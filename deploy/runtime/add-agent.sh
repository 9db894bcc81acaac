#!/usr/bin/env bash
# add-agent.sh <slug> [--channel C] [--discord-server-id ID] [--discord-user-id ID]
#   [--source-branch T] [--name N] [--description D] [--emoji E] [--model M]
#   [--owner-name N] [--owner-preferred-name N] [--owner-timezone TZ]
# Creates the agent's workspace and registers the agent with the runtime, then binds its chat
# channel. Channel tokens come from the agent's env file (secrets sync), never from argv.
. "$(dirname "$0")/common.sh"
[[ $# -ge 1 ]] || die "usage: add-agent.sh <slug> [options]"
slug=$1; shift
check_slug "$slug"
channel=telegram; args=()
while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || die "option $1 needs a value"
  case $1 in
    --channel) channel=$2 ;;
    --model) args+=(--model "$2") ;;
    --name|--description|--emoji|--owner-name|--owner-preferred-name|--owner-timezone|--source-branch|--discord-server-id|--discord-user-id)
      args+=("$1" "$2") ;;
    *) die "unknown option $1" ;;
  esac
  shift 2
done
case $channel in telegram|discord|slack|none) ;; *) die "unknown channel $channel" ;; esac
load_agent_env "$slug"
workspace="$RUNTIME_HOME/workspace-$slug"
mkdir -p "$workspace"
with_config_lock
"$RUNTIME" agents add "$slug" --workspace "$workspace" --non-interactive "${args[@]}"
if [[ $channel != none ]]; then
  # The runtime reads the token from the named variable of its environment.
  var=$(echo "${channel}_BOT_TOKEN" | tr '[:lower:]' '[:upper:]')
  "$RUNTIME" channels add --channel "$channel" --account "$slug" --token-env "$var"
fi
"$RUNTIME" gateway restart
echo "agent $slug added (channel $channel)"
