-- The columns the original product's UI reads on tables awp has (issue 34, item 10), with that
-- product's names, types and meanings (its db/migrations at 86f99c2), each kept right by what
-- owns its row. Additive: no existing column, type, default or writer changes.
--
-- How each is kept right depends on who writes it:
--  - read by the UI, written only through awp's own column: a STORED generated column over that
--    column, so the two cannot disagree (agent_commands.completed_at, contacts.full_name,
--    source_connections.error_message);
--  - written by the UI or the original's tools too: a plain column that a trigger keeps in step
--    with awp's, whichever of the two a statement sets (agent_inbox_items.attempt_count and
--    context, in sql/functions/inbox.sql; agent_usage's four, in sql/functions/usage.sql);
--  - awp's own: set by the code that owns the row (source_connections' sync fields by the
--    gateway's OAuth callback and validation, apps/api-gateway/src/sources.cpp), or by the client
--    alone where awp has no writer (tasks.series_id, workspace.slug and initialized).
-- docs/conformance.md lists each with its owner and test.

-- agent_usage: the original's usage row (provider, total_tokens, cost_total_usd, occurred_at).
-- total_tokens and cost_total_usd take the type of the awp column they follow (bigint like
-- input_tokens, numeric(14,6) like cost_usd; the original has integer and numeric(12,6)): they
-- must hold every value of what they follow. provider stays nullable: the spec's writers give
-- only `model` ("<provider>/<model_name>"), from which it is taken.
ALTER TABLE public.agent_usage
  ADD COLUMN provider text,
  ADD COLUMN total_tokens bigint NOT NULL DEFAULT 0 CHECK (total_tokens >= 0),
  ADD COLUMN cost_total_usd numeric(14, 6),
  ADD COLUMN occurred_at timestamptz;
UPDATE public.agent_usage
   SET provider = CASE WHEN position('/' IN coalesce(model, '')) > 1
                       THEN split_part(model, '/', 1) END,
       total_tokens = input_tokens + output_tokens,
       cost_total_usd = cost_usd,
       occurred_at = created_at;
ALTER TABLE public.agent_usage ALTER COLUMN occurred_at SET NOT NULL;
CREATE INDEX agent_usage_agent_occurred_idx ON public.agent_usage (agent_id, occurred_at DESC);

-- The trigger's function is defined here because the trigger needs it now (the body as it was
-- when this file was written); its current body is in sql/functions/usage.sql.
CREATE OR REPLACE FUNCTION public.awp_agent_usage_fields() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.occurred_at IS NULL THEN
      NEW.occurred_at := NEW.created_at;
    ELSIF NEW.created_at = now() THEN  -- created_at's default: the row said when it happened
      NEW.created_at := NEW.occurred_at;
    END IF;
    IF NEW.cost_total_usd IS NOT NULL AND NEW.cost_usd = 0 THEN
      NEW.cost_usd := NEW.cost_total_usd;
    END IF;
    IF NEW.total_tokens = 0 THEN
      NEW.total_tokens := NEW.input_tokens + NEW.output_tokens;
    END IF;
  ELSE
    IF NEW.occurred_at IS DISTINCT FROM OLD.occurred_at
       AND NEW.created_at IS NOT DISTINCT FROM OLD.created_at THEN
      NEW.created_at := NEW.occurred_at;
    ELSIF NEW.created_at IS DISTINCT FROM OLD.created_at
          AND NEW.occurred_at IS NOT DISTINCT FROM OLD.occurred_at THEN
      NEW.occurred_at := NEW.created_at;
    END IF;
    IF NEW.cost_total_usd IS DISTINCT FROM OLD.cost_total_usd
       AND NEW.cost_usd IS NOT DISTINCT FROM OLD.cost_usd THEN
      NEW.cost_usd := coalesce(NEW.cost_total_usd, 0);
    END IF;
    IF (NEW.input_tokens, NEW.output_tokens) IS DISTINCT FROM (OLD.input_tokens, OLD.output_tokens)
       AND NEW.total_tokens IS NOT DISTINCT FROM OLD.total_tokens THEN
      NEW.total_tokens := NEW.input_tokens + NEW.output_tokens;
    END IF;
  END IF;
  NEW.cost_total_usd := NEW.cost_usd;
  IF NEW.provider IS NULL AND position('/' IN coalesce(NEW.model, '')) > 1 THEN
    NEW.provider := split_part(NEW.model, '/', 1);
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_agent_usage_fields() FROM PUBLIC, anon, authenticated;
CREATE TRIGGER agent_usage_fields BEFORE INSERT OR UPDATE ON public.agent_usage
  FOR EACH ROW EXECUTE FUNCTION public.awp_agent_usage_fields();

