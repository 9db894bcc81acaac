-- The product's setup and recurring tasks (issue 38; docs/product-ui.md): every tenant has its
-- workspace row (made with the tenant, and here for the tenants there are), validated on every
-- write; complete_setup, the setup wizard's RPC; task_series keep their next occurrence on every
-- write, and spawn_due_task_instances makes the due ones tasks.
--
-- The functions are defined here as sql/functions/{producers,workspace,series}.sql had them when
-- this file was written (the triggers below need them); those files hold their current bodies.

-- sql/functions/producers.sql: the mention grammar, shared with the comments of 0038

-- The agents of a tenant a comment mentions: the mentions array (slugs with or without "@", or
-- agent ids) and @slug words in the body, case-insensitive, except its author. One grammar for
-- task_comments and the product's comments.
CREATE OR REPLACE FUNCTION public.awp_mentioned_agents(p_tenant_id uuid, p_mentions text[], p_body text,
                                                       p_author uuid)
RETURNS TABLE (id uuid, slug text)
LANGUAGE sql STABLE
SET search_path = ''
AS $$
  WITH named AS (
    SELECT lower(ltrim(btrim(m), '@')) AS name FROM unnest(p_mentions) AS m
    UNION
    SELECT lower(x[1]) FROM regexp_matches(coalesce(p_body, ''), '(?:^|[^A-Za-z0-9._-])@([A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]|[A-Za-z0-9])', 'g') AS x)
  SELECT DISTINCT ag.id, ag.slug FROM public.agents ag JOIN named n
      ON lower(ag.slug) = n.name OR ag.id::text = n.name
   WHERE ag.tenant_id = p_tenant_id AND ag.id IS DISTINCT FROM p_author
$$;
REVOKE ALL ON FUNCTION public.awp_mentioned_agents(uuid, text[], text, uuid) FROM PUBLIC, anon, authenticated;

-- A comment mentioning agents (awp_mentioned_agents), except its own author.
-- Key: comment_mention:<comment>:<agent>.
CREATE OR REPLACE FUNCTION public.awp_enqueue_comment_mentions() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_task public.tasks;
  a record;
BEGIN
  SELECT * INTO v_task FROM public.tasks t WHERE t.id = NEW.task_id;
  FOR a IN SELECT * FROM public.awp_mentioned_agents(NEW.tenant_id, NEW.mentions, NEW.body, NEW.actor_agent_id)
  LOOP
    PERFORM public.awp_enqueue_inbox_item(
      NEW.tenant_id, a.id, 'task_comment_mention', 'comment_mention:' || NEW.id || ':' || a.id,
      v_task.title, '@' || a.slug || ' mentioned in a comment on: ' || v_task.title,
      jsonb_strip_nulls(jsonb_build_object('comment_body', left(NEW.body, 500), 'task_title', v_task.title,
        'actor_type', NEW.actor_type, 'actor_agent_id', NEW.actor_agent_id)),
      p_task_id => NEW.task_id, p_comment_id => NEW.id);
  END LOOP;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_enqueue_comment_mentions() FROM PUBLIC, anon, authenticated;

-- sql/functions/workspace.sql

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

-- sql/functions/series.sql

