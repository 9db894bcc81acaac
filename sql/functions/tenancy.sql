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
-- pool login, the gateway its transaction claimed with a key (awp_claim_gateway, sql/0026); NULL
-- for every other role. The policies spell the same lookups out as subqueries (InitPlans, run
-- once per statement, the claim's only when there is no binding); these functions are for
-- everything else.
CREATE OR REPLACE FUNCTION public.awp_session_gateway() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE((SELECT r.gateway_id FROM public.gateway_roles r
                    WHERE r.role_name OPERATOR(pg_catalog.=) session_user),
                  public.awp_claimed_gateway())
$$;
REVOKE ALL ON FUNCTION public.awp_session_gateway() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_session_gateway() TO awp_gateway, service_role;

CREATE OR REPLACE FUNCTION public.awp_session_gateway_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE((SELECT r.tenant_id FROM public.gateway_roles r
                    WHERE r.role_name OPERATOR(pg_catalog.=) session_user),
                  public.awp_claimed_gateway_tenant())
$$;
REVOKE ALL ON FUNCTION public.awp_session_gateway_tenant() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_session_gateway_tenant() TO authenticated, awp_gateway, service_role;

-- Gateway keys (sql/0026, docs/security.md "Gateway keys"): a pool login's transaction presents
-- its gateway's key first and acts as that gateway until it ends.
-- The mac of a claim of p_gateway (of p_tenant) by this backend in this transaction. Only the
-- owner executes it (from the SECURITY DEFINER functions below).
CREATE OR REPLACE FUNCTION public.awp_claim_mac(p_gateway uuid, p_tenant uuid) RETURNS text
LANGUAGE sql STABLE
SET search_path = ''
AS $$
  SELECT encode(sha256(s.opad || sha256(s.ipad || convert_to(
           p_gateway::text || ':' || p_tenant::text || ':' || pg_backend_pid()::text || ':'
           || (extract(epoch FROM transaction_timestamp()) * 1000000)::bigint::text, 'UTF8'))), 'hex')
    FROM public.gateway_claim_secret s
$$;
REVOKE ALL ON FUNCTION public.awp_claim_mac(uuid, uuid) FROM PUBLIC, anon, authenticated, service_role;

-- The gateway (and its tenant) this transaction has claimed with a key, or NULL: a setting that
-- is missing, malformed, or whose mac does not verify names nobody.
CREATE OR REPLACE FUNCTION public.awp_claimed_gateway() RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = ''
AS $$
  SELECT CASE WHEN split_part(c, ':', 3) = public.awp_claim_mac(split_part(c, ':', 1)::uuid,
                                                                split_part(c, ':', 2)::uuid)
              THEN split_part(c, ':', 1)::uuid END
    FROM (SELECT current_setting('awp.gateway_claim', true) AS c) s
   WHERE c ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9a-f]{64}$'
$$;
REVOKE ALL ON FUNCTION public.awp_claimed_gateway() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_claimed_gateway() TO awp_gateway, service_role;

CREATE OR REPLACE FUNCTION public.awp_claimed_gateway_tenant() RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = ''
AS $$
  SELECT CASE WHEN split_part(c, ':', 3) = public.awp_claim_mac(split_part(c, ':', 1)::uuid,
                                                                split_part(c, ':', 2)::uuid)
              THEN split_part(c, ':', 2)::uuid END
    FROM (SELECT current_setting('awp.gateway_claim', true) AS c) s
   WHERE c ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9a-f]{64}$'
$$;
REVOKE ALL ON FUNCTION public.awp_claimed_gateway_tenant() FROM PUBLIC, anon;
-- current_tenant_id() names it through awp_session_gateway_tenant(), as in sql/0023.
GRANT EXECUTE ON FUNCTION public.awp_claimed_gateway_tenant() TO authenticated, awp_gateway, service_role;

-- Presents a gateway key: the rest of this transaction acts as that gateway. For a pool login
-- (a member of awp_gateway bound to no gateway); a gateway's own login is its gateway and claims
-- nothing. A malformed key is AW004; a key that is not the gateway's current one, or of a gateway
-- that does not exist, is 42501 with one message for both.
CREATE OR REPLACE FUNCTION public.awp_claim_gateway(p_key text) RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_gateway uuid;
  v_tenant uuid;
BEGIN
  IF p_key IS NULL OR p_key !~ '^awpk_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$' THEN
    RAISE EXCEPTION 'awp_claim_gateway: not a gateway key (awpk_<32 hex>_<43 base64url characters>)'
      USING ERRCODE = 'AW004';
  END IF;
  IF EXISTS (SELECT 1 FROM public.gateway_roles r WHERE r.role_name = session_user) THEN
    RAISE EXCEPTION 'awp_claim_gateway: login % is bound to its own gateway; keys are for a pool login',
      session_user USING ERRCODE = '42501';
  END IF;
  v_gateway := substr(p_key, 6, 32)::uuid;
  SELECT k.tenant_id INTO v_tenant FROM public.gateway_keys k
   WHERE k.gateway_id = v_gateway
     AND k.secret_sha256 = sha256(convert_to(substr(p_key, 39), 'UTF8'));
  IF v_tenant IS NULL THEN
    RAISE EXCEPTION 'awp_claim_gateway: gateway key refused' USING ERRCODE = '42501';
  END IF;
  PERFORM set_config('awp.gateway_claim',
                     v_gateway::text || ':' || v_tenant::text || ':' || public.awp_claim_mac(v_gateway, v_tenant),
                     true);
  RETURN v_gateway;
END
$$;
REVOKE ALL ON FUNCTION public.awp_claim_gateway(text) FROM PUBLIC, anon, authenticated, service_role;
GRANT EXECUTE ON FUNCTION public.awp_claim_gateway(text) TO awp_gateway;
