#!/usr/bin/env bash
# install-systemd.sh adopting a host's files from the layout before the agent user: awp's
# secrets leave the runtime's folder, the workspaces move out (a link left where the runtime's
# config names them), channel tokens stay readable by the agent user under their old path, every
# file gets its owner, and a second run changes nothing. Needs root (chown); 77 otherwise.
# Usage: adopt_layout.sh <source dir> <build dir>
set -euo pipefail
src=$1
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (chown)"; exit 77; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
owner() { stat -c %U "$1"; }
# The users of this test: "daemon" plays awp, "nobody" plays awp-agent.
export AWP_DAEMON_USER=daemon AWP_AGENT_USER=nobody
rt=$root/var/lib/awp/.openclaw
mkdir -p "$rt/workspace-ana/notes" "$rt/agents/ana" "$rt/secrets/agents" "$rt/secrets/channels"
echo '{"agents":{"list":[{"id":"ana","workspace":"/var/lib/awp/.openclaw/workspace-ana"}]}}' >"$rt/openclaw.json"
echo hello >"$rt/workspace-ana/notes/a.md"
echo "GW='s3cret'" >"$rt/secrets/gateway.env"
echo "K='v'" >"$rt/secrets/agents/ana.env"
echo "123:tok" >"$rt/secrets/channels/ana.telegram.token"
chown -R daemon:daemon "$root/var/lib/awp"

run() { bash "$src/deploy/install-systemd.sh" --system --adopt-layout-only --root "$root" 2>>"$root/log"; }
run || bad "the adoption failed: $(cat "$root/log")"
state=$root/var/lib/awp
[[ $(owner "$state/secrets/gateway.env") == daemon ]] || bad "secrets not the daemon's"
[[ $(stat -c %a "$state/secrets") == 700 ]] || bad "secrets folder not 0700"
[[ -f $state/secrets/agents/ana.env ]] || bad "an agent's env file was lost"
[[ -e $rt/secrets/gateway.env ]] && bad "awp's secrets are still in the runtime's folder"
[[ -L $rt/workspace-ana && $(readlink "$rt/workspace-ana") == /var/lib/awp/workspaces/workspace-ana ]] \
  || bad "no link where the runtime's config names the workspace"
[[ $(cat "$state/workspaces/workspace-ana/notes/a.md") == hello ]] || bad "a workspace file was lost"
[[ $(owner "$state/workspaces/workspace-ana/notes/a.md") == nobody ]] || bad "workspace file not the agent's"
[[ $(stat -c %a "$state/workspaces/workspace-ana/notes") == 2775 || $(stat -c %a "$state/workspaces/workspace-ana/notes") == 2770 ]] \
  || bad "workspace folders not setgid and group-writable: $(stat -c %a "$state/workspaces/workspace-ana/notes")"
[[ $(owner "$rt/openclaw.json") == nobody ]] || bad "the runtime's config not the agent's"
[[ $(stat -c %a "$rt") == 700 ]] || bad "the runtime's folder not 0700"
[[ $(cat "$rt/secrets/channels/ana.telegram.token") == "123:tok" ]] || bad "the channel token is not under its old path"
[[ $(owner "$rt/awp-channels/ana.telegram.token") == nobody ]] || bad "the channel token is not the agent's"
# A second run: nothing moves, nothing is lost.
before=$(find "$state" -printf '%p %U %m\n' | sort)
run || bad "a second run failed: $(cat "$root/log")"
after=$(find "$state" -printf '%p %U %m\n' | sort)
[[ $before == "$after" ]] || bad "a second run changed something: $(diff <(echo "$before") <(echo "$after") | head -5)"
# Both folders holding secrets: refused, nothing moved.
mv "$rt/secrets" "$rt/secrets.kept" && mkdir "$rt/secrets" && echo x >"$rt/secrets/other.env"
if run; then bad "secrets in two places were merged silently"; fi
[[ -f $rt/secrets/other.env ]] || bad "a refused adoption moved the secrets anyway"

((fail == 0)) && echo "adopt layout: secrets out, workspaces out with links, tokens readable, idempotent"
exit $fail
