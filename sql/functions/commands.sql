-- The command queue: insert validation and the state machine (triggers), leasing with
-- fencing tokens, the runner's RPCs, the run_shell policy gate and the awp_commands_<gateway> NOTIFY.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- Checks the payload of a new command: a JSON object with the action's required fields.
CREATE OR REPLACE FUNCTION public.awp_check_command_payload(p_action public.command_action, p_payload jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = ''
AS $$
DECLARE
  v_need text[];
  v_field text;
  v_key text;
BEGIN
  IF p_payload IS NULL OR jsonb_typeof(p_payload) <> 'object' THEN
    RAISE EXCEPTION 'agent_commands: payload must be a JSON object, got %',
      coalesce(jsonb_typeof(p_payload), 'null') USING ERRCODE = 'AW004';
  END IF;
  v_need := CASE p_action
    WHEN 'approve_pairing' THEN ARRAY['pairing_code']
    WHEN 'auth_set_api_key' THEN ARRAY['provider', 'api_key']
    WHEN 'auth_start' THEN ARRAY['provider']
    WHEN 'auth_paste' THEN ARRAY['parent_command_id', 'value']
    WHEN 'auth_remove' THEN ARRAY['profile_id']
    WHEN 'auth_set_default' THEN ARRAY['provider']
    WHEN 'source_write' THEN ARRAY['connection_id', 'action']
    WHEN 'execute_prompt' THEN ARRAY['prompt']
    ELSE ARRAY[]::text[] END;
  FOREACH v_field IN ARRAY v_need LOOP
    IF jsonb_typeof(p_payload -> v_field) IS DISTINCT FROM 'string'
       OR btrim(p_payload ->> v_field) = '' THEN
      RAISE EXCEPTION 'agent_commands: action % needs payload field "%" (a non-empty string)',
        p_action, v_field USING ERRCODE = 'AW004';
    END IF;
  END LOOP;
  IF p_action = 'source_write' AND jsonb_typeof(p_payload -> 'params') IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'agent_commands: action source_write needs payload field "params" (a JSON object)'
      USING ERRCODE = 'AW004';
  END IF;
  IF p_action = 'set_agent_model' THEN
    IF coalesce(p_payload ->> 'model', '') = '' AND coalesce(p_payload ->> 'thinking', '') = '' THEN
      RAISE EXCEPTION 'agent_commands: action set_agent_model needs "model" or "thinking" in the payload'
        USING ERRCODE = 'AW004';
    END IF;
    IF p_payload ? 'thinking' AND (p_payload ->> 'thinking') NOT IN ('none', 'low', 'medium', 'high') THEN
      RAISE EXCEPTION 'agent_commands: set_agent_model thinking must be none, low, medium or high, got "%"',
        p_payload ->> 'thinking' USING ERRCODE = 'AW004';
    END IF;
  END IF;
  IF p_action IN ('provision', 'approve_pairing') AND p_payload ? 'channel'
     AND (p_payload ->> 'channel') NOT IN ('telegram', 'discord', 'slack', 'none') THEN
    RAISE EXCEPTION 'agent_commands: channel must be telegram, discord, slack or none, got "%"',
      p_payload ->> 'channel' USING ERRCODE = 'AW004';
  END IF;
  IF p_action = 'auth_start' AND p_payload ? 'mode'
     AND (p_payload ->> 'mode') NOT IN ('oauth_paste', 'device_code') THEN
    RAISE EXCEPTION 'agent_commands: auth_start mode must be oauth_paste or device_code, got "%"',
      p_payload ->> 'mode' USING ERRCODE = 'AW004';
  END IF;
  IF p_action = 'provision' THEN
    FOR v_key IN SELECT k FROM jsonb_object_keys(p_payload) AS k WHERE k LIKE '%\_token' LOOP
      RAISE EXCEPTION 'agent_commands: provision payload must not carry "%": channel tokens belong in the secrets table',
        v_key USING ERRCODE = 'AW004';
    END LOOP;
  END IF;
END
$$;
REVOKE ALL ON FUNCTION public.awp_check_command_payload(public.command_action, jsonb) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_check_command_payload(public.command_action, jsonb) TO authenticated, service_role;

-- BEFORE INSERT: new commands are pending, name a real agent of their tenant consistently,
-- take the agent's gateway when none is given, and carry a valid payload.
CREATE OR REPLACE FUNCTION public.awp_commands_before_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_agent record;
  v_agent_gateway uuid;  -- stays NULL for gateway-wide commands (no agent)
BEGIN
  IF NEW.status IS DISTINCT FROM 'pending' THEN
    RAISE EXCEPTION 'agent_commands: a new command must have status pending, got %', NEW.status
      USING ERRCODE = 'AW004';
  END IF;
  NEW.lease_token := NULL; NEW.leased_by := NULL; NEW.leased_at := NULL;
  NEW.lease_expires_at := NULL; NEW.attempts := 0; NEW.started_at := NULL; NEW.finished_at := NULL;
  IF NEW.agent_id IS NOT NULL THEN
    SELECT a.id, a.slug, a.gateway_id INTO v_agent
      FROM public.agents a WHERE a.id = NEW.agent_id AND a.tenant_id = NEW.tenant_id;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'agent_commands: agent % not found in tenant %', NEW.agent_id, NEW.tenant_id
        USING ERRCODE = 'AW003';
    END IF;
    IF NEW.agent_slug IS NOT NULL AND NEW.agent_slug <> v_agent.slug THEN
      RAISE EXCEPTION 'agent_commands: agent_slug "%" does not match agent % (slug "%")',
        NEW.agent_slug, NEW.agent_id, v_agent.slug USING ERRCODE = 'AW004';
    END IF;
    NEW.agent_slug := v_agent.slug;
    v_agent_gateway := v_agent.gateway_id;
  ELSIF NEW.agent_slug IS NOT NULL THEN
    SELECT a.id, a.slug, a.gateway_id INTO v_agent
      FROM public.agents a WHERE a.slug = NEW.agent_slug AND a.tenant_id = NEW.tenant_id;
    IF FOUND THEN
      NEW.agent_id := v_agent.id;
      v_agent_gateway := v_agent.gateway_id;
    ELSIF NEW.action <> 'provision' THEN
      -- provision creates the agent: its slug may not exist yet.
      RAISE EXCEPTION 'agent_commands: agent "%" not found in tenant %', NEW.agent_slug, NEW.tenant_id
        USING ERRCODE = 'AW003';
    END IF;
  END IF;
  IF NEW.gateway_id IS NULL AND v_agent_gateway IS NOT NULL THEN
    NEW.gateway_id := v_agent_gateway;
  END IF;
  IF NEW.action IN ('update', 'remove', 'provision') AND NEW.agent_slug IS NULL THEN
    RAISE EXCEPTION 'agent_commands: action % needs agent_slug (or agent_id)', NEW.action
      USING ERRCODE = 'AW004';
  END IF;
  IF NEW.action = 'set_agent_model' AND jsonb_typeof(NEW.payload) = 'object'
     AND NOT NEW.payload ? 'agent_slug' THEN
    IF NEW.agent_slug IS NULL THEN
      RAISE EXCEPTION 'agent_commands: action set_agent_model needs payload field "agent_slug" (a non-empty string)'
        USING ERRCODE = 'AW004';
    END IF;
    NEW.payload := NEW.payload || jsonb_build_object('agent_slug', NEW.agent_slug);
  END IF;
  PERFORM public.awp_check_command_payload(NEW.action, NEW.payload);
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_commands_before_insert() FROM PUBLIC, anon, authenticated;

-- BEFORE UPDATE: the command state machine (pending -> leased | cancelled, or -> running only
-- when the same update takes a new lease: lease_token, leased_at, started_at, lease_expires_at;
-- leased -> running | pending | failed | cancelled; running -> done | failed; done, failed and
-- cancelled are final; AW001 otherwise), and updated_at.
CREATE OR REPLACE FUNCTION public.awp_commands_check_transition() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    IF NOT ((OLD.status = 'pending' AND NEW.status IN ('leased', 'cancelled'))
         OR (OLD.status = 'pending' AND NEW.status = 'running'
             AND NEW.lease_token IS NOT NULL AND NEW.lease_token IS DISTINCT FROM OLD.lease_token
             AND NEW.leased_at IS NOT NULL AND NEW.started_at IS NOT NULL
             AND NEW.lease_expires_at IS NOT NULL)
         OR (OLD.status = 'leased' AND NEW.status IN ('running', 'pending', 'failed', 'cancelled'))
         OR (OLD.status = 'running' AND NEW.status IN ('done', 'failed'))) THEN
      RAISE EXCEPTION 'command %: illegal transition from % to %', OLD.id, OLD.status,
        NEW.status || CASE WHEN OLD.status = 'pending' AND NEW.status = 'running'
                           THEN ' without a new lease (a command starts only under one)' ELSE '' END
        USING ERRCODE = 'AW001';
    END IF;
    IF NEW.status IN ('done', 'failed', 'cancelled') THEN
      NEW.finished_at := coalesce(NEW.finished_at, now());
      NEW.lease_expires_at := NULL;
    END IF;
  END IF;
  IF NEW.gateway_id IS DISTINCT FROM OLD.gateway_id AND OLD.status <> 'pending' THEN
    RAISE EXCEPTION 'command %: gateway can only change while pending (status is %)', OLD.id, OLD.status
      USING ERRCODE = 'AW001';
  END IF;
  IF NEW.payload IS DISTINCT FROM OLD.payload AND jsonb_typeof(NEW.payload) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'command %: payload must be a JSON object', OLD.id USING ERRCODE = 'AW004';
  END IF;
  IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_commands_check_transition() FROM PUBLIC, anon, authenticated;

-- Wake-ups: one NOTIFY per statement per gateway when commands become pending (insert or
-- re-queue). Payload: the command id when exactly one, else empty.
-- Runs as its owner (sql/0034): whoever writes the row wakes the daemons, and no API role may
-- call awp_notify_gateway itself.
CREATE OR REPLACE FUNCTION public.awp_notify_commands() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id
               FROM new_rows n WHERE n.status = 'pending' GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_commands_' || replace(r.gateway_id::text, '-', ''),
                        CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSE
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id
               FROM new_rows n JOIN old_rows o ON o.id = n.id
              WHERE n.status = 'pending' AND (o.status <> 'pending' OR o.gateway_id <> n.gateway_id)
              GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_commands_' || replace(r.gateway_id::text, '-', ''),
                        CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_notify_commands() FROM PUBLIC, anon, authenticated;

-- Merges p_patch into p_payload; a key whose patch value is JSON null is removed.
CREATE OR REPLACE FUNCTION public.awp_jsonb_patch(p_payload jsonb, p_patch jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = ''
AS $$
  SELECT CASE WHEN p_patch IS NULL THEN p_payload ELSE
    (coalesce(p_payload, '{}'::jsonb)
      - coalesce((SELECT array_agg(e.key) FROM jsonb_each(p_patch) e WHERE jsonb_typeof(e.value) = 'null'),
                 ARRAY[]::text[]))
    || coalesce((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(p_patch) e
                  WHERE jsonb_typeof(e.value) <> 'null'), '{}'::jsonb)
  END
$$;
REVOKE ALL ON FUNCTION public.awp_jsonb_patch(jsonb, jsonb) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_jsonb_patch(jsonb, jsonb) TO awp_gateway, service_role;

-- Expired leases of one gateway (or all when NULL): leased -> pending, running -> failed.
-- Returns (requeued, failed). Rows another transaction holds are skipped, never waited for.
CREATE OR REPLACE FUNCTION public.awp_expire_command_leases(p_gateway_id uuid DEFAULT NULL,
                                                 OUT requeued integer, OUT failed integer)
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  WITH expired AS (
    SELECT c.id FROM public.agent_commands c
     WHERE c.status = 'leased' AND c.lease_expires_at < now()
       AND (p_gateway_id IS NULL OR c.gateway_id = p_gateway_id)
     FOR UPDATE SKIP LOCKED)
  UPDATE public.agent_commands c
     SET status = 'pending', lease_token = NULL, leased_by = NULL, leased_at = NULL,
         lease_expires_at = NULL,
         meta = c.meta || jsonb_build_object('last_lease_expired_at', now(), 'last_leased_by', c.leased_by)
    FROM expired WHERE c.id = expired.id;
  GET DIAGNOSTICS requeued = ROW_COUNT;

  WITH expired AS (
    SELECT c.id FROM public.agent_commands c
     WHERE c.status = 'running' AND c.lease_expires_at < now()
       AND (p_gateway_id IS NULL OR c.gateway_id = p_gateway_id)
     FOR UPDATE SKIP LOCKED)
  UPDATE public.agent_commands c
     SET status = 'failed',
         error_message = format('lease expired at %s while running (runner %s stopped reporting); not retried',
                                c.lease_expires_at, coalesce(c.leased_by, 'unknown'))
    FROM expired WHERE c.id = expired.id;
  GET DIAGNOSTICS failed = ROW_COUNT;
END
$$;
REVOKE ALL ON FUNCTION public.awp_expire_command_leases(uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_expire_command_leases(uuid) TO awp_gateway, service_role;

-- Sweeps this gateway's expired leases only when there is one: an index probe on
-- agent_commands_lease_idx instead of two UPDATE statements on every lease.
CREATE OR REPLACE FUNCTION public.lease_command(p_lease_seconds integer DEFAULT 180,
                                                p_gateway_slug text DEFAULT NULL,
                                                p_runner text DEFAULT NULL,
                                                p_tenant_id uuid DEFAULT NULL)
RETURNS SETOF public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_gateway uuid;
BEGIN
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    RAISE EXCEPTION 'lease_command: p_lease_seconds must be between 1 and 86400, got %',
      coalesce(p_lease_seconds::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  v_gateway := public.awp_resolve_gateway(p_gateway_slug, p_tenant_id);
  IF EXISTS (SELECT 1 FROM public.agent_commands e
              WHERE e.status IN ('leased', 'running') AND e.lease_expires_at < now()
                AND e.gateway_id = v_gateway) THEN
    PERFORM public.awp_expire_command_leases(v_gateway);
  END IF;
  RETURN QUERY
  UPDATE public.agent_commands c
     SET status = 'leased', lease_token = gen_random_uuid(), leased_by = p_runner, leased_at = now(),
         lease_expires_at = now() + make_interval(secs => p_lease_seconds), attempts = c.attempts + 1
   WHERE c.id = (SELECT q.id FROM public.agent_commands q
                  WHERE q.gateway_id = v_gateway AND q.status = 'pending'
                  ORDER BY q.created_at, q.id
                  LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING c.*;
END
$$;
REVOKE ALL ON FUNCTION public.lease_command(integer, text, text, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.lease_command(integer, text, text, uuid) TO awp_gateway, service_role;

-- Locks a command for a transition and checks its status and lease token.
CREATE OR REPLACE FUNCTION public.awp_command_for_transition(p_command_id uuid, p_verb text,
                                                  p_expected public.command_status[],
                                                  p_lease_token uuid)
RETURNS public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_commands;
BEGIN
  IF p_command_id IS NULL THEN
    RAISE EXCEPTION 'cannot %: p_command_id is required', p_verb USING ERRCODE = 'AW004';
  END IF;
  SELECT * INTO v FROM public.agent_commands WHERE id = p_command_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'command %: not found', p_command_id USING ERRCODE = 'AW003';
  END IF;
  IF p_lease_token IS NOT NULL AND v.lease_token IS DISTINCT FROM p_lease_token THEN
    RAISE EXCEPTION 'command %: cannot %: lease lost (the lease token no longer matches; status is %)',
      p_command_id, p_verb, v.status USING ERRCODE = 'AW002';
  END IF;
  IF NOT v.status = ANY (p_expected) THEN
    RAISE EXCEPTION 'command %: cannot %: status is %, expected %', p_command_id, p_verb, v.status,
      array_to_string(p_expected, ' or ') USING ERRCODE = 'AW001';
  END IF;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.awp_command_for_transition(uuid, text, public.command_status[], uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_command_for_transition(uuid, text, public.command_status[], uuid) TO awp_gateway, service_role;

-- leased -> running. p_lease_seconds, when given, restarts the lease clock from now.
CREATE OR REPLACE FUNCTION public.start_command(p_command_id uuid, p_lease_token uuid DEFAULT NULL,
                                                p_lease_seconds integer DEFAULT NULL)
RETURNS public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_commands;
BEGIN
  IF p_lease_seconds IS NOT NULL AND (p_lease_seconds < 1 OR p_lease_seconds > 86400) THEN
    RAISE EXCEPTION 'start_command: p_lease_seconds must be between 1 and 86400, got %', p_lease_seconds
      USING ERRCODE = 'AW004';
  END IF;
  IF p_command_id IS NULL THEN
    RAISE EXCEPTION 'cannot start: p_command_id is required' USING ERRCODE = 'AW004';
  END IF;
  UPDATE public.agent_commands c
     SET status = 'running', started_at = now(),
         lease_expires_at = CASE WHEN p_lease_seconds IS NULL THEN c.lease_expires_at
                                 ELSE now() + make_interval(secs => p_lease_seconds) END
   WHERE c.id = p_command_id AND c.status = 'leased'
     AND (p_lease_token IS NULL OR c.lease_token = p_lease_token)
  RETURNING * INTO v;
  IF NOT FOUND THEN
    PERFORM public.awp_command_transition_refused(p_command_id, 'start', '{leased}', p_lease_token);
  END IF;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.start_command(uuid, uuid, integer) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.start_command(uuid, uuid, integer) TO awp_gateway, service_role;

-- Extends the lease of a leased or running command (long runs).
CREATE OR REPLACE FUNCTION public.extend_command_lease(p_command_id uuid, p_lease_token uuid,
                                            p_lease_seconds integer)
RETURNS public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_commands;
BEGIN
  IF p_lease_token IS NULL THEN
    RAISE EXCEPTION 'extend_command_lease: p_lease_token is required' USING ERRCODE = 'AW004';
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    RAISE EXCEPTION 'extend_command_lease: p_lease_seconds must be between 1 and 86400, got %',
      coalesce(p_lease_seconds::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  PERFORM public.awp_command_for_transition(p_command_id, 'extend lease', '{leased,running}', p_lease_token);
  UPDATE public.agent_commands c SET lease_expires_at = now() + make_interval(secs => p_lease_seconds)
   WHERE c.id = p_command_id RETURNING * INTO v;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.extend_command_lease(uuid, uuid, integer) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.extend_command_lease(uuid, uuid, integer) TO awp_gateway, service_role;

-- Atomic payload merge (connection_state progress, scrubbing) while the command is in flight.
CREATE OR REPLACE FUNCTION public.patch_command_payload(p_command_id uuid, p_patch jsonb,
                                             p_lease_token uuid DEFAULT NULL)
RETURNS public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_commands;
BEGIN
  IF p_patch IS NULL OR jsonb_typeof(p_patch) <> 'object' THEN
    RAISE EXCEPTION 'patch_command_payload: p_patch must be a JSON object' USING ERRCODE = 'AW004';
  END IF;
  PERFORM public.awp_command_for_transition(p_command_id, 'patch payload',
                                            '{leased,running,done,failed,cancelled}', p_lease_token);
  UPDATE public.agent_commands c SET payload = public.awp_jsonb_patch(c.payload, p_patch)
   WHERE c.id = p_command_id RETURNING * INTO v;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.patch_command_payload(uuid, jsonb, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.patch_command_payload(uuid, jsonb, uuid) TO awp_gateway, service_role;

-- running -> done, storing the outputs (and scrubbing the payload in the same update).
CREATE OR REPLACE FUNCTION public.complete_command(p_command_id uuid, p_exit_code integer,
                                                   p_stdout text DEFAULT NULL, p_stderr text DEFAULT NULL,
                                                   p_lease_token uuid DEFAULT NULL,
                                                   p_payload_patch jsonb DEFAULT NULL)
RETURNS public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_commands;
BEGIN
  IF p_payload_patch IS NOT NULL AND jsonb_typeof(p_payload_patch) <> 'object' THEN
    RAISE EXCEPTION 'complete_command: p_payload_patch must be a JSON object' USING ERRCODE = 'AW004';
  END IF;
  IF p_command_id IS NULL THEN
    RAISE EXCEPTION 'cannot complete: p_command_id is required' USING ERRCODE = 'AW004';
  END IF;
  UPDATE public.agent_commands c
     SET status = 'done', exit_code = p_exit_code, stdout = p_stdout, stderr = p_stderr,
         finished_at = now(),
         payload = CASE WHEN p_payload_patch IS NULL THEN c.payload
                        ELSE public.awp_jsonb_patch(c.payload, p_payload_patch) END
   WHERE c.id = p_command_id AND c.status = 'running'
     AND (p_lease_token IS NULL OR c.lease_token = p_lease_token)
  RETURNING * INTO v;
  IF NOT FOUND THEN
    PERFORM public.awp_command_transition_refused(p_command_id, 'complete', '{running}', p_lease_token);
  END IF;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.complete_command(uuid, integer, text, text, uuid, jsonb) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.complete_command(uuid, integer, text, text, uuid, jsonb) TO awp_gateway, service_role;

-- running (or leased: failed before it could start) -> failed.
CREATE OR REPLACE FUNCTION public.fail_command(p_command_id uuid, p_exit_code integer DEFAULT NULL,
                                               p_error text DEFAULT NULL, p_lease_token uuid DEFAULT NULL,
                                               p_stdout text DEFAULT NULL, p_stderr text DEFAULT NULL,
                                               p_payload_patch jsonb DEFAULT NULL)
RETURNS public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_commands;
BEGIN
  IF p_payload_patch IS NOT NULL AND jsonb_typeof(p_payload_patch) <> 'object' THEN
    RAISE EXCEPTION 'fail_command: p_payload_patch must be a JSON object' USING ERRCODE = 'AW004';
  END IF;
  IF p_command_id IS NULL THEN
    RAISE EXCEPTION 'cannot fail: p_command_id is required' USING ERRCODE = 'AW004';
  END IF;
  UPDATE public.agent_commands c
     SET status = 'failed', exit_code = p_exit_code, error_message = p_error,
         stdout = coalesce(p_stdout, c.stdout), stderr = coalesce(p_stderr, c.stderr),
         finished_at = now(),
         payload = CASE WHEN p_payload_patch IS NULL THEN c.payload
                        ELSE public.awp_jsonb_patch(c.payload, p_payload_patch) END
   WHERE c.id = p_command_id AND c.status IN ('running', 'leased')
     AND (p_lease_token IS NULL OR c.lease_token = p_lease_token)
  RETURNING * INTO v;
  IF NOT FOUND THEN
    PERFORM public.awp_command_transition_refused(p_command_id, 'fail', '{running,leased}', p_lease_token);
  END IF;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.fail_command(uuid, integer, text, uuid, text, text, jsonb) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.fail_command(uuid, integer, text, uuid, text, text, jsonb) TO awp_gateway, service_role;

-- pending or leased -> cancelled (a running command cannot be cancelled from the database).
-- Security invoker: a user reaches only the rows RLS shows, through the tenant_cancel policy.
CREATE OR REPLACE FUNCTION public.cancel_command(p_command_id uuid)
RETURNS public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_commands;
  v_status public.command_status;
BEGIN
  SELECT c.status INTO v_status FROM public.agent_commands c WHERE c.id = p_command_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'command %: not found', p_command_id USING ERRCODE = 'AW003';
  END IF;
  IF v_status NOT IN ('pending', 'leased') THEN
    RAISE EXCEPTION 'command %: cannot cancel: status is %, expected pending or leased',
      p_command_id, v_status USING ERRCODE = 'AW001';
  END IF;
  UPDATE public.agent_commands c SET status = 'cancelled'
   WHERE c.id = p_command_id AND c.status IN ('pending', 'leased')
  RETURNING * INTO v;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'command %: cannot cancel: its status changed meanwhile', p_command_id
      USING ERRCODE = 'AW001';
  END IF;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.cancel_command(uuid) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.cancel_command(uuid) TO authenticated, service_role;

-- AFTER UPDATE, per row, filtered by the trigger's WHEN (back to pending, or moved to another
-- gateway while pending): NOTIFY awp_commands_<gateway> with the command id.
-- Runs as its owner (sql/0034): whoever writes the row wakes the daemons, and no API role may
-- call awp_notify_gateway itself.
CREATE OR REPLACE FUNCTION public.awp_notify_command_requeued() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  PERFORM public.awp_notify_gateway('awp_commands_' || replace(NEW.gateway_id::text, '-', ''), NEW.id::text);
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_notify_command_requeued() FROM PUBLIC, anon, authenticated;

-- Raises the error of a transition whose UPDATE matched no row (not found, lease lost, wrong
-- status), or, when the row now looks right, that it changed meanwhile.
CREATE OR REPLACE FUNCTION public.awp_command_transition_refused(p_command_id uuid, p_verb text,
                                                      p_expected public.command_status[],
                                                      p_lease_token uuid)
RETURNS void
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  PERFORM public.awp_command_for_transition(p_command_id, p_verb, p_expected, p_lease_token);
  RAISE EXCEPTION 'command %: cannot %: it changed meanwhile, try again', p_command_id, p_verb
    USING ERRCODE = 'AW001';
END
$$;
REVOKE ALL ON FUNCTION public.awp_command_transition_refused(uuid, text, public.command_status[], uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_command_transition_refused(uuid, text, public.command_status[], uuid) TO awp_gateway, service_role;

-- The gateway a runner RPC acts for, checked once per call. The two hot RPCs below run as their
-- owner (SECURITY DEFINER), so row-level security does not confine their statements: this check
-- does, and each of their statements names the gateway it returns. The service role acts for the
-- gateway p_gateway names (awp_resolve_gateway), as its policies let it; a gateway's own login,
-- or a pool login with its gateway's key (the two lookups of awp_session_gateway), acts for its
-- own gateway only: any other id or slug in p_gateway is "not found", as row-level security
-- answers it; anyone else (a pool login without a key) acts for none (AW003). p_tenant_id, when
-- given, must be the gateway's tenant. Under row-level security the same RPCs looked the
-- session's gateway up in each policy of each statement: with a gateway key, 8-12 key checks per
-- command (bench/runner/RESULTS.md, 2026-11-28).
CREATE OR REPLACE FUNCTION public.awp_command_gateway(p_gateway text, p_tenant_id uuid)
RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_session uuid;
  v_tenant uuid;
  v_slug text;
BEGIN
  IF pg_catalog.pg_has_role(session_user, 'service_role', 'MEMBER') THEN
    RETURN public.awp_resolve_gateway(p_gateway, p_tenant_id);
  END IF;
  IF p_gateway IS NULL OR btrim(p_gateway) = '' THEN
    RAISE EXCEPTION 'gateway slug is required' USING ERRCODE = 'AW004';
  END IF;
  -- awp_session_gateway's lookups as statements of this function, whose plans stay cached (a
  -- SQL function called from PL/pgSQL is planned afresh on every call).
  -- The key's binding as an expression (one call), not a query over the function's row (a
  -- function scan): 10 µs less per call (bench/runner/RESULTS.md, 2026-11-29).
  SELECT r.gateway_id INTO v_session FROM public.gateway_roles r WHERE r.role_name = session_user;
  IF v_session IS NULL THEN
    v_session := (public.awp_key_binding()).gateway_id;
  END IF;
  IF v_session IS NOT NULL THEN
    SELECT g.tenant_id, g.slug INTO v_tenant, v_slug FROM public.gateways g WHERE g.id = v_session;
    IF (p_gateway = v_slug OR lower(p_gateway) = v_session::text)
       AND (p_tenant_id IS NULL OR p_tenant_id = v_tenant) THEN
      RETURN v_session;
    END IF;
  END IF;
  RAISE EXCEPTION 'gateway "%" not found%', p_gateway,
    CASE WHEN p_tenant_id IS NULL THEN '' ELSE ' in tenant ' || p_tenant_id END
    USING ERRCODE = 'AW003';
END
$$;
REVOKE ALL ON FUNCTION public.awp_command_gateway(text, uuid) FROM PUBLIC, anon, authenticated;

-- pending -> running under a new lease, in one UPDATE: what lease_command and start_command do
-- in two. Returns the row (status running, its new lease_token, started_at), or no row when
-- nothing is pending. The body repeats lease_command's rather than sharing a helper:
-- a wrapping function cost 0.05 ms (PL/pgSQL) to 0.15 ms (SQL, planned on every call) per lease,
-- measured with pgbench, an eighth to a third of the whole call. Runs as its owner: the caller's
-- gateway is checked once (awp_command_gateway), not by each policy of each statement.
CREATE OR REPLACE FUNCTION public.lease_and_start_command(p_lease_seconds integer DEFAULT 180,
                                               p_gateway_slug text DEFAULT NULL,
                                               p_runner text DEFAULT NULL,
                                               p_tenant_id uuid DEFAULT NULL)
RETURNS SETOF public.agent_commands
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_gateway uuid;
BEGIN
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    RAISE EXCEPTION 'lease_and_start_command: p_lease_seconds must be between 1 and 86400, got %',
      coalesce(p_lease_seconds::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  v_gateway := public.awp_command_gateway(p_gateway_slug, p_tenant_id);
  IF EXISTS (SELECT 1 FROM public.agent_commands e
              WHERE e.status IN ('leased', 'running') AND e.lease_expires_at < now()
                AND e.gateway_id = v_gateway) THEN
    PERFORM public.awp_expire_command_leases(v_gateway);
  END IF;
  RETURN QUERY
  UPDATE public.agent_commands c
     SET status = 'running', lease_token = gen_random_uuid(), leased_by = p_runner, leased_at = now(),
         started_at = now(), lease_expires_at = now() + make_interval(secs => p_lease_seconds),
         attempts = c.attempts + 1
   WHERE c.id = (SELECT q.id FROM public.agent_commands q
                  WHERE q.gateway_id = v_gateway AND q.status = 'pending'
                  ORDER BY q.created_at, q.id
                  LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING c.*;
END
$$;
REVOKE ALL ON FUNCTION public.lease_and_start_command(integer, text, text, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.lease_and_start_command(integer, text, text, uuid) TO awp_gateway, service_role;

-- A command's final transition (p_outcome done: what complete_command writes; failed:
-- fail_command) and lease_and_start_command's lease of the next one, in one UPDATE of both rows
-- and one transaction (one WAL flush per command); refused as a whole when either part is.
-- One statement rather than calls of those three functions: each UPDATE statement prepares its
-- constraints, generated column and triggers afresh, and each nested call has its own cost; the
-- runner's queue protocol spent about a third of its server CPU there (bench/runner/RESULTS.md,
-- 2026-11-28). Runs as its owner, the caller's gateway checked once (awp_command_gateway); the
-- command it finishes must be of that gateway ("not found" otherwise), as the next one is.
CREATE OR REPLACE FUNCTION public.finish_and_lease_command(p_command_id uuid, p_lease_token uuid,
                                                p_outcome text,
                                                p_exit_code integer DEFAULT NULL,
                                                p_error text DEFAULT NULL,
                                                p_stdout text DEFAULT NULL,
                                                p_stderr text DEFAULT NULL,
                                                p_payload_patch jsonb DEFAULT NULL,
                                                p_lease_seconds integer DEFAULT 180,
                                                p_gateway_slug text DEFAULT NULL,
                                                p_runner text DEFAULT NULL,
                                                p_tenant_id uuid DEFAULT NULL)
RETURNS SETOF public.agent_commands
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_gateway uuid;
  v_done boolean;
  v_row public.agent_commands;
  v_finished boolean := false;
BEGIN
  IF p_lease_token IS NULL THEN
    RAISE EXCEPTION 'finish_and_lease_command: p_lease_token is required' USING ERRCODE = 'AW004';
  END IF;
  IF p_command_id IS NULL THEN
    RAISE EXCEPTION 'finish_and_lease_command: p_command_id is required' USING ERRCODE = 'AW004';
  END IF;
  IF p_outcome IS NULL OR p_outcome NOT IN ('done', 'failed') THEN
    RAISE EXCEPTION 'finish_and_lease_command: p_outcome must be done or failed, got %',
      coalesce(p_outcome, 'null') USING ERRCODE = 'AW004';
  END IF;
  IF p_payload_patch IS NOT NULL AND jsonb_typeof(p_payload_patch) <> 'object' THEN
    RAISE EXCEPTION 'finish_and_lease_command: p_payload_patch must be a JSON object' USING ERRCODE = 'AW004';
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    RAISE EXCEPTION 'finish_and_lease_command: p_lease_seconds must be between 1 and 86400, got %',
      coalesce(p_lease_seconds::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  v_done := p_outcome = 'done';
  v_gateway := public.awp_command_gateway(p_gateway_slug, p_tenant_id);
  -- Row p_command_id gets its final transition (done: from running; failed: from running or
  -- leased; its lease token must match), the oldest pending row of the gateway its lease and
  -- start; each column's CASE picks the row's part.
  FOR v_row IN
    UPDATE public.agent_commands c
       SET status = CASE WHEN c.id <> p_command_id THEN 'running'::public.command_status
                         WHEN v_done THEN 'done'::public.command_status
                         ELSE 'failed'::public.command_status END,
           exit_code = CASE WHEN c.id <> p_command_id THEN c.exit_code
                            WHEN v_done THEN coalesce(p_exit_code, 0) ELSE p_exit_code END,
           error_message = CASE WHEN c.id = p_command_id AND NOT v_done THEN p_error
                                ELSE c.error_message END,
           stdout = CASE WHEN c.id <> p_command_id THEN c.stdout
                         WHEN v_done THEN p_stdout ELSE coalesce(p_stdout, c.stdout) END,
           stderr = CASE WHEN c.id <> p_command_id THEN c.stderr
                         WHEN v_done THEN p_stderr ELSE coalesce(p_stderr, c.stderr) END,
           finished_at = CASE WHEN c.id = p_command_id THEN now() ELSE c.finished_at END,
           payload = CASE WHEN c.id = p_command_id AND p_payload_patch IS NOT NULL
                          THEN public.awp_jsonb_patch(c.payload, p_payload_patch) ELSE c.payload END,
           lease_token = CASE WHEN c.id = p_command_id THEN c.lease_token ELSE gen_random_uuid() END,
           leased_by = CASE WHEN c.id = p_command_id THEN c.leased_by ELSE p_runner END,
           leased_at = CASE WHEN c.id = p_command_id THEN c.leased_at ELSE now() END,
           started_at = CASE WHEN c.id = p_command_id THEN c.started_at ELSE now() END,
           lease_expires_at = CASE WHEN c.id = p_command_id THEN c.lease_expires_at
                                   ELSE now() + make_interval(secs => p_lease_seconds) END,
           attempts = CASE WHEN c.id = p_command_id THEN c.attempts ELSE c.attempts + 1 END
     WHERE c.id = ANY (ARRAY[p_command_id,
                             (SELECT q.id FROM public.agent_commands q
                               WHERE q.gateway_id = v_gateway AND q.status = 'pending'
                               ORDER BY q.created_at, q.id
                               LIMIT 1 FOR UPDATE SKIP LOCKED)])
       AND (c.id <> p_command_id
            OR (c.lease_token = p_lease_token AND c.gateway_id = v_gateway
                AND (c.status = 'running' OR (c.status = 'leased' AND NOT v_done))))
    RETURNING c.*
  LOOP
    IF v_row.id = p_command_id THEN
      v_finished := true;
    ELSE
      RETURN NEXT v_row;
    END IF;
  END LOOP;
  IF NOT v_finished THEN
    -- Refused: the error says why, and nothing of the call stays (the lease is rolled back too).
    -- Another gateway's command is as unknown as a missing one.
    IF NOT EXISTS (SELECT 1 FROM public.agent_commands c
                    WHERE c.id = p_command_id AND c.gateway_id = v_gateway) THEN
      RAISE EXCEPTION 'command %: not found', p_command_id USING ERRCODE = 'AW003';
    END IF;
    IF v_done THEN
      PERFORM public.awp_command_transition_refused(p_command_id, 'complete', '{running}', p_lease_token);
    ELSE
      PERFORM public.awp_command_transition_refused(p_command_id, 'fail', '{running,leased}', p_lease_token);
    END IF;
  END IF;
  -- Expired leases of the gateway, swept after the transition, as complete_command then
  -- lease_and_start_command did: a command whose lease ran out while it ran is still finished by
  -- its holder when no sweep came first. A lease sent back to pending here is taken by the next
  -- call.
  IF EXISTS (SELECT 1 FROM public.agent_commands e
              WHERE e.status IN ('leased', 'running') AND e.lease_expires_at < now()
                AND e.gateway_id = v_gateway) THEN
    PERFORM public.awp_expire_command_leases(v_gateway);
  END IF;
  RETURN;
END
$$;
REVOKE ALL ON FUNCTION public.finish_and_lease_command(uuid, uuid, text, integer, text, text, text, jsonb, integer, text, text, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.finish_and_lease_command(uuid, uuid, text, integer, text, text, text, jsonb, integer, text, text, uuid) TO awp_gateway, service_role;

-- The agents row of the command's agent, written by the runner that holds the command's lease
-- (sql/0030): a gateway's login may not write agents, so this is its one narrow, checked way.
-- Only provision (status provisioning, ready or error, with error; model) and set_agent_model
-- (model, thinking) write it; each key of p_state that is present is written, a JSON null clears
-- it. The agent must be the command's (its agent_id, agent_slug or payload agent_slug) and of the
-- command's gateway; the caller must be that gateway's login (or the service role) and hold the
-- lease. Returns false when no such agent row exists (nothing written).
CREATE OR REPLACE FUNCTION public.awp_command_agent_state(p_command_id uuid, p_lease_token uuid,
                                                          p_agent_slug text, p_state jsonb)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_cmd public.agent_commands;
  v_gateway uuid := public.awp_session_gateway();
  v_status text := p_state ->> 'status';
  v_thinking text := p_state ->> 'thinking';
  v_key text;
  v_agent uuid;
BEGIN
  IF p_state IS NULL OR jsonb_typeof(p_state) <> 'object' THEN
    RAISE EXCEPTION 'awp_command_agent_state: p_state must be a JSON object' USING ERRCODE = 'AW004';
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_state) LOOP
    IF v_key NOT IN ('status', 'error', 'model', 'thinking') THEN
      RAISE EXCEPTION 'awp_command_agent_state: unknown key "%" (status, error, model, thinking)', v_key
        USING ERRCODE = 'AW004';
    END IF;
  END LOOP;
  SELECT * INTO v_cmd FROM public.agent_commands c WHERE c.id = p_command_id FOR SHARE;
  -- Another gateway's command is as unknown as a missing one.
  IF NOT FOUND OR (v_gateway IS DISTINCT FROM v_cmd.gateway_id
                   AND NOT pg_catalog.pg_has_role(session_user, 'service_role', 'MEMBER')) THEN
    RAISE EXCEPTION 'command %: not found', p_command_id USING ERRCODE = 'AW003';
  END IF;
  IF p_lease_token IS NULL OR v_cmd.lease_token IS DISTINCT FROM p_lease_token THEN
    RAISE EXCEPTION 'command %: cannot write its agent: lease lost (status is %)', p_command_id,
      v_cmd.status USING ERRCODE = 'AW002';
  END IF;
  IF v_cmd.status <> 'running' THEN
    RAISE EXCEPTION 'command %: cannot write its agent: status is %, expected running', p_command_id,
      v_cmd.status USING ERRCODE = 'AW001';
  END IF;
  IF v_cmd.action = 'provision' THEN
    IF p_state ? 'thinking' THEN
      RAISE EXCEPTION 'awp_command_agent_state: a provision does not set thinking' USING ERRCODE = 'AW004';
    END IF;
    IF p_state ? 'status' AND (v_status IS NULL OR v_status NOT IN ('provisioning', 'ready', 'error')) THEN
      RAISE EXCEPTION 'awp_command_agent_state: a provision sets status provisioning, ready or error, not %',
        coalesce(v_status, 'null') USING ERRCODE = 'AW004';
    END IF;
  ELSIF v_cmd.action = 'set_agent_model' THEN
    IF p_state ? 'status' OR p_state ? 'error' THEN
      RAISE EXCEPTION 'awp_command_agent_state: set_agent_model sets model and thinking only'
        USING ERRCODE = 'AW004';
    END IF;
    IF v_thinking IS NOT NULL AND v_thinking NOT IN ('none', 'low', 'medium', 'high') THEN
      RAISE EXCEPTION 'awp_command_agent_state: thinking must be none, low, medium or high, got %',
        v_thinking USING ERRCODE = 'AW004';
    END IF;
  ELSE
    RAISE EXCEPTION 'awp_command_agent_state: % does not change its agent (provision, set_agent_model)',
      v_cmd.action USING ERRCODE = 'AW004';
  END IF;
  IF length(p_state ->> 'model') > 300 THEN
    RAISE EXCEPTION 'awp_command_agent_state: model is longer than 300 characters' USING ERRCODE = 'AW004';
  END IF;
  SELECT a.id INTO v_agent FROM public.agents a
   WHERE a.tenant_id = v_cmd.tenant_id AND a.gateway_id = v_cmd.gateway_id AND a.slug = p_agent_slug
     AND (a.id = v_cmd.agent_id OR a.slug = v_cmd.agent_slug OR a.slug = v_cmd.payload ->> 'agent_slug');
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE public.agents a
     SET status = CASE WHEN p_state ? 'status' THEN v_status::public.agent_status ELSE a.status END,
         error = CASE WHEN p_state ? 'error' THEN left(p_state ->> 'error', 2000) ELSE a.error END,
         model = CASE WHEN p_state ? 'model' THEN p_state ->> 'model' ELSE a.model END,
         thinking = CASE WHEN p_state ? 'thinking' THEN v_thinking ELSE a.thinking END
   WHERE a.id = v_agent;
  RETURN true;
END
$$;
REVOKE ALL ON FUNCTION public.awp_command_agent_state(uuid, uuid, text, jsonb) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_command_agent_state(uuid, uuid, text, jsonb) TO awp_gateway, service_role;

-- Only an operator opens a gateway's shell to every member.
CREATE OR REPLACE FUNCTION public.awp_gateways_run_shell_policy() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.run_shell_policy = 'members'
     AND (TG_OP = 'INSERT' OR OLD.run_shell_policy IS DISTINCT FROM NEW.run_shell_policy)
     AND NOT public.current_is_operator() THEN
    RAISE EXCEPTION 'gateways: only an operator may let every member run shell commands (run_shell_policy = members)'
      USING ERRCODE = 'AW010';
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_gateways_run_shell_policy() FROM PUBLIC, anon, authenticated;

-- A run_shell command of a gateway whose policy is `operators` needs an operator's session.
-- Invoker's rights on purpose: current_is_operator() must see the inserting session's role.
CREATE OR REPLACE FUNCTION public.awp_commands_run_shell_gate() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_policy text;
BEGIN
  NEW.requested_by_operator := public.current_is_operator();
  IF NEW.action = 'run_shell' AND NOT NEW.requested_by_operator THEN
    SELECT g.run_shell_policy INTO v_policy FROM public.gateways g WHERE g.id = NEW.gateway_id;
    IF coalesce(v_policy, 'operators') <> 'members' THEN
      RAISE EXCEPTION 'agent_commands: run_shell on this gateway needs an operator (its run_shell_policy is operators)'
        USING ERRCODE = 'AW010';
    END IF;
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_commands_run_shell_gate() FROM PUBLIC, anon, authenticated;
