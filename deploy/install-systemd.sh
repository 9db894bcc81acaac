#!/usr/bin/env bash
# Sets up the awp daemons as systemd units on this host, as system units (user `awp`, settings in
# /etc/awp) or as user units of the calling user (--user; settings in ~/.config/awp): renders the
# units unless a package already installed them, writes the settings files (mode 0600, secrets
# generated, never overwritten), reloads systemd and enables awp.target. See docs/operations.md.
# The wake relay awp-wake gets its unit and wake.env too, but awp.target does not want it: on the
# one host that runs it for many gateway hosts, `systemctl enable --now awp-wake` (docs/wake.md).
# awp.target also starts the agent runtime's gateway (awp-agent-runtime, as the agent user) and
# awp-host-ops.path, the helper that restarts and updates what the runner's unit may not.
#
#   install-systemd.sh [--system|--user] [--bindir DIR] [--datadir DIR] [--now] [--no-enable]
#   install-systemd.sh --render-only DIR [--system|--user] [--bindir DIR] [--datadir DIR]
#   install-systemd.sh ... --root DIR    (stage into DIR: no useradd, no systemctl; for tests)
#   install-systemd.sh --update [--system|--user]   (after a pull: units rendered again, settings
#     kept, daemon-reload, the running daemons restarted without waiting; the runner's
#     update_gateway in service_manager mode; mode: --user unless root)
#   install-systemd.sh --adopt-layout-only [--root DIR]   (as root: only the agent user's folders
#     made or adopted from an older install; AWP_DAEMON_USER, AWP_AGENT_USER name the users)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=system
bindir='' datadir='' docdir='' root='' render_only='' now=0 enable=1 update=0 mode_given=0 adopt_only=0
daemons=(awp-api-gateway awp-command-runner awp-inbox-dispatcher awp-embedder awp-scheduler)
# Rendered and configured like the daemons, started only where an operator enables them.
optional=(awp-wake)
# Not daemons of awp's but started with them (awp.target wants them): the runtime's gateway and
# the host-operations helper (a path unit and the oneshot it starts).
companions=(awp-agent-runtime awp-host-ops)

die() { echo "install-systemd: $*" >&2; exit 2; }
say() { echo "install-systemd: $*" >&2; }
usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while (($#)); do
  case $1 in
    --system) mode=system; mode_given=1 ;;
    --user) mode=user; mode_given=1 ;;
    --update) update=1 ;;
    --bindir) bindir=${2:?--bindir needs a value}; shift ;;
    --datadir) datadir=${2:?--datadir needs a value}; shift ;;
    --docdir) docdir=${2:?--docdir needs a value}; shift ;;
    --root) root=${2:?--root needs a value}; shift ;;
    --render-only) render_only=${2:?--render-only needs a value}; shift ;;
    --now) now=1 ;;
    --no-enable) enable=0 ;;
    -h|--help) usage; exit 0 ;;
    # For tests: the layout adoption alone, under a root prefix, with the given users.
    --adopt-layout-only) adopt_only=1 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done
if ((update)) && ((!mode_given)); then
  if [[ $(id -u) -eq 0 ]]; then mode=system; else mode=user; fi
fi

# Templates: deploy/systemd in a checkout, <prefix>/share/awp/systemd once installed.
templates=$here/systemd
[[ -f $templates/awp.target.in ]] || die "unit templates not found in $templates"

# Where the binaries and the data (runtime scripts, agent templates) are: an installed prefix
# (share/awp -> ../../bin), a checkout's build (deploy -> ../build/bin), else the PATH.
if [[ -z $bindir ]]; then
  for b in "$here/../../bin" "$here/../build/bin" "$(dirname "$(command -v awp-api-gateway 2>/dev/null || echo /nonexistent/x)")"; do
    if [[ -x $b/awp-api-gateway ]]; then bindir=$(cd "$b" && pwd); break; fi
  done
  [[ -n $bindir ]] || die "no awp-api-gateway found; build first or pass --bindir"
