-- The tenant's workspace row (the product's settings singleton): made with every tenant,
-- validated on every write, filled by the UI's setup wizard through complete_setup.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- BEFORE INSERT OR UPDATE on workspace: name (the product's) and label (awp's first name of it)
-- stay one value, whichever a statement sets; owner_timezone is an IANA zone or NULL ('' is
-- NULL), since budgets count months in it (AW004 otherwise).
CREATE OR REPLACE FUNCTION public.awp_workspace_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.name = 'HQ' AND NEW.label <> 'HQ' THEN
      NEW.name := NEW.label;
    END IF;
    NEW.label := NEW.name;
  ELSIF NEW.name IS DISTINCT FROM OLD.name THEN
    NEW.label := NEW.name;
  ELSIF NEW.label IS DISTINCT FROM OLD.label THEN
    NEW.name := NEW.label;
  END IF;
  IF NEW.owner_timezone IS NOT NULL AND btrim(NEW.owner_timezone) = '' THEN
    NEW.owner_timezone := NULL;
  ELSIF NEW.owner_timezone IS NOT NULL THEN
    NEW.owner_timezone := public.awp_check_time_zone(NEW.owner_timezone);
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_workspace_before_write() FROM PUBLIC, anon, authenticated;

-- AFTER INSERT on tenants: the tenant's workspace row, not set up yet (the UI's wizard calls
-- complete_setup). Runs as whoever made the tenant (the service role or an administrator).
CREATE OR REPLACE FUNCTION public.awp_tenants_seed_workspace() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  INSERT INTO public.workspace (tenant_id, name, initialized)
  VALUES (NEW.id, 'HQ', false)
  ON CONFLICT (tenant_id) DO NOTHING;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_tenants_seed_workspace() FROM PUBLIC, anon, authenticated;

