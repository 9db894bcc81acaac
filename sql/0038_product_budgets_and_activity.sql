-- What the product's tables do on their own (issue 38; docs/product-ui.md): agent budgets rolled
-- up from every usage row, with recompute_agent_budget; the notifications of task and
-- deliverable events; a deliverable's review; comments that mention agents; interactions that
-- date a contact and count a template's uses; get_agent_daily_usage with the two columns the
-- product's UI charts; a task's deadline (due_at, else the end of due_date's day: the product's
-- due_date is a calendar day) for the overdue escalation and its index.
--
-- The functions are defined here as sql/functions/{budgets,activity,queries,producers}.sql had
-- them when this file was written (the triggers and the index below need them); those files hold
-- their current bodies.

-- sql/functions/budgets.sql

-- The zone if it is an IANA zone awp knows, else UTC: for zones stored before they were checked,
-- where a bad one must not make a usage row fail.
CREATE OR REPLACE FUNCTION public.awp_time_zone_or_utc(p_timezone text) RETURNS text
LANGUAGE sql STABLE
SET search_path = ''
AS $$
  SELECT coalesce((SELECT z.name FROM public.awp_time_zones z WHERE z.name = p_timezone), 'UTC')
$$;
REVOKE ALL ON FUNCTION public.awp_time_zone_or_utc(text) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_time_zone_or_utc(text) TO authenticated, service_role;

-- A budget's status (the product's rule): ok without a limit; unmetered when the period has only
-- calls without a cost; exceeded at the limit; warned at soft_threshold_pct of it.
CREATE OR REPLACE FUNCTION public.awp_budget_status(p_limit numeric, p_threshold_pct integer,
                                                     p_spend numeric, p_metered integer,
                                                     p_unmetered integer)
RETURNS public.budget_status
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT CASE
    WHEN p_limit IS NULL THEN 'ok'
    WHEN p_metered = 0 AND p_unmetered > 0 THEN 'unmetered'
    WHEN p_spend >= p_limit THEN 'exceeded'
    WHEN p_spend >= p_limit * p_threshold_pct / 100.0 THEN 'warned'
    ELSE 'ok' END::public.budget_status
$$;
REVOKE ALL ON FUNCTION public.awp_budget_status(numeric, integer, numeric, integer, integer) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_budget_status(numeric, integer, numeric, integer, integer)
  TO authenticated, service_role;

-- BEFORE INSERT OR UPDATE on agent_budgets: the period's zone is an IANA zone (AW004; NULL or ''
-- is UTC).
CREATE OR REPLACE FUNCTION public.awp_agent_budgets_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  NEW.period_anchor_tz := public.awp_check_time_zone(NEW.period_anchor_tz);
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_agent_budgets_before_write() FROM PUBLIC, anon, authenticated;

-- AFTER INSERT on agent_usage: the agent's budget row (made on its first usage, with the
-- workspace's default limit, threshold and cut-off, its month in the owner's zone) adds the row
-- to the current period, or starts a new period with it when the month turned; the status is
-- re-read, and a budget that just became warned or exceeded notifies once per period.
-- Runs as the writer of the usage row (the service role, a daemon).
CREATE OR REPLACE FUNCTION public.awp_agent_usage_budget() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_budget public.agent_budgets;
  v_old public.budget_status;
  v_period date;
  v_cost numeric := NEW.cost_total_usd;
