-- Gateway keys: many gateway hosts on one pooled login, each still confined to its own gateway
-- (issue 21, docs/security.md "Gateway keys", docs/scale.md). PgBouncer pools per login, so one
-- login per host (sql/0023) gives 1,000 hosts 1,000 pools that reopen server connections on
-- nearly every transaction. Here a host may instead log in with a shared pool login
-- (`awp_pool_*`, a member of awp_gateway bound to no gateway: it sees and changes nothing on its
-- own) and present its gateway's key as the first statement of every transaction, in the same
-- pipeline as the statement itself (libs/core pg::connection::set_gateway_key):
--
--   SELECT public.awp_claim_gateway('awpk_<gateway id, 32 hex>_<secret>');
--
-- awp_claim_gateway checks the key against its SHA-256 (the database never holds the key) and
-- sets the transaction-local setting awp.gateway_claim to "<gateway>:<tenant>:<mac>", where the
-- mac is an HMAC-SHA-256, under a secret only the schema owner can read, of the gateway, its
-- tenant, the backend and the transaction's start. Anyone can set the setting; nobody without the
-- secret can make a mac that verifies, and one made for another backend or transaction does not.
-- The policies of sql/0023 take the session's gateway from the login's binding, else from a
-- claim that verifies (awp_claimed_gateway): a bound login never reaches the second lookup (the
-- COALESCE stops at its binding), so a host with its own login pays nothing for this.

-- The keys: a SHA-256 of each gateway's secret, made by an administrator (awp_gateway_key).
-- Nobody but the owner reads the hash; the service role may see which gateways have a key and
-- since when (those columns only).
CREATE TABLE public.gateway_keys (
  gateway_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  secret_sha256 bytea NOT NULL CHECK (length(secret_sha256) = 32),
  created_at timestamptz NOT NULL DEFAULT now(),
  rotated_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (tenant_id, gateway_id) REFERENCES public.gateways (tenant_id, id) ON DELETE CASCADE
);
ALTER TABLE public.gateway_keys ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON public.gateway_keys FROM PUBLIC, anon, authenticated, service_role;
GRANT SELECT (gateway_id, tenant_id, created_at, rotated_at) ON public.gateway_keys TO service_role;
CREATE POLICY service_role_all ON public.gateway_keys FOR SELECT TO service_role USING (true);

-- The claims' HMAC key, 32 random bytes made here, kept as the two padded keys of HMAC-SHA-256
-- (RFC 2104: key XOR 0x36.., key XOR 0x5c.., 64 bytes each) so a claim costs two sha256 calls
-- and no extension. One row. Nobody but the owner reads it.
CREATE TABLE public.gateway_claim_secret (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  ipad bytea NOT NULL CHECK (length(ipad) = 64),
  opad bytea NOT NULL CHECK (length(opad) = 64)
);
ALTER TABLE public.gateway_claim_secret ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON public.gateway_claim_secret FROM PUBLIC, anon, authenticated, service_role;

DO $$
DECLARE
  -- gen_random_uuid draws from pg_strong_random: 244 random bits in, 256 bits out.
  k bytea := sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'))
             || '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
  i bytea := k;
  o bytea := k;