-- agent_inbox_items: attempt_count is the original's name of attempts (the lease counts it, a
-- re-drive resets it), context its name of the payload as its UI shows it, with the last
-- failure's reason while the item has one. Plain columns: the original UI writes both (a manual
-- re-drive sets attempt_count = 0, a manual wake inserts a context). The triggers that keep them
-- in step are the table's own (awp_inbox_before_insert, awp_inbox_check_transition); the rows
-- already there are filled with updated_at left as it was.
ALTER TABLE public.agent_inbox_items
  ADD COLUMN attempt_count integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
  ADD COLUMN context jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(context) = 'object');
ALTER TABLE public.agent_inbox_items DISABLE TRIGGER USER;
UPDATE public.agent_inbox_items
   SET attempt_count = attempts,
       context = payload || CASE WHEN last_error IS NULL THEN '{}'::jsonb
                                 ELSE jsonb_build_object('last_failure_reason', last_error) END
 WHERE attempts <> 0 OR payload <> '{}'::jsonb OR last_error IS NOT NULL;
ALTER TABLE public.agent_inbox_items ENABLE TRIGGER USER;
-- The two trigger functions with the bodies that keep them in step (as in
-- sql/functions/inbox.sql when this file was written).
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

-- agent_commands: when the command completed (done or failed), as the original's
-- complete_command and fail_command stamp it; the state machine's finished_at is set by the
-- final transition (a cancelled command has finished_at, not completed_at). Nothing else writes
-- a command's times, so a generated column.
ALTER TABLE public.agent_commands
  ADD COLUMN completed_at timestamptz GENERATED ALWAYS AS (
    CASE WHEN status IN ('done', 'failed') THEN finished_at END) STORED;

-- tasks: the recurring series a task is an occurrence of. The original's task_series table is
-- not part of awp, so there is no foreign key: the client that makes the series writes it.
ALTER TABLE public.tasks ADD COLUMN series_id uuid;
CREATE INDEX tasks_series_idx ON public.tasks (series_id) WHERE series_id IS NOT NULL;

-- contacts: the contact's full name, which the original UI searches and shows (its own schema
-- lacks the column, so its search fails there); awp's contacts have one name column.
ALTER TABLE public.contacts ADD COLUMN full_name text GENERATED ALWAYS AS (name) STORED;

-- workspace: the URL-safe name (unique in its tenant) and whether the setup wizard has run.
-- Rows already there were set up by whoever made them: initialized; a new row is not until the
-- UI's wizard says so, as in the original.
ALTER TABLE public.workspace
  ADD COLUMN slug text,
  ADD COLUMN initialized boolean NOT NULL DEFAULT true;
ALTER TABLE public.workspace ALTER COLUMN initialized SET DEFAULT false;
CREATE UNIQUE INDEX workspace_tenant_id_slug_key ON public.workspace (tenant_id, slug)
  WHERE slug IS NOT NULL;

-- source_connections: the sync schedule (sync_interval_hours, next_sync_at: due when it is
-- past), when the credentials were last confirmed (last_verified_at: the OAuth callback and a
-- successful POST /api/sources/validate set it), and the original's name of last_error.
ALTER TABLE public.source_connections
  ADD COLUMN sync_interval_hours integer NOT NULL DEFAULT 6 CHECK (sync_interval_hours >= 1),
  ADD COLUMN next_sync_at timestamptz,
  ADD COLUMN last_verified_at timestamptz,
  ADD COLUMN error_message text GENERATED ALWAYS AS (last_error) STORED;
CREATE INDEX source_connections_next_sync_idx ON public.source_connections (tenant_id, next_sync_at)
  WHERE status = 'active';
