-- Inbox producers: task assignment, comment mentions, blocker resolved, deliverable review and
-- overdue escalation.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- BEFORE INSERT OR UPDATE on tasks: completed_at follows status; an agent assignee is an agent.
CREATE OR REPLACE FUNCTION public.awp_tasks_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.status = 'done' AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM 'done') THEN
    NEW.completed_at := coalesce(NEW.completed_at, now());
  ELSIF NEW.status <> 'done' AND TG_OP = 'UPDATE' AND OLD.status = 'done' THEN
    NEW.completed_at := NULL;
  END IF;
  IF NEW.assignee_agent_id IS NOT NULL AND NEW.assignee_type IS NULL THEN
    NEW.assignee_type := 'agent';
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_tasks_before_write() FROM PUBLIC, anon, authenticated;

-- Task assigned to an agent (insert, or a new assignee): task_assignment, or task_reassignment
-- when it had another agent. Key: task_assignment|task_reassignment:<task>:<agent>:x<txn>.
CREATE OR REPLACE FUNCTION public.awp_enqueue_task_assignment() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_type public.inbox_event_type;
  v_previous uuid := CASE WHEN TG_OP = 'UPDATE' THEN OLD.assignee_agent_id END;
BEGIN
  IF NEW.assignee_agent_id IS NULL OR NEW.assignee_agent_id IS NOT DISTINCT FROM v_previous
     OR NEW.status IN ('done', 'cancelled') OR NEW.archived_at IS NOT NULL THEN
    RETURN NULL;
  END IF;
  v_type := CASE WHEN v_previous IS NULL THEN 'task_assignment' ELSE 'task_reassignment' END;
  PERFORM public.awp_enqueue_inbox_item(
    NEW.tenant_id, NEW.assignee_agent_id, v_type,
    v_type || ':' || NEW.id || ':' || NEW.assignee_agent_id || ':x' || pg_current_xact_id()::text,
    NEW.title,
    CASE v_type WHEN 'task_assignment' THEN 'Task assigned: ' ELSE 'Task reassigned: ' END || NEW.title,
    jsonb_strip_nulls(jsonb_build_object('task_title', NEW.title, 'task_status', NEW.status,
      'task_priority', NEW.priority, 'previous_agent_id', v_previous, 'due_at', coalesce(NEW.due_at, NEW.due_date),
      'model_override', NEW.model_override, 'thinking_override', NEW.thinking_override)),
    p_task_id => NEW.id);
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_enqueue_task_assignment() FROM PUBLIC, anon, authenticated;

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

-- A blocking task became done or cancelled: each open task it blocked (X blocked_by T, or
-- T blocks X) that has no other unresolved blocker gets a blocker_resolved item for its agent.
-- Only done and cancelled resolve a blocker; a missed blocker stays open until it is done.
-- Key: blocker_resolved:<blocked task>:<resolved task>:x<txn>.
CREATE OR REPLACE FUNCTION public.awp_enqueue_blocker_resolved() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  x record;
BEGIN
  FOR x IN
    SELECT DISTINCT t.id, t.title, t.assignee_agent_id
      FROM public.task_relations r
      JOIN public.tasks t ON t.id = CASE WHEN r.relation_type = 'blocked_by' THEN r.source_task_id
                                         ELSE r.target_task_id END
     WHERE ((r.relation_type = 'blocked_by' AND r.target_task_id = NEW.id)
         OR (r.relation_type = 'blocks' AND r.source_task_id = NEW.id))
       AND t.status IN ('todo', 'in_progress', 'blocked') AND t.archived_at IS NULL
       AND t.assignee_agent_id IS NOT NULL
       AND NOT EXISTS (
         SELECT 1 FROM public.task_relations r2
           JOIN public.tasks b ON b.id = CASE WHEN r2.relation_type = 'blocked_by' THEN r2.target_task_id
                                              ELSE r2.source_task_id END
          WHERE ((r2.relation_type = 'blocked_by' AND r2.source_task_id = t.id)
              OR (r2.relation_type = 'blocks' AND r2.target_task_id = t.id))
            AND b.id <> NEW.id AND b.status NOT IN ('done', 'cancelled'))
  LOOP
    PERFORM public.awp_enqueue_inbox_item(
      NEW.tenant_id, x.assignee_agent_id, 'blocker_resolved',
      'blocker_resolved:' || x.id || ':' || NEW.id || ':x' || pg_current_xact_id()::text,
      x.title, format('Blocker resolved: "%s" is %s. You can proceed with: "%s"', NEW.title, NEW.status, x.title),
      jsonb_build_object('resolved_task_id', NEW.id, 'resolved_task_title', NEW.title,
                         'blocked_task_title', x.title, 'resolution', NEW.status, 'remaining_blockers', 0),
      p_task_id => x.id);
  END LOOP;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_enqueue_blocker_resolved() FROM PUBLIC, anon, authenticated;

