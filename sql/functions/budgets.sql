-- Agent budgets (the product's agent_budgets): the monthly period's spend rolled up from every
-- usage row as it is written, its status against the limit, the notifications of a budget
-- warned and exceeded, and recompute_agent_budget.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

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