BEGIN
  INSERT INTO public.agent_budgets (agent_id, tenant_id, monthly_limit_usd, soft_threshold_pct,
                                    hard_cutoff, period_anchor_tz, current_period_start)
  SELECT NEW.agent_id, NEW.tenant_id, w.default_agent_budget_usd, coalesce(w.default_soft_threshold_pct, 80),
         coalesce(w.default_hard_cutoff, true), public.awp_time_zone_or_utc(w.owner_timezone),
         date_trunc('month', NEW.occurred_at AT TIME ZONE public.awp_time_zone_or_utc(w.owner_timezone))::date
    FROM (SELECT 1) one
    LEFT JOIN public.workspace w ON w.tenant_id = NEW.tenant_id
  ON CONFLICT (agent_id) DO NOTHING;

  SELECT * INTO v_budget FROM public.agent_budgets b WHERE b.agent_id = NEW.agent_id FOR UPDATE;
  v_old := v_budget.status;
  v_period := date_trunc('month', NEW.occurred_at AT TIME ZONE public.awp_time_zone_or_utc(v_budget.period_anchor_tz))::date;
  IF v_period > v_budget.current_period_start THEN  -- a new month: the period starts again
    v_budget.current_period_start := v_period;
    v_budget.current_period_spend_usd := 0;
    v_budget.current_period_tokens := 0;
    v_budget.current_period_metered_calls := 0;
    v_budget.current_period_unmetered_calls := 0;
    v_budget.warned_at := NULL;
    v_budget.exceeded_at := NULL;
  END IF;
  IF v_period >= v_budget.current_period_start THEN  -- a row of an earlier month counts for none
    v_budget.current_period_spend_usd := v_budget.current_period_spend_usd + coalesce(v_cost, 0);
    v_budget.current_period_tokens := v_budget.current_period_tokens + NEW.total_tokens;
    IF v_cost IS NULL THEN
      v_budget.current_period_unmetered_calls := v_budget.current_period_unmetered_calls + 1;
    ELSE
      v_budget.current_period_metered_calls := v_budget.current_period_metered_calls + 1;
    END IF;
  END IF;
  v_budget.status := public.awp_budget_status(v_budget.monthly_limit_usd, v_budget.soft_threshold_pct,
    v_budget.current_period_spend_usd, v_budget.current_period_metered_calls,
    v_budget.current_period_unmetered_calls);
  IF v_budget.status IN ('warned', 'exceeded') THEN
    v_budget.warned_at := coalesce(v_budget.warned_at, now());
  END IF;
  IF v_budget.status = 'exceeded' THEN
    v_budget.exceeded_at := coalesce(v_budget.exceeded_at, now());
  END IF;
  UPDATE public.agent_budgets b SET
    current_period_start = v_budget.current_period_start,
    current_period_spend_usd = v_budget.current_period_spend_usd,
    current_period_tokens = v_budget.current_period_tokens,
    current_period_metered_calls = v_budget.current_period_metered_calls,
    current_period_unmetered_calls = v_budget.current_period_unmetered_calls,
    status = v_budget.status, warned_at = v_budget.warned_at, exceeded_at = v_budget.exceeded_at,
    last_usage_at = greatest(b.last_usage_at, NEW.occurred_at)
  WHERE b.agent_id = NEW.agent_id;

  IF v_budget.status IN ('warned', 'exceeded') AND v_old IS DISTINCT FROM v_budget.status THEN
    INSERT INTO public.notifications (tenant_id, type, title, body, entity_type, entity_id,
                                      actor_type, meta)
    SELECT v_budget.tenant_id, 'budget.' || v_budget.status::text,
           'Agent ' || a.name || CASE v_budget.status WHEN 'warned' THEN ' near monthly budget'
                                                      ELSE ' exceeded monthly budget' END,
           CASE v_budget.status WHEN 'warned'
             THEN 'Spent $' || round(v_budget.current_period_spend_usd, 2) || ' of $' || v_budget.monthly_limit_usd
             ELSE 'Stopped at $' || round(v_budget.current_period_spend_usd, 2) || ' (limit $'
                  || v_budget.monthly_limit_usd || ')' END,
           'agent_budget', v_budget.agent_id, 'system',
           jsonb_build_object('agent_id', v_budget.agent_id, 'period_start', v_budget.current_period_start::text,
                              'spend', v_budget.current_period_spend_usd, 'limit', v_budget.monthly_limit_usd)
      FROM public.agents a WHERE a.id = v_budget.agent_id AND a.tenant_id = v_budget.tenant_id
    ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_agent_usage_budget() FROM PUBLIC, anon, authenticated;

