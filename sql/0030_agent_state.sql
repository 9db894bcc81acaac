-- The agents row tells the truth (issue 34, item 2): a provision leaves its agent ready, or in
-- status error with the reason; set_agent_model leaves the model and thinking it wrote into the
-- runtime. The runner's gateway login cannot write agents (sql/0023): it writes these through
-- awp_command_agent_state, SECURITY DEFINER, which checks that the caller holds the lease of a
-- running provision or set_agent_model of its own gateway that names the agent.
--   * agents.error: why the agent is in status error (the runner's last failed provision), NULL
--     otherwise. Additive.
-- The function's current body is in functions/commands.sql; this is the same text.

ALTER TABLE public.agents ADD COLUMN IF NOT EXISTS error text;
COMMENT ON COLUMN public.agents.error IS
  'Why the agent is in status error (the reason its last provision failed); NULL otherwise';

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
