-- Wake-ups through one relay per database (issue 21, docs/protocols/wake-relay.md): every
-- per-gateway NOTIFY is raised twice in its transaction, on the gateway's own channel (a single
-- host's daemons LISTEN there directly) and on awp_wake as "<channel> <payload>" (one awp-wake
-- relay per database LISTENs there and forwards to the gateway hosts' streams). PostgreSQL up to
-- 18 signals every listening session on every notifying commit, so one listener per database
-- instead of one per host keeps the cost of a write flat as gateways are added.
-- The current bodies are in functions/wake.sql and the queue files; these are the same text.
CREATE OR REPLACE FUNCTION public.awp_notify_gateway(p_channel text, p_payload text) RETURNS void
LANGUAGE sql
SET search_path = ''
AS $$
  SELECT pg_catalog.pg_notify(p_channel, coalesce(p_payload, ''));
  SELECT pg_catalog.pg_notify('awp_wake', p_channel || ' ' || coalesce(p_payload, ''));
$$;
-- The queue triggers that call it are not SECURITY DEFINER: they run as whoever wrote the row
-- (a user through the API, service_role, a gateway's own login). All it does is pg_notify,
-- which anyone may call.
REVOKE ALL ON FUNCTION public.awp_notify_gateway(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.awp_notify_gateway(text, text) TO authenticated, service_role, awp_gateway;
-- The queue triggers' NOTIFYs go through it.
CREATE OR REPLACE FUNCTION public.awp_notify_commands() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id
               FROM new_rows n WHERE n.status = 'pending' GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_commands_' || replace(r.gateway_id::text, '-', ''),
                        CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSE
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id
               FROM new_rows n JOIN old_rows o ON o.id = n.id
              WHERE n.status = 'pending' AND (o.status <> 'pending' OR o.gateway_id <> n.gateway_id)
              GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_commands_' || replace(r.gateway_id::text, '-', ''),
                        CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION public.awp_notify_command_requeued() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  PERFORM public.awp_notify_gateway('awp_commands_' || replace(NEW.gateway_id::text, '-', ''), NEW.id::text);
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION public.awp_notify_secrets() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id FROM new_rows n GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSIF TG_OP = 'DELETE' THEN
    FOR r IN SELECT o.gateway_id, count(*) AS n, min(o.id::text) AS one_id FROM old_rows o GROUP BY o.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSE
    FOR r IN
      WITH changed AS (
        SELECT n.id, n.gateway_id AS new_gateway, o.gateway_id AS old_gateway
          FROM new_rows n JOIN old_rows o ON o.id = n.id
         WHERE n.key IS DISTINCT FROM o.key OR n.encrypted_value IS DISTINCT FROM o.encrypted_value
            OR n.agent_id IS DISTINCT FROM o.agent_id OR n.gateway_id IS DISTINCT FROM o.gateway_id),
      touched AS (
        SELECT id, new_gateway AS gateway_id FROM changed
        UNION SELECT id, old_gateway FROM changed)
      SELECT t.gateway_id, count(*) AS n, min(t.id::text) AS one_id FROM touched t GROUP BY t.gateway_id
    LOOP
      PERFORM public.awp_notify_gateway('awp_secrets_' || replace(r.gateway_id::text, '-', ''), CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION public.awp_notify_inbox() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id
               FROM new_rows n
              WHERE n.gateway_id IS NOT NULL AND n.status IN ('pending', 'failed')
                AND (n.not_before IS NULL OR n.not_before <= now())
              GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_inbox_' || replace(r.gateway_id::text, '-', ''),
                        CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  ELSE
    FOR r IN SELECT n.gateway_id, count(*) AS n, min(n.id::text) AS one_id
               FROM new_rows n JOIN old_rows o ON o.id = n.id
              WHERE n.gateway_id IS NOT NULL AND n.status IN ('pending', 'failed')
                AND (n.not_before IS NULL OR n.not_before <= now())
                AND (o.status NOT IN ('pending', 'failed') OR o.gateway_id IS DISTINCT FROM n.gateway_id
                     OR (o.not_before IS NOT NULL AND o.not_before > now()))
              GROUP BY n.gateway_id LOOP
      PERFORM public.awp_notify_gateway('awp_inbox_' || replace(r.gateway_id::text, '-', ''),
                        CASE WHEN r.n = 1 THEN r.one_id ELSE '' END);
    END LOOP;
  END IF;
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION public.awp_notify_inbox_requeued() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  PERFORM public.awp_notify_gateway('awp_inbox_' || replace(NEW.gateway_id::text, '-', ''), NEW.id::text);
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION public.awp_agents_became_ready() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM public.agent_inbox_items i
              WHERE i.agent_id = NEW.id AND i.status IN ('pending', 'failed')) THEN
    PERFORM public.awp_notify_gateway('awp_inbox_' || replace(NEW.gateway_id::text, '-', ''), '');
  END IF;
  RETURN NULL;
END
$$;
