-- Gateway credentials: a gateway host holds only its own keys (docs/security.md, "Gateway
-- credentials"). Each gateway's daemons (runner, dispatcher, embedder) log in with a Postgres role
-- of their own, `awp_gw_<gateway id, 32 hex>`, a member of the NOLOGIN group `awp_gateway`, which
-- has no BYPASSRLS and is not a member of service_role. `public.gateway_roles` binds the login
-- role to its gateway; every policy below admits the rows of that one gateway (queue rows,
-- agents, secrets, heartbeats) or of its tenant (what its agents work on: knowledge, tasks,
-- source connections). The RPCs the daemons call run with the caller's rights, so they see and
-- change those rows and no others: another gateway's command, item, slug or id is "not found".
-- Roles are made by `awpctl gateway credential` through awp_gateway_role() (an administrator's
-- session: CREATEROLE), never by a gateway.

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awp_gateway') THEN
    CREATE ROLE awp_gateway NOLOGIN NOBYPASSRLS;
  END IF;
END
$$;
GRANT USAGE ON SCHEMA public TO awp_gateway;

CREATE TABLE public.gateway_roles (
  role_name name PRIMARY KEY CHECK (role_name ~ '^awp_gw_[a-z0-9_]{1,56}$'),
  tenant_id uuid NOT NULL,
  gateway_id uuid NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  rotated_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (tenant_id, gateway_id) REFERENCES public.gateways (tenant_id, id) ON DELETE CASCADE
);
ALTER TABLE public.gateway_roles ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON public.gateway_roles FROM PUBLIC, anon, authenticated;
GRANT SELECT ON public.gateway_roles TO service_role;
CREATE POLICY service_role_all ON public.gateway_roles FOR SELECT TO service_role USING (true);

-- The session's gateway and its tenant: the login role (session_user, which SET ROLE does not
-- change) looked up in gateway_roles, where a gateway role reads its own row only; NULL for every
-- other role. The policies below spell the lookup out as a subquery, one index probe per
-- statement (an InitPlan): called through a function it cost ~0.1 ms per statement, a third of
-- the queue's throughput (bench/runner). The functions are for everything else.
GRANT SELECT ON public.gateway_roles TO awp_gateway;
CREATE POLICY own_role ON public.gateway_roles FOR SELECT TO awp_gateway
  USING (role_name = session_user);

CREATE FUNCTION public.awp_session_gateway() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT r.gateway_id FROM public.gateway_roles r
   WHERE r.role_name OPERATOR(pg_catalog.=) session_user
$$;

CREATE FUNCTION public.awp_session_gateway_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT r.tenant_id FROM public.gateway_roles r
   WHERE r.role_name OPERATOR(pg_catalog.=) session_user
$$;

REVOKE ALL ON FUNCTION public.awp_session_gateway() FROM PUBLIC, anon, authenticated;
REVOKE ALL ON FUNCTION public.awp_session_gateway_tenant() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_session_gateway() TO awp_gateway, service_role;
-- current_tenant_id() names it, so whoever may call that needs it (it answers NULL for them).
GRANT EXECUTE ON FUNCTION public.awp_session_gateway_tenant() TO awp_gateway, service_role,
  authenticated;

-- A gateway role's tenant is its gateway's (the column defaults and the RPCs that take the
-- session's tenant); otherwise as in sql/0017. Still one SQL function: the lookup runs only for a
-- member of awp_gateway.
CREATE OR REPLACE FUNCTION public.current_tenant_id() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT COALESCE(
    NULLIF(c -> 'app_metadata' ->> 'tenant_id', '')::uuid,
    NULLIF(c ->> 'tenant_id', '')::uuid,
    CASE
      WHEN pg_catalog.pg_has_role(current_user, 'service_role', 'MEMBER')
        THEN '00000000-0000-0000-0000-000000000000'::uuid
      WHEN pg_catalog.pg_has_role(current_user, 'authenticated', 'MEMBER')
        OR pg_catalog.pg_has_role(current_user, 'anon', 'MEMBER')
        THEN NULL
      WHEN pg_catalog.pg_has_role(current_user, 'awp_gateway', 'MEMBER')
        THEN public.awp_session_gateway_tenant()
      ELSE '00000000-0000-0000-0000-000000000000'::uuid
    END)
  FROM (SELECT NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb AS c) AS claims
$$;
GRANT EXECUTE ON FUNCTION public.current_tenant_id() TO awp_gateway;

-- Table privileges and policies of a gateway role, one row per table: the privileges, the
-- command the policy covers, and whose rows: its gateway's (`gateway`: the column naming the
-- gateway) or its tenant's (`tenant`). Each lookup of the session's gateway is an InitPlan,
-- evaluated once per statement.
DO $$
DECLARE
  r record;
  v_rows text;
