-- Gateway registration tokens, daemon heartbeats, the secrets wake-up, lease reaping, and the
-- read RPCs: agent_reports_chain, get_task_relations, get_agent_daily_usage.

-- Registration tokens ---------------------------------------------------------------------------

-- Mints a single-use registration token for a tenant (awpctl gateway token). The plaintext is
-- returned once; only its SHA-256 is stored.
CREATE FUNCTION public.issue_gateway_token(p_tenant_id uuid DEFAULT NULL, p_label text DEFAULT NULL,
                                           p_ttl_seconds integer DEFAULT 86400,
                                           p_created_by text DEFAULT NULL)
RETURNS TABLE (token text, token_id uuid, tenant_id uuid, expires_at timestamptz)
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_tenant uuid := coalesce(p_tenant_id, public.current_tenant_id());
  v_token text := 'awpgt_' || replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '');
  v_id uuid;
  v_expires timestamptz;
BEGIN
  IF p_ttl_seconds IS NULL OR p_ttl_seconds < 60 OR p_ttl_seconds > 30 * 86400 THEN
    RAISE EXCEPTION 'issue_gateway_token: p_ttl_seconds must be between 60 and 2592000, got %',
      coalesce(p_ttl_seconds::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.tenants t WHERE t.id = v_tenant) THEN
    RAISE EXCEPTION 'tenant %: not found', v_tenant USING ERRCODE = 'AW003';
  END IF;
  INSERT INTO public.gateway_registration_tokens AS g (tenant_id, token_hash, label, expires_at, created_by)
  VALUES (v_tenant, public.awp_sha256_hex(v_token), NULLIF(btrim(p_label), ''),
          now() + make_interval(secs => p_ttl_seconds), p_created_by)
  RETURNING g.id, g.expires_at INTO v_id, v_expires;
  RETURN QUERY SELECT v_token, v_id, v_tenant, v_expires;
END
$$;

