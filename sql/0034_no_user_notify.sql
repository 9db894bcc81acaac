-- Nothing internal is callable by the data API's users (issue 37, "Nothing internal callable by
-- users"). Every wake-up is raised by the database itself: the queue triggers that NOTIFY a
-- gateway's daemons run as their owner (SECURITY DEFINER, search_path ''), reading only their
-- transition tables and the row, so whoever writes a queue row (a user through /rest/v1, the
-- service role, a gateway's own login, the shared pool login) still wakes the daemons without
-- being able to call awp_notify_gateway itself. Before, `authenticated` could call it through
-- /rest/v1/rpc/awp_notify_gateway with any channel: another tenant's gateway's awp_commands_*,
-- awp_secrets_*, awp_inbox_*, or `pgrst` ('reload schema' on every gateway).
-- The trigger functions change here, before the grant goes, so a write between the two steps of
-- one `awpctl migrate` still notifies; sql/functions/ holds the same definitions.
ALTER FUNCTION public.awp_notify_commands() SECURITY DEFINER;
ALTER FUNCTION public.awp_notify_command_requeued() SECURITY DEFINER;
ALTER FUNCTION public.awp_notify_secrets() SECURITY DEFINER;
ALTER FUNCTION public.awp_notify_inbox() SECURITY DEFINER;
ALTER FUNCTION public.awp_notify_inbox_requeued() SECURITY DEFINER;

REVOKE ALL ON FUNCTION public.awp_notify_gateway(text, text) FROM PUBLIC, anon, authenticated, awp_gateway;
