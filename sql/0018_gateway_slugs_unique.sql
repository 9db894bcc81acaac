-- Gateways that cannot be squatted. The daemons select their gateway with GATEWAY_ID, a slug or
-- the gateway's id. Slugs were unique per tenant only, so a second tenant that registered a
-- gateway under a slug another tenant's daemons use made those daemons fail ("exists in 2
-- tenants") or, without TENANT_ID, serve the other tenant's rows. Now:
--   * a slug is unique across all tenants (gateways_slug_key) and never has the shape of a uuid
--     (gateways_slug_not_uuid), so a GATEWAY_ID names at most one gateway;
--   * awp_resolve_gateway — behind every p_gateway_slug parameter (lease_command,
--     lease_and_start_command, finish_and_lease_command, lease_knowledge_items_for_indexing,
--     daemon_heartbeat) — takes the gateway's id as well as its slug; the daemons resolve
--     GATEWAY_ID once at start and pass the id from then on (docs/security.md, "Gateways and
--     their daemons");
--   * consume_gateway_token picks a slug free across all tenants.

-- Existing duplicates: the earliest gateway keeps the slug, later ones become <slug>-<n>; a
-- slug shaped like a uuid becomes <slug>-<n> too. Each rename is reported.
DO $$
DECLARE
  r record;
  v_base text;
  v_new text;
  v_n integer;
BEGIN
  FOR r IN
    SELECT g.id, g.tenant_id, g.slug FROM public.gateways g
     WHERE g.slug ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
        OR EXISTS (SELECT 1 FROM public.gateways o
                    WHERE o.slug = g.slug AND (o.created_at, o.id) < (g.created_at, g.id))
     ORDER BY g.created_at, g.id
  LOOP
    v_base := left(r.slug, 56);
    v_n := 2;
    LOOP
      v_new := v_base || '-' || v_n;
      EXIT WHEN NOT EXISTS (SELECT 1 FROM public.gateways g WHERE g.slug = v_new);
      v_n := v_n + 1;
    END LOOP;
    UPDATE public.gateways g SET slug = v_new WHERE g.id = r.id;
    RAISE NOTICE 'gateway % (tenant %): slug "%" renamed to "%" (slugs are now unique across tenants); set GATEWAY_ID of its daemons to "%" or to its id',
      r.id, r.tenant_id, r.slug, v_new, v_new;
  END LOOP;
END
$$;

ALTER TABLE public.gateways
  ADD CONSTRAINT gateways_slug_not_uuid
    CHECK (slug !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  ADD CONSTRAINT gateways_slug_key UNIQUE (slug);
DROP INDEX public.gateways_slug_idx;

-- Gateway by id (a uuid in its canonical text form, any case) or by slug, optionally within one
-- tenant. Never ambiguous: ids are ids, slugs are unique and never uuid-shaped.
CREATE OR REPLACE FUNCTION public.awp_resolve_gateway(p_gateway_slug text, p_tenant_id uuid DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_id uuid;
BEGIN
  IF p_gateway_slug IS NULL OR btrim(p_gateway_slug) = '' THEN
    RAISE EXCEPTION 'gateway slug is required' USING ERRCODE = 'AW004';
  END IF;
  IF p_gateway_slug ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
    SELECT g.id INTO v_id FROM public.gateways g
     WHERE g.id = p_gateway_slug::uuid AND (p_tenant_id IS NULL OR g.tenant_id = p_tenant_id);
  ELSE
    SELECT g.id INTO v_id FROM public.gateways g
     WHERE g.slug = p_gateway_slug AND (p_tenant_id IS NULL OR g.tenant_id = p_tenant_id);
  END IF;
  IF v_id IS NULL THEN
    RAISE EXCEPTION 'gateway "%" not found%', p_gateway_slug,
      CASE WHEN p_tenant_id IS NULL THEN '' ELSE ' in tenant ' || p_tenant_id END
      USING ERRCODE = 'AW003';
  END IF;
  RETURN v_id;
END
$$;

-- As in 0010, except that the slug is free across all tenants (the unique index decides when
-- two registrations race for the same slug: the loser takes the next suffix).
CREATE OR REPLACE FUNCTION public.consume_gateway_token(p_token text, p_label text DEFAULT NULL,
                                                        p_slug_hint text DEFAULT NULL,
                                                        p_tenant_id uuid DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
DECLARE
  v_token public.gateway_registration_tokens;
  v_label text;
  v_base text;
  v_slug text;
  v_n integer := 1;
  v_gateway uuid;
BEGIN
  IF p_token IS NULL OR btrim(p_token) = '' THEN
    RAISE EXCEPTION 'invalid gateway registration token' USING ERRCODE = 'AW006';
  END IF;
  SELECT * INTO v_token FROM public.gateway_registration_tokens t
   WHERE t.token_hash = public.awp_sha256_hex(btrim(p_token)) FOR UPDATE;
  IF NOT FOUND OR (p_tenant_id IS NOT NULL AND v_token.tenant_id <> p_tenant_id) THEN
    RAISE EXCEPTION 'invalid gateway registration token' USING ERRCODE = 'AW006';
  END IF;
  IF v_token.consumed_at IS NOT NULL THEN
    RAISE EXCEPTION 'gateway registration token already used (at %)', v_token.consumed_at
      USING ERRCODE = 'AW008';
  END IF;
  IF v_token.expires_at <= now() THEN
    RAISE EXCEPTION 'gateway registration token expired at %', v_token.expires_at USING ERRCODE = 'AW007';
  END IF;

  v_label := coalesce(NULLIF(btrim(p_label), ''), NULLIF(btrim(v_token.label), ''), 'Gateway');
  v_base := btrim(regexp_replace(lower(coalesce(NULLIF(btrim(p_slug_hint), ''), v_label)), '[^a-z0-9]+', '-', 'g'), '-');
  v_base := left(CASE WHEN v_base = '' THEN 'gateway' ELSE v_base END, 56);
  -- A uuid-shaped hint ("Gateway <uuid>") would be refused by gateways_slug_not_uuid.
  IF v_base ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
    v_base := 'gateway-' || left(v_base, 8);
  END IF;
  v_slug := v_base;
  LOOP
    WHILE EXISTS (SELECT 1 FROM public.gateways g WHERE g.slug = v_slug) LOOP
      v_n := v_n + 1;
      v_slug := v_base || '-' || v_n;
    END LOOP;
    BEGIN
      INSERT INTO public.gateways (tenant_id, slug, label, status, meta)
      VALUES (v_token.tenant_id, v_slug, v_label, 'provisioning',
              jsonb_build_object('registered_via', 'token', 'token_id', v_token.id))
      RETURNING id INTO v_gateway;
      EXIT;
    EXCEPTION WHEN unique_violation THEN
      -- Taken by a concurrent registration (or insert) since the check above: next suffix.
      v_n := v_n + 1;
      v_slug := v_base || '-' || v_n;
    END;
  END LOOP;
  UPDATE public.gateway_registration_tokens t SET consumed_at = now(), consumed_by_gateway_id = v_gateway
   WHERE t.id = v_token.id;
  RETURN jsonb_build_object('gateway_id', v_gateway, 'gateway_slug', v_slug);
END
$$;
