-- Realtime's change capture (issue 33; docs/realtime-capture.md): the publication the
-- api-gateway's logical replication slot reads with pgoutput. FOR ALL TABLES, so a table made
-- later is published without another migration; replica identity stays each table's default,
-- so an UPDATE or DELETE carries the primary key of the old row and nothing else.
-- Made only when missing, and only where the migrating role may make it: FOR ALL TABLES takes a
-- superuser. Elsewhere (a hosted Supabase project, whose own Realtime reads its publication
-- supabase_realtime) it is skipped with a NOTICE saying how to make it; awp's realtime reader
-- then reports the publication missing in /api/health and nothing else changes.
-- The publication decides nothing about who sees a change: row-level security does, for each
-- subscriber (docs/realtime-capture.md, "What the slot carries").

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = 'awp_realtime') THEN
    RETURN;
  END IF;
  IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
    RAISE NOTICE 'publication awp_realtime not made: FOR ALL TABLES takes a superuser. A '
                 'superuser can run: CREATE PUBLICATION awp_realtime FOR ALL TABLES';
    RETURN;
  END IF;
  CREATE PUBLICATION awp_realtime FOR ALL TABLES
    WITH (publish = 'insert, update, delete, truncate');
  COMMENT ON PUBLICATION awp_realtime IS
    'awp realtime: the changes awp-api-gateway streams to postgres_changes subscribers (RLS decides who sees each)';
END
$$;
