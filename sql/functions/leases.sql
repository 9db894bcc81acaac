-- The scheduler's sweep of expired leases over the three queues (commands, inbox, embeddings).
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- Called by the scheduler every minute: expired command leases (leased -> pending, running ->
-- failed), expired inbox leases (a failed attempt: failed with back-off, or dead_letter) and
-- expired embedding leases (released). Returns the counts as one row.
CREATE OR REPLACE FUNCTION public.reap_expired_leases()
RETURNS TABLE (commands_requeued integer, commands_failed integer, inbox_retried integer,
               inbox_dead_lettered integer, knowledge_released integer)
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  c record;
  i record;
BEGIN
  SELECT * INTO c FROM public.awp_expire_command_leases(NULL);
  SELECT * INTO i FROM public.awp_expire_inbox_leases(NULL);
  RETURN QUERY SELECT c.requeued, c.failed, i.retried, i.dead_lettered, public.awp_expire_knowledge_leases();
END
$$;
REVOKE ALL ON FUNCTION public.reap_expired_leases() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.reap_expired_leases() TO service_role;
