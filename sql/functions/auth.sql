-- The data API's sign-in: the helpers of auth.users and of /auth/v1's sessions.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration. auth.uid(), auth.role(), auth.jwt() and auth.email() are not here: they
-- are made only where missing (sql/0028), never replaced (a Supabase project has its own).

-- The app_metadata of an app_users row, as the access tokens of /auth/v1 and awp's auth.users
-- carry it: the provider (always email), the tenant when the user has one, awp_role = operator
-- for an operator (docs/security.md, "Who is who").
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

-- Keeps awp's auth.users (plain Postgres; sql/0028) in step with app_users: a row made, changed
-- or removed there is made, changed or removed here. SECURITY DEFINER: auth.users is written by
-- nobody else (not even the service role). On a Supabase project no trigger calls it (auth.users
-- is the platform's).
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
          CASE WHEN NEW.disabled THEN 'infinity'::timestamptz ELSE NEW.banned_until END, false,
          NEW.created_at, NEW.updated_at)
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

-- A user being removed (DELETE FROM app_users, whoever runs it) is signed out of every session
-- first, in the same transaction: the sessions stay, signed out, so every gateway (also one
-- started later) refuses their access tokens until those expire (sql/0039).
CREATE OR REPLACE FUNCTION public.awp_app_users_end_sessions() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  UPDATE public.app_sessions SET revoked_at = pg_catalog.now(), revoked_reason = 'user_deleted'
   WHERE user_id = OLD.id AND revoked_at IS NULL;
  RETURN OLD;
END
$$;
REVOKE ALL ON FUNCTION public.awp_app_users_end_sessions() FROM PUBLIC, anon, authenticated;
