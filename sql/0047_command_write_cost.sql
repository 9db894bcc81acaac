-- A command's write and the runner's RPCs at a lower cost (issue 41; bench/runner/RESULTS.md,
-- 2026-11-29):
--   * the command's tenant checked once, by its gateway's foreign key (below);
--   * awp_notify_gateway, which every queue trigger calls, in PL/pgSQL: its plans stay cached,
--     where the SQL function was planned again on every call (about 20 µs of every insert);
--   * awp_command_gateway calls awp_key_binding() as an expression instead of a query over its
--     row (about 10 µs of every call of the runner's two RPCs with a gateway key).
-- The current bodies are in functions/wake.sql and functions/commands.sql; these are the same text.
--
-- agent_commands_tenant_id_fkey is implied by agent_commands_gateway_id_fkey: gateway_id is NOT
-- NULL, so every row's (tenant_id, gateway_id) names a gateway of that tenant, whose own
-- gateways_tenant_id_fkey names the tenant; deleting a tenant still deletes its commands, through
-- its gateways (both ON DELETE CASCADE). The dropped check cost every insert an SPI lookup of the
-- tenants row FOR KEY SHARE (a row lock: a WAL record and a dirtied page of tenants per command),
-- about 9 µs of the 270 µs an insert costs the server (bench/runner/RESULTS.md).
ALTER TABLE public.agent_commands DROP CONSTRAINT agent_commands_tenant_id_fkey;

CREATE OR REPLACE FUNCTION public.awp_notify_gateway(p_channel text, p_payload text) RETURNS void
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  PERFORM pg_catalog.pg_notify(p_channel, coalesce(p_payload, ''));
  PERFORM pg_catalog.pg_notify('awp_wake', p_channel || ' ' || coalesce(p_payload, ''));
END
$$;

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
