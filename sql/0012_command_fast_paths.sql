-- The command runner's hot path: lease -> start -> complete (or fail), one row each.
--
-- Before, every transition locked and read the row in awp_command_for_transition, then updated
-- it in a second statement, and every update ran two PL/pgSQL BEFORE triggers (the state machine
-- and updated_at). Now each transition is one UPDATE whose WHERE clause carries the expected
-- status and lease token; only when it matches no row does the function look at the row to
-- raise the same error as before (not found / lease lost / wrong status). The state-machine
-- trigger also keeps updated_at, so an update runs one trigger, and lease_command sweeps expired
-- leases only when an index probe finds one. Signatures, results, errors and SQLSTATEs are
-- unchanged.

-- One BEFORE UPDATE trigger: the state machine, finished_at / lease_expires_at on final states,
-- the gateway and payload rules, and updated_at (what awp_set_updated_at did for this table).
CREATE OR REPLACE FUNCTION public.awp_commands_check_transition() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    IF NOT ((OLD.status = 'pending' AND NEW.status IN ('leased', 'cancelled'))
         OR (OLD.status = 'leased' AND NEW.status IN ('running', 'pending', 'failed', 'cancelled'))
         OR (OLD.status = 'running' AND NEW.status IN ('done', 'failed'))) THEN
      RAISE EXCEPTION 'command %: illegal transition from % to %', OLD.id, OLD.status, NEW.status
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

DROP TRIGGER agent_commands_updated_at ON public.agent_commands;

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

-- Raises the error of a transition whose UPDATE matched no row (not found, lease lost, wrong
-- status), or, when the row now looks right, that it changed meanwhile.
CREATE FUNCTION public.awp_command_transition_refused(p_command_id uuid, p_verb text,
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

REVOKE ALL ON FUNCTION public.awp_command_transition_refused(uuid, text, public.command_status[], uuid)
  FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_command_transition_refused(uuid, text, public.command_status[], uuid)
  TO service_role;
