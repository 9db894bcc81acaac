-- The data API's sign-in (issue 32): what a schema written for a hosted Supabase project expects
-- of the database (schema auth, auth.uid()/role()/jwt()/email(), auth.users), the sessions and
-- refresh tokens of the api-gateway's /auth/v1 (docs/data-api-auth.md), users without a tenant
-- (self-service sign-up), and the composite tenant foreign keys renamed to the names the
-- original UI's embed hints use.
--
-- On a Supabase project schema auth, its functions and auth.users already exist and belong to
-- the platform's own auth server: each is created here only when it is missing, and nothing of
-- theirs is replaced (the trigger that keeps auth.users in step with app_users is made only
-- together with a table made here).

-- Schema auth and its functions -------------------------------------------------------------

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'auth') THEN
    CREATE SCHEMA auth;
    GRANT USAGE ON SCHEMA auth TO anon, authenticated, service_role;
  END IF;

  -- The caller's claims as the api-gateway (or PostgREST) set them for the transaction:
  -- request.jwt.claims, the JSON object of the verified token. The older per-claim settings
  -- (request.jwt.claim.sub, .role, .email; PostgREST before v9) are read first, as Supabase's own
  -- definitions do, so a pooler or tool that still sets them is understood too.
  IF to_regprocedure('auth.jwt()') IS NULL THEN
    CREATE FUNCTION auth.jwt() RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path = ''
    AS $fn$
      SELECT COALESCE(
        NULLIF(pg_catalog.current_setting('request.jwt.claim', true), ''),
        NULLIF(pg_catalog.current_setting('request.jwt.claims', true), ''))::jsonb
    $fn$;
    REVOKE ALL ON FUNCTION auth.jwt() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION auth.jwt() TO anon, authenticated, service_role;
  END IF;
  IF to_regprocedure('auth.uid()') IS NULL THEN
    CREATE FUNCTION auth.uid() RETURNS uuid
    LANGUAGE sql STABLE
    SET search_path = ''
    AS $fn$
      SELECT COALESCE(
        NULLIF(pg_catalog.current_setting('request.jwt.claim.sub', true), ''),
        NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')::uuid
    $fn$;
    REVOKE ALL ON FUNCTION auth.uid() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION auth.uid() TO anon, authenticated, service_role;
  END IF;
  IF to_regprocedure('auth.role()') IS NULL THEN
    CREATE FUNCTION auth.role() RETURNS text
    LANGUAGE sql STABLE
    SET search_path = ''
    AS $fn$
      SELECT COALESCE(
        NULLIF(pg_catalog.current_setting('request.jwt.claim.role', true), ''),
        NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
    $fn$;
    REVOKE ALL ON FUNCTION auth.role() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION auth.role() TO anon, authenticated, service_role;
  END IF;
  IF to_regprocedure('auth.email()') IS NULL THEN
    CREATE FUNCTION auth.email() RETURNS text
    LANGUAGE sql STABLE
    SET search_path = ''
    AS $fn$
      SELECT COALESCE(
        NULLIF(pg_catalog.current_setting('request.jwt.claim.email', true), ''),
        NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb ->> 'email')
    $fn$;
    REVOKE ALL ON FUNCTION auth.email() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION auth.email() TO anon, authenticated, service_role;
  END IF;
END
$$;

-- Users without a tenant; the user's own metadata -------------------------------------------

-- A self-service sign-up (POST /auth/v1/signup without API_SIGNUP_TENANT) belongs to no tenant:
-- current_tenant_id() is NULL for its sessions, so it sees nothing of awp's tables, while the
-- tables of a schema written for a hosted project (auth.uid() policies) work for it. /api
-- refuses such a session (403 no_tenant).
ALTER TABLE public.app_users ALTER COLUMN tenant_id DROP NOT NULL;
-- The user's own data (GoTrue's user_metadata: PUT /auth/v1/user {"data": ...}); never read
-- for a decision (docs/security.md).
ALTER TABLE public.app_users ADD COLUMN user_metadata jsonb NOT NULL DEFAULT '{}'
  CHECK (jsonb_typeof(user_metadata) = 'object');

-- auth.users on plain Postgres ----------------------------------------------------------------

-- The app_metadata of an app_users row, as tokens and auth.users carry it (functions/auth.sql).
CREATE OR REPLACE FUNCTION public.awp_user_app_metadata(p_tenant_id uuid, p_is_operator boolean)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT pg_catalog.jsonb_build_object('provider', 'email', 'providers', '["email"]'::jsonb)
      || CASE WHEN p_tenant_id IS NULL THEN '{}'::jsonb
              ELSE pg_catalog.jsonb_build_object('tenant_id', p_tenant_id) END
      || CASE WHEN p_is_operator THEN '{"awp_role": "operator"}'::jsonb ELSE '{}'::jsonb END
$$;
REVOKE ALL ON FUNCTION public.awp_user_app_metadata(uuid, boolean) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_user_app_metadata(uuid, boolean) TO service_role;

-- Keeps awp's auth.users in step with app_users (functions/auth.sql).
CREATE OR REPLACE FUNCTION public.awp_auth_users_sync() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.id IS DISTINCT FROM OLD.id) THEN
    DELETE FROM auth.users WHERE id = OLD.id;
    IF TG_OP = 'DELETE' THEN
      RETURN NULL;
    END IF;
  END IF;
  INSERT INTO auth.users AS u (id, aud, role, email, phone, email_confirmed_at, confirmed_at,
                               last_sign_in_at, raw_app_meta_data, raw_user_meta_data,
                               banned_until, is_anonymous, created_at, updated_at)
  VALUES (NEW.id, 'authenticated', 'authenticated', NEW.email, NULL, NEW.created_at,
          NEW.created_at, NEW.last_login_at,
          public.awp_user_app_metadata(NEW.tenant_id, NEW.is_operator), NEW.user_metadata,
          CASE WHEN NEW.disabled THEN 'infinity'::timestamptz END, false, NEW.created_at,
          NEW.updated_at)
  ON CONFLICT (id) DO UPDATE SET
    email = EXCLUDED.email,
    last_sign_in_at = EXCLUDED.last_sign_in_at,
    raw_app_meta_data = EXCLUDED.raw_app_meta_data,
    raw_user_meta_data = EXCLUDED.raw_user_meta_data,
    banned_until = EXCLUDED.banned_until,
    updated_at = EXCLUDED.updated_at;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_auth_users_sync() FROM PUBLIC, anon, authenticated;