fi
[[ $bindir = /* ]] || bindir=$(cd "$bindir" && pwd)
# Both layouts keep runtime/ and templates/ beside this script.
datadir=${datadir:-$here}
if [[ -z $docdir ]]; then
  if [[ -d $here/../docs ]]; then docdir=$(cd "$here/../docs" && pwd); else docdir=$(cd "$here/../doc/awp" 2>/dev/null && pwd || echo /usr/share/doc/awp); fi
fi

# The host-operations helper's script: in the data folder (a package's is root's); a system
# install from a checkout runs a root-owned copy instead (below), since it runs as root.
host_ops=$datadir/systemd/host-ops.sh

render() {  # render <mode> <out dir>
  local m=$1 out=$2 run_as wanted_by runtime_rw agent_user runner_secrets workspaces f name
  local run_as_agent runtime_state
  if [[ $m == system ]]; then
    run_as='User=awp\nGroup=awp'
    run_as_agent='User=awp-agent\nGroup=awp-agent'
    runtime_state=/var/lib/awp/.openclaw
    wanted_by=multi-user.target
    # The runtime's state belongs to the agent user awp-agent (group awp, setgid, 2770).
    runtime_rw='ReadWritePaths=-/var/lib/awp/.openclaw'
    # Every process of an agent runs as awp-agent (docs/security.md, "The agent user"): the
    # daemon switches to it, so it holds CAP_SETUID and CAP_SETGID and no other capability.
    agent_user='Environment=AGENT_USER=awp-agent\nAmbientCapabilities=CAP_SETUID CAP_SETGID\nCapabilityBoundingSet=CAP_SETUID CAP_SETGID'
    runner_secrets="# awp's secrets folder: the runner's own, outside the agent user's.\nEnvironment=SECRETS_DIR=/var/lib/awp/secrets"
    # The agents' workspaces, shared by the agent user and the api-gateway through the group
    # awp-agent (the runtime keeps its own state folder 0700).
    workspaces='Environment=AWP_WORKSPACES_DIR=/var/lib/awp/workspaces\nReadWritePaths=-/var/lib/awp/workspaces'
  else
    run_as='# Runs as the user of this user manager.'
    run_as_agent='# User units: the runtime runs as this user (AGENT_USER needs the system units).'
    runtime_state=%h/.openclaw
    wanted_by=default.target
    runtime_rw='ReadWritePaths=-%h/.openclaw'
    agent_user='# User units: agents run as this user (AGENT_USER needs the system units).'
    runner_secrets=''
    workspaces='# User units: the workspaces are in the runtime state folder (OPENCLAW_STATE_DIR).'
  fi
  mkdir -p "$out"
  for f in "$templates"/*.in; do
    name=$(basename "$f" .in)
    sed -e "s|@AWP_BINDIR@|$bindir|g" -e "s|@AWP_DATADIR@|$datadir|g" \
        -e "s|@AWP_DOCDIR@|$docdir|g" -e "s|@AWP_RUN_AS@|$run_as|g" \
        -e "s|@AWP_WANTED_BY@|$wanted_by|g" -e "s|@AWP_RUNTIME_RW@|$runtime_rw|g" \
        -e "s|@AWP_AGENT_USER@|$agent_user|g" -e "s|@AWP_RUNNER_SECRETS@|$runner_secrets|g" \
        -e "s|@AWP_WORKSPACES@|$workspaces|g" -e "s|@AWP_RUN_AS_AGENT@|$run_as_agent|g" \
        -e "s|@AWP_RUNTIME_STATE@|$runtime_state|g" -e "s|@AWP_HOST_OPS@|$host_ops|g" \
        "$f" >"$out/$name.tmp"
    chmod 0644 "$out/$name.tmp"
    mv -f "$out/$name.tmp" "$out/$name"
  done
}

if [[ -n $render_only ]]; then
  render "$mode" "$render_only"
  exit 0
fi

staged=0
[[ -n $root ]] && staged=1
if ((staged == 0)) && [[ $mode == system && $(id -u) -ne 0 ]]; then
  die "system mode needs root (or use --user)"
fi

# The folders of the agent user's layout, made or adopted from the layout before it (every
# file under /var/lib/awp/.openclaw the awp user's, awp's secrets and the workspaces inside it):
#   the runtime's state          /var/lib/awp/.openclaw      agent user, 0700
#   the agents' workspaces       /var/lib/awp/workspaces     agent user, its group, setgid 2770;
#                                each workspace-<slug> moved here, a symlink left where the
#                                runtime's config names it
#   awp's secrets                /var/lib/awp/secrets        awp, 0700 (moved out of .openclaw)
#   the channel tokens           .openclaw/awp-channels      agent user (the runtime reads them);
#                                .openclaw/secrets/channels a symlink to it, for the config
# Idempotent. adopt_layout <root prefix> <daemon user> <agent user>
adopt_layout() {
  local prefix=$1 daemon=$2 agent=$3 dg ag state rt ws sec w name
  dg=$(id -gn "$daemon") ag=$(id -gn "$agent")
  state=$prefix/var/lib/awp rt=$state/.openclaw ws=$state/workspaces sec=$state/secrets
  install -d -o "$daemon" -g "$dg" -m 0755 "$state"
  install -d -o "$agent" -g "$ag" -m 0700 "$rt"
  install -d -o "$agent" -g "$ag" -m 2770 "$ws"
  if [[ -d $rt/secrets && ! -L $rt/secrets && ! -e $rt/secrets/.awp-moved ]]; then
    if [[ -e $sec && -n $(ls -A "$sec") ]]; then
      die "both $rt/secrets and $sec hold files: merge them into $sec by hand, then run this again"
    fi
    rm -rf "$sec"
    mv "$rt/secrets" "$sec"
    say "moved awp's secrets out of the runtime's folder to $sec"
  fi
  install -d -o "$daemon" -g "$dg" -m 0700 "$sec"
  chown -R -h "$daemon:$dg" "$sec"
  # Channel tokens the runtime was given (--token-file) under the old secrets folder.
  if [[ -d $sec/channels ]]; then
    install -d -o "$agent" -g "$ag" -m 0700 "$rt/awp-channels"
    find "$sec/channels" -maxdepth 1 -type f -name '*.token' -exec mv -n -t "$rt/awp-channels" {} +
    rmdir "$sec/channels" 2>/dev/null || true
    install -d -o "$agent" -g "$ag" -m 0700 "$rt/secrets"
    : >"$rt/secrets/.awp-moved"
    [[ -e $rt/secrets/channels ]] || ln -s ../awp-channels "$rt/secrets/channels"
  fi
  for w in "$rt"/workspace-*; do
    [[ -d $w && ! -L $w ]] || continue
    name=${w##*/}
    [[ -e $ws/$name ]] && die "$ws/$name exists already: move $w by hand"
    mv "$w" "$ws/$name"
    ln -s "/var/lib/awp/workspaces/$name" "$w"
    say "moved $name to $ws (a link left where the runtime's config names it)"
  done
  chown -R -h "$agent:$ag" "$rt" "$ws"
  find "$ws" -mindepth 1 -type d -exec chmod g+rwxs {} +
  find "$ws" -mindepth 1 -type f -exec chmod g+rw {} +
}

