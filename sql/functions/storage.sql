-- Files (/storage/v1, docs/storage.md): the triggers of storage.objects and storage.buckets.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). Their bodies are plpgsql, which names tables only when it runs: on a hosted
-- project whose schema storage is the platform's own (sql/0040 makes none of awp's there) they
-- exist and are attached to nothing.

-- Before a row of storage.objects is written: who it belongs to is the session's, never the
-- writer's say. A new object is the session's tenant's (AW009 without one) and its owner is the
-- claims' sub; the service role may name the tenant, else the bucket's tenant, else its claims'
-- (the default tenant without one). An update keeps the id, the tenant and created_at.
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

-- After a row of storage.objects is written or deleted: the bytes of a version no row names any
-- more are queued for removal (storage.deleted_versions; the api-gateway removes them after a
-- grace period, so a download that read the row a moment before still opens its file), and the
-- tenant's usage is counted. A write that takes the tenant above its quota raises AW011: its
-- storage.tenant_usage.max_bytes, else the gateway's default (the transaction's
-- awp.storage_tenant_quota, STORAGE_TENANT_QUOTA; 0 or unset: no quota). SECURITY DEFINER: the
-- queue and the usage are written by no one else.
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

-- Before a row of storage.buckets is written: a bucket a user makes (when a policy lets one) is
-- the user's tenant's, never shared; the service role's are shared unless it names a tenant.
-- An update keeps the id, the tenant and created_at.
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