-- The product's setup wizard in one transaction (its RPC, its parameters): fills the tenant's
-- workspace row once (name, slug, description, the owner's names and time zone; initialized),
-- and replaces the tenant's contact pipeline stages, contact fields and streams with the given
-- ones (each an array of objects, as the UI sends them). Run again, it leaves an initialized
-- workspace row alone and replaces the three lists again, as the product does.
-- The tenant is the caller's; p_tenant_id names another only for the service role (the
-- product's onboarding calls it with the service-role key and the default tenant). A user's
-- p_tenant_id other than their own is refused (42501), a session of no tenant too (AW009).
-- SECURITY INVOKER: the caller's row-level security applies to every statement.
-- Errors (22023): a blank name, a list that is not an array of objects, an element without
-- its key or label, more than 200 elements, an unknown stream type; AW004 for a bad time zone.
CREATE OR REPLACE FUNCTION public.complete_setup(p_name text, p_slug text, p_description text,
                                                 p_owner_name text, p_preferred_name text,
                                                 p_timezone text, p_stages jsonb, p_fields jsonb,
                                                 p_streams jsonb, p_tenant_id uuid DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_service boolean := pg_catalog.pg_has_role(current_user, 'service_role', 'MEMBER');
  v_tenant uuid := public.current_tenant_id();
  v_list record;
  v_bad text;
BEGIN
  IF v_service THEN
    v_tenant := coalesce(p_tenant_id, v_tenant);
  ELSIF v_tenant IS NULL THEN
    RAISE EXCEPTION 'the session has no tenant (app_metadata.tenant_id)' USING ERRCODE = 'AW009';
  ELSIF p_tenant_id IS NOT NULL AND p_tenant_id <> v_tenant THEN
    RAISE EXCEPTION 'complete_setup: p_tenant_id names another tenant; only the service role sets up another tenant'
      USING ERRCODE = '42501';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.tenants t WHERE t.id = v_tenant) THEN
    RAISE EXCEPTION 'complete_setup: tenant % not found', v_tenant USING ERRCODE = 'AW003';
  END IF;
  IF p_name IS NULL OR btrim(p_name) = '' THEN
    RAISE EXCEPTION 'complete_setup: p_name (the workspace name) is required' USING ERRCODE = '22023';
  END IF;
  FOR v_list IN SELECT * FROM (VALUES ('p_stages', p_stages), ('p_fields', p_fields), ('p_streams', p_streams)) l(name, items)
  LOOP
    IF v_list.items IS NULL OR jsonb_typeof(v_list.items) = 'null' THEN
      CONTINUE;
    END IF;
    IF jsonb_typeof(v_list.items) <> 'array' THEN
      RAISE EXCEPTION 'complete_setup: % must be an array of objects, got %', v_list.name, jsonb_typeof(v_list.items)
        USING ERRCODE = '22023';
    END IF;
    IF jsonb_array_length(v_list.items) > 200 THEN
      RAISE EXCEPTION 'complete_setup: % has % elements, at most 200', v_list.name, jsonb_array_length(v_list.items)
        USING ERRCODE = '22023';
    END IF;
    SELECT string_agg(DISTINCT jsonb_typeof(e), ', ') INTO v_bad
      FROM jsonb_array_elements(v_list.items) e WHERE jsonb_typeof(e) <> 'object';
    IF v_bad IS NOT NULL THEN
      RAISE EXCEPTION 'complete_setup: % must hold objects only, got %', v_list.name, v_bad USING ERRCODE = '22023';
    END IF;
  END LOOP;
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(nullif(p_stages, 'null'), '[]')) s
              WHERE coalesce(btrim(s ->> 'stage_key'), '') = '' OR coalesce(btrim(s ->> 'label'), '') = '') THEN
    RAISE EXCEPTION 'complete_setup: every element of p_stages needs a stage_key and a label' USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(nullif(p_fields, 'null'), '[]')) f
              WHERE coalesce(btrim(f ->> 'field_key'), '') = '' OR coalesce(btrim(f ->> 'field_type'), '') = ''
                 OR coalesce(btrim(f ->> 'label'), '') = '') THEN
    RAISE EXCEPTION 'complete_setup: every element of p_fields needs a field_key, a field_type and a label'
      USING ERRCODE = '22023';
  END IF;
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(nullif(p_streams, 'null'), '[]')) st
              WHERE coalesce(btrim(st ->> 'name'), '') = '') THEN
    RAISE EXCEPTION 'complete_setup: every element of p_streams needs a name' USING ERRCODE = '22023';
  END IF;
  SELECT string_agg(DISTINCT st ->> 'type', ', ') INTO v_bad
    FROM jsonb_array_elements(coalesce(nullif(p_streams, 'null'), '[]')) st
   WHERE st ->> 'type' IS NOT NULL
     AND st ->> 'type' NOT IN (SELECT e.enumlabel::text FROM pg_catalog.pg_enum e
                                WHERE e.enumtypid = 'public.stream_type'::regtype);
  IF v_bad IS NOT NULL THEN
    RAISE EXCEPTION 'complete_setup: unknown stream type %', v_bad USING ERRCODE = '22023';
  END IF;

  INSERT INTO public.workspace AS w (tenant_id, name, slug, description, owner_name,
                                     owner_preferred_name, owner_timezone, initialized)
  VALUES (v_tenant, btrim(p_name), nullif(btrim(p_slug), ''), nullif(p_description, ''),
          nullif(p_owner_name, ''), nullif(p_preferred_name, ''), nullif(p_timezone, ''), true)
  ON CONFLICT (tenant_id) DO UPDATE
     SET name = EXCLUDED.name, slug = EXCLUDED.slug, description = EXCLUDED.description,
         owner_name = EXCLUDED.owner_name, owner_preferred_name = EXCLUDED.owner_preferred_name,
         owner_timezone = EXCLUDED.owner_timezone, initialized = true
   WHERE NOT w.initialized;

  DELETE FROM public.pipeline_stages p WHERE p.tenant_id = v_tenant AND p.entity_type = 'contact';
  DELETE FROM public.field_definitions f WHERE f.tenant_id = v_tenant AND f.entity_type = 'contact';
  DELETE FROM public.streams s WHERE s.tenant_id = v_tenant;

  INSERT INTO public.pipeline_stages (tenant_id, entity_type, stage_key, label, color, sort_order,
                                      is_terminal, is_default)
  SELECT v_tenant, 'contact', s ->> 'stage_key', s ->> 'label', s ->> 'color',
         coalesce((s ->> 'sort_order')::integer, 0), coalesce((s ->> 'is_terminal')::boolean, false),
         coalesce((s ->> 'is_default')::boolean, false)
    FROM jsonb_array_elements(coalesce(nullif(p_stages, 'null'), '[]')) s;

  INSERT INTO public.field_definitions (tenant_id, entity_type, field_key, field_type, label,
                                        field_group, sort_order, required, options, description,
                                        is_active)
  SELECT v_tenant, 'contact', f ->> 'field_key', f ->> 'field_type', f ->> 'label', f ->> 'field_group',
         coalesce((f ->> 'sort_order')::integer, 0), coalesce((f ->> 'required')::boolean, false),
         CASE WHEN jsonb_typeof(f -> 'options') IS DISTINCT FROM 'null' THEN f -> 'options' END,
         nullif(f ->> 'description', ''), true
    FROM jsonb_array_elements(coalesce(nullif(p_fields, 'null'), '[]')) f;

  INSERT INTO public.streams (tenant_id, name, description, type, color, icon, sort_order, meta)
  SELECT v_tenant, st ->> 'name', nullif(st ->> 'description', ''),
         coalesce((st ->> 'type')::public.stream_type, 'functional'), st ->> 'color', st ->> 'icon',
         coalesce((st ->> 'sort_order')::integer, 0), '{}'::jsonb
    FROM jsonb_array_elements(coalesce(nullif(p_streams, 'null'), '[]')) st;
END
$$;
REVOKE ALL ON FUNCTION public.complete_setup(text, text, text, text, text, text, jsonb, jsonb, jsonb, uuid)
  FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.complete_setup(text, text, text, text, text, text, jsonb, jsonb, jsonb, uuid)
  TO authenticated, service_role;
