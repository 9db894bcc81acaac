-- Row-level security and table privileges: authenticated sees only its tenant, service_role
-- everything, anon nothing. Every privilege is granted explicitly.

-- Tenant tables users manage through the UI: full CRUD for authenticated, limited by RLS.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['workspace', 'gateways', 'agents', 'secrets', 'source_connections',
    'knowledge_folders', 'knowledge_items', 'contacts', 'collections', 'collection_records',
    'tasks', 'task_relations', 'task_comments', 'work_products', 'routines', 'plugins']
  LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC, anon, authenticated', t);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO authenticated', t);
    EXECUTE format('GRANT ALL ON public.%I TO service_role', t);
    EXECUTE format('CREATE POLICY tenant_isolation ON public.%I FOR ALL TO authenticated '
                   'USING (tenant_id = (SELECT public.current_tenant_id())) '
                   'WITH CHECK (tenant_id = (SELECT public.current_tenant_id()))', t);
    EXECUTE format('CREATE POLICY service_role_all ON public.%I FOR ALL TO service_role '
                   'USING (true) WITH CHECK (true)', t);
  END LOOP;
END
$$;

-- Tables written only by daemons and RPCs: authenticated may read its tenant's rows.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['knowledge_chunks', 'knowledge_item_versions', 'agent_inbox_items',
    'agent_usage', 'daemon_heartbeats']
  LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC, anon, authenticated', t);
    EXECUTE format('GRANT SELECT ON public.%I TO authenticated', t);
    EXECUTE format('GRANT ALL ON public.%I TO service_role', t);
    EXECUTE format('CREATE POLICY tenant_read ON public.%I FOR SELECT TO authenticated '
                   'USING (tenant_id = (SELECT public.current_tenant_id()))', t);
    EXECUTE format('CREATE POLICY service_role_all ON public.%I FOR ALL TO service_role '
                   'USING (true) WITH CHECK (true)', t);
  END LOOP;
END
$$;

-- Commands: a user enqueues (status pending, no lease) and may cancel a command that has not
-- started; everything else goes through the runner's RPCs.
ALTER TABLE public.agent_commands ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON public.agent_commands FROM PUBLIC, anon, authenticated;
GRANT SELECT ON public.agent_commands TO authenticated;
GRANT INSERT (id, tenant_id, agent_id, agent_slug, gateway_id, action, payload, status, requested_by,
              meta) ON public.agent_commands TO authenticated;
GRANT UPDATE (status) ON public.agent_commands TO authenticated;
GRANT ALL ON public.agent_commands TO service_role;
CREATE POLICY tenant_read ON public.agent_commands FOR SELECT TO authenticated
  USING (tenant_id = (SELECT public.current_tenant_id()));
CREATE POLICY tenant_enqueue ON public.agent_commands FOR INSERT TO authenticated
  WITH CHECK (tenant_id = (SELECT public.current_tenant_id()) AND status = 'pending');
CREATE POLICY tenant_cancel ON public.agent_commands FOR UPDATE TO authenticated
  USING (tenant_id = (SELECT public.current_tenant_id()) AND status IN ('pending', 'leased'))
  WITH CHECK (tenant_id = (SELECT public.current_tenant_id()) AND status = 'cancelled');
CREATE POLICY service_role_all ON public.agent_commands FOR ALL TO service_role
  USING (true) WITH CHECK (true);

-- Service role only: token hashes and login users.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['gateway_registration_tokens', 'app_users']
  LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC, anon, authenticated', t);
    EXECUTE format('GRANT ALL ON public.%I TO service_role', t);
    EXECUTE format('CREATE POLICY service_role_all ON public.%I FOR ALL TO service_role '
                   'USING (true) WITH CHECK (true)', t);
  END LOOP;
END
$$;

-- FORCE: the table owner is subject to the policies too, on every table that no SECURITY
-- DEFINER function of ours reads or writes (those run as the owner on purpose: token exchange,
-- inbox producers, escalation, routine triggers, skill versions).
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['tenants', 'workspace', 'secrets', 'source_connections',
    'knowledge_folders', 'knowledge_chunks', 'contacts', 'collections', 'collection_records',
    'plugins', 'agent_commands', 'agent_usage', 'daemon_heartbeats', 'app_users']
  LOOP
    EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', t);
  END LOOP;
END
$$;
