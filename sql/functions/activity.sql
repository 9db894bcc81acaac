-- What the product's tables do on their own when a row changes: a contact's last contact date
-- and a template's use count follow interactions; the bell gets a notification when a task is
-- assigned, done, blocked or overdue and when an agent submits a deliverable; a deliverable's
-- review wakes its agent or completes its task; a comment on a task that mentions agents wakes
-- them.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

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