-- Exchanges a registration token for a new gateway, atomically: the token must exist (in
-- p_tenant_id when given), be unused and unexpired. Returns {"gateway_id", "gateway_slug"}.
-- SECURITY DEFINER: the caller (anon during gateway bootstrap) cannot read tokens or write
-- gateways itself.
CREATE FUNCTION public.consume_gateway_token(p_token text, p_label text DEFAULT NULL,
                                             p_slug_hint text DEFAULT NULL, p_tenant_id uuid DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_token public.gateway_registration_tokens;
  v_label text;
  v_base text;
  v_slug text;
  v_n integer := 1;
  v_gateway uuid;
BEGIN
  IF p_token IS NULL OR btrim(p_token) = '' THEN
    RAISE EXCEPTION 'invalid gateway registration token' USING ERRCODE = 'AW006';
  END IF;
  SELECT * INTO v_token FROM public.gateway_registration_tokens t
   WHERE t.token_hash = public.awp_sha256_hex(btrim(p_token)) FOR UPDATE;
  IF NOT FOUND OR (p_tenant_id IS NOT NULL AND v_token.tenant_id <> p_tenant_id) THEN
    RAISE EXCEPTION 'invalid gateway registration token' USING ERRCODE = 'AW006';
  END IF;
  IF v_token.consumed_at IS NOT NULL THEN
    RAISE EXCEPTION 'gateway registration token already used (at %)', v_token.consumed_at
      USING ERRCODE = 'AW008';
  END IF;
  IF v_token.expires_at <= now() THEN
    RAISE EXCEPTION 'gateway registration token expired at %', v_token.expires_at USING ERRCODE = 'AW007';
  END IF;

  v_label := coalesce(NULLIF(btrim(p_label), ''), NULLIF(btrim(v_token.label), ''), 'Gateway');
  v_base := btrim(regexp_replace(lower(coalesce(NULLIF(btrim(p_slug_hint), ''), v_label)), '[^a-z0-9]+', '-', 'g'), '-');
  v_base := left(CASE WHEN v_base = '' THEN 'gateway' ELSE v_base END, 56);
  v_slug := v_base;
  WHILE EXISTS (SELECT 1 FROM public.gateways g WHERE g.tenant_id = v_token.tenant_id AND g.slug = v_slug) LOOP
    v_n := v_n + 1;
    v_slug := v_base || '-' || v_n;
  END LOOP;

  INSERT INTO public.gateways (tenant_id, slug, label, status, meta)
  VALUES (v_token.tenant_id, v_slug, v_label, 'provisioning',
          jsonb_build_object('registered_via', 'token', 'token_id', v_token.id))
  RETURNING id INTO v_gateway;
  UPDATE public.gateway_registration_tokens t SET consumed_at = now(), consumed_by_gateway_id = v_gateway
   WHERE t.id = v_token.id;
  RETURN jsonb_build_object('gateway_id', v_gateway, 'gateway_slug', v_slug);
END
$$;

-- Daemon heartbeats --------------------------------------------------------------------------

-- Upserts the liveness row of one daemon instance and touches its gateway (last_seen_at; a
-- provisioning gateway becomes ready). Returns the gateway's id, tenant and status, so a
-- daemon learns when its gateway is hibernating.
CREATE FUNCTION public.daemon_heartbeat(p_gateway_slug text, p_daemon text, p_instance text DEFAULT NULL,
                                        p_pid integer DEFAULT NULL, p_version text DEFAULT NULL,
                                        p_started_at timestamptz DEFAULT NULL, p_meta jsonb DEFAULT NULL,
                                        p_tenant_id uuid DEFAULT NULL)
RETURNS TABLE (gateway_id uuid, tenant_id uuid, gateway_status public.gateway_status, last_seen_at timestamptz)
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_gateway uuid := public.awp_resolve_gateway(p_gateway_slug, p_tenant_id);
BEGIN
  IF p_daemon IS NULL OR p_daemon !~ '^[a-z][a-z0-9_-]{0,62}$' THEN
    RAISE EXCEPTION 'daemon_heartbeat: p_daemon must be a lower-case name such as command-runner, got "%"',
      coalesce(p_daemon, 'null') USING ERRCODE = 'AW004';
  END IF;
  IF p_meta IS NOT NULL AND jsonb_typeof(p_meta) <> 'object' THEN
    RAISE EXCEPTION 'daemon_heartbeat: p_meta must be a JSON object' USING ERRCODE = 'AW004';
  END IF;
  UPDATE public.gateways g
     SET last_seen_at = now(), last_heartbeat_at = now(),
         status = CASE WHEN g.status = 'provisioning' THEN 'ready'::public.gateway_status ELSE g.status END
   WHERE g.id = v_gateway;
  INSERT INTO public.daemon_heartbeats AS h (tenant_id, gateway_id, daemon, instance, pid, version,
                                             started_at, last_seen_at, meta)
  SELECT g.tenant_id, g.id, p_daemon, coalesce(NULLIF(btrim(p_instance), ''), 'default'), p_pid, p_version,
         coalesce(p_started_at, now()), now(), coalesce(p_meta, '{}')
    FROM public.gateways g WHERE g.id = v_gateway
  ON CONFLICT ON CONSTRAINT daemon_heartbeats_pkey DO UPDATE
     SET pid = coalesce(EXCLUDED.pid, h.pid), version = coalesce(EXCLUDED.version, h.version),
         started_at = CASE WHEN p_started_at IS NOT NULL OR EXCLUDED.pid IS DISTINCT FROM h.pid
                           THEN EXCLUDED.started_at ELSE h.started_at END,
         last_seen_at = now(), meta = CASE WHEN p_meta IS NULL THEN h.meta ELSE EXCLUDED.meta END;
  RETURN QUERY SELECT g.id, g.tenant_id, g.status, g.last_seen_at FROM public.gateways g WHERE g.id = v_gateway;
END
$$;

-- Secrets wake-up ----------------------------------------------------------------------------

-- One NOTIFY awp_secrets_<gateway> per statement per gateway whose secrets changed (insert,
-- delete, or a change of key, value, agent or gateway; the sync daemon's own status writes do
-- not wake it again). Payload: the secret id when one row changed, else empty.
CREATE FUNCTION public.awp_notify_secrets() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id FROM new_rows n GROUP BY n.gateway_id LOOP
      PERFORM pg_notify('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSIF TG_OP = 'DELETE' THEN
    FOR r IN SELECT o.gateway_id, count(*) AS n, min(o.id::text) AS one_id FROM old_rows o GROUP BY o.gateway_id LOOP
      PERFORM pg_notify('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSE
    FOR r IN
      WITH changed AS (
        SELECT n.id, n.gateway_id AS new_gateway, o.gateway_id AS old_gateway
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE n.key IS DISTINCT FROM o.key OR n.encrypted_value IS DISTINCT FROM o.encrypted_value
            OR n.agent_id IS DISTINCT FROM o.agent_id OR n.gateway_id IS DISTINCT FROM o.gateway_id),
      touched AS (
        SELECT id, new_gateway AS gateway_id FROM changed
        UNION SELECT id, old_gateway FROM changed)
      SELECT t.gateway_id, count(*) AS n, min(t.id::text) AS one_id FROM touched t GROUP BY t.gateway_id
    LOOP
      PERFORM pg_notify('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER secrets_notify_insert AFTER INSERT ON public.secrets
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.awp_notify_secrets();
CREATE TRIGGER secrets_notify_update AFTER UPDATE ON public.secrets
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION public.awp_notify_secrets();
CREATE TRIGGER secrets_notify_delete AFTER DELETE ON public.secrets
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.awp_notify_secrets();

-- A changed secret value waits for the next sync.
CREATE FUNCTION public.awp_secrets_before_update() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.encrypted_value IS DISTINCT FROM OLD.encrypted_value AND NEW.sync_status IS NOT DISTINCT FROM OLD.sync_status THEN
    NEW.sync_status := 'pending';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER secrets_before_update BEFORE UPDATE ON public.secrets
  FOR EACH ROW EXECUTE FUNCTION public.awp_secrets_before_update();

-- Lease reaping ------------------------------------------------------------------------------

-- Called by the scheduler every minute: expired command leases (leased -> pending, running ->
-- failed), expired inbox leases (a failed attempt: failed with back-off, or dead_letter) and
-- expired embedding leases (released). Returns the counts as one row.
CREATE FUNCTION public.reap_expired_leases()
RETURNS TABLE (commands_requeued integer, commands_failed integer, inbox_retried integer,
               inbox_dead_lettered integer, knowledge_released integer)
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  c record;
  i record;
BEGIN
  SELECT * INTO c FROM public.awp_expire_command_leases(NULL);
  SELECT * INTO i FROM public.awp_expire_inbox_leases(NULL);
  RETURN QUERY SELECT c.requeued, c.failed, i.retried, i.dead_lettered, public.awp_expire_knowledge_leases();
END
$$;

-- Read RPCs ----------------------------------------------------------------------------------

-- The reporting chain upward from an agent: depth 0 is the agent itself, then its manager, ...
-- Stops at p_max_depth (default 5, at most 100) and before an agent already in the chain (a
-- cycle). RLS applies. AW003 when the agent is not visible.
CREATE FUNCTION public.agent_reports_chain(p_agent_id uuid, p_max_depth integer DEFAULT 5)
RETURNS TABLE (depth integer, agent_id uuid, slug text, name text)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_max integer := coalesce(p_max_depth, 5);
BEGIN
  IF v_max < 0 OR v_max > 100 THEN
    RAISE EXCEPTION 'agent_reports_chain: p_max_depth must be between 0 and 100, got %', v_max
      USING ERRCODE = 'AW004';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.agents a WHERE a.id = p_agent_id) THEN
    RAISE EXCEPTION 'agent %: not found', p_agent_id USING ERRCODE = 'AW003';
  END IF;
  RETURN QUERY
  WITH RECURSIVE chain (d, aid, aslug, aname, manager, path) AS (
    SELECT 0, a.id, a.slug, a.name, a.reports_to_id, ARRAY[a.id]
      FROM public.agents a WHERE a.id = p_agent_id
    UNION ALL
    SELECT c.d + 1, a.id, a.slug, a.name, a.reports_to_id, c.path || a.id
      FROM chain c JOIN public.agents a ON a.id = c.manager
     WHERE c.d < v_max AND NOT a.id = ANY (c.path))
  SELECT c.d, c.aid, c.aslug, c.aname FROM chain c ORDER BY c.d;
END
$$;

-- All relations of a task: rows of task_relations in both directions (direction outgoing when
-- the task is the source), plus its parent and children from tasks.parent_id (relation_id NULL).
-- perspective_type is the relation as seen from p_task_id (an incoming "blocks" is blocked_by).
-- RLS applies. AW003 when the task is not visible.
CREATE FUNCTION public.get_task_relations(p_task_id uuid)
RETURNS TABLE (relation_id uuid, relation_type public.task_relation_type, direction text,
               perspective_type public.task_relation_type, related_task_id uuid, related_title text,
               related_status public.task_status, related_assignee_agent_id uuid,
               related_assignee_name text, created_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_parent uuid;
BEGIN
  SELECT t.parent_id INTO v_parent FROM public.tasks t WHERE t.id = p_task_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'task %: not found', p_task_id USING ERRCODE = 'AW003';
  END IF;
  RETURN QUERY
  WITH rel AS (
    SELECT r.id AS rid, r.relation_type AS rtype, 'outgoing'::text AS dir, r.relation_type AS ptype,
           r.target_task_id AS other, r.created_at AS at
      FROM public.task_relations r WHERE r.source_task_id = p_task_id
    UNION ALL
    SELECT r.id, r.relation_type, 'incoming',
           CASE r.relation_type WHEN 'blocks' THEN 'blocked_by'::public.task_relation_type
                                WHEN 'blocked_by' THEN 'blocks'::public.task_relation_type
                                WHEN 'parent_of' THEN 'child_of'::public.task_relation_type
                                WHEN 'child_of' THEN 'parent_of'::public.task_relation_type
                                ELSE r.relation_type END,
           r.source_task_id, r.created_at
      FROM public.task_relations r WHERE r.target_task_id = p_task_id
    UNION ALL
    SELECT NULL::uuid, 'child_of'::public.task_relation_type, 'outgoing', 'child_of'::public.task_relation_type,
           v_parent, NULL::timestamptz
     WHERE v_parent IS NOT NULL
    UNION ALL
    SELECT NULL::uuid, 'parent_of'::public.task_relation_type, 'outgoing', 'parent_of'::public.task_relation_type,
           c.id, c.created_at
      FROM public.tasks c WHERE c.parent_id = p_task_id)
  SELECT rel.rid, rel.rtype, rel.dir, rel.ptype, t.id, t.title, t.status, t.assignee_agent_id, a.name, rel.at
    FROM rel
    JOIN public.tasks t ON t.id = rel.other
    LEFT JOIN public.agents a ON a.id = t.assignee_agent_id
   ORDER BY rel.ptype, t.title, t.id;
END
$$;

-- The agent's LLM usage per UTC day from p_start_date to p_end_date inclusive (defaults: the
-- last 30 days up to today), one row per day, days without usage as zeros. At most 366 days.
-- RLS applies. AW003 when the agent is not visible; AW004 for a bad range.
CREATE FUNCTION public.get_agent_daily_usage(p_agent_id uuid, p_start_date date DEFAULT NULL,
                                             p_end_date date DEFAULT NULL)
RETURNS TABLE (day date, input_tokens bigint, output_tokens bigint, total_tokens bigint,
               cost_usd numeric, calls bigint)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_end date := coalesce(p_end_date, (now() AT TIME ZONE 'UTC')::date);
  v_start date := coalesce(p_start_date, v_end - 29);
BEGIN
  IF v_start > v_end THEN
    RAISE EXCEPTION 'get_agent_daily_usage: p_start_date % is after p_end_date %', v_start, v_end
      USING ERRCODE = 'AW004';
  END IF;
  IF v_end - v_start > 365 THEN
    RAISE EXCEPTION 'get_agent_daily_usage: at most 366 days at a time, got % days', v_end - v_start + 1
      USING ERRCODE = 'AW004';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.agents a WHERE a.id = p_agent_id) THEN
    RAISE EXCEPTION 'agent %: not found', p_agent_id USING ERRCODE = 'AW003';
  END IF;
  RETURN QUERY
  WITH used AS (
    SELECT (u.created_at AT TIME ZONE 'UTC')::date AS d, sum(u.input_tokens)::bigint AS i,
           sum(u.output_tokens)::bigint AS o, sum(u.cost_usd) AS c, count(*) AS n
      FROM public.agent_usage u
     WHERE u.agent_id = p_agent_id
       AND u.created_at >= (v_start::timestamp AT TIME ZONE 'UTC')
       AND u.created_at < ((v_end + 1)::timestamp AT TIME ZONE 'UTC')
     GROUP BY 1)
  SELECT s.d::date, coalesce(used.i, 0), coalesce(used.o, 0), coalesce(used.i, 0) + coalesce(used.o, 0),
         coalesce(used.c, 0), coalesce(used.n, 0)
    FROM generate_series(v_start, v_end, interval '1 day') AS s(d)
    LEFT JOIN used ON used.d = s.d::date
   ORDER BY 1;
END
$$;

REVOKE ALL ON FUNCTION public.issue_gateway_token(uuid, text, integer, text) FROM PUBLIC, anon, authenticated;
REVOKE ALL ON FUNCTION public.consume_gateway_token(text, text, text, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.daemon_heartbeat(text, text, text, integer, text, timestamptz, jsonb, uuid)
  FROM PUBLIC, anon, authenticated;
REVOKE ALL ON FUNCTION public.awp_notify_secrets() FROM PUBLIC, anon, authenticated;
REVOKE ALL ON FUNCTION public.awp_secrets_before_update() FROM PUBLIC, anon, authenticated;
REVOKE ALL ON FUNCTION public.reap_expired_leases() FROM PUBLIC, anon, authenticated;
REVOKE ALL ON FUNCTION public.agent_reports_chain(uuid, integer) FROM PUBLIC, anon;
REVOKE ALL ON FUNCTION public.get_task_relations(uuid) FROM PUBLIC, anon;
REVOKE ALL ON FUNCTION public.get_agent_daily_usage(uuid, date, date) FROM PUBLIC, anon;

GRANT EXECUTE ON FUNCTION public.issue_gateway_token(uuid, text, integer, text) TO service_role;
GRANT EXECUTE ON FUNCTION public.consume_gateway_token(text, text, text, uuid) TO anon, authenticated, service_role;
GRANT EXECUTE ON FUNCTION public.daemon_heartbeat(text, text, text, integer, text, timestamptz, jsonb, uuid)
  TO service_role;
GRANT EXECUTE ON FUNCTION public.reap_expired_leases() TO service_role;
GRANT EXECUTE ON FUNCTION public.agent_reports_chain(uuid, integer) TO authenticated, service_role;
GRANT EXECUTE ON FUNCTION public.get_task_relations(uuid) TO authenticated, service_role;
GRANT EXECUTE ON FUNCTION public.get_agent_daily_usage(uuid, date, date) TO authenticated, service_role;
