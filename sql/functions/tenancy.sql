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
-- change) looked up in gateway_roles, where a gateway role reads its own row only; else, for a
-- pool login, the gateway whose key its transaction presented (awp_present_gateway_key,
-- sql/0026), looked up in gateway_keys by the key's SHA-256; NULL for every other role. The
-- policies spell the same lookups out as subqueries (InitPlans, run once per statement, the key's
-- only when there is no binding); these functions are for everything else.
CREATE OR REPLACE FUNCTION public.awp_session_gateway() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE((SELECT r.gateway_id FROM public.gateway_roles r
                    WHERE r.role_name OPERATOR(pg_catalog.=) session_user),
                  (public.awp_key_binding()).gateway_id)
$$;
REVOKE ALL ON FUNCTION public.awp_session_gateway() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_session_gateway() TO awp_gateway, service_role;

CREATE OR REPLACE FUNCTION public.awp_session_gateway_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE((SELECT r.tenant_id FROM public.gateway_roles r
                    WHERE r.role_name OPERATOR(pg_catalog.=) session_user),
                  (public.awp_key_binding()).tenant_id)
$$;
REVOKE ALL ON FUNCTION public.awp_session_gateway_tenant() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_session_gateway_tenant() TO authenticated, awp_gateway, service_role;

-- Gateway keys (sql/0026, docs/security.md "Gateway keys"): a pool login's transaction presents
-- its gateway's key first and acts as that gateway until it ends.
-- This transaction's mark: its start, in microseconds since the epoch.
CREATE OR REPLACE FUNCTION public.awp_transaction_mark() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT ((pg_catalog.date_part('epoch', pg_catalog.transaction_timestamp())
           OPERATOR(pg_catalog.*) 1000000)::bigint)::text
$$;
REVOKE ALL ON FUNCTION public.awp_transaction_mark() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_transaction_mark() TO authenticated, awp_gateway, service_role;

-- Presents a gateway key for the rest of this transaction (awp.gateway_key = "<key>:<mark>").
-- It checks nothing itself: a key that is malformed, refused or of a deleted gateway makes the
-- transaction nobody's, as if none were presented. plpgsql: its plan stays cached for the
-- session (an inlined SQL function would be parsed again with every statement). Returns ''.
CREATE OR REPLACE FUNCTION public.awp_present_gateway_key(p_key text) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = ''
AS $$
BEGIN
  PERFORM set_config('awp.gateway_key', concat(p_key, ':', public.awp_transaction_mark()), true);
  RETURN '';
END
$$;
REVOKE ALL ON FUNCTION public.awp_present_gateway_key(text) FROM PUBLIC, anon, authenticated, service_role;
GRANT EXECUTE ON FUNCTION public.awp_present_gateway_key(text) TO awp_gateway;

-- The gateway (and its tenant) whose current key this transaction presented, or NULLs: the
-- setting must be "<key>:<mark>" with this transaction's mark and a well-formed key (nothing
-- malformed is cast), then one index probe on gateway_keys as the owner for the key's gateway
-- and its secret's SHA-256. The policies call it as an InitPlan only when the login has no
-- binding of its own; plpgsql, so a policy that names it stays cheap to plan.
CREATE OR REPLACE FUNCTION public.awp_key_binding(OUT gateway_id uuid, OUT tenant_id uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v text := current_setting('awp.gateway_key', true);
BEGIN
  IF length(v) > 82 AND substr(v, 82) = concat(':', public.awp_transaction_mark())
     AND left(v, 5) = 'awpk_' AND substr(v, 38, 1) = '_'
     AND translate(substr(v, 6, 32), '0123456789abcdef', '') = '' THEN
    SELECT k.gateway_id, k.tenant_id INTO gateway_id, tenant_id FROM public.gateway_keys k
     WHERE k.gateway_id = substr(v, 6, 32)::uuid
       AND k.secret_sha256 = sha256(convert_to(substr(v, 39, 43), 'UTF8'));
  END IF;
END
$$;
REVOKE ALL ON FUNCTION public.awp_key_binding() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_key_binding() TO authenticated, awp_gateway, service_role;