-- The agent's budget for the current month, counted again from its usage rows of that month
-- (the product's RPC, behind the UI's "Recompute"): made first when the agent has none, with the
-- workspace's defaults. Returns the budget row. SECURITY INVOKER; a user names only an agent of their own
-- tenant (another's is "not found", AW003), whose usage row-level security shows them.
CREATE OR REPLACE FUNCTION public.recompute_agent_budget(p_agent_id uuid) RETURNS public.agent_budgets
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_tenant uuid;
  v_tz text;
  v_period date;
  v_from timestamptz;
  v_result public.agent_budgets;
BEGIN
  SELECT a.tenant_id INTO v_tenant FROM public.agents a
   WHERE a.id = p_agent_id
     AND (pg_catalog.pg_has_role(current_user, 'service_role', 'MEMBER')
          OR a.tenant_id = public.current_tenant_id());
  IF NOT FOUND THEN
    RAISE EXCEPTION 'agent %: not found', p_agent_id USING ERRCODE = 'AW003';
  END IF;
  INSERT INTO public.agent_budgets (agent_id, tenant_id, monthly_limit_usd, soft_threshold_pct,
                                    hard_cutoff, period_anchor_tz)
  SELECT p_agent_id, v_tenant, w.default_agent_budget_usd, coalesce(w.default_soft_threshold_pct, 80),
         coalesce(w.default_hard_cutoff, true), public.awp_time_zone_or_utc(w.owner_timezone)
    FROM (SELECT 1) one
    LEFT JOIN public.workspace w ON w.tenant_id = v_tenant
  ON CONFLICT (agent_id) DO NOTHING;

  SELECT public.awp_time_zone_or_utc(b.period_anchor_tz) INTO v_tz
    FROM public.agent_budgets b WHERE b.agent_id = p_agent_id;
  v_period := date_trunc('month', now() AT TIME ZONE v_tz)::date;
  v_from := v_period::timestamp AT TIME ZONE v_tz;

  WITH agg AS (
    SELECT coalesce(sum(u.cost_total_usd), 0) AS spend, coalesce(sum(u.total_tokens), 0) AS tokens,
           count(*) FILTER (WHERE u.cost_total_usd IS NOT NULL)::integer AS metered,
           count(*) FILTER (WHERE u.cost_total_usd IS NULL)::integer AS unmetered,
           max(u.occurred_at) AS last_at
      FROM public.agent_usage u
     WHERE u.agent_id = p_agent_id AND u.tenant_id = v_tenant AND u.occurred_at >= v_from
       AND u.occurred_at < (v_period + interval '1 month')::timestamp AT TIME ZONE v_tz)
  UPDATE public.agent_budgets b SET
    current_period_start = v_period,
    current_period_spend_usd = agg.spend,
    current_period_tokens = agg.tokens,
    current_period_metered_calls = agg.metered,
    current_period_unmetered_calls = agg.unmetered,
    last_usage_at = agg.last_at,
    status = public.awp_budget_status(b.monthly_limit_usd, b.soft_threshold_pct, agg.spend, agg.metered,
                                      agg.unmetered),
    warned_at = CASE WHEN b.monthly_limit_usd IS NULL
                       OR agg.spend < b.monthly_limit_usd * b.soft_threshold_pct / 100.0 THEN NULL
                     ELSE coalesce(b.warned_at, now()) END,
    exceeded_at = CASE WHEN b.monthly_limit_usd IS NULL OR agg.spend < b.monthly_limit_usd THEN NULL
                       ELSE coalesce(b.exceeded_at, now()) END
    FROM agg
   WHERE b.agent_id = p_agent_id
  RETURNING b.* INTO v_result;
  RETURN v_result;
END
$$;
REVOKE ALL ON FUNCTION public.recompute_agent_budget(uuid) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.recompute_agent_budget(uuid) TO authenticated, service_role;

-- sql/functions/activity.sql

-- AFTER INSERT on interactions: the contact's last_contact_date moves forward to the
-- interaction's time, and the template used counts one more use. Runs as the writer, in the
-- interaction's tenant.
CREATE OR REPLACE FUNCTION public.awp_interactions_after_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.contact_id IS NOT NULL THEN
    UPDATE public.contacts c SET last_contact_date = NEW.occurred_at
     WHERE c.id = NEW.contact_id AND c.tenant_id = NEW.tenant_id
       AND (c.last_contact_date IS NULL OR c.last_contact_date < NEW.occurred_at);
  END IF;
  IF NEW.template_id IS NOT NULL THEN
    UPDATE public.templates t SET use_count = t.use_count + 1
     WHERE t.id = NEW.template_id AND t.tenant_id = NEW.tenant_id;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_interactions_after_insert() FROM PUBLIC, anon, authenticated;

-- AFTER UPDATE on tasks, when its status or agent changed: the product's notifications
-- (task_assigned to a new agent; task_completed and task_blocked of an agent's task;
-- task_overdue when it became missed). Runs as the writer (a user of the tenant, the service
-- role, the scheduler's escalation).
CREATE OR REPLACE FUNCTION public.awp_tasks_notify() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_agent text;
BEGIN
  IF NEW.assignee_agent_id IS NOT NULL THEN
    SELECT a.name INTO v_agent FROM public.agents a
     WHERE a.id = NEW.assignee_agent_id AND a.tenant_id = NEW.tenant_id;
  END IF;
  IF NEW.assignee_agent_id IS NOT NULL AND NEW.assignee_agent_id IS DISTINCT FROM OLD.assignee_agent_id THEN
    INSERT INTO public.notifications (tenant_id, type, title, body, entity_type, entity_id,
                                      actor_type, actor_agent_id, meta)
    VALUES (NEW.tenant_id, 'task_assigned', coalesce(v_agent, 'Agent') || ' assigned to task', NEW.title,
            'task', NEW.id, 'system', NEW.assignee_agent_id,
            jsonb_build_object('task_title', NEW.title, 'agent_name', v_agent));
  END IF;
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    IF NEW.status IN ('done', 'blocked') AND NEW.assignee_agent_id IS NOT NULL THEN
      INSERT INTO public.notifications (tenant_id, type, title, body, entity_type, entity_id,
                                        actor_type, actor_agent_id, meta)
      VALUES (NEW.tenant_id, CASE NEW.status WHEN 'done' THEN 'task_completed' ELSE 'task_blocked' END,
              coalesce(v_agent, 'Agent') || CASE NEW.status WHEN 'done' THEN ' completed a task' ELSE ' is blocked' END,
              NEW.title, 'task', NEW.id, 'agent', NEW.assignee_agent_id,
              jsonb_build_object('task_title', NEW.title, 'old_status', OLD.status, 'new_status', NEW.status));
    ELSIF NEW.status = 'missed' THEN
      INSERT INTO public.notifications (tenant_id, type, title, body, entity_type, entity_id,
                                        actor_type, actor_agent_id, meta)
      VALUES (NEW.tenant_id, 'task_overdue', 'Task overdue: ' || NEW.title,
              CASE WHEN v_agent IS NOT NULL THEN 'Assigned to ' || v_agent || ' - deadline was '
                   ELSE 'Deadline was ' END || coalesce(coalesce(NEW.due_at, NEW.due_date)::text, 'unknown'),
              'task', NEW.id, 'system', NEW.assignee_agent_id,
              jsonb_build_object('task_title', NEW.title, 'due_date', coalesce(NEW.due_at, NEW.due_date),
                                 'agent_name', v_agent));
    END IF;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_tasks_notify() FROM PUBLIC, anon, authenticated;

-- AFTER INSERT OR UPDATE OF review_status on entity_links, for a deliverable an agent submitted:
-- submitted, the bell says so (deliverable_submitted); approved, the task it belongs to becomes
-- done once every deliverable of it is approved; revision_requested or rejected, the agent gets a
-- deliverable_review item (key deliverable_review:<link>:<status>:<day>). SECURITY DEFINER, as
-- awp's other inbox producers (users cannot write inbox items): every row it reads or writes is
-- named by the link's own tenant.
CREATE OR REPLACE FUNCTION public.awp_entity_links_deliverable() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_agent_id uuid;
  v_agent_name text;
  v_task_id uuid;
  v_task_title text;
BEGIN
  IF NOT NEW.is_deliverable OR NEW.submitted_by_agent_id IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT a.id, a.name INTO v_agent_id, v_agent_name FROM public.agents a
   WHERE a.id = NEW.submitted_by_agent_id AND a.tenant_id = NEW.tenant_id;
  IF NEW.owner_type = 'task' THEN
    SELECT t.id, t.title INTO v_task_id, v_task_title FROM public.tasks t
     WHERE t.id = NEW.owner_id AND t.tenant_id = NEW.tenant_id;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO public.notifications (tenant_id, type, title, body, entity_type, entity_id,
                                      actor_type, actor_agent_id, meta)
    VALUES (NEW.tenant_id, 'deliverable_submitted',
            coalesce(v_agent_name, 'Agent') || ' submitted a deliverable for review',
            coalesce(NEW.label, 'Untitled'), NEW.owner_type, NEW.owner_id, 'agent', v_agent_id,
            jsonb_build_object('deliverable_id', NEW.id, 'deliverable_label', NEW.label,
                               'task_title', v_task_title, 'agent_name', v_agent_name));
    RETURN NULL;
  END IF;
  IF NEW.review_status IS NOT DISTINCT FROM OLD.review_status THEN
    RETURN NULL;
  END IF;
  IF NEW.review_status = 'approved' AND v_task_id IS NOT NULL THEN
    IF NOT EXISTS (SELECT 1 FROM public.entity_links l
                    WHERE l.tenant_id = NEW.tenant_id AND l.owner_type = 'task' AND l.owner_id = NEW.owner_id
                      AND l.is_deliverable AND l.review_status IS DISTINCT FROM 'approved') THEN
      UPDATE public.tasks t SET status = 'done'
       WHERE t.id = v_task_id AND t.tenant_id = NEW.tenant_id
         AND t.status IN ('todo', 'in_progress', 'blocked', 'missed');
    END IF;
  ELSIF NEW.review_status IN ('revision_requested', 'rejected') AND v_agent_id IS NOT NULL THEN
    PERFORM public.awp_enqueue_inbox_item(
      NEW.tenant_id, v_agent_id, 'deliverable_review',
      'deliverable_review:' || NEW.id || ':' || NEW.review_status || ':' || current_date,
      coalesce(NEW.label, 'Untitled'),
      CASE NEW.review_status WHEN 'rejected' THEN 'Deliverable rejected: '
                             ELSE 'Revision requested on deliverable: ' END || coalesce(NEW.label, 'Untitled'),
      jsonb_strip_nulls(jsonb_build_object('deliverable_id', NEW.id, 'deliverable_label', NEW.label,
        'review_status', NEW.review_status, 'review_note', NEW.review_note, 'url', NEW.url)),
      p_task_id => v_task_id);
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_entity_links_deliverable() FROM PUBLIC, anon, authenticated;

-- AFTER INSERT on comments, on a task: every agent of the tenant the comment mentions (the
-- mentions array or @slug in the body, awp_mentioned_agents), but its author, gets a
-- task_comment_mention item (key comment_mention:<comment>:<agent>). SECURITY DEFINER, as awp's
-- other inbox producers; the task must be the comment's tenant's.
CREATE OR REPLACE FUNCTION public.awp_comments_enqueue_mentions() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_task record;
  a record;
BEGIN
  IF NEW.entity_type <> 'task' THEN
    RETURN NULL;
  END IF;
  SELECT t.id, t.title INTO v_task FROM public.tasks t
   WHERE t.id = NEW.entity_id AND t.tenant_id = NEW.tenant_id;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  FOR a IN SELECT * FROM public.awp_mentioned_agents(NEW.tenant_id, NEW.mentions, NEW.body, NEW.actor_agent_id)
  LOOP
    PERFORM public.awp_enqueue_inbox_item(
      NEW.tenant_id, a.id, 'task_comment_mention', 'comment_mention:' || NEW.id || ':' || a.id,
      v_task.title, '@' || a.slug || ' mentioned in a comment on: ' || v_task.title,
      jsonb_strip_nulls(jsonb_build_object('comment_id', NEW.id, 'comment_body', left(NEW.body, 500),
        'task_title', v_task.title, 'actor_type', NEW.actor_type, 'actor_agent_id', NEW.actor_agent_id)),
      p_task_id => v_task.id);
  END LOOP;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_comments_enqueue_mentions() FROM PUBLIC, anon, authenticated;

-- sql/functions/queries.sql: get_agent_daily_usage with the product's two columns (a new
-- return type: dropped and made again)

DROP FUNCTION public.get_agent_daily_usage(uuid, date, date);

-- The agent's LLM usage per UTC day from p_start_date to p_end_date inclusive (defaults: the
-- last 30 days up to today), one row per day, days without usage as zeros. At most 366 days.
-- spend_usd and tokens are the original product's names of cost_usd and total_tokens (its UI
-- charts them). RLS applies. AW003 when the agent is not visible; AW004 for a bad range.
CREATE OR REPLACE FUNCTION public.get_agent_daily_usage(p_agent_id uuid, p_start_date date DEFAULT NULL,
                                             p_end_date date DEFAULT NULL)