-- The first occurrence of the series strictly after p_from, or NULL. One calendar for routines
-- and series: routine_next_occurrence (time zones, DST, month ends), with the series' cadence in
-- its terms (days_of_week 0 = Sunday .. 6 = Saturday become ISO 7, 1..6; day_of_month -1, the
-- last day, is 31, which a shorter month ends sooner; daily every n days and weekly without
-- days every 7n days count from the day of p_from, as in the product).
CREATE OR REPLACE FUNCTION public.awp_task_series_next(p_series public.task_series, p_from timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_n integer := coalesce(p_series.interval_n, 1);
  v_time text := p_series.time_of_day::text;
BEGIN
  CASE p_series.cadence_type
  WHEN 'daily', 'every_n_days' THEN
    RETURN public.routine_next_occurrence('every_n_days', v_n, NULL, NULL, v_time, p_series.timezone, p_from);
  WHEN 'weekdays' THEN
    RETURN public.routine_next_occurrence('weekdays', NULL, NULL, NULL, v_time, p_series.timezone, p_from);
  WHEN 'weekly' THEN
    IF cardinality(p_series.days_of_week) = 0 THEN
      RETURN public.routine_next_occurrence('every_n_days', 7 * v_n, NULL, NULL, v_time, p_series.timezone, p_from);
    END IF;
    RETURN public.routine_next_occurrence('weekly', NULL,
      ARRAY(SELECT CASE d WHEN 0 THEN 7 ELSE d END FROM unnest(p_series.days_of_week) d)::smallint[],
      NULL, v_time, p_series.timezone, p_from);
  WHEN 'monthly' THEN
    RETURN public.routine_next_occurrence('monthly', NULL, NULL,
      CASE WHEN p_series.day_of_month = -1 THEN 31 ELSE coalesce(p_series.day_of_month, 1) END,
      v_time, p_series.timezone, p_from);
  END CASE;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_task_series_next(public.task_series, timestamptz) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_task_series_next(public.task_series, timestamptz) TO authenticated, service_role;

-- BEFORE INSERT OR UPDATE on task_series: the zone checked (AW004), and next_occurrence_at kept
-- as the product keeps it: NULL while paused; the first occurrence on or after starts_on (and
-- not before now) when made, when its cadence changes or when it is resumed; paused once
-- ends_after_count occurrences were spawned or the next one falls after ends_on.
CREATE OR REPLACE FUNCTION public.awp_task_series_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_recompute boolean;
BEGIN
  NEW.timezone := public.awp_check_time_zone(NEW.timezone);
  IF NEW.ends_after_count IS NOT NULL AND NEW.spawned_count >= NEW.ends_after_count THEN
    NEW.is_paused := true;
  END IF;
  IF NEW.is_paused THEN
    NEW.next_occurrence_at := NULL;
    RETURN NEW;
  END IF;
  IF TG_OP = 'INSERT' THEN
    v_recompute := true;
  ELSE
    v_recompute := OLD.is_paused
      OR (NEW.cadence_type, NEW.interval_n, NEW.days_of_week, NEW.day_of_month, NEW.time_of_day,
          NEW.timezone, NEW.starts_on)
         IS DISTINCT FROM (OLD.cadence_type, OLD.interval_n, OLD.days_of_week, OLD.day_of_month,
                           OLD.time_of_day, OLD.timezone, OLD.starts_on);
  END IF;
  IF v_recompute THEN
    NEW.next_occurrence_at := public.awp_task_series_next(NEW,
      greatest(public.awp_local_to_utc(NEW.starts_on::timestamp, NEW.timezone) - interval '1 second', now()));
  END IF;
  IF NEW.ends_on IS NOT NULL AND NEW.next_occurrence_at IS NOT NULL
     AND (NEW.next_occurrence_at AT TIME ZONE NEW.timezone)::date > NEW.ends_on THEN
    NEW.is_paused := true;
    NEW.next_occurrence_at := NULL;
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_task_series_before_write() FROM PUBLIC, anon, authenticated;

-- Spawns a task for every series whose next occurrence is due (the product's RPC; its UI calls
-- it after making a series, the scheduler every tick): occurrences missed while nothing ran are
-- skipped (counted in the task's meta.catchup_skipped), so a series spawns one task per call, for
-- its latest due occurrence; with missed_policy auto_skip the series' previous open task becomes
-- missed. Each spawned task and each auto-missed one is in the audit log. One task per
-- occurrence even when two callers race (the unique key, and SKIP LOCKED on the series).
-- SECURITY INVOKER: a user spawns only their own tenant's series (row-level security, and the
-- tenant named below); the service role and the scheduler every active tenant's.
-- Returns the number of tasks spawned.
CREATE OR REPLACE FUNCTION public.spawn_due_task_instances() RETURNS integer
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_service boolean := pg_catalog.pg_has_role(current_user, 'service_role', 'MEMBER');
  v_tenant uuid := public.current_tenant_id();
  v_series public.task_series;
  v_occurrence timestamptz;
  v_next timestamptz;
  v_skipped integer;
  v_prior uuid;
  v_task uuid;
  v_spawned integer := 0;
BEGIN
  IF NOT v_service AND v_tenant IS NULL THEN
    RETURN 0;
  END IF;
  FOR v_series IN
    SELECT s.* FROM public.task_series s
      JOIN public.tenants t ON t.id = s.tenant_id AND t.status = 'active'
     WHERE NOT s.is_paused AND s.next_occurrence_at <= now()
       AND (v_service OR s.tenant_id = v_tenant)
     ORDER BY s.next_occurrence_at
       FOR UPDATE OF s SKIP LOCKED
  LOOP
    v_occurrence := v_series.next_occurrence_at;
    v_skipped := 0;
    LOOP  -- catch up to the latest due occurrence (bounded: ten years of days)
      v_next := public.awp_task_series_next(v_series, v_occurrence);
      EXIT WHEN v_next IS NULL OR v_next > now() OR v_skipped >= 3660
        OR (v_series.ends_on IS NOT NULL AND (v_next AT TIME ZONE v_series.timezone)::date > v_series.ends_on);
      v_occurrence := v_next;
      v_skipped := v_skipped + 1;
    END LOOP;

    IF v_series.missed_policy = 'auto_skip' THEN
      SELECT t.id INTO v_prior FROM public.tasks t
       WHERE t.series_id = v_series.id AND t.tenant_id = v_series.tenant_id
         AND t.status IN ('todo', 'in_progress', 'blocked')
       ORDER BY t.series_occurrence_at DESC NULLS LAST LIMIT 1;
      IF FOUND THEN
        UPDATE public.tasks t SET status = 'missed' WHERE t.id = v_prior;
        INSERT INTO public.audit_log (tenant_id, actor_type, module, entity_type, entity_id, action,
                                      summary, meta)
        VALUES (v_series.tenant_id, 'system', 'tasks', 'task', v_prior, 'status_changed',
                'Auto-missed: a new occurrence was spawned before this one was done',
                jsonb_build_object('series_id', v_series.id, 'reason', 'recurring_auto_skip'));
      END IF;
    END IF;

    v_task := NULL;
    INSERT INTO public.tasks (tenant_id, stream_id, title, description, priority, assignee_type,
                              assignee_agent_id, tags, linked_entity_type, linked_entity_id,
                              model_override, thinking_override, series_id, series_occurrence_at,
                              due_date, meta)
    VALUES (v_series.tenant_id, v_series.stream_id, v_series.title, v_series.description,
            v_series.priority, v_series.assignee_type, v_series.assignee_agent_id, v_series.tags,
            v_series.linked_entity_type, v_series.linked_entity_id, v_series.model_override,
            v_series.thinking_override, v_series.id, v_occurrence, v_occurrence,
            CASE WHEN v_skipped > 0 THEN jsonb_build_object('catchup_skipped', v_skipped) ELSE '{}'::jsonb END)
    ON CONFLICT (series_id, series_occurrence_at) DO NOTHING
    RETURNING id INTO v_task;

    IF v_task IS NOT NULL THEN
      v_spawned := v_spawned + 1;
      INSERT INTO public.audit_log (tenant_id, actor_type, module, entity_type, entity_id, action,
                                    summary, meta)
      VALUES (v_series.tenant_id, 'system', 'tasks', 'task', v_task, 'created',
              'Recurring instance spawned: ' || v_series.title,
              jsonb_build_object('series_id', v_series.id, 'occurrence_at', v_occurrence,
                                 'catchup_skipped', v_skipped));
    END IF;

    -- The series' trigger pauses it once ends_after_count or ends_on is reached.
    UPDATE public.task_series s
       SET spawned_count = s.spawned_count + CASE WHEN v_task IS NULL THEN 0 ELSE 1 END,
           last_spawned_at = CASE WHEN v_task IS NULL THEN s.last_spawned_at ELSE now() END,
           next_occurrence_at = public.awp_task_series_next(v_series, v_occurrence)
     WHERE s.id = v_series.id;
  END LOOP;
  RETURN v_spawned;
END
$$;
REVOKE ALL ON FUNCTION public.spawn_due_task_instances() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.spawn_due_task_instances() TO authenticated, service_role;

CREATE TRIGGER workspace_before_write BEFORE INSERT OR UPDATE ON public.workspace
  FOR EACH ROW EXECUTE FUNCTION public.awp_workspace_before_write();
CREATE TRIGGER tenants_seed_workspace AFTER INSERT ON public.tenants
  FOR EACH ROW EXECUTE FUNCTION public.awp_tenants_seed_workspace();
CREATE TRIGGER task_series_before_write BEFORE INSERT OR UPDATE ON public.task_series
  FOR EACH ROW EXECUTE FUNCTION public.awp_task_series_before_write();

-- Every tenant's workspace row: not set up yet where it is new (a row already there keeps
-- initialized as sql/0029 left it).
INSERT INTO public.workspace (tenant_id, name, initialized)
SELECT t.id, 'HQ', false FROM public.tenants t
ON CONFLICT (tenant_id) DO NOTHING;
