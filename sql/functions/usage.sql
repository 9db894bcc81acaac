-- agent_usage: the original product's fields of a usage row kept in step with awp's (sql/0029).
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- BEFORE INSERT OR UPDATE on agent_usage. awp has no writer of usage rows (the runtime, the UI
-- or a script inserts them, with the spec's columns or the original's), so the row keeps both
-- names right itself, whichever a statement gives:
--  - occurred_at and created_at are one time (the spec's usage queries and
--    get_agent_daily_usage read created_at, the original UI occurred_at): a row that gives one
--    gets it in both; an update of one moves the other;
--  - cost_total_usd is cost_usd (a row that gives only cost_total_usd sets cost_usd);
--  - total_tokens is input + output unless the writer gave its own total (the original's runtime
--    counts cache tokens in it), and follows them when they change and it is not given;
--  - provider, when not given, is the <provider> of model "<provider>/<model_name>".
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