BEGIN
  FOR n IN 0..63 LOOP
    i := set_byte(i, n, get_byte(k, n) # 54);  -- 0x36
    o := set_byte(o, n, get_byte(k, n) # 92);  -- 0x5c
  END LOOP;
  INSERT INTO public.gateway_claim_secret (ipad, opad) VALUES (i, o);
END
$$;

-- The mac of a claim of p_gateway (of p_tenant) by this backend in this transaction. Only the
-- owner executes it (from the SECURITY DEFINER functions below).
CREATE FUNCTION public.awp_claim_mac(p_gateway uuid, p_tenant uuid) RETURNS text
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
CREATE FUNCTION public.awp_claimed_gateway() RETURNS uuid
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

CREATE FUNCTION public.awp_claimed_gateway_tenant() RETURNS uuid
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
CREATE FUNCTION public.awp_claim_gateway(p_key text) RETURNS uuid
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

-- Sets a gateway's key (or a new one: the old stops working). For an administrator's session
-- only. Takes the SHA-256 of the secret, never the secret: awpctl makes the secret, sends its
-- hash and prints the key, awpk_<gateway id without dashes>_<secret>.
CREATE FUNCTION public.awp_gateway_key(p_gateway text, p_secret_sha256 bytea)
RETURNS TABLE (gateway_id uuid, tenant_id uuid, slug text)
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_gateway uuid := public.awp_resolve_gateway(p_gateway, NULL);
  v_tenant uuid;
  v_slug text;
BEGIN
  IF p_secret_sha256 IS NULL OR length(p_secret_sha256) <> 32 THEN
    RAISE EXCEPTION 'awp_gateway_key: the secret''s SHA-256 is 32 bytes' USING ERRCODE = 'AW004';
  END IF;
  SELECT g.tenant_id, g.slug INTO v_tenant, v_slug FROM public.gateways g WHERE g.id = v_gateway;
  INSERT INTO public.gateway_keys AS k (gateway_id, tenant_id, secret_sha256)
  VALUES (v_gateway, v_tenant, p_secret_sha256)
  ON CONFLICT ON CONSTRAINT gateway_keys_pkey
  DO UPDATE SET secret_sha256 = EXCLUDED.secret_sha256, rotated_at = now();
  RETURN QUERY SELECT v_gateway, v_tenant, v_slug;
END
$$;
REVOKE ALL ON FUNCTION public.awp_gateway_key(text, bytea) FROM PUBLIC, anon, authenticated, service_role;

-- Creates a pool login (or sets a new password on it): a member of awp_gateway that no gateway is
-- bound to, `awp_pool_<a-z0-9_>`, for an administrator's session only. Its name can never be a
-- gateway's own login (those are awp_gw_*, gateway_roles' CHECK).
CREATE FUNCTION public.awp_gateway_pool_role(p_password text, p_role text DEFAULT 'awp_pool')
RETURNS text
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF p_password IS NULL OR length(p_password) < 24 THEN
    RAISE EXCEPTION 'awp_gateway_pool_role: the password must have at least 24 characters'
      USING ERRCODE = 'AW004';
  END IF;
  IF p_role IS NULL OR p_role !~ '^awp_pool(_[a-z0-9_]{1,54})?$' THEN
    RAISE EXCEPTION 'awp_gateway_pool_role: a pool login is awp_pool or awp_pool_ and 1 to 54 of a-z 0-9 _, got "%"', p_role
      USING ERRCODE = 'AW004';
  END IF;
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_role) THEN
    EXECUTE format('ALTER ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS '
                   'NOREPLICATION INHERIT PASSWORD %L', p_role, p_password);
  ELSE
    EXECUTE format('CREATE ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS '
                   'NOREPLICATION INHERIT PASSWORD %L', p_role, p_password);
  END IF;
  EXECUTE format('GRANT awp_gateway TO %I', p_role);
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', pg_catalog.current_database(), p_role);
  RETURN p_role;
END
$$;
REVOKE ALL ON FUNCTION public.awp_gateway_pool_role(text, text) FROM PUBLIC, anon, authenticated, service_role;

-- The session's gateway: its login's binding, else its transaction's claim.
CREATE OR REPLACE FUNCTION public.awp_session_gateway() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE((SELECT r.gateway_id FROM public.gateway_roles r
                    WHERE r.role_name OPERATOR(pg_catalog.=) session_user),
                  public.awp_claimed_gateway())
$$;

CREATE OR REPLACE FUNCTION public.awp_session_gateway_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE((SELECT r.tenant_id FROM public.gateway_roles r
                    WHERE r.role_name OPERATOR(pg_catalog.=) session_user),
                  public.awp_claimed_gateway_tenant())
$$;

-- The policies of sql/0023, the same rows, now also admitting a claimed gateway. The binding is
-- looked up first; the claim's InitPlan runs only when the login has none.
DO $$
DECLARE
  r record;
  v_rows text;
BEGIN
  FOR r IN SELECT * FROM (VALUES
    ('gateways', 'ALL', 'gateway', 'id'),
    ('agents', 'SELECT', 'gateway', 'gateway_id'),
    ('secrets', 'ALL', 'gateway', 'gateway_id'),
    ('agent_commands', 'ALL', 'gateway', 'gateway_id'),
    ('agent_inbox_items', 'ALL', 'gateway', 'gateway_id'),
    ('daemon_heartbeats', 'ALL', 'gateway', 'gateway_id'),
    ('knowledge_items', 'ALL', 'tenant', 'tenant_id'),
    ('knowledge_chunks', 'ALL', 'tenant', 'tenant_id'),
    ('tasks', 'SELECT', 'tenant', 'tenant_id'),
    ('task_relations', 'SELECT', 'tenant', 'tenant_id'),
    ('source_connections', 'SELECT', 'tenant', 'tenant_id'),
    ('tenants', 'SELECT', 'tenant', 'id'))
    AS t (tbl, cmd, whose, col)
  LOOP
    v_rows := format('%I = COALESCE((SELECT g.%I FROM public.gateway_roles g WHERE g.role_name = session_user), '
                     '(SELECT public.%I()))',
                     r.col, CASE WHEN r.whose = 'gateway' THEN 'gateway_id' ELSE 'tenant_id' END,
                     CASE WHEN r.whose = 'gateway' THEN 'awp_claimed_gateway' ELSE 'awp_claimed_gateway_tenant' END);
    EXECUTE format('ALTER POLICY %I ON public.%I USING (%s)%s',
                   CASE WHEN r.whose = 'gateway' THEN 'gateway_own' ELSE 'gateway_tenant' END,
                   r.tbl, v_rows,
                   CASE WHEN r.cmd = 'ALL' THEN ' WITH CHECK (' || v_rows || ')' ELSE '' END);
  END LOOP;
END
$$;
