-- Queue statements whose plans the server connection keeps (issue 21, docs/scale.md "Where the
-- database's time went"). Through PgBouncer a statement is unnamed and planned every time, and a
-- PL/pgSQL statement of the form "p IS NULL OR col = p" is planned afresh on every call (its
-- generic plan cannot use the index): at 1,000 gateway hosts these plans were a large share of
-- a write's database CPU.
--   * awp_inbox_scan: the dispatcher's scan, until now a statement of its own; it also counts
--     each agent's leasable items, so the dispatcher leases an agent again only while it has some;
--   * lease_inbox_item sweeps expired leases only when the agent has one (an index probe);
--   * awp_resolve_gateway looks up the id or slug alone and checks the tenant after.
-- The current bodies are in functions/inbox.sql and functions/gateways.sql; these are the same text.

-- The dispatcher's scan of its gateway (apps/inbox-dispatcher/queue.cpp, docs/protocols/
-- inbox-queue.md): one row per ready agent with items leasable now (its oldest item's age in epoch
-- seconds and how many; an expired lease counts, leasing reaps it first), then one last row, agent
-- NULL, with the seconds until the next item becomes leasable (a back-off ends or a lease expires;
-- NULL when nothing waits). A function so that the server connection keeps its plan: sent as a
-- statement, unnamed through PgBouncer, it was planned afresh on every scan (~0.3 ms, most of its
-- cost). Row-level security applies: a gateway's login scans only its own gateway.
CREATE OR REPLACE FUNCTION public.awp_inbox_scan(p_gateway_id uuid)
RETURNS TABLE (agent_id uuid, oldest double precision, due_in double precision, waiting bigint)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH w AS (
    SELECT i.agent_id, i.created_at, i.status, i.not_before, i.lease_expires_at
      FROM public.agent_inbox_items i
     WHERE i.gateway_id = p_gateway_id AND i.status IN ('pending', 'failed', 'leased')
       AND (i.status = 'leased' OR i.attempts < i.max_attempts))
  SELECT w.agent_id, extract(epoch FROM min(w.created_at))::float8, NULL::float8, count(*)
    FROM w JOIN public.agents a ON a.id = w.agent_id
   WHERE a.gateway_id = p_gateway_id AND a.status = 'ready'
     AND ((w.status <> 'leased' AND (w.not_before IS NULL OR w.not_before <= now()))
          OR (w.status = 'leased' AND w.lease_expires_at < now()))
   GROUP BY w.agent_id
  UNION ALL
  SELECT NULL::uuid, NULL::float8, extract(epoch FROM min(s.t) - clock_timestamp())::float8, NULL::bigint
    FROM (SELECT CASE WHEN w.status = 'leased' THEN w.lease_expires_at ELSE w.not_before END AS t
            FROM w
           WHERE (w.status = 'leased' AND w.lease_expires_at >= now())
              OR (w.status <> 'leased' AND w.not_before > now())) s;
END
$$;
REVOKE ALL ON FUNCTION public.awp_inbox_scan(uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_inbox_scan(uuid) TO awp_gateway, service_role;

-- Leases the agent's oldest item that is pending, or failed and past its back-off.
CREATE OR REPLACE FUNCTION public.lease_inbox_item(p_agent_id uuid, p_lease_seconds integer DEFAULT 120,
                                        p_runner text DEFAULT NULL)
RETURNS SETOF public.agent_inbox_items
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF p_agent_id IS NULL THEN
    RAISE EXCEPTION 'lease_inbox_item: p_agent_id is required' USING ERRCODE = 'AW004';
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    RAISE EXCEPTION 'lease_inbox_item: p_lease_seconds must be between 1 and 86400, got %',
      coalesce(p_lease_seconds::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.agents a WHERE a.id = p_agent_id) THEN
    RAISE EXCEPTION 'agent %: not found', p_agent_id USING ERRCODE = 'AW003';
  END IF;
  -- The sweep (two statements, planned afresh on every call) runs only when one of this agent's
  -- leases has expired: an index probe on agent_inbox_items_lease_idx otherwise.
  IF EXISTS (SELECT 1 FROM public.agent_inbox_items e
              WHERE e.status = 'leased' AND e.lease_expires_at < now() AND e.agent_id = p_agent_id) THEN
    PERFORM public.awp_expire_inbox_leases(p_agent_id);
  END IF;
  RETURN QUERY
  UPDATE public.agent_inbox_items i
     SET status = 'leased', attempts = i.attempts + 1, lease_token = gen_random_uuid(),
         leased_by = p_runner, leased_at = now(),
         lease_expires_at = now() + make_interval(secs => p_lease_seconds), not_before = NULL
   WHERE i.id = (SELECT q.id FROM public.agent_inbox_items q
                  WHERE q.agent_id = p_agent_id AND q.status IN ('pending', 'failed')
                    AND q.attempts < q.max_attempts
                    AND (q.not_before IS NULL OR q.not_before <= now())
                  ORDER BY q.created_at, q.id
                  LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING i.*;
END
$$;
REVOKE ALL ON FUNCTION public.lease_inbox_item(uuid, integer, text) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.lease_inbox_item(uuid, integer, text) TO awp_gateway, service_role;

-- Gateway by id (a uuid in its canonical text form, any case) or by slug, optionally within one
-- tenant. Never ambiguous: ids are ids, slugs are unique and never uuid-shaped.
CREATE OR REPLACE FUNCTION public.awp_resolve_gateway(p_gateway_slug text, p_tenant_id uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_id uuid;
  v_tenant uuid;
BEGIN
  IF p_gateway_slug IS NULL OR btrim(p_gateway_slug) = '' THEN
    RAISE EXCEPTION 'gateway slug is required' USING ERRCODE = 'AW004';
  END IF;
  -- One plan each, cached: no "p_tenant_id IS NULL OR" in a statement (it is planned afresh on
  -- every call); ids and slugs are unique across tenants, the tenant is checked after.
  IF p_gateway_slug ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
    SELECT g.id, g.tenant_id INTO v_id, v_tenant FROM public.gateways g WHERE g.id = p_gateway_slug::uuid;
  ELSE
    SELECT g.id, g.tenant_id INTO v_id, v_tenant FROM public.gateways g WHERE g.slug = p_gateway_slug;
  END IF;
  IF p_tenant_id IS NOT NULL AND v_tenant IS DISTINCT FROM p_tenant_id THEN
    v_id := NULL;
  END IF;
  IF v_id IS NULL THEN
    RAISE EXCEPTION 'gateway "%" not found%', p_gateway_slug,
      CASE WHEN p_tenant_id IS NULL THEN '' ELSE ' in tenant ' || p_tenant_id END
      USING ERRCODE = 'AW003';
  END IF;
  RETURN v_id;
END
$$;
REVOKE ALL ON FUNCTION public.awp_resolve_gateway(text, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_resolve_gateway(text, uuid) TO awp_gateway, service_role;
