-- Recurring tasks (the product's task_series): the next occurrence of a series, kept on every
-- write of the series, and the spawn of each due occurrence as a task.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

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
