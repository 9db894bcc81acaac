-- finish_and_lease_command: the runner's final transition of one command (complete_command or
-- fail_command) and lease_and_start_command of the next, in one transaction.
--
-- The runner takes one command at a time and leases the next as soon as one ends, so the two
-- statements always came back to back, each with its own commit and WAL flush. One transaction
-- halves the flushes: measured with pgbench, 845-895 -> 1,151-1,373 commands/s with 1 client and
-- 1,261-1,435 -> 2,053-2,113 with 4. The guarantees are those of the two functions: the next
-- command runs only after this commit is durable; if either part is refused (lease lost, illegal
-- transition, unknown gateway) nothing of the call happens, and the runner then makes the two
-- calls apart so each reports its own error.

CREATE FUNCTION public.finish_and_lease_command(p_command_id uuid, p_lease_token uuid,
                                                p_outcome text,
                                                p_exit_code integer DEFAULT NULL,
                                                p_error text DEFAULT NULL,
                                                p_stdout text DEFAULT NULL,
                                                p_stderr text DEFAULT NULL,
                                                p_payload_patch jsonb DEFAULT NULL,
                                                p_lease_seconds integer DEFAULT 180,
                                                p_gateway_slug text DEFAULT NULL,
                                                p_runner text DEFAULT NULL,
                                                p_tenant_id uuid DEFAULT NULL)
RETURNS SETOF public.agent_commands
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF p_lease_token IS NULL THEN
    RAISE EXCEPTION 'finish_and_lease_command: p_lease_token is required' USING ERRCODE = 'AW004';
  END IF;
  IF p_outcome = 'done' THEN
    PERFORM public.complete_command(p_command_id, coalesce(p_exit_code, 0), p_stdout, p_stderr,
                                    p_lease_token, p_payload_patch);
  ELSIF p_outcome = 'failed' THEN
    PERFORM public.fail_command(p_command_id, p_exit_code, p_error, p_lease_token, p_stdout,
                                p_stderr, p_payload_patch);
  ELSE
    RAISE EXCEPTION 'finish_and_lease_command: p_outcome must be done or failed, got %',
      coalesce(p_outcome, 'null') USING ERRCODE = 'AW004';
  END IF;
  RETURN QUERY SELECT * FROM public.lease_and_start_command(p_lease_seconds, p_gateway_slug, p_runner,
                                                            p_tenant_id);
END
$$;

REVOKE ALL ON FUNCTION public.finish_and_lease_command(uuid, uuid, text, integer, text, text, text,
                                                       jsonb, integer, text, text, uuid)
  FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.finish_and_lease_command(uuid, uuid, text, integer, text, text, text,
                                                          jsonb, integer, text, text, uuid)
  TO service_role;