RETURNS TABLE (day date, input_tokens bigint, output_tokens bigint, total_tokens bigint,
               cost_usd numeric, calls bigint, spend_usd numeric, tokens bigint)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_end date := coalesce(p_end_date, (now() AT TIME ZONE 'UTC')::date);
  v_start date := coalesce(p_start_date, v_end - 29);
BEGIN
  IF v_start > v_end THEN
    RAISE EXCEPTION 'get_agent_daily_usage: p_start_date % is after p_end_date %', v_start, v_end
      USING ERRCODE = 'AW004';
  END IF;
  IF v_end - v_start > 365 THEN
    RAISE EXCEPTION 'get_agent_daily_usage: at most 366 days at a time, got % days', v_end - v_start + 1
      USING ERRCODE = 'AW004';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.agents a WHERE a.id = p_agent_id) THEN
    RAISE EXCEPTION 'agent %: not found', p_agent_id USING ERRCODE = 'AW003';
  END IF;
  RETURN QUERY
  WITH used AS (
    SELECT (u.created_at AT TIME ZONE 'UTC')::date AS d, sum(u.input_tokens)::bigint AS i,
           sum(u.output_tokens)::bigint AS o, sum(u.cost_usd) AS c, count(*) AS n
      FROM public.agent_usage u
     WHERE u.agent_id = p_agent_id
       AND u.created_at >= (v_start::timestamp AT TIME ZONE 'UTC')
       AND u.created_at < ((v_end + 1)::timestamp AT TIME ZONE 'UTC')
     GROUP BY 1)
  SELECT s.d::date, coalesce(used.i, 0), coalesce(used.o, 0), coalesce(used.i, 0) + coalesce(used.o, 0),
         coalesce(used.c, 0), coalesce(used.n, 0), coalesce(used.c, 0),
         coalesce(used.i, 0) + coalesce(used.o, 0)
    FROM generate_series(v_start, v_end, interval '1 day') AS s(d)
    LEFT JOIN used ON used.d = s.d::date
   ORDER BY 1;
