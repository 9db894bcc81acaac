-- Gateway keys: many gateway hosts on one pooled login, each still confined to its own gateway
-- (issue 21, docs/security.md "Gateway keys", docs/scale.md). PgBouncer pools per login, so one
-- login per host (sql/0023) gives 1,000 hosts 1,000 pools that reopen server connections on
-- nearly every transaction. Here a host may instead log in with a shared pool login
-- (`awp_pool*`, a member of awp_gateway bound to no gateway: it sees and changes nothing on its
-- own) and present its gateway's key at the start of every transaction, in the same pipeline as
-- the statement itself (libs/core pg::connection::set_gateway_key):
--
--   SELECT public.awp_present_gateway_key('awpk_<gateway id, 32 hex>_<secret>');
--
-- which puts the key, marked with this transaction's start, into the transaction-local setting
-- awp.gateway_key. Every policy of sql/0023 takes the session's gateway from the login's binding,
-- else from the gateway_keys row whose SHA-256 the presented key matches (one index probe per
-- statement, an InitPlan). The database never holds a key, only its hash; a key set for the
-- session, or in another transaction, is not this transaction's and names nobody. A bound login
-- never reaches the key (the COALESCE stops at its binding), so a host with its own login pays
-- nothing for this.

-- The keys: a SHA-256 of each gateway's secret, made by an administrator (awp_gateway_key). A
-- gateway role reads the one row whose key its transaction presents; the service role reads all
-- (a hash of 256 random bits tells nothing about the key).
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
GRANT SELECT ON public.gateway_keys TO service_role, awp_gateway;
CREATE POLICY service_role_all ON public.gateway_keys FOR SELECT TO service_role USING (true);

-- This transaction's mark: its start, in microseconds since the epoch.
CREATE FUNCTION public.awp_transaction_mark() RETURNS text
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
CREATE FUNCTION public.awp_present_gateway_key(p_key text) RETURNS text
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
CREATE FUNCTION public.awp_key_binding(OUT gateway_id uuid, OUT tenant_id uuid)
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

-- A gateway role sees the one key row its transaction presents.
CREATE POLICY presented_key ON public.gateway_keys FOR SELECT TO awp_gateway
  USING (gateway_id = (SELECT (public.awp_key_binding()).gateway_id));

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

-- The session's gateway: its login's binding, else the gateway whose key its transaction presented.
CREATE OR REPLACE FUNCTION public.awp_session_gateway() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE((SELECT r.gateway_id FROM public.gateway_roles r
                    WHERE r.role_name OPERATOR(pg_catalog.=) session_user),
                  (public.awp_key_binding()).gateway_id)
$$;

CREATE OR REPLACE FUNCTION public.awp_session_gateway_tenant() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
  SELECT COALESCE((SELECT r.tenant_id FROM public.gateway_roles r
                    WHERE r.role_name OPERATOR(pg_catalog.=) session_user),
                  (public.awp_key_binding()).tenant_id)
$$;

-- The policies of sql/0023, the same rows, now also admitting the gateway of a presented key. The
-- binding is looked up first; the key's InitPlan runs only when the login has none.
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
                     '(SELECT (public.awp_key_binding()).%I))',
                     r.col, CASE WHEN r.whose = 'gateway' THEN 'gateway_id' ELSE 'tenant_id' END,
                     CASE WHEN r.whose = 'gateway' THEN 'gateway_id' ELSE 'tenant_id' END);
    EXECUTE format('ALTER POLICY %I ON public.%I USING (%s)%s',
                   CASE WHEN r.whose = 'gateway' THEN 'gateway_own' ELSE 'gateway_tenant' END,
                   r.tbl, v_rows,
                   CASE WHEN r.cmd = 'ALL' THEN ' WITH CHECK (' || v_rows || ')' ELSE '' END);
  END LOOP;
END
$$;