if ((adopt_only)); then
  adopt_layout "$root" "${AWP_DAEMON_USER:-awp}" "${AWP_AGENT_USER:-awp-agent}"
  exit 0
fi

random_hex() {
  if command -v openssl >/dev/null; then openssl rand -hex 32; else od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; fi
}

if [[ $mode == system ]]; then
  confdir=$root/etc/awp
  unit_dir=$root/etc/systemd/system
  packaged_dirs=("$root/usr/lib/systemd/system" "$root/lib/systemd/system" "$root/usr/local/lib/systemd/system")
  systemctl=(systemctl)
else
  home=${HOME:?HOME is not set}
  confdir=$root${XDG_CONFIG_HOME:-$home/.config}/awp
  unit_dir=$root${XDG_CONFIG_HOME:-$home/.config}/systemd/user
  packaged_dirs=("$root/usr/lib/systemd/user" "$root/usr/local/lib/systemd/user")
  systemctl=(systemctl --user)
fi

# 1. The units: a package's copies (in systemd's own search path) win; else render into /etc
#    (or ~/.config), where an operator's edits belong anyway.
packaged=
for d in "${packaged_dirs[@]}"; do
  if [[ -f $d/awp.target ]]; then packaged=$d; break; fi
done
if [[ -n $packaged ]]; then
  say "using the units installed in $packaged"
