-- No tenant, no data. A session of role authenticated (or anon) whose claims carry no tenant
-- (what every fresh sign-up of a hosted Supabase project gets) used to be served as the default
-- tenant. current_tenant_id() now returns NULL for it: every policy `tenant_id =
-- current_tenant_id()` matches nothing, and an INSERT that relies on the column default is
-- refused with AW009 "the session has no tenant (app_metadata.tenant_id)".
-- The default tenant stays the fallback for the service role, its members (the daemons'
-- awp_daemon), superusers and any other role: they write the rows of the default tenant on a
-- single host (the seeded `default` gateway, awpctl, the migrations, issue_gateway_token).

-- Still one plain SQL function with no table reads (the claims first; the role is looked at
-- only when the claims carry no tenant, through the role-membership cache), STABLE, so each
-- policy's `(SELECT public.current_tenant_id())` stays a one-time InitPlan per statement.
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
      ELSE '00000000-0000-0000-0000-000000000000'::uuid
    END)
  FROM (SELECT NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb AS c) AS claims
$$;

-- Raised where a row needs the session's tenant and there is none. Called only on that path.
CREATE FUNCTION public.awp_no_tenant() RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
BEGIN
  RAISE EXCEPTION 'the session has no tenant (app_metadata.tenant_id)'
    USING ERRCODE = 'AW009',
          HINT = 'sign in with an account that belongs to a tenant, or pass tenant_id explicitly as the service role';
END
$$;

-- The column default of every tenant_id: the session's tenant, or AW009. Plain SQL; the
-- plpgsql raiser runs only when there is no tenant.
CREATE FUNCTION public.awp_session_tenant_id() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT COALESCE(public.current_tenant_id(), public.awp_no_tenant())
$$;

REVOKE ALL ON FUNCTION public.awp_no_tenant() FROM PUBLIC, anon;
REVOKE ALL ON FUNCTION public.awp_session_tenant_id() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_no_tenant() TO authenticated, service_role;
GRANT EXECUTE ON FUNCTION public.awp_session_tenant_id() TO authenticated, service_role;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN
    SELECT c.relname FROM pg_catalog.pg_attrdef d
      JOIN pg_catalog.pg_class c ON c.oid = d.adrelid
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      JOIN pg_catalog.pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
     WHERE n.nspname = 'public' AND a.attname = 'tenant_id'
       AND pg_catalog.pg_get_expr(d.adbin, d.adrelid) ~ '^(public\.)?current_tenant_id\(\)$'
     ORDER BY 1
  LOOP
    EXECUTE format('ALTER TABLE public.%I ALTER COLUMN tenant_id SET DEFAULT public.awp_session_tenant_id()',
                   t.relname);
  END LOOP;
END
$$;