-- A TABLE, not a view, so that `REFERENCES auth.users (id)` of a schema written for a hosted
-- project works; the columns such schemas and their functions read (Supabase's names). Written
-- only by the trigger below: app_users stays the one place users are made, changed and removed
-- (a row referenced by such a foreign key without ON DELETE then blocks the user's removal, as
-- it does on the platform). Not readable by anon or authenticated, as on Supabase.
DO $$
BEGIN
  IF to_regclass('auth.users') IS NOT NULL THEN
    RETURN;  -- the platform's own
  END IF;
  CREATE TABLE auth.users (
    instance_id uuid,
    id uuid PRIMARY KEY,
    aud character varying(255),
    role character varying(255),
    email character varying(255),
    phone text,
    email_confirmed_at timestamptz,
    phone_confirmed_at timestamptz,
    confirmed_at timestamptz,
    last_sign_in_at timestamptz,
    raw_app_meta_data jsonb,
    raw_user_meta_data jsonb,
    is_super_admin boolean,
    is_sso_user boolean NOT NULL DEFAULT false,
    is_anonymous boolean NOT NULL DEFAULT false,
    banned_until timestamptz,
    deleted_at timestamptz,
    created_at timestamptz,
    updated_at timestamptz
  );
  CREATE INDEX users_email_idx ON auth.users (email);
  COMMENT ON TABLE auth.users IS
    'awp: the users of public.app_users, kept in step by the trigger app_users_auth_users_sync';
  ALTER TABLE auth.users ENABLE ROW LEVEL SECURITY;
  REVOKE ALL ON auth.users FROM PUBLIC, anon, authenticated;
  GRANT SELECT ON auth.users TO service_role;
  CREATE POLICY service_role_read ON auth.users FOR SELECT TO service_role USING (true);
  INSERT INTO auth.users (id, aud, role, email, email_confirmed_at, confirmed_at, last_sign_in_at,
                          raw_app_meta_data, raw_user_meta_data, banned_until, created_at,
                          updated_at)
  SELECT id, 'authenticated', 'authenticated', email, created_at, created_at, last_login_at,
         public.awp_user_app_metadata(tenant_id, is_operator), user_metadata,
         CASE WHEN disabled THEN 'infinity'::timestamptz END, created_at, updated_at
    FROM public.app_users;
  CREATE TRIGGER app_users_auth_users_sync AFTER INSERT OR UPDATE OR DELETE ON public.app_users
    FOR EACH ROW EXECUTE FUNCTION public.awp_auth_users_sync();
END
$$;

-- Sessions and refresh tokens of /auth/v1 ----------------------------------------------------

-- awp's own names: auth.sessions and auth.refresh_tokens are the platform's on Supabase. Service
-- role only (the api-gateway signs in through it); no tenant column: a user may have none.
CREATE TABLE public.app_sessions (
  id uuid PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES public.app_users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  refreshed_at timestamptz,
  -- No refresh after this (NULL: none, as GoTrue's default).
  not_after timestamptz,
  -- Signed out (logout, a reused refresh token, a password change): its refresh tokens are
  -- refused, and its access tokens by the gateway until tokens_valid_until.
  revoked_at timestamptz,
  revoked_reason text CHECK (revoked_reason IN ('logout', 'logout_global', 'logout_others',
                                                'refresh_token_reuse', 'password_changed')),
  -- The exp of the last access token issued for the session: until then a signed-out session's
  -- tokens must be refused (the gateway loads these on start).
  tokens_valid_until timestamptz NOT NULL,
  aal text NOT NULL DEFAULT 'aal1',
  user_agent text,
  ip inet,
  CHECK ((revoked_at IS NULL) = (revoked_reason IS NULL))
);
CREATE INDEX app_sessions_user_id_idx ON public.app_sessions (user_id);
CREATE INDEX app_sessions_revoked_idx ON public.app_sessions (tokens_valid_until)
  WHERE revoked_at IS NOT NULL;

-- Refresh tokens: only their SHA-256 is kept. Rotated on use: the used token is revoked and
-- its child made; child_sealed is that child sealed with a key derived from the used token
-- (AES-256-GCM), so a client presenting the used token again within the reuse interval (two
-- tabs refreshing at once) gets the same child, and nobody without the used token can read it.
CREATE TABLE public.app_refresh_tokens (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  token_sha256 bytea NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
  session_id uuid NOT NULL REFERENCES public.app_sessions (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES public.app_users (id) ON DELETE CASCADE,
  parent_id bigint REFERENCES public.app_refresh_tokens (id) ON DELETE SET NULL,
  revoked boolean NOT NULL DEFAULT false,
  revoked_at timestamptz,
  child_sealed bytea,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK (revoked = (revoked_at IS NOT NULL))
);
CREATE INDEX app_refresh_tokens_session_id_idx ON public.app_refresh_tokens (session_id);
CREATE INDEX app_refresh_tokens_parent_id_idx ON public.app_refresh_tokens (parent_id);

CREATE TRIGGER app_sessions_updated_at BEFORE UPDATE ON public.app_sessions
  FOR EACH ROW EXECUTE FUNCTION public.awp_set_updated_at();

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['app_sessions', 'app_refresh_tokens']
  LOOP
    EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC, anon, authenticated', t);
    EXECUTE format('GRANT ALL ON public.%I TO service_role', t);
    EXECUTE format('CREATE POLICY service_role_all ON public.%I FOR ALL TO service_role '
                   'USING (true) WITH CHECK (true)', t);
  END LOOP;
END
$$;

-- The composite tenant foreign keys, renamed -------------------------------------------------

-- Every foreign key (tenant_id, <col>) → <table2> (tenant_id, id) that Postgres named
-- <table>_tenant_id_<col>_fkey becomes <table>_<col>_fkey: the names the original UI's embed
-- hints use (agents!tasks_assignee_agent_id_fkey, ...; a column hint would not do, PostgREST
-- matches one only on a single-column key). Skipped with a NOTICE where the new name is taken
-- or longer than Postgres' 63 bytes. On awp's schema this renames (table: columns):
--   agent_commands: agent_id, gateway_id
--   agent_inbox_items: agent_id, comment_id, contact_id, gateway_id, routine_id, task_id,
--     work_product_id
--   agent_usage: agent_id
--   agents: gateway_id, reports_to_id
--   collection_records: collection_id
--   daemon_heartbeats: gateway_id
--   gateway_keys: gateway_id
--   gateway_registration_tokens: consumed_by_gateway_id (was ..._consumed_by_gateway__fkey,
--     the name Postgres truncated)
--   gateway_roles: gateway_id
--   knowledge_chunks: knowledge_item_id
--   knowledge_folders: parent_id
--   knowledge_item_versions: knowledge_item_id
--   knowledge_items: agent_id, folder_id, source_connection_id
--   routines: agent_id, collection_id
--   secrets: agent_id, gateway_id
--   source_connections: secret_id
--   task_comments: actor_agent_id, task_id
--   task_relations: created_by_agent_id, source_task_id, target_task_id
--   tasks: assignee_agent_id, contact_id, parent_id
--   work_products: knowledge_item_id, reviewer_agent_id, submitted_by_agent_id, task_id
DO $$
DECLARE
  k record;
  new_name text;
BEGIN
  FOR k IN
    SELECT c.conrelid, c.conname, t.relname, col.attname
      FROM pg_catalog.pg_constraint c
      JOIN pg_catalog.pg_class t ON t.oid = c.conrelid
      JOIN pg_catalog.pg_attribute ten ON ten.attrelid = c.conrelid AND ten.attnum = c.conkey[1]
      JOIN pg_catalog.pg_attribute col ON col.attrelid = c.conrelid AND col.attnum = c.conkey[2]
      JOIN pg_catalog.pg_attribute rten ON rten.attrelid = c.confrelid AND rten.attnum = c.confkey[1]
      JOIN pg_catalog.pg_attribute rid ON rid.attrelid = c.confrelid AND rid.attnum = c.confkey[2]
     WHERE c.contype = 'f' AND t.relnamespace = 'public'::regnamespace
       AND pg_catalog.cardinality(c.conkey) = 2
       AND ten.attname = 'tenant_id' AND rten.attname = 'tenant_id' AND rid.attname = 'id'
       AND left(c.conname, length(t.relname) + 11) = t.relname || '_tenant_id_'
       AND right(c.conname, 5) = '_fkey'
     ORDER BY t.relname, c.conname
  LOOP
    new_name := k.relname || '_' || k.attname || '_fkey';
    IF octet_length(new_name) > 63 THEN
      RAISE NOTICE 'foreign key %.% kept: % would be longer than 63 bytes',
        k.relname, k.conname, new_name;
    ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint
                   WHERE conrelid = k.conrelid AND conname = new_name) THEN
      RAISE NOTICE 'foreign key %.% kept: % is taken', k.relname, k.conname, new_name;
    ELSE
      EXECUTE format('ALTER TABLE public.%I RENAME CONSTRAINT %I TO %I',
                     k.relname, k.conname, new_name);
    END IF;
  END LOOP;
END
$$;
