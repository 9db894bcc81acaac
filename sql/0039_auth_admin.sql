-- The admin API of /auth/v1 (issue 38; docs/data-api.md, "The admin API"): what a service-role
-- caller may do to a user that the schema did not hold yet.
--  - app_users.banned_until: a ban for a while (GoTrue's ban_duration); a user is refused a
--    sign-in and a refresh while it lies ahead, as a disabled one is (disabled stays the ban
--    without an end that awpctl and older gateways know).
--  - A user's sessions outlive the user as signed out (ON DELETE CASCADE removed them): the
--    foreign key goes, so an administrator reads why and when each session of a removed user
--    ended. The trigger of sql/0032 (awp_user_sessions_end, BEFORE DELETE) still ends every live
--    one, whoever removes the user, and app_token_revocations keeps their tokens refused.
--  - Three more reasons a session ends: the user removed, banned, or changed by an
--    administrator (password, tenant, operator flag).

ALTER TABLE public.app_users ADD COLUMN banned_until timestamptz;
COMMENT ON COLUMN public.app_users.banned_until IS
  'awp: no sign-in or refresh before this (the admin API''s ban_duration); NULL = no timed ban';

-- auth.users' banned_until follows it (functions/auth.sql holds the current body).
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

ALTER TABLE public.app_sessions DROP CONSTRAINT app_sessions_revoked_reason_check;
ALTER TABLE public.app_sessions ADD CONSTRAINT app_sessions_revoked_reason_check
  CHECK (revoked_reason IN ('logout', 'logout_global', 'logout_others', 'refresh_token_reuse',
                            'password_changed', 'user_disabled', 'user_moved',
                            'operator_role_removed', 'user_removed', 'revoked', 'user_deleted',
                            'user_banned', 'admin_changed'));

ALTER TABLE public.app_sessions DROP CONSTRAINT app_sessions_user_id_fkey;