-- Work products: sent for review (-> in_review) wakes the reviewer agent; revision_requested
-- or rejected wakes the submitting agent; when every deliverable of a task is approved, the
-- task becomes done. Key: deliverable_review:<work product>:<status>:<review round>.
CREATE OR REPLACE FUNCTION public.awp_work_products_before_write() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.status = 'in_review' AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM 'in_review') THEN
    NEW.review_round := CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE OLD.review_round + 1 END;
  END IF;
  IF NEW.status IN ('approved', 'revision_requested', 'rejected')
     AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status) THEN
    NEW.reviewed_at := coalesce(NEW.reviewed_at, now());
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_work_products_before_write() FROM PUBLIC, anon, authenticated;

-- AFTER INSERT OR UPDATE on work_products, on a status change of a deliverable: in_review wakes
-- the reviewer agent, revision_requested or rejected the submitting agent (deliverable_review
-- items); approved makes the task done once every deliverable of it is approved.
CREATE OR REPLACE FUNCTION public.awp_enqueue_deliverable_review() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_agent uuid;
  v_summary text;
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.status IS NOT DISTINCT FROM OLD.status THEN
    RETURN NULL;
  END IF;
  IF NEW.status = 'in_review' THEN
    v_agent := NEW.reviewer_agent_id;
    v_summary := 'Deliverable sent for review: ' || NEW.title;
  ELSIF NEW.status IN ('revision_requested', 'rejected') THEN
    v_agent := NEW.submitted_by_agent_id;
    v_summary := CASE NEW.status WHEN 'rejected' THEN 'Deliverable rejected: '
                                 ELSE 'Revision requested on deliverable: ' END || NEW.title;
  ELSIF NEW.status = 'approved' AND NEW.is_deliverable AND NEW.task_id IS NOT NULL THEN
    IF NOT EXISTS (SELECT 1 FROM public.work_products w
                    WHERE w.task_id = NEW.task_id AND w.is_deliverable AND w.status <> 'approved') THEN
      UPDATE public.tasks t SET status = 'done'
       WHERE t.id = NEW.task_id AND t.status IN ('todo', 'in_progress', 'blocked', 'missed');
    END IF;
    RETURN NULL;
  END IF;
  IF v_agent IS NULL OR NOT NEW.is_deliverable THEN
    RETURN NULL;
  END IF;
  PERFORM public.awp_enqueue_inbox_item(
    NEW.tenant_id, v_agent, 'deliverable_review',
    'deliverable_review:' || NEW.id || ':' || NEW.status || ':' || NEW.review_round,
    NEW.title, v_summary,
    jsonb_strip_nulls(jsonb_build_object('work_product_id', NEW.id, 'work_product_title', NEW.title,
      'review_status', NEW.status, 'review_note', NEW.review_note, 'review_round', NEW.review_round,
      'url', NEW.url)),
    p_task_id => NEW.task_id, p_work_product_id => NEW.id);
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_enqueue_deliverable_review() FROM PUBLIC, anon, authenticated;

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
