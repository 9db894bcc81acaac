-- The runner's two hot RPCs at a lower cost (issue 41; bench/runner/RESULTS.md, 2026-11-28):
--   * lease_and_start_command and finish_and_lease_command run as their owner (SECURITY DEFINER):
--     the caller's gateway is checked once per call by awp_command_gateway (the service role: the
--     gateway named; a gateway's own login: its binding; a pool login: the gateway of the key its
--     transaction presented; anyone else: none), where row-level security looked it up again in
--     each policy of each statement (with a gateway key, 8-12 key checks per command). Every
--     statement of the two names the checked gateway; a command of another gateway is "not found"
--     to finish_and_lease_command, even with its real lease token (docs/security.md, "Gateway
--     keys");
--   * finish_and_lease_command writes the end of one command and the start of the next in one
--     UPDATE of both rows instead of calling complete_command (or fail_command) and
--     lease_and_start_command: each UPDATE prepares the table's constraints, generated column and
--     triggers again, and each nested call has its own cost.
-- The current bodies are in functions/commands.sql; these are the same text.

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
  SELECT r.gateway_id INTO v_session FROM public.gateway_roles r WHERE r.role_name = session_user;
  IF v_session IS NULL THEN
    SELECT k.gateway_id INTO v_session FROM public.awp_key_binding() k;
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
