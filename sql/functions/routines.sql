-- Routines: schedules and their next occurrence (time zones, DST), validation, the scheduler's
-- spawn of schedule items, event routines.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- The zone name, checked; AW004 for anything that is not an IANA zone (POSIX strings such as
-- "XYZ+3" and bare abbreviations such as "PST" included).
CREATE OR REPLACE FUNCTION public.awp_check_time_zone(p_timezone text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
BEGIN
  IF p_timezone IS NULL OR btrim(p_timezone) = '' THEN
    RETURN 'UTC';
  END IF;
  IF EXISTS (SELECT 1 FROM public.awp_time_zones z WHERE z.name = p_timezone)
     OR (p_timezone ~ '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)+$'
         AND EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names n WHERE n.name = p_timezone)) THEN
    RETURN p_timezone;
  END IF;
  RAISE EXCEPTION 'unknown time zone "%" (expected an IANA name such as Europe/Berlin)', p_timezone
    USING ERRCODE = 'AW004';
END
$$;
REVOKE ALL ON FUNCTION public.awp_check_time_zone(text) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_check_time_zone(text) TO authenticated, service_role;

-- A local wall-clock time in a zone as an instant. A time that occurs twice (the hour repeated
-- when clocks go back) is its first occurrence; a time that does not exist (clocks go forward)
-- is moved forward by the size of the gap (02:30 on a spring-forward night -> 03:30).
CREATE OR REPLACE FUNCTION public.awp_local_to_utc(p_local timestamp, p_timezone text) RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_t timestamptz := p_local AT TIME ZONE 'UTC';
  v_before interval := ((v_t - interval '1 day') AT TIME ZONE p_timezone) - ((v_t - interval '1 day') AT TIME ZONE 'UTC');
  v_after interval := ((v_t + interval '1 day') AT TIME ZONE p_timezone) - ((v_t + interval '1 day') AT TIME ZONE 'UTC');
  v_c1 timestamptz := v_t - v_before;
  v_c2 timestamptz := v_t - v_after;
  v_ok1 boolean := (v_c1 AT TIME ZONE p_timezone) = p_local;
  v_ok2 boolean := (v_c2 AT TIME ZONE p_timezone) = p_local;
BEGIN
  IF v_ok1 AND v_ok2 THEN
    RETURN least(v_c1, v_c2);
  ELSIF v_ok1 THEN
    RETURN v_c1;
  ELSIF v_ok2 THEN
    RETURN v_c2;
  END IF;
  RETURN v_c1;  -- in a gap: the offset before the change moves it forward by the gap
END
$$;
REVOKE ALL ON FUNCTION public.awp_local_to_utc(timestamp, text) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_local_to_utc(timestamp, text) TO authenticated, service_role;