END
$$;
REVOKE ALL ON FUNCTION public.get_agent_daily_usage(uuid, date, date) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.get_agent_daily_usage(uuid, date, date) TO authenticated, service_role;

-- sql/functions/producers.sql: a task's deadline, and the escalation by it

-- A task's deadline: due_at, the instant; else the end of due_date's day (UTC). due_date is a
-- calendar day to the original product's UI (its date picker sends "2026-03-06", midnight) and to
-- its escalation (missed once due_date < the current date), so a task due on a day is not missed
-- before that day has passed, and a recurring task spawned at its occurrence is not missed at once.
CREATE OR REPLACE FUNCTION public.awp_task_deadline(p_due_at timestamptz, p_due_date timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT coalesce(p_due_at, (date_trunc('day', p_due_date AT TIME ZONE 'UTC') + interval '1 day') AT TIME ZONE 'UTC')
$$;
REVOKE ALL ON FUNCTION public.awp_task_deadline(timestamptz, timestamptz) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_task_deadline(timestamptz, timestamptz) TO authenticated, service_role;

-- Called by the scheduler: every open, unarchived task past its deadline (awp_task_deadline:
-- due_at, else the end of due_date's day) becomes missed; its agent gets a task_assignment item
-- marked overdue (the spec has no overdue event type), and that agent's manager (reports_to) an
-- escalation item. Keys: overdue:<task>:<due epoch>, overdue_escalation:<task>:<manager>:<due
-- epoch>. Returns the number of tasks marked missed.
CREATE OR REPLACE FUNCTION public.escalate_overdue_tasks() RETURNS integer
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  t record;
  v_manager uuid;
  v_due_key text;
  v_count integer := 0;
BEGIN
  FOR t IN
    WITH due AS (
      SELECT q.id FROM public.tasks q
       WHERE q.status IN ('todo', 'in_progress', 'blocked') AND q.archived_at IS NULL
         AND public.awp_task_deadline(q.due_at, q.due_date) < now()
       ORDER BY public.awp_task_deadline(q.due_at, q.due_date)
       FOR UPDATE SKIP LOCKED)
    UPDATE public.tasks u SET status = 'missed' FROM due WHERE u.id = due.id
    RETURNING u.id, u.tenant_id, u.title, u.assignee_agent_id,
              public.awp_task_deadline(u.due_at, u.due_date) AS due
  LOOP
    v_count := v_count + 1;
    CONTINUE WHEN t.assignee_agent_id IS NULL;
    v_due_key := floor(extract(epoch FROM t.due))::bigint::text;
    PERFORM public.awp_enqueue_inbox_item(
      t.tenant_id, t.assignee_agent_id, 'task_assignment', 'overdue:' || t.id || ':' || v_due_key,
      t.title, 'OVERDUE: task missed its deadline: ' || t.title,
      jsonb_build_object('overdue', true, 'escalation', true, 'task_title', t.title, 'due_at', t.due),
      p_task_id => t.id);
    SELECT a.reports_to_id INTO v_manager FROM public.agents a WHERE a.id = t.assignee_agent_id;
    IF v_manager IS NOT NULL THEN
      PERFORM public.awp_enqueue_inbox_item(
        t.tenant_id, v_manager, 'task_assignment',
        'overdue_escalation:' || t.id || ':' || v_manager || ':' || v_due_key,
        t.title, 'ESCALATION: a report missed the deadline of: ' || t.title,
        jsonb_build_object('overdue', true, 'escalation', true, 'task_title', t.title, 'due_at', t.due,
                           'assignee_agent_id', t.assignee_agent_id),
        p_task_id => t.id);
    END IF;
  END LOOP;
  RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION public.escalate_overdue_tasks() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.escalate_overdue_tasks() TO service_role;

CREATE TRIGGER agent_budgets_before_write BEFORE INSERT OR UPDATE ON public.agent_budgets
  FOR EACH ROW EXECUTE FUNCTION public.awp_agent_budgets_before_write();
CREATE TRIGGER agent_usage_budget AFTER INSERT ON public.agent_usage
  FOR EACH ROW EXECUTE FUNCTION public.awp_agent_usage_budget();
CREATE TRIGGER interactions_after_insert AFTER INSERT ON public.interactions
  FOR EACH ROW EXECUTE FUNCTION public.awp_interactions_after_insert();
CREATE TRIGGER tasks_notify AFTER UPDATE OF status, assignee_agent_id ON public.tasks
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                     OR OLD.assignee_agent_id IS DISTINCT FROM NEW.assignee_agent_id)
  EXECUTE FUNCTION public.awp_tasks_notify();
CREATE TRIGGER entity_links_deliverable AFTER INSERT OR UPDATE OF review_status ON public.entity_links
  FOR EACH ROW WHEN (NEW.is_deliverable AND NEW.submitted_by_agent_id IS NOT NULL)
  EXECUTE FUNCTION public.awp_entity_links_deliverable();
CREATE TRIGGER comments_enqueue_mentions AFTER INSERT ON public.comments
  FOR EACH ROW WHEN (NEW.entity_type = 'task')
  EXECUTE FUNCTION public.awp_comments_enqueue_mentions();

-- The overdue escalation finds open tasks past their deadline by this index.
DROP INDEX public.tasks_overdue_idx;
CREATE INDEX tasks_overdue_idx ON public.tasks (public.awp_task_deadline(due_at, due_date))
  WHERE status IN ('todo', 'in_progress', 'blocked') AND archived_at IS NULL;

-- Every agent's budget row, as the product makes them (no limit until one is set).
INSERT INTO public.agent_budgets (agent_id, tenant_id)
SELECT a.id, a.tenant_id FROM public.agents a
ON CONFLICT (agent_id) DO NOTHING;