BEGIN
  FOR r IN SELECT * FROM (VALUES
    -- Its gateway's row: only the heartbeat columns are writable.
    ('gateways', 'SELECT, UPDATE (last_seen_at, last_heartbeat_at, status)', 'ALL', 'gateway', 'id'),
    ('agents', 'SELECT', 'SELECT', 'gateway', 'gateway_id'),
    -- Secrets: gateway-wide and of its agents; it writes only the sync status.
    ('secrets', 'SELECT, UPDATE (sync_status, sync_error, last_synced_at)', 'ALL', 'gateway', 'gateway_id'),
    -- Queues: leases and transitions go through the RPCs; no INSERT, no DELETE.
    ('agent_commands', 'SELECT, UPDATE', 'ALL', 'gateway', 'gateway_id'),
    ('agent_inbox_items', 'SELECT, UPDATE', 'ALL', 'gateway', 'gateway_id'),
    ('daemon_heartbeats', 'SELECT, INSERT, UPDATE', 'ALL', 'gateway', 'gateway_id'),
    -- What its agents work on, of its tenant: knowledge to embed, tasks an inbox item names,
    -- the source connections source_write uses.
    ('knowledge_items', 'SELECT, UPDATE', 'ALL', 'tenant', 'tenant_id'),
    ('knowledge_chunks', 'SELECT, INSERT, UPDATE, DELETE', 'ALL', 'tenant', 'tenant_id'),
    ('tasks', 'SELECT', 'SELECT', 'tenant', 'tenant_id'),
    ('task_relations', 'SELECT', 'SELECT', 'tenant', 'tenant_id'),
    ('source_connections', 'SELECT', 'SELECT', 'tenant', 'tenant_id'),
    ('tenants', 'SELECT', 'SELECT', 'tenant', 'id'))
    AS t (tbl, privileges, cmd, whose, col)
  LOOP
    EXECUTE format('GRANT %s ON public.%I TO awp_gateway', r.privileges, r.tbl);
    -- The rows it may see and write: the table's column against the session's binding.
    v_rows := format('%I = (SELECT g.%I FROM public.gateway_roles g WHERE g.role_name = session_user)',
                     r.col, CASE WHEN r.whose = 'gateway' THEN 'gateway_id' ELSE 'tenant_id' END);
    EXECUTE format('CREATE POLICY %I ON public.%I FOR %s TO awp_gateway USING (%s)%s',
                   CASE WHEN r.whose = 'gateway' THEN 'gateway_own' ELSE 'gateway_tenant' END,
                   r.tbl, r.cmd, v_rows,
                   CASE WHEN r.cmd = 'ALL' THEN ' WITH CHECK (' || v_rows || ')' ELSE '' END);
  END LOOP;
END
$$;

-- The RPCs of the runner, the dispatcher and the embedder, and the helpers they call with the
-- caller's rights. Nothing else: not the registration tokens, the scheduler's sweeps over every
-- gateway (reap_expired_leases, spawn_routine_schedule_items, escalate_overdue_tasks), nor any
-- user RPC.
DO $$
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY[
    'awp_resolve_gateway(text, uuid)', 'awp_session_tenant_id()', 'awp_no_tenant()',
    'awp_sha256_hex(text)', 'awp_text_array_to_string(text[])',
    'daemon_heartbeat(text, text, text, integer, text, timestamptz, jsonb, uuid)',
    'awp_expire_command_leases(uuid)', 'awp_jsonb_patch(jsonb, jsonb)',
    'awp_command_for_transition(uuid, text, public.command_status[], uuid)',
    'awp_command_transition_refused(uuid, text, public.command_status[], uuid)',
    'lease_command(integer, text, text, uuid)',
    'lease_and_start_command(integer, text, text, uuid)',
    'start_command(uuid, uuid, integer)', 'extend_command_lease(uuid, uuid, integer)',
    'patch_command_payload(uuid, jsonb, uuid)',
    'complete_command(uuid, integer, text, text, uuid, jsonb)',
    'fail_command(uuid, integer, text, uuid, text, text, jsonb)',
    'awp_expire_inbox_leases(uuid)', 'awp_inbox_backoff(integer)',
    'awp_inbox_item_for_transition(uuid, text, uuid)',
    'lease_inbox_item(uuid, integer, text)', 'complete_inbox_item(uuid, uuid)',
    'fail_inbox_item(uuid, text, uuid, integer)', 'get_task_relations(uuid)',
    'awp_embedding_backoff(integer)', 'awp_embedding_max_attempts()', 'awp_expire_knowledge_leases()',
    'awp_knowledge_item_for_mark(uuid, text, uuid, text)',
    'lease_knowledge_items_for_indexing(text, integer, integer, uuid, text)',
    'mark_knowledge_item_failed(uuid, text, uuid, text)']
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION public.%s TO awp_gateway', f);
  END LOOP;
  -- finish_and_lease_command and mark_knowledge_item_indexed: every overload.
  FOR f IN
    SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'public'
       AND p.proname IN ('finish_and_lease_command', 'mark_knowledge_item_indexed')
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO awp_gateway', f);
  END LOOP;
