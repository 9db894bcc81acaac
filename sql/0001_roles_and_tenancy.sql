-- Roles, extensions, privileges defaults, tenants and current_tenant_id(): the base every table uses.
-- Applies to plain PostgreSQL 15 (creates what Supabase already has) and to a Supabase project.

-- The three API roles exist on Supabase; on plain Postgres we create them, NOLOGIN.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'anon') THEN
    CREATE ROLE anon NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'authenticated') THEN
    CREATE ROLE authenticated NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'service_role') THEN
    CREATE ROLE service_role NOLOGIN BYPASSRLS;
  END IF;
END
$$;

-- pgvector. Supabase keeps extensions in schema "extensions"; plain Postgres in public.
-- Every function that uses vector operators pins search_path to "public, extensions".
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
    RETURN;
  ELSIF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'extensions') THEN
    EXECUTE 'CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA extensions';
  ELSE
    EXECUTE 'CREATE EXTENSION IF NOT EXISTS vector';
  END IF;
END
$$;
-- No pgcrypto: gen_random_uuid() and sha256() are built into PostgreSQL 13+.

GRANT USAGE ON SCHEMA public TO anon, authenticated, service_role;

-- Nothing we create later is executable by PUBLIC unless granted explicitly (after CREATE
-- EXTENSION above, so the vector operators stay usable by everyone). On Supabase the project
-- also grants everything in public to anon and authenticated by default; undo that for our
-- objects: every table and function below is granted explicitly.
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON FUNCTIONS FROM anon, authenticated;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM anon, authenticated;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM anon, authenticated;

-- Tenants ---------------------------------------------------------------------------------

CREATE TABLE public.tenants (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL CHECK (btrim(name) <> ''),
  slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'deleted')),
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO public.tenants (id, name, slug)
VALUES ('00000000-0000-0000-0000-000000000000', 'Default', 'default');

-- The caller's tenant, from the claims PostgREST (or the api-gateway) puts in
-- request.jwt.claims: app_metadata.tenant_id, else tenant_id, else the default tenant.
-- '' counts as missing: a connection that once used set_config(..., true) reads '' afterwards.
CREATE FUNCTION public.current_tenant_id() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT COALESCE(
    NULLIF(c -> 'app_metadata' ->> 'tenant_id', '')::uuid,
    NULLIF(c ->> 'tenant_id', '')::uuid,
    '00000000-0000-0000-0000-000000000000'::uuid)
  FROM (SELECT NULLIF(current_setting('request.jwt.claims', true), '')::jsonb AS c) AS claims
$$;

REVOKE ALL ON FUNCTION public.current_tenant_id() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.current_tenant_id() TO authenticated, service_role;

-- updated_at maintenance: bumps updated_at unless the writer set it explicitly.
CREATE FUNCTION public.awp_set_updated_at() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_set_updated_at() FROM PUBLIC, anon, authenticated;

CREATE TRIGGER tenants_updated_at BEFORE UPDATE ON public.tenants
  FOR EACH ROW EXECUTE FUNCTION public.awp_set_updated_at();

ALTER TABLE public.tenants ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON public.tenants FROM PUBLIC, anon, authenticated;
GRANT SELECT ON public.tenants TO authenticated;
GRANT ALL ON public.tenants TO service_role;
CREATE POLICY tenant_own_row ON public.tenants FOR SELECT TO authenticated
  USING (id = (SELECT public.current_tenant_id()));
CREATE POLICY service_role_all ON public.tenants FOR ALL TO service_role
  USING (true) WITH CHECK (true);
