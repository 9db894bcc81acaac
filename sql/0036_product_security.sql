-- Row-level security and privileges of the product's tables (sql/0035), as awp's other tables
-- have them (sql/0004): authenticated sees and writes its own tenant's rows only, the service
-- role everything, and the table owner is held to the policies too (FORCE, where no SECURITY
-- DEFINER function of ours writes the table). Every privilege is granted explicitly.
--
-- anon may SELECT the product's tables and the workspace row's table, as on a hosted project,
-- where a signed-out client reading them (the product's UI reads workspace before sign-in) gets
-- an empty answer (200 []) rather than a privilege error: no policy names anon, so it sees no row
-- of any of them. awp's other tables keep refusing anon (401 42501), credentials (secrets,
-- gateway_registration_tokens, app_*) and tenants first. docs/security.md, "Tenants in SQL".

-- Tenant tables the UI manages: full CRUD for authenticated, limited by RLS.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['streams', 'task_series', 'labels', 'task_labels', 'task_templates',
    'campaigns', 'organizations', 'templates', 'contact_organizations', 'pipeline_stages',
    'field_definitions', 'interactions', 'draft_sets', 'comments', 'entity_links',
    'notifications', 'collection_fields', 'collection_views', 'agent_budgets',
    'knowledge_item_agents', 'hq_plugins']
  LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
    -- FORCE but where SECURITY DEFINER producers act as the owner: entity_links (its
    -- deliverables' review, sql/0038, reads them) and notifications (tasks those producers move
    -- notify).
    IF t NOT IN ('notifications', 'entity_links') THEN
      EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', t);
    END IF;
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

-- A plugin's webhook secret is not for the browser: authenticated reads every other column (the
-- product's column grant), and writes the row.
REVOKE SELECT ON public.hq_plugins FROM authenticated;
GRANT SELECT (id, tenant_id, plugin_id, name, description, version, source, is_enabled, hooks,
              entry_module, webhook_url, config, config_schema, capabilities, installed_by, meta,
              created_at, updated_at) ON public.hq_plugins TO authenticated;

-- The audit log is append-only for users: they read and add their tenant's entries, nobody but
-- the service role changes or removes one.
ALTER TABLE public.audit_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.audit_log FORCE ROW LEVEL SECURITY;
REVOKE ALL ON public.audit_log FROM PUBLIC, anon, authenticated;
GRANT SELECT, INSERT ON public.audit_log TO authenticated;
GRANT ALL ON public.audit_log TO service_role;
CREATE POLICY tenant_read ON public.audit_log FOR SELECT TO authenticated
  USING (tenant_id = (SELECT public.current_tenant_id()));
CREATE POLICY tenant_append ON public.audit_log FOR INSERT TO authenticated
  WITH CHECK (tenant_id = (SELECT public.current_tenant_id()));
CREATE POLICY service_role_all ON public.audit_log FOR ALL TO service_role
  USING (true) WITH CHECK (true);

-- Written by what runs plugins and syncs sources (the service role); users read their tenant's.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['hq_plugin_events', 'source_sync_runs']
  LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', t);
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

-- The same for every tenant: users read, the service role writes.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['collection_templates', '_schema_version']
  LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC, anon, authenticated', t);
    EXECUTE format('GRANT SELECT ON public.%I TO authenticated', t);
    EXECUTE format('GRANT ALL ON public.%I TO service_role', t);
    EXECUTE format('CREATE POLICY read_all ON public.%I FOR SELECT TO authenticated USING (true)', t);
    EXECUTE format('CREATE POLICY service_role_all ON public.%I FOR ALL TO service_role '
                   'USING (true) WITH CHECK (true)', t);
  END LOOP;
END
$$;

-- anon: SELECT where no policy gives it a row.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['workspace', 'streams', 'task_series', 'labels', 'task_labels',
    'task_templates', 'campaigns', 'organizations', 'templates', 'contact_organizations',
    'pipeline_stages', 'field_definitions', 'interactions', 'draft_sets', 'comments',
    'entity_links', 'notifications', 'audit_log', 'collection_fields', 'collection_views',
    'collection_templates', 'agent_budgets', 'knowledge_item_agents', 'hq_plugin_events',
    'source_sync_runs', '_schema_version']
  LOOP
    EXECUTE format('GRANT SELECT ON public.%I TO anon', t);
  END LOOP;
END
$$;
-- hq_plugins' readable columns, as for authenticated.
GRANT SELECT (id, tenant_id, plugin_id, name, description, version, source, is_enabled, hooks,
              entry_module, webhook_url, config, config_schema, capabilities, installed_by, meta,
              created_at, updated_at) ON public.hq_plugins TO anon;
