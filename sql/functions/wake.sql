-- Wake-ups of a gateway's daemons (docs/protocols/wake-relay.md). Every per-gateway NOTIFY goes
-- through here, so that it is raised twice in the same transaction:
--   * on the gateway's own channel (awp_commands_<gw>, awp_inbox_<gw>, awp_secrets_<gw>), which
--     a single host's daemons LISTEN on directly;
--   * on awp_wake as "<channel> <payload>", which one awp-wake relay per database LISTENs on and
--     forwards to the gateway hosts' streams (many gateways on one database: PostgreSQL up to 18
--     signals every listening session on every notifying commit, so one listener, not one per
--     host, keeps the cost of a write flat).
-- The database does not need to know which design a host uses; a host changes design by its own
-- configuration (WAKE_URL). Payloads are ids or '', never content; a wake-up is a hint, the rows
-- are the state. PL/pgSQL: its two statements' plans stay cached for the session, where a SQL
-- function called from the queue triggers is planned again on every call (about 20 µs of every
-- command's insert, bench/runner/RESULTS.md, 2026-11-29).
CREATE OR REPLACE FUNCTION public.awp_notify_gateway(p_channel text, p_payload text) RETURNS void
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  PERFORM pg_catalog.pg_notify(p_channel, coalesce(p_payload, ''));
  PERFORM pg_catalog.pg_notify('awp_wake', p_channel || ' ' || coalesce(p_payload, ''));
END
$$;
-- Only the database raises wake-ups: the queue triggers that call it are SECURITY DEFINER (they
-- run as their owner whoever wrote the row), and no API role may call it, so a user cannot
-- NOTIFY another tenant's gateway or `pgrst` through /rest/v1/rpc (sql/0034).
REVOKE ALL ON FUNCTION public.awp_notify_gateway(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.awp_notify_gateway(text, text) TO service_role;
