-- Files (issue 39, docs/storage.md): the schema storage behind the api-gateway's /storage/v1,
-- with the tables @supabase/storage-js's server keeps (storage.buckets, storage.objects, their
-- column names), row-level security as the platform does it, awp's tenancy on top, and the
-- product's two buckets with their policies.
--
-- - storage.objects holds metadata only; the bytes are in the object store under the row's
--   version (STORAGE_DIR). A row is written only once its bytes are durable, and a version no
--   row names any more is queued in storage.deleted_versions for the gateway to remove.
-- - Tenancy: every object belongs to a tenant (tenant_id, set by a trigger from the session,
--   never by the writer). A RESTRICTIVE policy holds every anon and authenticated statement to
--   its own tenant's objects, whatever permissive policy an operator adds: one tenant's users
--   never list, read, overwrite or delete another's. anon has no tenant, so it reaches no object
--   under RLS; it reads public buckets through their public URLs only.
-- - Buckets: tenant_id NULL is a bucket every tenant uses (the product's two), set: one
--   tenant's own. Only the service role makes, changes and deletes buckets unless a policy says
--   otherwise.
-- - Quotas: storage.tenant_usage counts each tenant's bytes and objects; AW011 past its
--   max_bytes (else the gateway's STORAGE_TENANT_QUOTA).
--
-- On a hosted project, schema storage is the platform's own storage server's: nothing of it is
-- made or changed here (a NOTICE says so), and the product's policies are the operator's to add
-- there (docs/storage.md, "On a hosted project").

-- The trigger functions (their current bodies: sql/functions/storage.sql).
CREATE OR REPLACE FUNCTION public.awp_storage_object_before() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_service boolean := pg_catalog.pg_has_role(current_user, 'service_role', 'MEMBER');
  v_sub text := NULLIF(NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb
                       ->> 'sub', '');
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF v_service THEN
      NEW.tenant_id := COALESCE(NEW.tenant_id,
        (SELECT b.tenant_id FROM storage.buckets b WHERE b.id OPERATOR(pg_catalog.=) NEW.bucket_id),
        public.current_tenant_id());
      NEW.owner_id := COALESCE(NEW.owner_id, v_sub);
    ELSE
      NEW.tenant_id := public.awp_session_tenant_id();
      NEW.owner_id := v_sub;
    END IF;
    NEW.created_at := pg_catalog.now();
  ELSE
    NEW.id := OLD.id;
    NEW.tenant_id := OLD.tenant_id;
    NEW.created_at := OLD.created_at;
    IF NEW.version IS DISTINCT FROM OLD.version AND NOT v_service THEN
      NEW.owner_id := v_sub;  -- an overwrite is its writer's
    END IF;
  END IF;
  NEW.owner := CASE WHEN NEW.owner_id ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$'
                    THEN NEW.owner_id::uuid END;
  NEW.updated_at := pg_catalog.now();
  NEW.last_accessed_at := pg_catalog.now();
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_storage_object_before() FROM PUBLIC, anon, authenticated;

CREATE OR REPLACE FUNCTION public.awp_storage_object_after() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_tenant uuid;
  v_delta bigint := 0;
  v_count bigint := 0;
  v_used bigint;
  v_cap bigint;
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO storage.deleted_versions (version) VALUES (OLD.version) ON CONFLICT DO NOTHING;
    -- An update, not an upsert: a tenant being deleted (its objects go by cascade) has no row
    -- to make.
    UPDATE storage.tenant_usage u
       SET bytes = u.bytes - OLD.size, objects = u.objects - 1, updated_at = pg_catalog.now()
     WHERE u.tenant_id OPERATOR(pg_catalog.=) OLD.tenant_id;
    RETURN NULL;
  END IF;
  v_tenant := NEW.tenant_id;
  IF TG_OP = 'INSERT' THEN
    v_delta := NEW.size;
    v_count := 1;
  ELSE
    IF NEW.version IS DISTINCT FROM OLD.version THEN
      INSERT INTO storage.deleted_versions (version) VALUES (OLD.version) ON CONFLICT DO NOTHING;
    END IF;
    v_delta := NEW.size - OLD.size;
  END IF;
  IF v_delta = 0 AND v_count = 0 THEN
    RETURN NULL;
  END IF;
  INSERT INTO storage.tenant_usage AS u (tenant_id, bytes, objects)
  VALUES (v_tenant, v_delta, v_count)
  ON CONFLICT (tenant_id) DO UPDATE
     SET bytes = u.bytes + v_delta, objects = u.objects + v_count, updated_at = pg_catalog.now()
  RETURNING u.bytes, u.max_bytes INTO v_used, v_cap;
  IF v_delta > 0 THEN
    v_cap := COALESCE(v_cap,
      NULLIF(pg_catalog.current_setting('awp.storage_tenant_quota', true), '')::bigint);
    IF v_cap > 0 AND v_used > v_cap THEN
      RAISE EXCEPTION 'the tenant''s storage quota of % bytes is used up (% bytes with this write)',
        v_cap, v_used
        USING ERRCODE = 'AW011',
              HINT = 'remove objects, or ask an operator to raise storage.tenant_usage.max_bytes';
    END IF;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_storage_object_after() FROM PUBLIC, anon, authenticated;

CREATE OR REPLACE FUNCTION public.awp_storage_bucket_before() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_sub text := NULLIF(NULLIF(pg_catalog.current_setting('request.jwt.claims', true), '')::jsonb
                       ->> 'sub', '');
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NOT pg_catalog.pg_has_role(current_user, 'service_role', 'MEMBER') THEN
      NEW.tenant_id := public.awp_session_tenant_id();
      NEW.owner_id := v_sub;
    END IF;
    NEW.created_at := pg_catalog.now();
  ELSE
    NEW.id := OLD.id;
    NEW.name := OLD.name;
    NEW.tenant_id := OLD.tenant_id;
    NEW.created_at := OLD.created_at;
  END IF;
  NEW.owner := CASE WHEN NEW.owner_id ~ '^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$'
                    THEN NEW.owner_id::uuid END;
  NEW.updated_at := pg_catalog.now();
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_storage_bucket_before() FROM PUBLIC, anon, authenticated;

DO $do$
BEGIN
  IF to_regnamespace('storage') IS NOT NULL THEN
    RAISE NOTICE 'schema storage exists (a hosted project''s storage server): awp makes none of its storage tables, policies or buckets here (docs/storage.md, "On a hosted project")';
    RETURN;
  END IF;

  CREATE SCHEMA storage;
  GRANT USAGE ON SCHEMA storage TO anon, authenticated, service_role;

  -- The platform's helpers for policies: a name's folders, its file name, its extension.
  CREATE FUNCTION storage.foldername(name text) RETURNS text[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  SET search_path = ''
  AS $fn$
    SELECT p[1:pg_catalog.array_length(p, 1) - 1]
      FROM (SELECT pg_catalog.string_to_array(name, '/') AS p) s
  $fn$;
  CREATE FUNCTION storage.filename(name text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  SET search_path = ''
  AS $fn$
    SELECT p[pg_catalog.array_length(p, 1)]
      FROM (SELECT pg_catalog.string_to_array(name, '/') AS p) s
  $fn$;
  CREATE FUNCTION storage.extension(name text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  SET search_path = ''
  AS $fn$
    SELECT p[pg_catalog.array_length(p, 1)]
      FROM (SELECT pg_catalog.string_to_array(storage.filename(name), '.') AS p) s
  $fn$;
  REVOKE ALL ON FUNCTION storage.foldername(text), storage.filename(text), storage.extension(text)
    FROM PUBLIC;
  GRANT EXECUTE ON FUNCTION storage.foldername(text), storage.filename(text),
    storage.extension(text) TO anon, authenticated, service_role;

  CREATE TABLE storage.buckets (
    id text PRIMARY KEY,
    name text NOT NULL UNIQUE,
    owner uuid,
    owner_id text,
    -- NULL: every tenant's (made by the service role); set: that tenant's own.
    tenant_id uuid REFERENCES public.tenants (id) ON DELETE CASCADE,
    public boolean NOT NULL DEFAULT false,
    file_size_limit bigint CHECK (file_size_limit IS NULL OR file_size_limit >= 0),
    allowed_mime_types text[],
    type text NOT NULL DEFAULT 'STANDARD' CHECK (type = 'STANDARD'),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT buckets_name_is_id CHECK (name = id),
    CONSTRAINT buckets_id_rule CHECK (
      id ~ '^[A-Za-z0-9_!.*''() &$=@;:+,?-]{1,100}$' AND id !~ '^ ' AND id !~ ' $'
      AND id NOT IN ('.', '..'))
  );

  CREATE TABLE storage.objects (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    bucket_id text NOT NULL REFERENCES storage.buckets (id),
    name text COLLATE "C" NOT NULL,
    owner uuid,
    owner_id text,
    tenant_id uuid NOT NULL REFERENCES public.tenants (id) ON DELETE CASCADE,
    -- The store's name of the bytes (store.hpp): a new one with every write.
    version text NOT NULL UNIQUE CHECK (version ~ '^[0-9a-f]{32}$'),
    size bigint NOT NULL CHECK (size >= 0),
    mimetype text NOT NULL DEFAULT 'application/octet-stream',
    etag text NOT NULL,
    cache_control text,
    -- The platform's view of the above (eTag, size, mimetype, cacheControl, lastModified,
    -- contentLength, httpStatusCode), written with them; policies may read it.
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    user_metadata jsonb,
    path_tokens text[] GENERATED ALWAYS AS (string_to_array(name, '/')) STORED,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    last_accessed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT objects_bucket_name_key UNIQUE (bucket_id, name),
    -- The gateway checks every other rule of a name (libs/storage names.hpp); canonical
    -- equivalence needs Unicode's tables, which the database has: "é" composed and decomposed
    -- would otherwise be two objects that look the same.
    CONSTRAINT objects_name_nfc CHECK (name IS NFC NORMALIZED),
    CONSTRAINT objects_name_length CHECK (octet_length(name) BETWEEN 1 AND 1024)
  );
  CREATE INDEX objects_tenant_idx ON storage.objects (tenant_id);

  -- Versions whose rows are gone: the gateway removes their bytes after a grace period.
  CREATE TABLE storage.deleted_versions (
    version text PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
  );
  CREATE INDEX deleted_versions_deleted_at_idx ON storage.deleted_versions (deleted_at);

  -- Each tenant's stored bytes and objects (kept by the triggers), and its quota.
  CREATE TABLE storage.tenant_usage (
    tenant_id uuid PRIMARY KEY REFERENCES public.tenants (id) ON DELETE CASCADE,
    bytes bigint NOT NULL DEFAULT 0,
    objects bigint NOT NULL DEFAULT 0,
    max_bytes bigint CHECK (max_bytes IS NULL OR max_bytes >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
  );

  CREATE TRIGGER buckets_before BEFORE INSERT OR UPDATE ON storage.buckets
    FOR EACH ROW EXECUTE FUNCTION public.awp_storage_bucket_before();
  CREATE TRIGGER objects_before BEFORE INSERT OR UPDATE ON storage.objects
    FOR EACH ROW EXECUTE FUNCTION public.awp_storage_object_before();
  CREATE TRIGGER objects_after AFTER INSERT OR UPDATE OR DELETE ON storage.objects
    FOR EACH ROW EXECUTE FUNCTION public.awp_storage_object_after();

  -- Privileges: the API roles may try anything on buckets and objects; row-level security
  -- decides. The queue and the usage are the triggers' (a user reads its tenant's usage).
  GRANT SELECT, INSERT, UPDATE, DELETE ON storage.buckets, storage.objects
    TO authenticated, service_role;
  GRANT SELECT ON storage.buckets, storage.objects TO anon;
  GRANT SELECT ON storage.tenant_usage TO authenticated;
  GRANT SELECT, INSERT, UPDATE, DELETE ON storage.tenant_usage, storage.deleted_versions
    TO service_role;

  ALTER TABLE storage.buckets ENABLE ROW LEVEL SECURITY;
  ALTER TABLE storage.objects ENABLE ROW LEVEL SECURITY;
  ALTER TABLE storage.deleted_versions ENABLE ROW LEVEL SECURITY;
  ALTER TABLE storage.tenant_usage ENABLE ROW LEVEL SECURITY;
  ALTER TABLE storage.buckets FORCE ROW LEVEL SECURITY;
  ALTER TABLE storage.objects FORCE ROW LEVEL SECURITY;

  CREATE POLICY service_role_all ON storage.buckets FOR ALL TO service_role
    USING (true) WITH CHECK (true);
  CREATE POLICY service_role_all ON storage.objects FOR ALL TO service_role
    USING (true) WITH CHECK (true);
  CREATE POLICY service_role_all ON storage.deleted_versions FOR ALL TO service_role
    USING (true) WITH CHECK (true);
  CREATE POLICY service_role_all ON storage.tenant_usage FOR ALL TO service_role
    USING (true) WITH CHECK (true);
  CREATE POLICY tenant_usage_own ON storage.tenant_usage FOR SELECT TO authenticated
    USING (tenant_id = (SELECT public.current_tenant_id()));

  -- The tenant wall: restrictive, so it holds whatever permissive policy is added later. A
  -- user without a tenant reaches nothing (current_tenant_id() is NULL), and anon nothing at all:
  -- it reads public buckets through their public URLs, never under RLS.
  CREATE POLICY awp_tenant_wall ON storage.objects AS RESTRICTIVE FOR ALL TO authenticated
    USING (tenant_id = (SELECT public.current_tenant_id()))
    WITH CHECK (tenant_id = (SELECT public.current_tenant_id()));
  CREATE POLICY awp_anon_wall ON storage.objects AS RESTRICTIVE FOR ALL TO anon
    USING (false) WITH CHECK (false);
  CREATE POLICY awp_tenant_wall_read ON storage.buckets AS RESTRICTIVE FOR SELECT
    TO authenticated
    USING (tenant_id IS NULL OR tenant_id = (SELECT public.current_tenant_id()));
  CREATE POLICY awp_tenant_wall_insert ON storage.buckets AS RESTRICTIVE FOR INSERT
    TO authenticated
    WITH CHECK (tenant_id = (SELECT public.current_tenant_id()));
  CREATE POLICY awp_tenant_wall_update ON storage.buckets AS RESTRICTIVE FOR UPDATE
    TO authenticated
    USING (tenant_id = (SELECT public.current_tenant_id()))
    WITH CHECK (tenant_id = (SELECT public.current_tenant_id()));
  CREATE POLICY awp_tenant_wall_delete ON storage.buckets AS RESTRICTIVE FOR DELETE
    TO authenticated
    USING (tenant_id = (SELECT public.current_tenant_id()));
  CREATE POLICY awp_anon_wall ON storage.buckets AS RESTRICTIVE FOR ALL TO anon
    USING (false) WITH CHECK (false);
  -- A signed-in user sees the buckets it may use (shared ones and its tenant's).
  CREATE POLICY buckets_read ON storage.buckets FOR SELECT TO authenticated USING (true);

  -- The product's buckets. assets: knowledge uploads, shown through public URLs; a tenant's
  -- users read, write and delete the objects under the folder named by their tenant's id
  -- (<tenant id>/knowledge/<item id>/<file name>, as the UI names them). gateway-backups: a
  -- gateway host's state, written and read with the service-role key only (no policy: no user
  -- reaches it).
  INSERT INTO storage.buckets (id, name, public) VALUES ('assets', 'assets', true);
  INSERT INTO storage.buckets (id, name, public, allowed_mime_types)
  VALUES ('gateway-backups', 'gateway-backups', false,
          ARRAY['application/gzip', 'application/x-gzip', 'application/octet-stream']);
  CREATE POLICY assets_tenant_read ON storage.objects FOR SELECT TO authenticated
    USING (bucket_id = 'assets'
           AND (storage.foldername(name))[1] = (SELECT public.current_tenant_id())::text);
  CREATE POLICY assets_tenant_insert ON storage.objects FOR INSERT TO authenticated
    WITH CHECK (bucket_id = 'assets'
                AND (storage.foldername(name))[1] = (SELECT public.current_tenant_id())::text);
  CREATE POLICY assets_tenant_update ON storage.objects FOR UPDATE TO authenticated
    USING (bucket_id = 'assets'
           AND (storage.foldername(name))[1] = (SELECT public.current_tenant_id())::text)
    WITH CHECK (bucket_id = 'assets'
                AND (storage.foldername(name))[1] = (SELECT public.current_tenant_id())::text);
  CREATE POLICY assets_tenant_delete ON storage.objects FOR DELETE TO authenticated
    USING (bucket_id = 'assets'
           AND (storage.foldername(name))[1] = (SELECT public.current_tenant_id())::text);
END
$do$;
