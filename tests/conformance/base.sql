-- The part of a hosted Supabase project that the client's test fixtures take for granted, made in
-- a scratch database of the project's cluster before a fixture is loaded (tests/conformance/*.sh).
-- Written from what the fixtures use: the API roles and the authenticator that switches to them,
-- the platform's default privileges (everything a migration makes in public is granted to the
-- three API roles; row-level security is what narrows it), schema extensions on the database's
-- search_path, and, unless awp's own migrations follow (psql variable with_auth = false),
-- auth.uid()/role()/email()/jwt().
-- Roles are the cluster's: made only when missing (awp's cluster has anon, authenticated and
-- service_role already, and they are left as they are).
\set ON_ERROR_STOP on

SELECT format('CREATE ROLE %I NOLOGIN NOINHERIT%s', r,
              CASE r WHEN 'service_role' THEN ' BYPASSRLS' ELSE '' END)
  FROM unnest(ARRAY['anon', 'authenticated', 'service_role', 'authenticator']) AS r
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) \gexec
-- On the platform the authenticator logs in and switches to the role a request's token names;
-- here awp's gateway logs in as awp_api, which may do the same. The fixtures only set options on it.
GRANT anon, authenticated, service_role TO authenticator;

CREATE SCHEMA IF NOT EXISTS extensions;
GRANT USAGE ON SCHEMA extensions TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA extensions GRANT ALL ON TABLES TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA extensions GRANT ALL ON FUNCTIONS TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA extensions GRANT ALL ON SEQUENCES TO anon, authenticated, service_role;
-- As on the platform, extensions' types and functions are found without a schema name.
SELECT format('ALTER DATABASE %I SET search_path TO "$user", public, extensions', current_database())
\gexec
-- Every project loads pg_stat_statements, so Postgres computes query identifiers (EXPLAIN VERBOSE
-- shows them; a plain cluster leaves compute_query_id at auto, which is off without it).
SELECT format('ALTER DATABASE %I SET compute_query_id TO on', current_database())
\gexec
-- The Supabase CLI's Postgres (where the suites' snapshots were taken) runs with
-- effective_cache_size = 128MB, which EXPLAIN (SETTINGS) lists among the non-default settings.
SELECT format('ALTER DATABASE %I SET effective_cache_size TO ''128MB''', current_database())
\gexec
CREATE EXTENSION IF NOT EXISTS "uuid-ossp" WITH SCHEMA extensions;
CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA extensions;

GRANT USAGE ON SCHEMA public TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON FUNCTIONS TO anon, authenticated, service_role;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON SEQUENCES TO anon, authenticated, service_role;

\if :with_auth
-- What policies written for the platform call. They read the claims the request's transaction
-- carries, as the platform's do: request.jwt.claims, or the older per-claim settings.
CREATE SCHEMA IF NOT EXISTS auth;
GRANT USAGE ON SCHEMA auth TO anon, authenticated, service_role;

CREATE FUNCTION auth.jwt() RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(nullif(current_setting('request.jwt.claim', true), ''),
                  nullif(current_setting('request.jwt.claims', true), ''))::jsonb
$$;
CREATE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql STABLE AS $$
  SELECT coalesce(nullif(current_setting('request.jwt.claim.sub', true), ''),
                  nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')::uuid
$$;
CREATE FUNCTION auth.role() RETURNS text LANGUAGE sql STABLE AS $$
  SELECT coalesce(nullif(current_setting('request.jwt.claim.role', true), ''),
                  nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
$$;
CREATE FUNCTION auth.email() RETURNS text LANGUAGE sql STABLE AS $$
  SELECT coalesce(nullif(current_setting('request.jwt.claim.email', true), ''),
                  nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'email')
$$;
GRANT EXECUTE ON FUNCTION auth.jwt(), auth.uid(), auth.role(), auth.email()
  TO anon, authenticated, service_role;
\endif
