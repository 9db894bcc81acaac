-- Read RPCs for users: an agent's reporting chain, a task's relations, an agent's daily usage.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- The reporting chain upward from an agent: depth 0 is the agent itself, then its manager, ...
-- Stops at p_max_depth (default 5, at most 100) and before an agent already in the chain (a
-- cycle). RLS applies. AW003 when the agent is not visible.
CREATE OR REPLACE FUNCTION public.agent_reports_chain(p_agent_id uuid, p_max_depth integer DEFAULT 5)
RETURNS TABLE (depth integer, agent_id uuid, slug text, name text)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_max integer := coalesce(p_max_depth, 5);
BEGIN
  IF v_max < 0 OR v_max > 100 THEN
    RAISE EXCEPTION 'agent_reports_chain: p_max_depth must be between 0 and 100, got %', v_max
      USING ERRCODE = 'AW004';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM public.agents a WHERE a.id = p_agent_id) THEN
    RAISE EXCEPTION 'agent %: not found', p_agent_id USING ERRCODE = 'AW003';
  END IF;
  RETURN QUERY
  WITH RECURSIVE chain (d, aid, aslug, aname, manager, path) AS (
    SELECT 0, a.id, a.slug, a.name, a.reports_to_id, ARRAY[a.id]
      FROM public.agents a WHERE a.id = p_agent_id
    UNION ALL
    SELECT c.d + 1, a.id, a.slug, a.name, a.reports_to_id, c.path || a.id
      FROM chain c JOIN public.agents a ON a.id = c.manager
     WHERE c.d < v_max AND NOT a.id = ANY (c.path))
  SELECT c.d, c.aid, c.aslug, c.aname FROM chain c ORDER BY c.d;
END
$$;
REVOKE ALL ON FUNCTION public.agent_reports_chain(uuid, integer) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.agent_reports_chain(uuid, integer) TO authenticated, service_role;

-- All relations of a task: rows of task_relations in both directions (direction outgoing when
-- the task is the source), plus its parent and children from tasks.parent_id (relation_id NULL).
-- perspective_type is the relation as seen from p_task_id (an incoming "blocks" is blocked_by).
-- RLS applies. AW003 when the task is not visible.
CREATE OR REPLACE FUNCTION public.get_task_relations(p_task_id uuid)
RETURNS TABLE (relation_id uuid, relation_type public.task_relation_type, direction text,
               perspective_type public.task_relation_type, related_task_id uuid, related_title text,
               related_status public.task_status, related_assignee_agent_id uuid,
               related_assignee_name text, created_at timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_parent uuid;
BEGIN
  SELECT t.parent_id INTO v_parent FROM public.tasks t WHERE t.id = p_task_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'task %: not found', p_task_id USING ERRCODE = 'AW003';
  END IF;
  RETURN QUERY
  WITH rel AS (
    SELECT r.id AS rid, r.relation_type AS rtype, 'outgoing'::text AS dir, r.relation_type AS ptype,
           r.target_task_id AS other, r.created_at AS at
      FROM public.task_relations r WHERE r.source_task_id = p_task_id
    UNION ALL
    SELECT r.id, r.relation_type, 'incoming',
           CASE r.relation_type WHEN 'blocks' THEN 'blocked_by'::public.task_relation_type
                                WHEN 'blocked_by' THEN 'blocks'::public.task_relation_type
                                WHEN 'parent_of' THEN 'child_of'::public.task_relation_type
                                WHEN 'child_of' THEN 'parent_of'::public.task_relation_type
                                ELSE r.relation_type END,
           r.source_task_id, r.created_at
      FROM public.task_relations r WHERE r.target_task_id = p_task_id
    UNION ALL
    SELECT NULL::uuid, 'child_of'::public.task_relation_type, 'outgoing', 'child_of'::public.task_relation_type,
           v_parent, NULL::timestamptz
     WHERE v_parent IS NOT NULL
    UNION ALL
    SELECT NULL::uuid, 'parent_of'::public.task_relation_type, 'outgoing', 'parent_of'::public.task_relation_type,
           c.id, c.created_at
      FROM public.tasks c WHERE c.parent_id = p_task_id)
  SELECT rel.rid, rel.rtype, rel.dir, rel.ptype, t.id, t.title, t.status, t.assignee_agent_id, a.name, rel.at
    FROM rel
    JOIN public.tasks t ON t.id = rel.other
    LEFT JOIN public.agents a ON a.id = t.assignee_agent_id
   ORDER BY rel.ptype, t.title, t.id;
END
$$;
REVOKE ALL ON FUNCTION public.get_task_relations(uuid) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.get_task_relations(uuid) TO authenticated, awp_gateway, service_role;

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
