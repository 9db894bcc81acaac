-- Gateways: resolving a slug or id, registration tokens, daemon heartbeats, the secrets NOTIFY
-- (awp_secrets_<gateway>) and a gateway's own login role.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- Gateway by id (a uuid in its canonical text form, any case) or by slug, optionally within one
-- tenant. Never ambiguous: ids are ids, slugs are unique and never uuid-shaped.
CREATE OR REPLACE FUNCTION public.awp_resolve_gateway(p_gateway_slug text, p_tenant_id uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_id uuid;
  v_tenant uuid;
BEGIN
  IF p_gateway_slug IS NULL OR btrim(p_gateway_slug) = '' THEN
    RAISE EXCEPTION 'gateway slug is required' USING ERRCODE = 'AW004';
  END IF;
  -- One plan each, cached: no "p_tenant_id IS NULL OR" in a statement (it is planned afresh on
  -- every call); ids and slugs are unique across tenants, the tenant is checked after.
  IF p_gateway_slug ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
    SELECT g.id, g.tenant_id INTO v_id, v_tenant FROM public.gateways g WHERE g.id = p_gateway_slug::uuid;
  ELSE
    SELECT g.id, g.tenant_id INTO v_id, v_tenant FROM public.gateways g WHERE g.slug = p_gateway_slug;
  END IF;
  IF p_tenant_id IS NOT NULL AND v_tenant IS DISTINCT FROM p_tenant_id THEN
    v_id := NULL;
  END IF;
  IF v_id IS NULL THEN
    RAISE EXCEPTION 'gateway "%" not found%', p_gateway_slug,
      CASE WHEN p_tenant_id IS NULL THEN '' ELSE ' in tenant ' || p_tenant_id END
      USING ERRCODE = 'AW003';
  END IF;
  RETURN v_id;
END
$$;
REVOKE ALL ON FUNCTION public.awp_resolve_gateway(text, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_resolve_gateway(text, uuid) TO awp_gateway, service_role;

-- Mints a single-use registration token for a tenant (awpctl gateway token). The plaintext is
-- returned once; only its SHA-256 is stored.
CREATE OR REPLACE FUNCTION public.issue_gateway_token(p_tenant_id uuid DEFAULT NULL, p_label text DEFAULT NULL,
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
REVOKE ALL ON FUNCTION public.issue_gateway_token(uuid, text, integer, text) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.issue_gateway_token(uuid, text, integer, text) TO service_role;

-- Registers a gateway with a single-use registration token (callable by anon: the token is the
-- credential): AW006 unknown or another tenant's token, AW007 expired, AW008 already used. The
-- new gateway (provisioning) takes its slug from p_slug_hint, else p_label, else the token's
-- label, made free across all tenants with -2, -3, ... (the unique index decides when two
-- registrations race for the same slug: the loser takes the next suffix).
-- Returns {"gateway_id", "gateway_slug"}.
CREATE OR REPLACE FUNCTION public.consume_gateway_token(p_token text, p_label text DEFAULT NULL,
                                                        p_slug_hint text DEFAULT NULL,
                                                        p_tenant_id uuid DEFAULT NULL)
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
  -- A uuid-shaped hint ("Gateway <uuid>") would be refused by gateways_slug_not_uuid.
  IF v_base ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
    v_base := 'gateway-' || left(v_base, 8);
  END IF;
  v_slug := v_base;
  LOOP
    WHILE EXISTS (SELECT 1 FROM public.gateways g WHERE g.slug = v_slug) LOOP
      v_n := v_n + 1;
      v_slug := v_base || '-' || v_n;
    END LOOP;
    BEGIN
      INSERT INTO public.gateways (tenant_id, slug, label, status, meta)
      VALUES (v_token.tenant_id, v_slug, v_label, 'provisioning',
              jsonb_build_object('registered_via', 'token', 'token_id', v_token.id))
      RETURNING id INTO v_gateway;
      EXIT;
    EXCEPTION WHEN unique_violation THEN
      -- Taken by a concurrent registration (or insert) since the check above: next suffix.
      v_n := v_n + 1;
      v_slug := v_base || '-' || v_n;
    END;
  END LOOP;
  UPDATE public.gateway_registration_tokens t SET consumed_at = now(), consumed_by_gateway_id = v_gateway
   WHERE t.id = v_token.id;
  RETURN jsonb_build_object('gateway_id', v_gateway, 'gateway_slug', v_slug);
END
$$;
REVOKE ALL ON FUNCTION public.consume_gateway_token(text, text, text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.consume_gateway_token(text, text, text, uuid) TO anon, authenticated, service_role;

-- Upserts the liveness row of one daemon instance and touches its gateway (last_seen_at; a
-- provisioning gateway becomes ready). Returns the gateway's id, tenant and status, so a
-- daemon learns when its gateway is hibernating.
CREATE OR REPLACE FUNCTION public.daemon_heartbeat(p_gateway_slug text, p_daemon text, p_instance text DEFAULT NULL,
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
REVOKE ALL ON FUNCTION public.daemon_heartbeat(text, text, text, integer, text, timestamptz, jsonb, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.daemon_heartbeat(text, text, text, integer, text, timestamptz, jsonb, uuid) TO awp_gateway, service_role;

-- One NOTIFY awp_secrets_<gateway> per statement per gateway whose secrets changed (insert,
-- delete, or a change of key, value, agent or gateway; the sync daemon's own status writes do
-- not wake it again). Payload: the secret id when one row changed, else empty.
-- Runs as its owner (sql/0034): whoever writes the row wakes the daemons, and no API role may
-- call awp_notify_gateway itself.
CREATE OR REPLACE FUNCTION public.awp_notify_secrets() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id FROM new_rows n GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSIF TG_OP = 'DELETE' THEN
    FOR r IN SELECT o.gateway_id, count(*) AS n, min(o.id::text) AS one_id FROM old_rows o GROUP BY o.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
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
      PERFORM public.awp_notify_gateway('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_notify_secrets() FROM PUBLIC, anon, authenticated;

-- A changed secret value waits for the next sync.
CREATE OR REPLACE FUNCTION public.awp_secrets_before_update() RETURNS trigger
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
REVOKE ALL ON FUNCTION public.awp_secrets_before_update() FROM PUBLIC, anon, authenticated;

-- Creates the login role of a gateway, or sets a new password on it (rotation), and binds it to
-- the gateway. For an administrator's session only (CREATEROLE; executable by no API role).
-- The role is awp_gw_<gateway id, 32 hex> unless p_role names one (awp_gw_<a-z0-9_>: a stack
-- that must know it in advance, such as the compose file); binding the gateway to another role
-- unbinds the one before. p_password is best a SCRAM verifier ("SCRAM-SHA-256$...", what awpctl
-- sends: the password itself never reaches the server), stored as it is; a plain password is
-- hashed by the server (password_encryption).
CREATE OR REPLACE FUNCTION public.awp_gateway_role(p_gateway text, p_password text, p_role text DEFAULT NULL)
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
REVOKE ALL ON FUNCTION public.awp_gateway_role(text, text, text) FROM PUBLIC, anon, authenticated;

-- Sets a gateway's key (or a new one: the old stops working). For an administrator's session
-- only. Takes the SHA-256 of the secret, never the secret: awpctl makes the secret, sends its
-- hash and prints the key, awpk_<gateway id without dashes>_<secret>.
CREATE OR REPLACE FUNCTION public.awp_gateway_key(p_gateway text, p_secret_sha256 bytea)
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
CREATE OR REPLACE FUNCTION public.awp_gateway_pool_role(p_password text, p_role text DEFAULT 'awp_pool')
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
