#!/usr/bin/env bash
# The compose stack without a Docker engine: docker-compose validates the file with
# .env.example; the services keep the operating contract (names the runner restarts, health
# checks, depends_on conditions, stop_grace_period above the drain deadline, init for the
# daemons that spawn processes); and each service's entry command and health check run on this
# host from the build, with the service's environment: every daemon accepts it (--print-config)
# and knows every variable it is given. The wake relay awp-wake is a daemon of the profile "relay"
# (off by default), held to the same contract. Profile pgbouncer: the daemons through PgBouncer
# in transaction mode, LISTEN and the migrations direct.
# Usage: compose_stack.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
dir=$src/deploy/compose
command -v docker-compose >/dev/null || { echo "SKIP: docker-compose missing (AWP_DEPS=full scripts/install-deps.sh)"; exit 77; }
python3 -c 'import yaml' 2>/dev/null || { echo "SKIP: python3-yaml missing"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

docker-compose --project-directory "$dir" -f "$dir/docker-compose.yml" --env-file "$dir/.env.example" config -q
docker-compose --project-directory "$dir" -f "$dir/docker-compose.yml" --env-file "$dir/.env.example" config >"$work/config.yml"
# A missing secret is refused, not defaulted.
grep -v '^JWT_SECRET=' "$dir/.env.example" >"$work/no-secret.env"
if docker-compose --project-directory "$dir" -f "$dir/docker-compose.yml" --env-file "$work/no-secret.env" config -q 2>/dev/null; then
  echo "FAIL: the stack validates without JWT_SECRET"; exit 1
fi

# Profile pgbouncer, as .env.example's comment says to enable it.
sed -e 's/^COMPOSE_PROFILES=.*/COMPOSE_PROFILES=pgbouncer/; s/^AWP_DB_ADDRESS=.*/AWP_DB_ADDRESS=pgbouncer:6432/' \
    -e 's/^DATABASE_PREPARED=.*/DATABASE_PREPARED=off/' "$dir/.env.example" >"$work/pooled.env"
docker-compose --project-directory "$dir" -f "$dir/docker-compose.yml" --env-file "$work/pooled.env" config >"$work/pooled.yml"

# An .env that does not set NETWORKING_MODE: the stack's own default.
grep -v '^NETWORKING_MODE=' "$dir/.env.example" >"$work/no-netmode.env"
docker-compose --project-directory "$dir" -f "$dir/docker-compose.yml" --env-file "$work/no-netmode.env" config >"$work/no-netmode.yml"

python3 - "$work/config.yml" "$build/bin" "$work" "$work/pooled.yml" "$dir/pgbouncer/pgbouncer.ini" \
  "$src/deploy/systemd/pgbouncer/pgbouncer.ini.example" "$work/no-netmode.yml" <<'PY'
import os, re, subprocess, sys, yaml

cfg = yaml.safe_load(open(sys.argv[1]))
bindir, work = sys.argv[2], sys.argv[3]
pooled = yaml.safe_load(open(sys.argv[4]))["services"]
inis = {path: open(path).read() for path in sys.argv[5:7]}  # compose's and the systemd example
services = cfg["services"]
failures = []
def bad(msg): failures.append(msg)

daemons = ["awp-api-gateway", "awp-command-runner", "awp-inbox-dispatcher", "awp-embedder", "awp-scheduler"]
# Daemons started only with their profile; every check of a daemon applies to them too.
profile_daemons = {"awp-wake": "relay"}
for name in daemons + list(profile_daemons) + ["postgres", "migrate", "agent-runtime"]:
    if name not in services: bad(f"service {name} missing")
if failures:
    print("\n".join("FAIL: " + f for f in failures)); sys.exit(1)

for name in daemons:
    if services[name].get("profiles"): bad(f"{name}: behind a profile, so not started by default")
for name, profile in profile_daemons.items():
    if services[name].get("profiles") != [profile]: bad(f"{name}: not in (only) the profile {profile}")
# The relay: reachable from the other hosts, healthy only while it LISTENs (GET /healthz 503 else).
wake_env = {k: str(v) for k, v in (services["awp-wake"].get("environment") or {}).items()}
if wake_env.get("WAKE_BIND") != "0.0.0.0": bad("awp-wake: WAKE_BIND is not 0.0.0.0")
if f"http://127.0.0.1:{wake_env.get('WAKE_PORT', '8095')}/healthz" not in (services["awp-wake"].get("healthcheck") or {}).get("test", []):
    bad("awp-wake: the health check does not ask its /healthz on WAKE_PORT")
if not any(str(p.get("target") if isinstance(p, dict) else p).split("/")[0].split(":")[-1] == wake_env.get("WAKE_PORT", "8095")
           for p in services["awp-wake"].get("ports") or []):
    bad("awp-wake: WAKE_PORT is not published")
nofile = (services["awp-wake"].get("ulimits") or {}).get("nofile")
soft = nofile.get("soft") if isinstance(nofile, dict) else nofile
if not isinstance(soft, int) or soft <= int(wake_env.get("WAKE_MAX_STREAMS", 20000)):
    bad(f"awp-wake: nofile limit {soft} holds fewer sockets than WAKE_MAX_STREAMS")
if not services["postgres"]["image"].startswith("pgvector/pgvector:pg15"): bad("postgres is not pgvector/pgvector:pg15")
migrate_cmd = " ".join(services["migrate"]["command"])
if "awpctl migrate &&" not in migrate_cmd or "awpctl gateway credential" not in migrate_cmd:
    bad("migrate does not run awpctl migrate, then make the gateway's login")
# A gateway host's daemons use the gateway's own login; the platform's use theirs.
all_daemons = daemons + list(profile_daemons)
for name in all_daemons:
    url = str((services[name].get("environment") or {}).get("DATABASE_URL", ""))
    gateway_daemon = name in ("awp-command-runner", "awp-inbox-dispatcher", "awp-embedder")
    if gateway_daemon and not url.startswith("postgresql://awp_gw_default:"):
        bad(f"{name}: DATABASE_URL is not the gateway's own login awp_gw_default")
    if not gateway_daemon and "awp_gw_" in url:
        bad(f"{name}: uses the gateway's login")
    if gateway_daemon and "JWT_SECRET" in (services[name].get("environment") or {}):
        bad(f"{name}: holds JWT_SECRET, a secret of the api-gateway")
# Agents run as awp-agent: the daemons that start them switch users and hold only that power;
# the Docker socket is mounted into the runner alone, whose agents never get its groups.
for name in ("awp-command-runner", "awp-inbox-dispatcher"):
    s = services[name]
    env = {k: str(v) for k, v in (s.get("environment") or {}).items()}
    if env.get("AGENT_USER") != "awp-agent": bad(f"{name}: AGENT_USER is not awp-agent")
    caps = set(s.get("cap_add") or [])
    if not {"SETUID", "SETGID"} <= caps: bad(f"{name}: cannot switch to the agent user (cap_add)")
    if caps - {"SETUID", "SETGID", "DAC_OVERRIDE"}: bad(f"{name}: more capabilities than it needs: {caps}")
    if "ALL" not in (s.get("cap_drop") or []): bad(f"{name}: does not drop every other capability")
for name, s in services.items():
    mounts = [str(v) for v in (s.get("volumes") or [])]
    sock = any("docker.sock" in str(m.get("source", m) if isinstance(m, dict) else m) for m in s.get("volumes") or [])
    if sock and name != "awp-command-runner": bad(f"{name}: mounts the Docker socket")
    if name == "agent-runtime" and sock: bad("the agent runtime reaches the Docker socket")
runner_env = {k: str(v) for k, v in (services["awp-command-runner"].get("environment") or {}).items()}
if runner_env.get("SECRETS_DIR", "").startswith(runner_env.get("OPENCLAW_STATE_DIR", "/nonexistent")):
    bad("the runner's secrets are inside the agent user's runtime state")
# Provision finds its templates: the image's scripts and templates (deploy/docker/Dockerfile's
# install layout), and the operator's template source passed on.
for k, v in (("AWP_RUNTIME_SCRIPTS", "/usr/share/awp/runtime"), ("AWP_TEMPLATES_DIR", "/usr/share/awp/templates")):
    if runner_env.get(k) != v: bad(f"awp-command-runner: {k} is {runner_env.get(k)!r}, not {v}")
if "AWP_TEMPLATES_SOURCE" not in runner_env: bad("awp-command-runner: AWP_TEMPLATES_SOURCE is not passed on")
# OAuth logins: the runtime's callback listens on 127.0.0.1:1455 inside the runner's container,
# which no browser reaches (a published port forwards to the container's address, not its
# loopback). NETWORKING_MODE=local would report autoCallback: true for a redirect that never
# arrives: the stack pastes back (remote), with .env.example and without a setting.
nonet = yaml.safe_load(open(sys.argv[7]))["services"]["awp-command-runner"].get("environment") or {}
for label, env in ((".env.example", runner_env), ("no NETWORKING_MODE in .env", nonet)):
    if str(env.get("NETWORKING_MODE", "local")) == "local":
        bad(f"awp-command-runner ({label}): NETWORKING_MODE is local, but no browser reaches the callback on 1455 in its container")

# Profile pgbouncer: off by default (the daemons reach postgres itself, named statements on);
# on, every daemon's DATABASE_URL goes through PgBouncer in transaction mode with named
# statements off, while LISTEN (WAKE_DATABASE_URL) and the migrations stay direct.
for name in ("pgbouncer", "pgbouncer-auth"):
    if services.get(name, {}).get("profiles") != ["pgbouncer"]: bad(f"{name}: not in profile pgbouncer alone")
listen_daemons = ("awp-command-runner", "awp-inbox-dispatcher", "awp-embedder")
for name in daemons:
    plain = {k: str(v) for k, v in (services[name].get("environment") or {}).items()}
    env = {k: str(v) for k, v in (pooled[name].get("environment") or {}).items()}
    for k in ("DATABASE_URL", "AWP_API_DATABASE_URL"):
        if k in plain and "@postgres:5432/" not in plain[k]: bad(f"{name}: {k} is not postgres itself by default")
        if k in env and "@pgbouncer:6432/" not in env[k]: bad(f"{name}: {k} does not go through pgbouncer in the profile")
    if name != "awp-api-gateway":
        if plain.get("DATABASE_PREPARED") != "on": bad(f"{name}: DATABASE_PREPARED is not on by default")
        if env.get("DATABASE_PREPARED") != "off": bad(f"{name}: DATABASE_PREPARED is not off through pgbouncer")
    if name in listen_daemons and "@postgres:5432/" not in env.get("WAKE_DATABASE_URL", ""):
        bad(f"{name}: WAKE_DATABASE_URL (LISTEN) is not postgres itself through pgbouncer")
if "@postgres:5432/" not in str(pooled["awp-api-gateway"]["environment"].get("AWP_API_WAKE_DATABASE_URL", "")):
    bad("awp-api-gateway: AWP_API_WAKE_DATABASE_URL (the schema cache's LISTEN) is not postgres itself through pgbouncer")
if "awp-wake" in pooled and "@postgres:5432/" not in str(pooled["awp-wake"]["environment"].get("DATABASE_URL", "")):
    bad("awp-wake: its DATABASE_URL (LISTEN) is not postgres itself in the profile")
if "@postgres:5432/" not in str(pooled["migrate"]["environment"].get("DATABASE_URL", "")):
    bad("migrate does not reach postgres itself (a session advisory lock) in the profile")
for path, ini in inis.items():
    name = os.path.basename(path)
    settings = dict(re.findall(r"(?m)^\s*([a-z_]+)\s*=[ \t]*(.*?)\s*$", ini.split("[pgbouncer]", 1)[-1]))
    if settings.get("pool_mode") != "transaction": bad(f"{name}: pool_mode is not transaction")
    reset = settings.get("server_reset_query", "")
    for part in ("RESET ROLE", "RESET ALL", "DEALLOCATE ALL", "UNLISTEN *", "pg_advisory_unlock_all()", "DISCARD TEMP"):
        if part not in reset: bad(f"{name}: server_reset_query does not {part}: a client could leave it for the next")
    if "DISCARD ALL" in reset: bad(f"{name}: server_reset_query drops every cached plan (DISCARD ALL)")
    if settings.get("server_reset_query_always") != "1": bad(f"{name}: server_reset_query_always is not 1 (transaction mode would skip the reset)")
    if int(settings.get("max_db_connections", "0") or 0) <= 0: bad(f"{name}: max_db_connections is not set")
    if "pgbouncer.get_auth" not in settings.get("auth_query", ""): bad(f"{name}: auth_query is not the lookup function")

def seconds(text):
    m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", str(text))
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0) if m else 0

