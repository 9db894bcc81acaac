-- One session model for /api and /auth/v1 (issue 37; docs/security.md, "Sessions"): every
-- sign-in through either face is a row of app_sessions, and every way a session ends leaves a
-- row in app_token_revocations and a NOTIFY on awp_session_revoked, written by the database
-- itself, so that each api-gateway process refuses the session's access tokens within a second
-- (LISTEN) and none forgets it (the table, read at start and after every reconnect).
--
-- What ends sessions here, whoever writes it (the gateway, awpctl, an operator's SQL):
--   - app_sessions.revoked_at set (sign-out of any scope, a reused refresh token, ...);
--   - a live app_sessions row deleted;
--   - app_users: disabled, moved to another tenant, no longer an operator, a new password
--     (every session but the one named by the transaction's awp.keep_session: the one that
--     changed it through PUT /auth/v1/user), removed.
-- Tokens minted outside a session (awpctl token) are covered by a revocation of the user: every
-- such token of the user issued at or before the change is refused.

-- Which face issued a session. Both issue the same sessions; /api's have no refresh token.
ALTER TABLE public.app_sessions
  ADD COLUMN via text NOT NULL DEFAULT 'auth/v1' CHECK (via IN ('api', 'auth/v1'));

ALTER TABLE public.app_sessions DROP CONSTRAINT app_sessions_revoked_reason_check;
ALTER TABLE public.app_sessions ADD CONSTRAINT app_sessions_revoked_reason_check
  CHECK (revoked_reason IN ('logout', 'logout_global', 'logout_others', 'refresh_token_reuse',
                            'password_changed', 'user_disabled', 'user_moved',
                            'operator_role_removed', 'user_removed', 'revoked'));

-- What each gateway process keeps in memory: the revocations whose tokens may still be alive.
-- No foreign key: a revocation outlives the user it names (a removed user's tokens stay refused).
CREATE TABLE public.app_token_revocations (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id uuid NOT NULL,
  -- A session ended: every access token of it is refused.
  session_id uuid,
  -- Every token of the user without a session_id claim, issued (iat) at or before this (or
  -- with no iat), is refused.
  issued_before timestamptz,
  reason text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- No token this row refuses can be valid after it (the last access token's expiry plus the
  -- gateway's clock leeway): the row may then go.
  expires_at timestamptz NOT NULL,
  CHECK ((session_id IS NULL) <> (issued_before IS NULL))
);
CREATE INDEX app_token_revocations_expires_at_idx ON public.app_token_revocations (expires_at);

ALTER TABLE public.app_token_revocations ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.app_token_revocations FORCE ROW LEVEL SECURITY;
REVOKE ALL ON public.app_token_revocations FROM PUBLIC, anon, authenticated;
GRANT ALL ON public.app_token_revocations TO service_role;
CREATE POLICY service_role_all ON public.app_token_revocations FOR ALL TO service_role
  USING (true) WITH CHECK (true);

-- The functions below run as whoever writes app_sessions or app_users (not SECURITY DEFINER):
-- only the service role, its members and superusers may, and they may write this table too.
-- Their current bodies are in functions/auth.sql.

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

CREATE TRIGGER app_sessions_revoked AFTER UPDATE OF revoked_at ON public.app_sessions
  FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
  EXECUTE FUNCTION public.awp_session_ended();
CREATE TRIGGER app_sessions_removed AFTER DELETE ON public.app_sessions
  FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND OLD.tokens_valid_until > now() - interval '1 minute')
  EXECUTE FUNCTION public.awp_session_ended();

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

CREATE TRIGGER app_users_sessions_end
  AFTER UPDATE OF disabled, tenant_id, is_operator, password_hash ON public.app_users
  FOR EACH ROW EXECUTE FUNCTION public.awp_user_sessions_end();
-- Before the row goes: its sessions are still there to be ended (the foreign key then removes
-- them).
CREATE TRIGGER app_users_removed_sessions_end BEFORE DELETE ON public.app_users
  FOR EACH ROW EXECUTE FUNCTION public.awp_user_sessions_end();

-- Sessions signed out before this migration whose tokens may still be alive.
INSERT INTO public.app_token_revocations (user_id, session_id, reason, created_at, expires_at)
SELECT user_id, id, revoked_reason, revoked_at, tokens_valid_until + interval '1 minute'
  FROM public.app_sessions
 WHERE revoked_at IS NOT NULL AND tokens_valid_until > now() - interval '1 minute';