END
$$;

-- Creates the login role of a gateway, or sets a new password on it (rotation), and binds it to
-- the gateway. For an administrator's session only (CREATEROLE; executable by no API role).
-- The role is awp_gw_<gateway id, 32 hex> unless p_role names one (awp_gw_<a-z0-9_>: a stack
-- that must know it in advance, such as the compose file); binding the gateway to another role
-- unbinds the one before. p_password is best a SCRAM verifier ("SCRAM-SHA-256$...", what awpctl
-- sends: the password itself never reaches the server), stored as it is; a plain password is
-- hashed by the server (password_encryption).
CREATE FUNCTION public.awp_gateway_role(p_gateway text, p_password text, p_role text DEFAULT NULL)
RETURNS TABLE (role_name text, gateway_id uuid, tenant_id uuid, slug text)
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_gateway uuid := public.awp_resolve_gateway(p_gateway, NULL);
  v_tenant uuid;
  v_slug text;
  v_role text;
BEGIN
  IF p_password IS NULL OR length(p_password) < 24 THEN
    RAISE EXCEPTION 'awp_gateway_role: the password must have at least 24 characters'
      USING ERRCODE = 'AW004';
  END IF;
  SELECT g.tenant_id, g.slug INTO v_tenant, v_slug FROM public.gateways g WHERE g.id = v_gateway;
  IF p_role IS NOT NULL AND p_role !~ '^awp_gw_[a-z0-9_]{1,56}$' THEN
    RAISE EXCEPTION 'awp_gateway_role: a role name is awp_gw_ and 1 to 56 of a-z 0-9 _, got "%"', p_role
      USING ERRCODE = 'AW004';
  END IF;
  v_role := coalesce(p_role, 'awp_gw_' || replace(v_gateway::text, '-', ''));
  IF EXISTS (SELECT 1 FROM public.gateway_roles r WHERE r.role_name = v_role AND r.gateway_id <> v_gateway) THEN
    RAISE EXCEPTION 'awp_gateway_role: role % already belongs to another gateway', v_role
      USING ERRCODE = 'AW004';
  END IF;
  DELETE FROM public.gateway_roles r WHERE r.gateway_id = v_gateway AND r.role_name <> v_role;
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = v_role) THEN
    EXECUTE format('ALTER ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS '
                   'NOREPLICATION INHERIT PASSWORD %L', v_role, p_password);
  ELSE
    EXECUTE format('CREATE ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS '
                   'NOREPLICATION INHERIT PASSWORD %L', v_role, p_password);
  END IF;
  EXECUTE format('GRANT awp_gateway TO %I', v_role);
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', pg_catalog.current_database(), v_role);
  INSERT INTO public.gateway_roles AS r (role_name, tenant_id, gateway_id)
  VALUES (v_role, v_tenant, v_gateway)
  ON CONFLICT ON CONSTRAINT gateway_roles_pkey DO UPDATE SET rotated_at = now();
  RETURN QUERY SELECT v_role, v_gateway, v_tenant, v_slug;
END
$$;
REVOKE ALL ON FUNCTION public.awp_gateway_role(text, text, text)
  FROM PUBLIC, anon, authenticated, service_role;