-- The first fire time strictly after p_from (default now()). See sql/README.md for the rules of
-- each cadence. Errors: AW004 for an unknown cadence, a bad interval, day, time or zone.
CREATE OR REPLACE FUNCTION public.routine_next_occurrence(p_cadence_type text, p_interval_n integer DEFAULT NULL,
                                               p_days_of_week smallint[] DEFAULT NULL,
                                               p_day_of_month integer DEFAULT NULL,
                                               p_time_of_day text DEFAULT NULL,
                                               p_timezone text DEFAULT NULL,
                                               p_from timestamptz DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_tz text := public.awp_check_time_zone(p_timezone);
  v_from timestamptz := coalesce(p_from, now());
  v_time time;
  v_date date;
  v_day date;
  v_month date;
  v_dom integer;
  v_days smallint[];
  v_candidate timestamptz;
  v_n integer := p_interval_n;
BEGIN
  IF p_cadence_type IS NULL OR p_cadence_type NOT IN ('every_n_minutes', 'every_n_hours', 'daily',
       'weekdays', 'weekly', 'monthly', 'every_n_days') THEN
    RAISE EXCEPTION 'unknown cadence_type "%" (expected every_n_minutes, every_n_hours, daily, weekdays, weekly, monthly or every_n_days)',
      coalesce(p_cadence_type, 'null') USING ERRCODE = 'AW004';
  END IF;
  IF v_n IS NOT NULL AND (v_n < 1 OR v_n > 525600) THEN
    RAISE EXCEPTION 'interval_n must be between 1 and 525600, got %', v_n USING ERRCODE = 'AW004';
  END IF;
  IF p_time_of_day IS NULL OR btrim(p_time_of_day) = '' THEN
    v_time := time '09:00';
  ELSIF btrim(p_time_of_day) ~ '^([01]?[0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]+)?)?$' THEN
    v_time := btrim(p_time_of_day)::time;
  ELSE
    RAISE EXCEPTION 'invalid time_of_day "%" (expected HH:MM between 00:00 and 23:59)', p_time_of_day
      USING ERRCODE = 'AW004';
  END IF;
  IF p_days_of_week IS NOT NULL AND NOT p_days_of_week <@ ARRAY[1, 2, 3, 4, 5, 6, 7]::smallint[] THEN
    RAISE EXCEPTION 'days_of_week must hold ISO weekdays 1 (Monday) to 7 (Sunday), got %', p_days_of_week
      USING ERRCODE = 'AW004';
  END IF;
  IF p_day_of_month IS NOT NULL AND (p_day_of_month < 1 OR p_day_of_month > 31) THEN
    RAISE EXCEPTION 'day_of_month must be between 1 and 31, got %', p_day_of_month USING ERRCODE = 'AW004';
  END IF;

  v_date := (v_from AT TIME ZONE v_tz)::date;

  CASE p_cadence_type
  WHEN 'every_n_minutes' THEN
    RETURN date_trunc('minute', v_from) + make_interval(mins => coalesce(v_n, 15));
  WHEN 'every_n_hours' THEN
    RETURN date_trunc('minute', v_from) + make_interval(hours => coalesce(v_n, 1));
  WHEN 'daily' THEN
    FOR i IN 0..2 LOOP
      v_candidate := public.awp_local_to_utc((v_date + i) + v_time, v_tz);
      IF v_candidate > v_from THEN RETURN v_candidate; END IF;
    END LOOP;
  WHEN 'weekdays' THEN
    FOR i IN 0..9 LOOP
      v_day := v_date + i;
      IF extract(isodow FROM v_day) <= 5 THEN
        v_candidate := public.awp_local_to_utc(v_day + v_time, v_tz);
        IF v_candidate > v_from THEN RETURN v_candidate; END IF;
      END IF;
    END LOOP;
  WHEN 'weekly' THEN
    v_days := CASE WHEN p_days_of_week IS NULL OR cardinality(p_days_of_week) = 0
                   THEN ARRAY[extract(isodow FROM v_date)::smallint] ELSE p_days_of_week END;
    FOR i IN 0..14 LOOP
      v_day := v_date + i;
      IF extract(isodow FROM v_day)::smallint = ANY (v_days) THEN
        v_candidate := public.awp_local_to_utc(v_day + v_time, v_tz);
        IF v_candidate > v_from THEN RETURN v_candidate; END IF;
      END IF;
    END LOOP;
  WHEN 'monthly' THEN
    v_dom := coalesce(p_day_of_month, extract(day FROM v_date)::integer);
    FOR i IN 0..2 LOOP
      v_month := (date_trunc('month', v_date) + make_interval(months => i))::date;
      -- Day 29-31 in a shorter month: the month's last day.
      v_day := v_month + (least(v_dom, extract(day FROM (v_month + interval '1 month' - interval '1 day'))::integer) - 1);
      v_candidate := public.awp_local_to_utc(v_day + v_time, v_tz);
      IF v_candidate > v_from THEN RETURN v_candidate; END IF;
    END LOOP;
  WHEN 'every_n_days' THEN
    v_candidate := public.awp_local_to_utc(v_date + v_time, v_tz);
    IF v_candidate > v_from THEN RETURN v_candidate; END IF;
    RETURN public.awp_local_to_utc((v_date + coalesce(v_n, 1)) + v_time, v_tz);
  END CASE;
  RAISE EXCEPTION 'routine_next_occurrence: no occurrence found for % after %', p_cadence_type, v_from
    USING ERRCODE = 'AW004';
END
$$;
REVOKE ALL ON FUNCTION public.routine_next_occurrence(text, integer, smallint[], integer, text, text, timestamptz) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.routine_next_occurrence(text, integer, smallint[], integer, text, text, timestamptz) TO authenticated, service_role;

-- Column check for event routines: the watched field must exist on the entity.
CREATE OR REPLACE FUNCTION public.awp_event_entity_table(p_entity_type text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = ''
AS $$
  SELECT CASE p_entity_type WHEN 'task' THEN 'tasks' WHEN 'contact' THEN 'contacts'
    WHEN 'knowledge_item' THEN 'knowledge_items' WHEN 'collection_record' THEN 'collection_records' END
$$;
REVOKE ALL ON FUNCTION public.awp_event_entity_table(text) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_event_entity_table(text) TO authenticated, service_role;

-- BEFORE INSERT OR UPDATE on routines: agent_slug from the agent, field and schedule checked
-- when written (never later, inside someone else's write), next_run_at computed.
CREATE OR REPLACE FUNCTION public.awp_routines_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_slug text;
  v_schedule_changed boolean;
BEGIN
  SELECT a.slug INTO v_slug FROM public.agents a WHERE a.id = NEW.agent_id AND a.tenant_id = NEW.tenant_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'routines: agent % not found in tenant %', NEW.agent_id, NEW.tenant_id
      USING ERRCODE = 'AW003';
  END IF;
  IF NEW.agent_slug IS NOT NULL AND NEW.agent_slug <> v_slug THEN
    RAISE EXCEPTION 'routines: agent_slug "%" does not match agent % (slug "%")', NEW.agent_slug,
      NEW.agent_id, v_slug USING ERRCODE = 'AW004';
  END IF;
  NEW.agent_slug := v_slug;

  IF NEW.trigger_type = 'event' THEN
    IF NEW.condition IN ('changed_to', 'changed_from', 'any_change') AND (NEW.field IS NULL OR btrim(NEW.field) = '') THEN
      RAISE EXCEPTION 'routines: condition % needs the watched field', NEW.condition USING ERRCODE = 'AW004';
    END IF;
    IF NEW.field IS NOT NULL AND NOT (
         EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                  WHERE a.attrelid = ('public.' || public.awp_event_entity_table(NEW.entity_type))::regclass
                    AND a.attname = NEW.field AND a.attnum > 0 AND NOT a.attisdropped)
      OR (NEW.entity_type = 'collection_record' AND NEW.field ~ '^[A-Za-z0-9_][A-Za-z0-9_ .-]{0,127}$')) THEN
      RAISE EXCEPTION 'routines: % has no field "%"', NEW.entity_type, NEW.field USING ERRCODE = 'AW004';
    END IF;
    IF NEW.collection_id IS NOT NULL AND NEW.entity_type <> 'collection_record' THEN
      RAISE EXCEPTION 'routines: collection_id only applies to collection_record routines' USING ERRCODE = 'AW004';
    END IF;
    NEW.next_run_at := NULL;
    RETURN NEW;
  END IF;

  NEW.timezone := public.awp_check_time_zone(NEW.timezone);
  v_schedule_changed := TG_OP = 'INSERT' OR NEW.cadence_type IS DISTINCT FROM OLD.cadence_type
    OR NEW.interval_n IS DISTINCT FROM OLD.interval_n OR NEW.days_of_week IS DISTINCT FROM OLD.days_of_week
    OR NEW.day_of_month IS DISTINCT FROM OLD.day_of_month OR NEW.time_of_day IS DISTINCT FROM OLD.time_of_day
    OR NEW.timezone IS DISTINCT FROM OLD.timezone OR NEW.trigger_type IS DISTINCT FROM OLD.trigger_type
    OR (NEW.is_active AND NOT OLD.is_active);
  IF v_schedule_changed THEN
    -- Validates every schedule field (AW004 on a bad one).
    PERFORM public.routine_next_occurrence(NEW.cadence_type, NEW.interval_n, NEW.days_of_week,
                                           NEW.day_of_month, NEW.time_of_day::text, NEW.timezone, now());
    IF NEW.next_run_at IS NULL OR (TG_OP = 'UPDATE' AND NEW.next_run_at IS NOT DISTINCT FROM OLD.next_run_at) THEN
      NEW.next_run_at := public.routine_next_occurrence(NEW.cadence_type, NEW.interval_n, NEW.days_of_week,
                                                        NEW.day_of_month, NEW.time_of_day::text, NEW.timezone,
                                                        now());
    END IF;
    NEW.last_error := NULL;
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_routines_before_write() FROM PUBLIC, anon, authenticated;

-- Called by the scheduler every minute. For each due, active schedule routine: one inbox item
-- for the slot that came due (dedup key routine:<id>:<slot minute>), then next_run_at moves to
-- the first occurrence after now(): after downtime a routine fires once, never a burst. Returns
-- the number of items created. A routine whose schedule cannot be computed gets last_error and
-- next_run_at NULL (it stops until edited); the others go on.
CREATE OR REPLACE FUNCTION public.spawn_routine_schedule_items() RETURNS integer
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  r public.routines;
  v_slot timestamptz;
  v_next timestamptz;
  v_step interval;
  v_item uuid;
  v_created integer := 0;
BEGIN
  FOR r IN SELECT * FROM public.routines q
            WHERE q.trigger_type = 'schedule' AND q.is_active AND q.archived_at IS NULL
              AND q.next_run_at <= now()
            ORDER BY q.next_run_at, q.id
            FOR UPDATE SKIP LOCKED LOOP
    BEGIN
      v_slot := r.next_run_at;
      IF r.cadence_type IN ('every_n_minutes', 'every_n_hours') THEN
        -- Elapsed-time cadences keep their grid: the next slot of slot + k * step after now().
        v_step := CASE r.cadence_type WHEN 'every_n_minutes' THEN make_interval(mins => coalesce(r.interval_n, 15))
                                      ELSE make_interval(hours => coalesce(r.interval_n, 1)) END;
        v_next := v_slot + v_step * (floor(extract(epoch FROM now() - v_slot) / extract(epoch FROM v_step)) + 1);
      ELSE
        v_next := public.routine_next_occurrence(r.cadence_type, r.interval_n, r.days_of_week, r.day_of_month,
                                                 r.time_of_day::text, r.timezone, now());
      END IF;
      v_item := public.awp_enqueue_inbox_item(
        r.tenant_id, r.agent_id, 'routine_schedule',
        'routine:' || r.id || ':' || to_char(v_slot AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI'),
        r.name, coalesce(r.instruction, r.name),
        jsonb_build_object('routine_id', r.id, 'routine_name', r.name, 'instruction', r.instruction,
                           'scheduled_for', v_slot, 'cadence_type', r.cadence_type, 'timezone', r.timezone),
        p_routine_id => r.id);
      UPDATE public.routines u
         SET next_run_at = v_next, last_run_at = now(),
             run_count = u.run_count + CASE WHEN v_item IS NULL THEN 0 ELSE 1 END, last_error = NULL
       WHERE u.id = r.id;
      IF v_item IS NOT NULL THEN
        v_created := v_created + 1;
      END IF;
    EXCEPTION WHEN OTHERS THEN
      UPDATE public.routines u SET next_run_at = NULL, last_error = left(SQLERRM, 1000) WHERE u.id = r.id;
    END;
  END LOOP;
  RETURN v_created;
END
$$;
REVOKE ALL ON FUNCTION public.spawn_routine_schedule_items() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.spawn_routine_schedule_items() TO service_role;

-- Event routines: AFTER INSERT OR UPDATE on tasks, contacts, knowledge_items and
-- collection_records. Runs as the owner (the writer cannot create inbox items). One item per
-- routine, entity and transaction (dedup key routine_event:<routine>:<entity>:<transaction>).
CREATE OR REPLACE FUNCTION public.awp_fire_event_routines() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_entity text := CASE TG_TABLE_NAME WHEN 'tasks' THEN 'task' WHEN 'contacts' THEN 'contact'
                     WHEN 'knowledge_items' THEN 'knowledge_item' WHEN 'collection_records' THEN 'collection_record' END;
  v_new jsonb;
  v_old jsonb;
  v_new_value jsonb;
  v_old_value jsonb;
  v_changed boolean;
  v_fire boolean;
  v_item uuid;
  r public.routines;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM public.routines q
                  WHERE q.tenant_id = NEW.tenant_id AND q.entity_type = v_entity
                    AND q.trigger_type = 'event' AND q.is_active AND q.archived_at IS NULL) THEN
    RETURN NULL;
  END IF;
  v_new := to_jsonb(NEW) - 'embedding' - 'search_vector';
  v_old := CASE WHEN TG_OP = 'UPDATE' THEN to_jsonb(OLD) - 'embedding' - 'search_vector' END;
  FOR r IN SELECT * FROM public.routines q
            WHERE q.tenant_id = NEW.tenant_id AND q.entity_type = v_entity
              AND q.trigger_type = 'event' AND q.is_active AND q.archived_at IS NULL
              AND (v_entity <> 'collection_record' OR q.collection_id IS NULL
                   OR q.collection_id = (v_new ->> 'collection_id')::uuid)
            ORDER BY q.created_at, q.id LOOP
    IF r.field IS NULL THEN
      v_new_value := NULL; v_old_value := NULL;
    ELSIF v_entity = 'collection_record' AND NOT v_new ? r.field THEN
      v_new_value := v_new -> 'values' -> r.field;
      v_old_value := v_old -> 'values' -> r.field;
    ELSE
      v_new_value := v_new -> r.field;
      v_old_value := v_old -> r.field;
    END IF;
    v_changed := TG_OP = 'UPDATE' AND r.field IS NOT NULL AND v_new_value IS DISTINCT FROM v_old_value;
    v_fire := CASE r.condition
      WHEN 'created' THEN TG_OP = 'INSERT'
                          AND (r.field IS NULL OR r.value IS NULL OR (v_new_value #>> '{}') = r.value)
      WHEN 'any_change' THEN v_changed
      WHEN 'changed_to' THEN v_changed AND (v_new_value #>> '{}') IS NOT DISTINCT FROM r.value
      WHEN 'changed_from' THEN v_changed AND (v_old_value #>> '{}') IS NOT DISTINCT FROM r.value
      ELSE false END;
    CONTINUE WHEN NOT v_fire;
    v_item := public.awp_enqueue_inbox_item(
      NEW.tenant_id, r.agent_id, 'routine_event',
      'routine_event:' || r.id || ':' || NEW.id || ':x' || pg_current_xact_id()::text,
      r.name, coalesce(r.instruction, r.name),
      jsonb_build_object('routine_id', r.id, 'routine_name', r.name, 'instruction', r.instruction,
                         'entity_type', v_entity, 'entity_id', NEW.id, 'field', r.field,
                         'condition', r.condition, 'value', r.value,
                         'old_value', v_old_value #>> '{}', 'new_value', v_new_value #>> '{}'),
      p_task_id => CASE WHEN v_entity = 'task' THEN NEW.id END,
      p_contact_id => CASE WHEN v_entity = 'contact' THEN NEW.id END,
      p_routine_id => r.id);
    IF v_item IS NOT NULL THEN
      UPDATE public.routines u SET last_run_at = now(), run_count = u.run_count + 1 WHERE u.id = r.id;
    END IF;
  END LOOP;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_fire_event_routines() FROM PUBLIC, anon, authenticated;
