-- The agent inbox: item defaults, leasing, attempts and back-off, dead_letter, and the
-- awp_inbox_<gateway> NOTIFYs.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- Back-off before retry number attempts+1: 30 s, 60 s, 120 s, ... capped at 15 minutes.
CREATE OR REPLACE FUNCTION public.awp_inbox_backoff(p_attempts integer) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT make_interval(secs => least(900, 30 * power(2, greatest(coalesce(p_attempts, 1), 1) - 1)))
$$;
REVOKE ALL ON FUNCTION public.awp_inbox_backoff(integer) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_inbox_backoff(integer) TO awp_gateway, service_role;

-- BEFORE INSERT: agent_slug and gateway_id come from the agent of the same tenant.
CREATE OR REPLACE FUNCTION public.awp_inbox_before_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_agent record;
BEGIN
  SELECT a.slug, a.gateway_id INTO v_agent
    FROM public.agents a WHERE a.id = NEW.agent_id AND a.tenant_id = NEW.tenant_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'agent_inbox_items: agent % not found in tenant %', NEW.agent_id, NEW.tenant_id
      USING ERRCODE = 'AW003';
  END IF;
  IF NEW.agent_slug IS NOT NULL AND NEW.agent_slug <> v_agent.slug THEN
    RAISE EXCEPTION 'agent_inbox_items: agent_slug "%" does not match agent % (slug "%")',
      NEW.agent_slug, NEW.agent_id, v_agent.slug USING ERRCODE = 'AW004';
  END IF;
  NEW.agent_slug := v_agent.slug;
  NEW.gateway_id := coalesce(NEW.gateway_id, v_agent.gateway_id);
  IF NEW.dedup_key IS NULL OR btrim(NEW.dedup_key) = '' THEN
    RAISE EXCEPTION 'agent_inbox_items: dedup_key is required' USING ERRCODE = 'AW004';
  END IF;
  -- The original product's names (sql/0029): attempt_count is attempts; context is the payload
  -- as its UI shows it, with last_failure_reason while the item has failed. A writer of either
  -- name (the original UI inserts a context) sets both.
  IF NEW.attempts = 0 AND NEW.attempt_count IS DISTINCT FROM 0 THEN
    NEW.attempts := NEW.attempt_count;
  END IF;
  NEW.attempt_count := NEW.attempts;
  IF NEW.payload = '{}'::jsonb AND NEW.context IS DISTINCT FROM '{}'::jsonb THEN
    NEW.payload := NEW.context - 'last_failure_reason';
  END IF;
  NEW.context := NEW.payload || CASE WHEN NEW.last_error IS NULL THEN '{}'::jsonb
                                     ELSE jsonb_build_object('last_failure_reason', NEW.last_error) END;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_inbox_before_insert() FROM PUBLIC, anon, authenticated;

