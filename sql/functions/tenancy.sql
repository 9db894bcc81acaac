-- Tenancy and sessions: the session's tenant, operator and gateway.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- The session's tenant: the claims' app_metadata.tenant_id, else their tenant_id; without
-- one, the default tenant for the service role (and the daemons, superusers, other roles), NULL
-- for authenticated and anon (no tenant, no data), and the gateway's tenant for a gateway role
-- (a member of awp_gateway). '' counts as missing; a claim that is not a uuid raises 22P02.
-- One SQL function: the gateway lookup runs only for a member of awp_gateway.
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
REVOKE ALL ON FUNCTION public.current_tenant_id() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.current_tenant_id() TO authenticated, awp_gateway, service_role;

-- An operator (who may change a host's configuration rather than a tenant's rows): the service
-- role, or a session whose verified claims carry app_metadata.awp_role = "operator".
CREATE OR REPLACE FUNCTION public.current_is_operator() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT pg_catalog.pg_has_role(current_user, 'service_role', 'MEMBER')
      OR coalesce(NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb
                    -> 'app_metadata' ->> 'awp_role' = 'operator', false)
$$;
REVOKE ALL ON FUNCTION public.current_is_operator() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.current_is_operator() TO authenticated, service_role;

-- Raised where a row needs the session's tenant and there is none. Called only on that path.
CREATE OR REPLACE FUNCTION public.awp_no_tenant() RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
BEGIN
  RAISE EXCEPTION 'the session has no tenant (app_metadata.tenant_id)'
    USING ERRCODE = 'AW009',
          HINT = 'sign in with an account that belongs to a tenant, or pass tenant_id explicitly as the service role';
END
$$;
REVOKE ALL ON FUNCTION public.awp_no_tenant() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_no_tenant() TO authenticated, awp_gateway, service_role;

-- The column default of every tenant_id: the session's tenant, or AW009. Plain SQL; the
-- plpgsql raiser runs only when there is no tenant.
CREATE OR REPLACE FUNCTION public.awp_session_tenant_id() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT COALESCE(public.current_tenant_id(), public.awp_no_tenant())
$$;
REVOKE ALL ON FUNCTION public.awp_session_tenant_id() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_session_tenant_id() TO authenticated, awp_gateway, service_role;

-- The session's gateway and its tenant: the login role (session_user, which SET ROLE does not
-- change) looked up in gateway_roles, where a gateway role reads its own row only; NULL for
-- every other role. The policies spell the lookup out as a subquery (an InitPlan, one index
-- probe per statement); these functions are for everything else.
CREATE OR REPLACE FUNCTION public.awp_session_gateway() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT r.gateway_id FROM public.gateway_roles r
   WHERE r.role_name OPERATOR(pg_catalog.=) session_user
$$;
REVOKE ALL ON FUNCTION public.awp_session_gateway() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_session_gateway() TO awp_gateway, service_role;

CREATE OR REPLACE FUNCTION public.awp_session_gateway_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT r.tenant_id FROM public.gateway_roles r
   WHERE r.role_name OPERATOR(pg_catalog.=) session_user
$$;
REVOKE ALL ON FUNCTION public.awp_session_gateway_tenant() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_session_gateway_tenant() TO authenticated, awp_gateway, service_role;