for name in all_daemons:
    s = services[name]
    env = {k: str(v) for k, v in (s.get("environment") or {}).items()}
    if s.get("command", [None])[0] != name: bad(f"{name}: command is not {name}")
    hc = s.get("healthcheck", {}).get("test")
    if not hc or hc[0] != "CMD" or hc[1] != "awpctl": bad(f"{name}: no awpctl health check")
    drain = float(env.get("DRAIN_TIMEOUT", 20))
    if seconds(s.get("stop_grace_period", "10s")) < drain + 10:
        bad(f"{name}: stop_grace_period {s.get('stop_grace_period')} not 10 s above DRAIN_TIMEOUT {drain}")
    deps = s.get("depends_on", {})
    if deps.get("postgres", {}).get("condition") != "service_healthy": bad(f"{name}: postgres not service_healthy")
    if deps.get("migrate", {}).get("condition") != "service_completed_successfully": bad(f"{name}: migrate not completed first")
    spawns = name in ("awp-command-runner", "awp-inbox-dispatcher")
    if spawns and s.get("init") is not True: bad(f"{name}: spawns processes but has no init")
    if s.get("restart") != "unless-stopped": bad(f"{name}: restart policy {s.get('restart')}")
    if name == "awp-command-runner" and env.get("RUNTIME_MODE") != "container": bad("runner not in container mode")