-- Re-driving a dead letter (dead_letter -> pending, by an operator) starts it afresh: attempts
-- back to 0 and no back-off left over, so it gets its full max_attempts again. attempt_count and
-- context (the original's names, sql/0029) follow attempts and payload + last_error, whichever
-- name an update sets.
CREATE OR REPLACE FUNCTION public.awp_inbox_check_transition() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.attempt_count IS DISTINCT FROM OLD.attempt_count
     AND NEW.attempts IS NOT DISTINCT FROM OLD.attempts THEN
    NEW.attempts := NEW.attempt_count;
  END IF;
  IF NEW.context IS DISTINCT FROM OLD.context AND NEW.payload IS NOT DISTINCT FROM OLD.payload THEN
    NEW.payload := NEW.context - 'last_failure_reason';
  END IF;
  IF NEW.status IS DISTINCT FROM OLD.status
     AND (OLD.status = 'done' OR (OLD.status = 'dead_letter' AND NEW.status <> 'pending')) THEN
    RAISE EXCEPTION 'inbox item %: illegal transition from % to %', OLD.id, OLD.status, NEW.status
      USING ERRCODE = 'AW001';
  END IF;
  IF OLD.status = 'dead_letter' AND NEW.status = 'pending' THEN
    NEW.attempts := 0;
    NEW.not_before := NULL;
  END IF;
  IF NEW.status <> 'leased' THEN
    NEW.lease_expires_at := NULL;
  END IF;
  NEW.attempt_count := NEW.attempts;
  IF NEW.payload IS DISTINCT FROM OLD.payload OR NEW.last_error IS DISTINCT FROM OLD.last_error
     OR NEW.context IS DISTINCT FROM OLD.context THEN
    NEW.context := NEW.payload || CASE WHEN NEW.last_error IS NULL THEN '{}'::jsonb
                                       ELSE jsonb_build_object('last_failure_reason', NEW.last_error) END;
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_inbox_check_transition() FROM PUBLIC, anon, authenticated;

-- Wake-ups: one NOTIFY per statement per gateway for items that became leasable now.
-- Runs as its owner (sql/0034): whoever writes the row wakes the daemons, and no API role may
-- call awp_notify_gateway itself.
CREATE OR REPLACE FUNCTION public.awp_notify_inbox() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id
               FROM new_rows n
              WHERE n.gateway_id IS NOT NULL AND n.status IN ('pending', 'failed')
                AND (n.not_before IS NULL OR n.not_before <= now())
              GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_inbox_' || replace(r.gateway_id::text, '-', ''),
                        CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSE
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id
               FROM new_rows n JOIN old_rows o ON o.id = n.id
              WHERE n.gateway_id IS NOT NULL AND n.status IN ('pending', 'failed')
                AND (n.not_before IS NULL OR n.not_before <= now())
                AND (o.status NOT IN ('pending', 'failed') OR o.gateway_id IS DISTINCT FROM n.gateway_id
                     OR (o.not_before IS NOT NULL AND o.not_before > now()))
              GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_inbox_' || replace(r.gateway_id::text, '-', ''),
                        CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_notify_inbox() FROM PUBLIC, anon, authenticated;

-- An agent moved to another gateway takes its open items along (runs as owner: the user who
-- moves the agent cannot write inbox items).
CREATE OR REPLACE FUNCTION public.awp_agents_gateway_moved() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  UPDATE public.agent_inbox_items i SET gateway_id = NEW.gateway_id
   WHERE i.agent_id = NEW.id AND i.status IN ('pending', 'failed', 'leased');
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_agents_gateway_moved() FROM PUBLIC, anon, authenticated;

-- Creates an inbox item unless its dedup key exists. Returns the new id, or NULL on a duplicate.
CREATE OR REPLACE FUNCTION public.awp_enqueue_inbox_item(p_tenant_id uuid, p_agent_id uuid,
    p_event_type public.inbox_event_type, p_dedup_key text, p_title text, p_summary text,
    p_payload jsonb DEFAULT '{}', p_task_id uuid DEFAULT NULL, p_comment_id uuid DEFAULT NULL,
    p_contact_id uuid DEFAULT NULL, p_routine_id uuid DEFAULT NULL,
    p_work_product_id uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_id uuid;
BEGIN
  INSERT INTO public.agent_inbox_items (tenant_id, agent_id, event_type, dedup_key, title, summary,
                                        payload, task_id, comment_id, contact_id, routine_id,
                                        work_product_id)
  VALUES (p_tenant_id, p_agent_id, p_event_type, p_dedup_key, p_title, p_summary,
          coalesce(p_payload, '{}'), p_task_id, p_comment_id, p_contact_id, p_routine_id,
          p_work_product_id)
  ON CONFLICT (dedup_key) DO NOTHING
  RETURNING id INTO v_id;
  RETURN v_id;
END
$$;
REVOKE ALL ON FUNCTION public.awp_enqueue_inbox_item(uuid, uuid, public.inbox_event_type, text, text, text, jsonb, uuid, uuid, uuid, uuid, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_enqueue_inbox_item(uuid, uuid, public.inbox_event_type, text, text, text, jsonb, uuid, uuid, uuid, uuid, uuid) TO service_role;

-- Expired inbox leases count as failed attempts: back to failed with back-off, or dead_letter
-- once attempts reached max_attempts. Returns (retried, dead_lettered).
CREATE OR REPLACE FUNCTION public.awp_expire_inbox_leases(p_agent_id uuid DEFAULT NULL,
                                               OUT retried integer, OUT dead_lettered integer)
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  WITH expired AS (
    SELECT i.id FROM public.agent_inbox_items i
     WHERE i.status = 'leased' AND i.lease_expires_at < now()
       AND (p_agent_id IS NULL OR i.agent_id = p_agent_id)
     FOR UPDATE SKIP LOCKED),
  moved AS (
    UPDATE public.agent_inbox_items i
       SET status = CASE WHEN i.attempts >= i.max_attempts THEN 'dead_letter'::public.inbox_item_status
                         ELSE 'failed'::public.inbox_item_status END,
           failed_at = now(),
           not_before = CASE WHEN i.attempts >= i.max_attempts THEN NULL
                             ELSE now() + public.awp_inbox_backoff(i.attempts) END,
           last_error = format('lease expired at %s (held by %s, attempt %s of %s)', i.lease_expires_at,
                               coalesce(i.leased_by, 'unknown'), i.attempts, i.max_attempts),
           lease_token = NULL
      FROM expired WHERE i.id = expired.id
    RETURNING i.status)
  SELECT count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'dead_letter')
    INTO retried, dead_lettered FROM moved;
END
$$;
REVOKE ALL ON FUNCTION public.awp_expire_inbox_leases(uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_expire_inbox_leases(uuid) TO awp_gateway, service_role;

-- The dispatcher's scan of its gateway (apps/inbox-dispatcher/queue.cpp, docs/protocols/
-- inbox-queue.md): one row per ready agent with items leasable now (its oldest item's age in epoch
-- seconds and how many; an expired lease counts, leasing reaps it first), then one last row, agent
-- NULL, with the seconds until the next item becomes leasable (a back-off ends or a lease expires;
-- NULL when nothing waits). A function so that the server connection keeps its plan: sent as a
-- statement, unnamed through PgBouncer, it was planned afresh on every scan (~0.3 ms, most of its
-- cost). Row-level security applies: a gateway's login scans only its own gateway.
CREATE OR REPLACE FUNCTION public.awp_inbox_scan(p_gateway_id uuid)
RETURNS TABLE (agent_id uuid, oldest double precision, due_in double precision, waiting bigint)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH w AS (
    SELECT i.agent_id, i.created_at, i.status, i.not_before, i.lease_expires_at
      FROM public.agent_inbox_items i
     WHERE i.gateway_id = p_gateway_id AND i.status IN ('pending', 'failed', 'leased')
       AND (i.status = 'leased' OR i.attempts < i.max_attempts))
  SELECT w.agent_id, extract(epoch FROM min(w.created_at))::float8, NULL::float8, count(*)
    FROM w JOIN public.agents a ON a.id = w.agent_id
   WHERE a.gateway_id = p_gateway_id AND a.status = 'ready'
     AND ((w.status <> 'leased' AND (w.not_before IS NULL OR w.not_before <= now()))
          OR (w.status = 'leased' AND w.lease_expires_at < now()))
   GROUP BY w.agent_id
  UNION ALL
  SELECT NULL::uuid, NULL::float8, extract(epoch FROM min(s.t) - clock_timestamp())::float8, NULL::bigint
    FROM (SELECT CASE WHEN w.status = 'leased' THEN w.lease_expires_at ELSE w.not_before END AS t
            FROM w
           WHERE (w.status = 'leased' AND w.lease_expires_at >= now())
              OR (w.status <> 'leased' AND w.not_before > now())) s;
END
$$;
REVOKE ALL ON FUNCTION public.awp_inbox_scan(uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_inbox_scan(uuid) TO awp_gateway, service_role;

-- Leases the agent's oldest item that is pending, or failed and past its back-off.
CREATE OR REPLACE FUNCTION public.lease_inbox_item(p_agent_id uuid, p_lease_seconds integer DEFAULT 120,
                                        p_runner text DEFAULT NULL)
RETURNS SETOF public.agent_inbox_items
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF p_agent_id IS NULL THEN
    RAISE EXCEPTION 'lease_inbox_item: p_agent_id is required' USING ERRCODE = 'AW004';
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    RAISE EXCEPTION 'lease_inbox_item: p_lease_seconds must be between 1 and 86400, got %',
      coalesce(p_lease_seconds::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.agents a WHERE a.id = p_agent_id) THEN
    RAISE EXCEPTION 'agent %: not found', p_agent_id USING ERRCODE = 'AW003';
  END IF;
  -- The sweep (two statements, planned afresh on every call) runs only when one of this agent's
  -- leases has expired: an index probe on agent_inbox_items_lease_idx otherwise.
  IF EXISTS (SELECT 1 FROM public.agent_inbox_items e
              WHERE e.status = 'leased' AND e.lease_expires_at < now() AND e.agent_id = p_agent_id) THEN
    PERFORM public.awp_expire_inbox_leases(p_agent_id);
  END IF;
  RETURN QUERY
  UPDATE public.agent_inbox_items i
     SET status = 'leased', attempts = i.attempts + 1, lease_token = gen_random_uuid(),
         leased_by = p_runner, leased_at = now(),
         lease_expires_at = now() + make_interval(secs => p_lease_seconds), not_before = NULL
   WHERE i.id = (SELECT q.id FROM public.agent_inbox_items q
                  WHERE q.agent_id = p_agent_id AND q.status IN ('pending', 'failed')
                    AND q.attempts < q.max_attempts
                    AND (q.not_before IS NULL OR q.not_before <= now())
                  ORDER BY q.created_at, q.id
                  LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING i.*;
END
$$;
REVOKE ALL ON FUNCTION public.lease_inbox_item(uuid, integer, text) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.lease_inbox_item(uuid, integer, text) TO awp_gateway, service_role;

-- Locks an inbox item for a transition and checks it: AW004 no id, AW003 not found, AW002 lease
-- lost, AW001 not leased.
CREATE OR REPLACE FUNCTION public.awp_inbox_item_for_transition(p_item_id uuid, p_verb text, p_lease_token uuid)
RETURNS public.agent_inbox_items
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_inbox_items;
BEGIN
  IF p_item_id IS NULL THEN
    RAISE EXCEPTION 'cannot %: p_item_id is required', p_verb USING ERRCODE = 'AW004';
  END IF;
  SELECT * INTO v FROM public.agent_inbox_items WHERE id = p_item_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'inbox item %: not found', p_item_id USING ERRCODE = 'AW003';
  END IF;
  IF p_lease_token IS NOT NULL AND v.lease_token IS DISTINCT FROM p_lease_token THEN
    RAISE EXCEPTION 'inbox item %: cannot %: lease lost (the lease token no longer matches; status is %)',
      p_item_id, p_verb, v.status USING ERRCODE = 'AW002';
  END IF;
  IF v.status <> 'leased' THEN
    RAISE EXCEPTION 'inbox item %: cannot %: status is %, expected leased', p_item_id, p_verb, v.status
      USING ERRCODE = 'AW001';
  END IF;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.awp_inbox_item_for_transition(uuid, text, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_inbox_item_for_transition(uuid, text, uuid) TO awp_gateway, service_role;

-- leased -> done.
CREATE OR REPLACE FUNCTION public.complete_inbox_item(p_item_id uuid, p_lease_token uuid DEFAULT NULL)
RETURNS public.agent_inbox_items
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_inbox_items;
BEGIN
  PERFORM public.awp_inbox_item_for_transition(p_item_id, 'complete', p_lease_token);
  UPDATE public.agent_inbox_items i
     SET status = 'done', completed_at = now(), lease_token = NULL, last_error = NULL
   WHERE i.id = p_item_id RETURNING * INTO v;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.complete_inbox_item(uuid, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.complete_inbox_item(uuid, uuid) TO awp_gateway, service_role;

-- leased -> failed (waits p_retry_after_seconds, default the exponential back-off) or
-- dead_letter when attempts reached max_attempts.
CREATE OR REPLACE FUNCTION public.fail_inbox_item(p_item_id uuid, p_reason text DEFAULT NULL,
                                       p_lease_token uuid DEFAULT NULL,
                                       p_retry_after_seconds integer DEFAULT NULL)
RETURNS public.agent_inbox_items
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.agent_inbox_items;
BEGIN
  IF p_retry_after_seconds IS NOT NULL AND (p_retry_after_seconds < 0 OR p_retry_after_seconds > 86400) THEN
    RAISE EXCEPTION 'fail_inbox_item: p_retry_after_seconds must be between 0 and 86400, got %',
      p_retry_after_seconds USING ERRCODE = 'AW004';
  END IF;
  v := public.awp_inbox_item_for_transition(p_item_id, 'fail', p_lease_token);
  UPDATE public.agent_inbox_items i
     SET status = CASE WHEN v.attempts >= v.max_attempts THEN 'dead_letter'::public.inbox_item_status
                       ELSE 'failed'::public.inbox_item_status END,
         failed_at = now(), lease_token = NULL,
         last_error = coalesce(p_reason, 'failed without a reason'),
         not_before = CASE WHEN v.attempts >= v.max_attempts THEN NULL
                           WHEN p_retry_after_seconds IS NOT NULL
                             THEN now() + make_interval(secs => p_retry_after_seconds)
                           ELSE now() + public.awp_inbox_backoff(v.attempts) END
   WHERE i.id = p_item_id RETURNING * INTO v;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.fail_inbox_item(uuid, text, uuid, integer) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.fail_inbox_item(uuid, text, uuid, integer) TO awp_gateway, service_role;

-- AFTER UPDATE, per row, filtered by the trigger's WHEN (leasable again, or moved to another
-- gateway): NOTIFY awp_inbox_<gateway> with the item id.
-- Runs as its owner (sql/0034): whoever writes the row wakes the daemons, and no API role may
-- call awp_notify_gateway itself.
CREATE OR REPLACE FUNCTION public.awp_notify_inbox_requeued() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  PERFORM public.awp_notify_gateway('awp_inbox_' || replace(NEW.gateway_id::text, '-', ''), NEW.id::text);
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_notify_inbox_requeued() FROM PUBLIC, anon, authenticated;

-- An agent that becomes ready again (resumed, woken from hibernation, out of error) wakes its
-- gateway's dispatcher when it has items waiting, instead of leaving them to the safety poll.
CREATE OR REPLACE FUNCTION public.awp_agents_became_ready() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM public.agent_inbox_items i
              WHERE i.agent_id = NEW.id AND i.status IN ('pending', 'failed')) THEN
    PERFORM public.awp_notify_gateway('awp_inbox_' || replace(NEW.gateway_id::text, '-', ''), '');
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_agents_became_ready() FROM PUBLIC, anon, authenticated;