else
  if [[ $mode == system ]]; then
    # The helper runs as root: its script a root-owned copy, never one in a user's checkout.
    install -d "$root/usr/local/lib/awp"
    install -m 0755 "$templates/host-ops.sh" "$root/usr/local/lib/awp/host-ops.sh"
    host_ops=/usr/local/lib/awp/host-ops.sh
  fi
  render "$mode" "$unit_dir"
  say "wrote ${#daemons[@]} units, awp.target, ${companions[*]} and ${optional[*]} (not wanted by the target) to $unit_dir (binaries in $bindir)"
fi

# 2. The service user (system mode): its home is the state directory, where the agent runtime
#    keeps its files.
if [[ $mode == system ]]; then
  if ((staged)); then
    say "staged: would create the system user awp (home /var/lib/awp)"
  elif ! getent passwd awp >/dev/null; then
    useradd --system --user-group --home-dir /var/lib/awp --no-create-home \
      --shell /usr/sbin/nologin --comment "awp daemons" awp
    say "created the system user awp"
  fi
  # The agent user: every process of an agent runs as it, so none can read the daemons' files,
  # environment or credentials. It owns the runtime's state and the workspaces; awp is a member
  # of its group, so the api-gateway edits the agents' files (setgid, group-writable folder).
  if ((staged)); then
    say "staged: would create the system user awp-agent (home /var/lib/awp/.openclaw)"
  else
    if ! getent passwd awp-agent >/dev/null; then
      useradd --system --user-group --home-dir /var/lib/awp/.openclaw --no-create-home \
        --shell /usr/sbin/nologin --comment "awp agents" awp-agent
      say "created the system user awp-agent"
    fi
    usermod -a -G awp-agent awp
    adopt_layout "" awp awp-agent
  fi
fi

# 3. Settings: 0600 files, secrets generated once, an existing file never overwritten.
umask 077
mkdir -p "$confdir"
chmod 0700 "$confdir"
if [[ ! -f $confdir/awp.env ]]; then
  sed -e "s|@JWT_SECRET@|$(random_hex)|" -e "s|@SERVICE_ROLE_KEY@|$(random_hex)|" \
    "$templates/awp.env.example" >"$confdir/awp.env.tmp"
  chmod 0600 "$confdir/awp.env.tmp"
  mv "$confdir/awp.env.tmp" "$confdir/awp.env"
  say "wrote $confdir/awp.env (0600): set DATABASE_URL and GATEWAY_ID before starting"
else
  say "kept the existing $confdir/awp.env"
fi
# The gateway's own database login, read by the runner, the dispatcher and the embedder after
# awp.env: its DATABASE_URL reaches this gateway's rows only (sql/0023, docs/security.md "Gateway
# credentials"). With AWP_ADMIN_DATABASE_URL (an administrator's DSN, never stored) and awpctl,
# the installer makes it; otherwise the file says how.
if [[ ! -f $confdir/gateway.env ]]; then
  gw=${GATEWAY_ID:-default}
  {
    echo "# The database login of gateway $gw: awpctl gateway credential $gw --database-url <admin DSN>"
    echo "# (run it again to rotate). Without a line below these daemons use awp.env's DATABASE_URL."
  } >"$confdir/gateway.env.tmp"
  chmod 0600 "$confdir/gateway.env.tmp"
  if [[ -n ${AWP_ADMIN_DATABASE_URL:-} && -z $root ]]; then
    url=$("$bindir/awpctl" gateway credential "$gw" --database-url "$AWP_ADMIN_DATABASE_URL") \
      || die "awpctl gateway credential $gw failed (is the database migrated?)"
    echo "DATABASE_URL=$url" >>"$confdir/gateway.env.tmp"
    say "made the database login of gateway $gw in $confdir/gateway.env (0600)"
  elif [[ -n ${AWP_ADMIN_DATABASE_URL:-} ]]; then
    say "staged: would make the database login of gateway $gw (awpctl gateway credential)"
  fi
  mv "$confdir/gateway.env.tmp" "$confdir/gateway.env"
