-- Vacuum settings of the two queue tables, against their known failure mode: dead index entries.
--
-- Every command or inbox item that leaves `pending` leaves a dead entry at the front of the
-- partial queue index (agent_commands_pending_idx, agent_inbox_items_ready_idx), because work
-- is taken oldest first. Each lease walks past those entries until a vacuum removes them:
-- measured with bench/runner/run.sh, 4 leasers drained 10,000 commands at 1,405/s after 30,000
-- commands without a vacuum, and at 1,836/s after one VACUUM.
--
-- Two settings per table:
-- - vacuum_index_cleanup = on. By default (auto) VACUUM skips the index pass while fewer than
--   2 % of the table's pages hold dead rows. A queue table that keeps its history (done and
--   failed rows stay, as the spec wants) is large and its dead rows sit on a few recent pages,
--   so the index pass was skipped and the queue index kept its dead entries: with 500,000 rows
--   of history and 5,000 commands since, VACUUM reported "index scan bypassed" and a lease still
--   read 57 index pages instead of 2.
-- - autovacuum after 1,000 dead rows plus 2 % of the table instead of 50 plus 20 %: with a
--   history of a million rows the default waited for 200,000 dead rows, about 100,000 commands.
--
-- A held xmin (a long transaction, an idle-in-transaction session, a stale replication slot)
-- stops any vacuum from removing rows: docs/operations.md, "Queue tables and vacuum".

ALTER TABLE public.agent_commands SET (
  vacuum_index_cleanup = on,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_scale_factor = 0.02
);

ALTER TABLE public.agent_inbox_items SET (
  vacuum_index_cleanup = on,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_scale_factor = 0.02
);
