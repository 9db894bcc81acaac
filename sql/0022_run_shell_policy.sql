-- Who may have a gateway run text a user wrote (run_shell: a program and its arguments): a
-- per-gateway setting, `operators` (the default) or `members` (every member of the tenant).
-- Decided by the database at insert, with the operator role of sql/0016; the runner checks the
-- same again before it runs one (docs/security.md, "Commands that run text a user wrote").
ALTER TABLE public.gateways
  ADD COLUMN run_shell_policy text NOT NULL DEFAULT 'operators'
    CONSTRAINT gateways_run_shell_policy_check CHECK (run_shell_policy IN ('operators', 'members'));

-- Set by the database, never by the inserter (not in the column grants of sql/0004): whether
-- the session that wrote the command was an operator.
ALTER TABLE public.agent_commands ADD COLUMN requested_by_operator boolean NOT NULL DEFAULT false;

-- Only an operator opens a gateway's shell to every member.
CREATE FUNCTION public.awp_gateways_run_shell_policy() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.run_shell_policy = 'members'
     AND (TG_OP = 'INSERT' OR OLD.run_shell_policy IS DISTINCT FROM NEW.run_shell_policy)
     AND NOT public.current_is_operator() THEN
    RAISE EXCEPTION 'gateways: only an operator may let every member run shell commands (run_shell_policy = members)'
      USING ERRCODE = 'AW010';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER gateways_run_shell_policy BEFORE INSERT OR UPDATE OF run_shell_policy
  ON public.gateways FOR EACH ROW EXECUTE FUNCTION public.awp_gateways_run_shell_policy();

-- A run_shell command of a gateway whose policy is `operators` needs an operator's session.
-- Invoker's rights on purpose: current_is_operator() must see the inserting session's role.
CREATE FUNCTION public.awp_commands_run_shell_gate() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_policy text;
BEGIN
  NEW.requested_by_operator := public.current_is_operator();
  IF NEW.action = 'run_shell' AND NOT NEW.requested_by_operator THEN
    SELECT g.run_shell_policy INTO v_policy FROM public.gateways g WHERE g.id = NEW.gateway_id;
    IF coalesce(v_policy, 'operators') <> 'members' THEN
      RAISE EXCEPTION 'agent_commands: run_shell on this gateway needs an operator (its run_shell_policy is operators)'
        USING ERRCODE = 'AW010';
    END IF;
  END IF;
  RETURN NEW;
END
$$;
-- "zz": after agent_commands_before_insert (triggers fire in name order), which fills gateway_id
-- from the agent.
CREATE TRIGGER agent_commands_zz_run_shell_gate BEFORE INSERT ON public.agent_commands
  FOR EACH ROW EXECUTE FUNCTION public.awp_commands_run_shell_gate();

REVOKE ALL ON FUNCTION public.awp_gateways_run_shell_policy() FROM PUBLIC, anon, authenticated;
REVOKE ALL ON FUNCTION public.awp_commands_run_shell_gate() FROM PUBLIC, anon, authenticated;