# Entry commands, run from the build with the service's environment and nothing else.
def run(argv, env, timeout=30):
    full = {"PATH": bindir + ":/usr/bin:/bin", "HOME": work, "PGCONNECT_TIMEOUT": "3"}
    full.update(env)
    exe = "/bin/sh" if argv[0] == "sh" else os.path.join(bindir, argv[0])
    if not os.access(exe, os.X_OK):
        return 127, f"{exe} is not built"
    p = subprocess.run([exe] + argv[1:], env=full, capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr

# Variables a daemon reads besides its options (for docker compose inside the runner, or libpq).
read_elsewhere = {"COMPOSE_FILE", "DATABASE_URL@awp-api-gateway"}
checked = 0
for name in all_daemons:
    s = services[name]
    env = {k: str(v) for k, v in (s.get("environment") or {}).items()}
    rc, out = run(s["command"] + ["--print-config"], env)
    if rc != 0:
        bad(f"{name} --print-config with the compose environment exited {rc}: {out.strip()[:400]}"); continue
    known = set(re.findall(r"\(env ([A-Z0-9_]+)\)", out))
    for k in env:
        if k not in known and k not in read_elsewhere and f"{k}@{name}" not in read_elsewhere:
            bad(f"{name}: compose sets {k}, which {name} does not read (--print-config lists no such env)")
    # The health check parses and answers: 0 (healthy) or 1 (unhealthy: nothing runs here), never 78.
    test = s["healthcheck"]["test"][1:]
    rc, out = run(test, env)
    if rc not in (0, 1): bad(f"{name}: health check {' '.join(test)} exited {rc}: {out.strip()[:300]}")
    checked += 1

# migrate: the image's one-shot command, against a database that is not there: an error (1),
# not a usage error (78).
m = services["migrate"]
rc, out = run([c.replace("$$", "$") for c in m["command"]], {k: str(v) for k, v in m["environment"].items()})
if rc != 1: bad(f"migrate exited {rc} (want 1: no database here): {out.strip()[:300]}")

if failures:
    print("\n".join("FAIL: " + f for f in failures)); sys.exit(1)
print(f"compose: valid; {len(services)} services; {checked} daemon entry commands and health checks ran")
PY
