-- The command_action enum in the spec's order (interface-spec, "Enums": provision, update,
-- remove, start_session, end_session, restart_session, execute_prompt, send_message, run_shell,
-- upload_file, auth_set_api_key, auth_start, auth_paste, set_agent_model, source_write), then the
-- further values awp implements, by topic. The order is visible: enum_range(), ORDER BY action,
-- comparisons. Postgres cannot reorder the labels of an enum, so the type is made again and the
-- one column and the one function typed with it move over; every stored value is kept (by its
-- label). Nothing else names the type: function bodies compare the column with literals.
ALTER TYPE public.command_action RENAME TO command_action_before_0021;

CREATE TYPE public.command_action AS ENUM (
  'provision', 'update', 'remove', 'start_session', 'end_session', 'restart_session',
  'execute_prompt', 'send_message', 'run_shell', 'upload_file', 'auth_set_api_key', 'auth_start',
  'auth_paste', 'set_agent_model', 'source_write',
  -- further values: agent lifecycle, gateway services, model and provider connections
  'approve_pairing', 'update_all', 'restart_gateway', 'restart_dispatcher', 'update_gateway',
  'list_models', 'auth_list', 'auth_refresh', 'auth_remove', 'auth_set_default');

-- The payload check, as it is now, for the new type (its current body, not a copy of an old one).
DO $$
BEGIN
  EXECUTE replace(pg_get_functiondef(
      'public.awp_check_command_payload(public.command_action_before_0021, jsonb)'::regprocedure),
    'command_action_before_0021', 'command_action');
END
$$;
REVOKE ALL ON FUNCTION public.awp_check_command_payload(public.command_action, jsonb) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_check_command_payload(public.command_action, jsonb)
  TO authenticated, service_role;

ALTER TABLE public.agent_commands
  ALTER COLUMN action TYPE public.command_action USING action::text::public.command_action;

DROP FUNCTION public.awp_check_command_payload(public.command_action_before_0021, jsonb);
DROP TYPE public.command_action_before_0021;
