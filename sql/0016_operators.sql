-- Operators: the people who may change a host's configuration (workspaces, gateway settings,
-- who may run shell commands) rather than a tenant's rows. An operator is the service role, or a
-- user whose verified claims carry app_metadata.awp_role = "operator". awp's own login puts that
-- claim in the session of an app_users row with is_operator; on a hosted Supabase project an
-- administrator sets it in the user's app_metadata (which only the service role can write).

ALTER TABLE public.app_users ADD COLUMN is_operator boolean NOT NULL DEFAULT false;

CREATE FUNCTION public.current_is_operator() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT pg_catalog.pg_has_role(current_user, 'service_role', 'MEMBER')
      OR coalesce(NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb
                    -> 'app_metadata' ->> 'awp_role' = 'operator', false)
$$;

REVOKE ALL ON FUNCTION public.current_is_operator() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.current_is_operator() TO authenticated, service_role;
