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

-- One session model (sql/0032; docs/security.md, "Sessions"): every way a session ends writes a
-- row of app_token_revocations and NOTIFYs awp_session_revoked with its id; each api-gateway
-- process reads the row and refuses the tokens it names. None is SECURITY DEFINER: they run as
-- whoever writes app_sessions or app_users (the service role, its members, superusers), who may
-- write app_token_revocations too.

-- One revocation: a session (p_session_id) or, for tokens of no session, the user's tokens issued
-- until p_issued_before; kept until p_expires_at (+ the gateways' clock leeway).
CREATE OR REPLACE FUNCTION public.awp_revoke_tokens(p_user_id uuid, p_session_id uuid,
                                                    p_issued_before timestamptz, p_reason text,
                                                    p_expires_at timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_id bigint;
BEGIN
  INSERT INTO public.app_token_revocations (user_id, session_id, issued_before, reason, expires_at)
  VALUES (p_user_id, p_session_id, p_issued_before, p_reason,
          greatest(p_expires_at, now()) + interval '1 minute')
  RETURNING id INTO v_id;
  PERFORM pg_catalog.pg_notify('awp_session_revoked', v_id::text);
END
$$;
REVOKE ALL ON FUNCTION public.awp_revoke_tokens(uuid, uuid, timestamptz, text, timestamptz)
  FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_revoke_tokens(uuid, uuid, timestamptz, text, timestamptz)
  TO service_role;

-- Trigger of app_sessions: a session signed out (revoked_at set) or a live one deleted.
CREATE OR REPLACE FUNCTION public.awp_session_ended() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM public.awp_revoke_tokens(OLD.user_id, OLD.id, NULL, 'removed',
                                     OLD.tokens_valid_until);
    RETURN NULL;
  END IF;
  PERFORM public.awp_revoke_tokens(NEW.user_id, NEW.id, NULL, NEW.revoked_reason,
                                   NEW.tokens_valid_until);
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_session_ended() FROM PUBLIC, anon, authenticated;

-- Trigger of app_users: a user disabled, moved to another tenant, no longer an operator, given a
-- new password (every session but the transaction's awp.keep_session, the one that changed it
-- through PUT /auth/v1/user) or removed: the user's sessions end (a removed user's stay, signed
-- out: sql/0039 dropped their foreign key), their refresh tokens are revoked, and (but for a password) the user's tokens of no session issued until now too.
CREATE OR REPLACE FUNCTION public.awp_user_sessions_end() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_reason text;
  v_keep uuid;
BEGIN
  IF TG_OP = 'DELETE' THEN
    v_reason := 'user_removed';
  ELSIF NEW.disabled AND NOT OLD.disabled THEN
    v_reason := 'user_disabled';
  ELSIF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id THEN
    v_reason := 'user_moved';
  ELSIF OLD.is_operator AND NOT NEW.is_operator THEN
    v_reason := 'operator_role_removed';
  ELSIF NEW.password_hash IS DISTINCT FROM OLD.password_hash THEN
    v_reason := 'password_changed';
    -- The session that changed it (PUT /auth/v1/user) stays; an operator's change ends all.
    v_keep := NULLIF(pg_catalog.current_setting('awp.keep_session', true), '')::uuid;
  ELSE
    RETURN NULL;
  END IF;
  UPDATE public.app_sessions SET revoked_at = now(), revoked_reason = v_reason
   WHERE user_id = OLD.id AND revoked_at IS NULL AND id IS DISTINCT FROM v_keep;
  UPDATE public.app_refresh_tokens t SET revoked = true, revoked_at = now()
    FROM public.app_sessions s
   WHERE s.id = t.session_id AND s.user_id = OLD.id AND s.revoked_at IS NOT NULL AND NOT t.revoked;
  -- Tokens of no session (awpctl token): those issued until now. Kept 31 days, the longest an
  -- access token awp mints lives (awpctl token --ttl).
  IF v_reason <> 'password_changed' THEN
    PERFORM public.awp_revoke_tokens(OLD.id, NULL, now(), v_reason, now() + interval '31 days');
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_user_sessions_end() FROM PUBLIC, anon, authenticated;
