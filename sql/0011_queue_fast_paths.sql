-- Queue hot paths. The re-queue wake-ups of commands and inbox items were statement triggers
-- with transition tables: every lease, start, complete and fail built two tuplestores and ran a
-- join in PL/pgSQL only to find that nothing became pending. As row triggers whose WHEN clause
-- is evaluated by the executor, the hot path pays nothing; a row that does become leasable
-- again (lease expiry, retry, re-drive, gateway move) sends one NOTIFY with its id.

DROP TRIGGER agent_commands_notify_update ON public.agent_commands;

CREATE FUNCTION public.awp_notify_command_requeued() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  PERFORM pg_notify('awp_commands_' || replace(NEW.gateway_id::text, '-', ''), NEW.id::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER agent_commands_notify_requeued AFTER UPDATE ON public.agent_commands
  FOR EACH ROW
  WHEN (NEW.status = 'pending'
        AND (OLD.status <> 'pending' OR OLD.gateway_id IS DISTINCT FROM NEW.gateway_id))
  EXECUTE FUNCTION public.awp_notify_command_requeued();

DROP TRIGGER agent_inbox_items_notify_update ON public.agent_inbox_items;

CREATE FUNCTION public.awp_notify_inbox_requeued() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  PERFORM pg_notify('awp_inbox_' || replace(NEW.gateway_id::text, '-', ''), NEW.id::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER agent_inbox_items_notify_requeued AFTER UPDATE ON public.agent_inbox_items
  FOR EACH ROW
  WHEN (NEW.gateway_id IS NOT NULL AND NEW.status IN ('pending', 'failed')
        AND (NEW.not_before IS NULL OR NEW.not_before <= now())
        AND (OLD.status NOT IN ('pending', 'failed') OR OLD.gateway_id IS DISTINCT FROM NEW.gateway_id
             OR (OLD.not_before IS NOT NULL AND OLD.not_before > now())))
  EXECUTE FUNCTION public.awp_notify_inbox_requeued();

REVOKE ALL ON FUNCTION public.awp_notify_command_requeued() FROM PUBLIC, anon, authenticated;
REVOKE ALL ON FUNCTION public.awp_notify_inbox_requeued() FROM PUBLIC, anon, authenticated;

-- Re-driving a dead letter (dead_letter -> pending, by an operator) starts it afresh: attempts
-- back to 0 and no back-off left over, so it gets its full max_attempts again.
CREATE OR REPLACE FUNCTION public.awp_inbox_check_transition() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
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
  RETURN NEW;
END
$$;

-- An agent that becomes ready again (resumed, woken from hibernation, out of error) wakes its
-- gateway's dispatcher when it has items waiting, instead of leaving them to the safety poll.
CREATE FUNCTION public.awp_agents_became_ready() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM public.agent_inbox_items i
              WHERE i.agent_id = NEW.id AND i.status IN ('pending', 'failed')) THEN
    PERFORM pg_notify('awp_inbox_' || replace(NEW.gateway_id::text, '-', ''), '');
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER agents_became_ready AFTER UPDATE OF status ON public.agents
  FOR EACH ROW
  WHEN (NEW.status = 'ready' AND OLD.status IS DISTINCT FROM 'ready' AND NEW.gateway_id IS NOT NULL)
  EXECUTE FUNCTION public.awp_agents_became_ready();

REVOKE ALL ON FUNCTION public.awp_agents_became_ready() FROM PUBLIC, anon, authenticated;