fi
# The host-operations helper: the checkout update_gateway pulls (this one, when it is a checkout).
if [[ ! -f $confdir/host-ops.env ]]; then
  {
    echo "# awp-host-ops (deploy/systemd/host-ops.sh): what update_gateway pulls and re-installs."
    if [[ -e $here/../.git ]]; then
      echo "AWP_REPO_DIR=$(cd "$here/.." && pwd)"
    else
      echo "# Installed from a package: no checkout; update it with the package manager."
      echo "#AWP_REPO_DIR=/path/to/awp"
    fi
  } >"$confdir/host-ops.env.tmp"
  chmod 0600 "$confdir/host-ops.env.tmp"
  mv "$confdir/host-ops.env.tmp" "$confdir/host-ops.env"
fi
# The runtime's gateway reads this file alone (none of awp.env's secrets reach an agent process).
if [[ ! -f $confdir/agent-runtime.env ]]; then
  cat >"$confdir/agent-runtime.env.tmp" <<'RUNTIME'
# awp-agent-runtime: the agent runtime's gateway, as the agent user. Only this file is read:
# awp.env's secrets never reach an agent process. The same CLI as AGENT_RUNTIME in awp.env:
AGENT_RUNTIME=openclaw
# The runtime's own settings (provider keys it reads from its environment, OPENCLAW_*), if any.
RUNTIME
  chmod 0600 "$confdir/agent-runtime.env.tmp"
  mv "$confdir/agent-runtime.env.tmp" "$confdir/agent-runtime.env"
fi
for d in "${daemons[@]}" "${optional[@]}"; do
  f=$confdir/${d#awp-}.env
  if [[ ! -f $f ]]; then
    printf "# Settings for %s only, read after awp.env (see: %s --help).\n" "$d" "$d" >"$f.tmp"
    if [[ $d == awp-wake ]]; then
      cat >>"$f.tmp" <<'WAKE'
# The wake relay (docs/wake.md): off unless enabled (systemctl enable --now awp-wake), on the one
# host that serves many gateway hosts. Its DATABASE_URL is a direct session (never a transaction
# pooler): it only LISTENs on awp_wake and checks the hosts' logins, so any login that connects.
#DATABASE_URL=postgresql://awp_daemon:CHANGE_ME@127.0.0.1:5432/awp
# Where the gateway hosts reach it; they set WAKE_URL=http://<this host>:8095 and nothing else.
#WAKE_BIND=0.0.0.0
#WAKE_PORT=8095
WAKE
    fi
    chmod 0600 "$f.tmp"
    mv "$f.tmp" "$f"
  fi
done
if [[ $mode == user ]]; then
  # The unit makes ~/.openclaw writable only when it exists.
  mkdir -p "$root$home/.openclaw"
fi

# 4. systemd: reload, enable the target (it wants every daemon), optionally start.
if ((staged)); then
  say "staged into $root: skipped ${systemctl[*]} daemon-reload/enable"
  exit 0
fi
"${systemctl[@]}" daemon-reload
if ((update)); then
  # --no-block: the runner that runs this (update_gateway) is restarted after it answers.
  units=()
  for d in "${daemons[@]}"; do units+=("$d.service"); done
  # try-restart fails on a unit systemd does not know: only the optional units installed here.
  for d in "${optional[@]}"; do
    if [[ -f ${packaged:-$unit_dir}/$d.service ]]; then units+=("$d.service"); fi
  done
  units+=(awp-agent-runtime.service)
  "${systemctl[@]}" --no-block try-restart "${units[@]}"
  # An install older than the helper: start it (the target wants it from now on).
  "${systemctl[@]}" --no-block start awp-host-ops.path
  say "updated: units rendered again, settings kept, running daemons restarting"
  exit 0
fi
if ((enable)); then
  "${systemctl[@]}" enable awp.target
fi
if [[ $mode == user ]] && command -v loginctl >/dev/null; then
  # Without lingering, user units stop at logout and never start at boot.
  loginctl enable-linger "$(id -un)" 2>/dev/null ||
    say "could not enable lingering; run: loginctl enable-linger $(id -un)"
fi
if ((now)); then
  "${systemctl[@]}" start awp.target
  say "started awp.target; status: ${systemctl[*]} status 'awp-*' and awpctl status"
else
  say "next: edit $confdir/awp.env, run awpctl migrate, then ${systemctl[*]} start awp.target"
fi
