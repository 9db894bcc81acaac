-- Knowledge: re-index on edit, skill versions, the embedding pipeline (awp_embed NOTIFY) and the
-- four searches.
--
-- The current definition of each of these functions, with its privileges: a repeatable file
-- (sql/README.md). awpctl migrate applies it after the numbered migrations, and again whenever
-- it changes. Change a body here; a new signature or return type, or a DROP, also needs a
-- numbered migration.

-- Tries a failed item again after 60 s, 120 s, ... capped at 1 hour; gives up after 5 attempts.
CREATE OR REPLACE FUNCTION public.awp_embedding_backoff(p_attempts integer) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = ''
AS $$
  SELECT make_interval(secs => least(3600, 60 * power(2, greatest(coalesce(p_attempts, 1), 1) - 1)))
$$;
REVOKE ALL ON FUNCTION public.awp_embedding_backoff(integer) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_embedding_backoff(integer) TO awp_gateway, service_role;

-- Attempts before an item's embedding stays failed.
CREATE OR REPLACE FUNCTION public.awp_embedding_max_attempts() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = ''
AS $$ SELECT 5 $$;
REVOKE ALL ON FUNCTION public.awp_embedding_max_attempts() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_embedding_max_attempts() TO awp_gateway, service_role;

-- BEFORE UPDATE: an edit of what the embedder reads puts the item back to pending and drops any
-- lease (so a late mark from the old lease is refused); pipeline writes do not bump updated_at.
CREATE OR REPLACE FUNCTION public.awp_knowledge_items_before_update() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  IF NEW.title IS DISTINCT FROM OLD.title OR NEW.content IS DISTINCT FROM OLD.content
     OR NEW.plain_text IS DISTINCT FROM OLD.plain_text OR NEW.tags IS DISTINCT FROM OLD.tags THEN
    NEW.embedding_status := 'pending';
    NEW.chunk_status := 'pending';
    NEW.embedding_error := NULL;
    NEW.chunk_error := NULL;
    NEW.embedding_attempts := 0;
    NEW.embedding_not_before := NULL;
    NEW.embedding_lease_token := NULL;
    NEW.embedding_leased_by := NULL;
    NEW.embedding_lease_expires_at := NULL;
  END IF;
  IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at AND (
       NEW.title IS DISTINCT FROM OLD.title OR NEW.content IS DISTINCT FROM OLD.content
    OR NEW.plain_text IS DISTINCT FROM OLD.plain_text OR NEW.tags IS DISTINCT FROM OLD.tags
    OR NEW.folder_id IS DISTINCT FROM OLD.folder_id OR NEW.kind IS DISTINCT FROM OLD.kind
    OR NEW.scope IS DISTINCT FROM OLD.scope OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
    OR NEW.pinned IS DISTINCT FROM OLD.pinned OR NEW.icon IS DISTINCT FROM OLD.icon
    OR NEW.meta IS DISTINCT FROM OLD.meta OR NEW.archived_at IS DISTINCT FROM OLD.archived_at
    OR NEW.mime_type IS DISTINCT FROM OLD.mime_type OR NEW.file_url IS DISTINCT FROM OLD.file_url
    OR NEW.source_connection_id IS DISTINCT FROM OLD.source_connection_id
    OR NEW.source_external_id IS DISTINCT FROM OLD.source_external_id) THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END
$$;
REVOKE ALL ON FUNCTION public.awp_knowledge_items_before_update() FROM PUBLIC, anon, authenticated;

-- Skill versions: every insert of a skill and every change of its title or text adds a row to
-- knowledge_item_versions. The writer may name the reason and the author for the transaction:
--   SELECT set_config('awp.change_reason', $1, true), set_config('awp.changed_by', $2, true);
CREATE OR REPLACE FUNCTION public.awp_knowledge_item_version() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = ''
AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.title IS NOT DISTINCT FROM OLD.title
     AND NEW.content IS NOT DISTINCT FROM OLD.content
     AND NEW.plain_text IS NOT DISTINCT FROM OLD.plain_text THEN
    RETURN NULL;
  END IF;
  INSERT INTO public.knowledge_item_versions (tenant_id, knowledge_item_id, version, title, content,
                                              plain_text, reason, changed_by)
  SELECT NEW.tenant_id, NEW.id, coalesce(max(v.version), 0) + 1, NEW.title, NEW.content, NEW.plain_text,
         coalesce(NULLIF(current_setting('awp.change_reason', true), ''),
                  CASE WHEN TG_OP = 'INSERT' THEN 'created' ELSE 'updated' END),
         coalesce(NULLIF(current_setting('awp.changed_by', true), ''),
                  NULLIF(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub',
                  session_user::text)
    FROM public.knowledge_item_versions v WHERE v.knowledge_item_id = NEW.id;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_knowledge_item_version() FROM PUBLIC, anon, authenticated;

-- Wake-up for the embedder: one NOTIFY on awp_embed per statement that made work.
CREATE OR REPLACE FUNCTION public.awp_notify_embed() RETURNS trigger
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_n bigint;
  v_id text;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT count(*), min(n.id::text) INTO v_n, v_id FROM new_rows n
     WHERE n.embedding_status = 'pending' AND n.archived_at IS NULL;
  ELSE
    SELECT count(*), min(n.id::text) INTO v_n, v_id
      FROM new_rows n JOIN old_rows o ON o.id = n.id
     WHERE n.embedding_status = 'pending' AND n.archived_at IS NULL
       AND n.embedding_lease_token IS NULL
       AND (o.embedding_status <> 'pending' OR o.source_hash IS DISTINCT FROM n.source_hash
            OR (n.processing_status = 'done' AND o.processing_status <> 'done')
            OR o.archived_at IS NOT NULL);
  END IF;
  IF v_n > 0 THEN
    PERFORM pg_notify('awp_embed', CASE WHEN v_n = 1 THEN v_id ELSE '' END);
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_notify_embed() FROM PUBLIC, anon, authenticated;

-- Leases up to p_limit items pending embedding (oldest edit first). With a gateway slug, only the
-- items of that gateway's tenant. Each row carries the source_hash and lease_token to hand back.
CREATE OR REPLACE FUNCTION public.lease_knowledge_items_for_indexing(p_gateway_slug text DEFAULT NULL,
                                                          p_limit integer DEFAULT 10,
                                                          p_lease_seconds integer DEFAULT 300,
                                                          p_tenant_id uuid DEFAULT NULL,
                                                          p_runner text DEFAULT NULL)
RETURNS TABLE (id uuid, tenant_id uuid, kind text, title text, content jsonb, plain_text text,
               tags text[], folder_id uuid, mime_type text, updated_at timestamptz,
               source_hash text, lease_token uuid, attempts integer, chunk_source_hash text)
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_tenant uuid := p_tenant_id;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    RAISE EXCEPTION 'lease_knowledge_items_for_indexing: p_limit must be between 1 and 1000, got %',
      coalesce(p_limit::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    RAISE EXCEPTION 'lease_knowledge_items_for_indexing: p_lease_seconds must be between 1 and 86400, got %',
      coalesce(p_lease_seconds::text, 'null') USING ERRCODE = 'AW004';
  END IF;
  IF p_gateway_slug IS NOT NULL THEN
    SELECT g.tenant_id INTO v_tenant FROM public.gateways g
     WHERE g.id = public.awp_resolve_gateway(p_gateway_slug, p_tenant_id);
  END IF;
  RETURN QUERY
  WITH picked AS (
    SELECT k.id FROM public.knowledge_items k
     WHERE k.embedding_status IN ('pending', 'failed') AND k.archived_at IS NULL
       AND (v_tenant IS NULL OR k.tenant_id = v_tenant)
       AND (k.kind IN ('page', 'skill') OR k.processing_status = 'done')
       AND (k.embedding_lease_expires_at IS NULL OR k.embedding_lease_expires_at < now())
       AND (k.embedding_not_before IS NULL OR k.embedding_not_before <= now())
       AND k.embedding_attempts < public.awp_embedding_max_attempts()
     ORDER BY k.updated_at, k.id
     LIMIT p_limit
     FOR UPDATE SKIP LOCKED)
  UPDATE public.knowledge_items k
     SET embedding_status = 'pending', embedding_lease_token = gen_random_uuid(),
         embedding_leased_by = coalesce(p_runner, p_gateway_slug),
         embedding_lease_expires_at = now() + make_interval(secs => p_lease_seconds),
         embedding_attempts = k.embedding_attempts + 1, embedding_not_before = NULL
    FROM picked WHERE k.id = picked.id
  RETURNING k.id, k.tenant_id, k.kind, k.title, k.content, k.plain_text, k.tags, k.folder_id,
            k.mime_type, k.updated_at, k.source_hash, k.embedding_lease_token,
            k.embedding_attempts, k.chunk_source_hash;
END
$$;
REVOKE ALL ON FUNCTION public.lease_knowledge_items_for_indexing(text, integer, integer, uuid, text) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.lease_knowledge_items_for_indexing(text, integer, integer, uuid, text) TO awp_gateway, service_role;

-- Locks a knowledge item for mark_knowledge_item_indexed / _failed and checks it: AW004 no id,
-- AW003 not found, AW002 lease lost, AW005 stale source hash, AW001 not pending.
CREATE OR REPLACE FUNCTION public.awp_knowledge_item_for_mark(p_item_id uuid, p_verb text, p_lease_token uuid,
                                                   p_source_hash text)
RETURNS public.knowledge_items
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.knowledge_items;
BEGIN
  IF p_item_id IS NULL THEN
    RAISE EXCEPTION 'cannot %: p_item_id is required', p_verb USING ERRCODE = 'AW004';
  END IF;
  SELECT * INTO v FROM public.knowledge_items k WHERE k.id = p_item_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'knowledge item %: not found', p_item_id USING ERRCODE = 'AW003';
  END IF;
  IF p_lease_token IS NOT NULL AND v.embedding_lease_token IS DISTINCT FROM p_lease_token THEN
    RAISE EXCEPTION 'knowledge item %: cannot %: lease lost (edited or leased again since)', p_item_id,
      p_verb USING ERRCODE = 'AW002';
  END IF;
  IF p_source_hash IS NOT NULL AND p_source_hash IS DISTINCT FROM v.source_hash THEN
    RAISE EXCEPTION 'knowledge item %: cannot %: stale source hash % (the item changed since it was leased; it stays pending)',
      p_item_id, p_verb, left(p_source_hash, 12) USING ERRCODE = 'AW005';
  END IF;
  IF v.embedding_status <> 'pending' THEN
    RAISE EXCEPTION 'knowledge item %: cannot %: embedding_status is %, expected pending', p_item_id,
      p_verb, v.embedding_status USING ERRCODE = 'AW001';
  END IF;
  RETURN v;
END
$$;
REVOKE ALL ON FUNCTION public.awp_knowledge_item_for_mark(uuid, text, uuid, text) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_knowledge_item_for_mark(uuid, text, uuid, text) TO awp_gateway, service_role;

-- pending -> indexed. Stores the item vector and, when p_chunks is given (a JSON array of
-- {chunk_index, content, char_start, char_end, page_number, section_path, meta, content_hash,
-- embedding: [384 numbers]}), replaces the item's chunks in the same transaction.
CREATE OR REPLACE FUNCTION public.mark_knowledge_item_indexed(p_item_id uuid, p_embedding vector(384),
                                                   p_model text, p_dimensions integer,
                                                   p_source_hash text, p_chunks jsonb DEFAULT NULL,
                                                   p_lease_token uuid DEFAULT NULL)
RETURNS TABLE (item_id uuid, embedding_status text, chunk_status text, chunk_count integer)
LANGUAGE plpgsql
SET search_path = public, extensions, pg_temp
AS $$
DECLARE
  v public.knowledge_items;
  v_chunks integer;
BEGIN
  IF p_embedding IS NULL THEN
    RAISE EXCEPTION 'mark_knowledge_item_indexed: p_embedding is required' USING ERRCODE = 'AW004';
  END IF;
  IF p_dimensions IS DISTINCT FROM 384 OR vector_dims(p_embedding) <> 384 THEN
    RAISE EXCEPTION 'mark_knowledge_item_indexed: embeddings have 384 dimensions, got p_dimensions % and a vector of %',
      coalesce(p_dimensions::text, 'null'), vector_dims(p_embedding) USING ERRCODE = 'AW004';
  END IF;
  IF p_model IS NULL OR btrim(p_model) = '' THEN
    RAISE EXCEPTION 'mark_knowledge_item_indexed: p_model is required (every vector names its model)'
      USING ERRCODE = 'AW004';
  END IF;
  IF p_source_hash IS NULL THEN
    RAISE EXCEPTION 'mark_knowledge_item_indexed: p_source_hash is required (the source_hash the lease returned)'
      USING ERRCODE = 'AW004';
  END IF;
  IF p_chunks IS NOT NULL AND jsonb_typeof(p_chunks) <> 'array' THEN
    RAISE EXCEPTION 'mark_knowledge_item_indexed: p_chunks must be a JSON array, got %', jsonb_typeof(p_chunks)
      USING ERRCODE = 'AW004';
  END IF;
  v := public.awp_knowledge_item_for_mark(p_item_id, 'mark indexed', p_lease_token, p_source_hash);

  IF p_chunks IS NOT NULL THEN
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_chunks) e
                WHERE jsonb_typeof(e) <> 'object' OR jsonb_typeof(e -> 'chunk_index') <> 'number'
                   OR jsonb_typeof(e -> 'content') <> 'string') THEN
      RAISE EXCEPTION 'mark_knowledge_item_indexed: every chunk needs chunk_index (number) and content (string)'
        USING ERRCODE = 'AW004';
    END IF;
    DELETE FROM public.knowledge_chunks c WHERE c.knowledge_item_id = p_item_id;
    INSERT INTO public.knowledge_chunks (tenant_id, knowledge_item_id, chunk_index, content, content_hash,
                                         char_start, char_end, page_number, section_path, meta,
                                         embedding, embedding_status, embedding_model,
                                         embedding_dimensions, embedding_updated_at)
    SELECT v.tenant_id, p_item_id, (e ->> 'chunk_index')::integer, e ->> 'content',
           coalesce(e ->> 'content_hash', public.awp_sha256_hex(e ->> 'content')),
           (e ->> 'char_start')::integer, (e ->> 'char_end')::integer, (e ->> 'page_number')::integer,
           CASE WHEN jsonb_typeof(e -> 'section_path') = 'array'
                THEN ARRAY(SELECT jsonb_array_elements_text(e -> 'section_path')) END,
           CASE WHEN jsonb_typeof(e -> 'meta') = 'object' THEN e -> 'meta' ELSE '{}'::jsonb END,
           CASE WHEN jsonb_typeof(e -> 'embedding') = 'array' THEN (e ->> 'embedding')::vector(384) END,
           CASE WHEN jsonb_typeof(e -> 'embedding') = 'array' THEN 'indexed' ELSE 'pending' END,
           CASE WHEN jsonb_typeof(e -> 'embedding') = 'array' THEN p_model END,
           CASE WHEN jsonb_typeof(e -> 'embedding') = 'array' THEN 384 END,
           CASE WHEN jsonb_typeof(e -> 'embedding') = 'array' THEN now() END
      FROM jsonb_array_elements(p_chunks) e;
    GET DIAGNOSTICS v_chunks = ROW_COUNT;
  END IF;

  UPDATE public.knowledge_items k
     SET embedding = p_embedding, embedding_model = p_model, embedding_dimensions = p_dimensions,
         embedding_status = 'indexed', embedding_source_hash = p_source_hash,
         embedding_updated_at = now(), embedding_error = NULL, embedding_attempts = 0,
         embedding_not_before = NULL, embedding_lease_token = NULL, embedding_leased_by = NULL,
         embedding_lease_expires_at = NULL,
         chunk_status = CASE WHEN p_chunks IS NULL THEN k.chunk_status ELSE 'indexed' END,
         chunk_count = CASE WHEN p_chunks IS NULL THEN k.chunk_count ELSE v_chunks END,
         chunk_source_hash = CASE WHEN p_chunks IS NULL THEN k.chunk_source_hash ELSE p_source_hash END,
         chunks_updated_at = CASE WHEN p_chunks IS NULL THEN k.chunks_updated_at ELSE now() END,
         chunk_error = CASE WHEN p_chunks IS NULL THEN k.chunk_error END
   WHERE k.id = p_item_id;
  RETURN QUERY SELECT k.id, k.embedding_status, k.chunk_status, k.chunk_count
                 FROM public.knowledge_items k WHERE k.id = p_item_id;
END
$$;
REVOKE ALL ON FUNCTION public.mark_knowledge_item_indexed(uuid, vector(384), text, integer, text, jsonb, uuid) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.mark_knowledge_item_indexed(uuid, vector(384), text, integer, text, jsonb, uuid) TO awp_gateway, service_role;

-- pending -> failed, retried after a back-off until awp_embedding_max_attempts() attempts.
CREATE OR REPLACE FUNCTION public.mark_knowledge_item_failed(p_item_id uuid, p_error text,
                                                  p_lease_token uuid DEFAULT NULL,
                                                  p_source_hash text DEFAULT NULL)
RETURNS TABLE (item_id uuid, embedding_status text, chunk_status text, chunk_count integer)
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v public.knowledge_items;
BEGIN
  v := public.awp_knowledge_item_for_mark(p_item_id, 'mark failed', p_lease_token, p_source_hash);
  UPDATE public.knowledge_items k
     SET embedding_status = 'failed', embedding_error = left(coalesce(p_error, 'failed without a reason'), 2000),
         embedding_not_before = now() + public.awp_embedding_backoff(k.embedding_attempts),
         embedding_lease_token = NULL, embedding_leased_by = NULL, embedding_lease_expires_at = NULL
   WHERE k.id = p_item_id;
  RETURN QUERY SELECT k.id, k.embedding_status, k.chunk_status, k.chunk_count
                 FROM public.knowledge_items k WHERE k.id = p_item_id;
END
$$;
REVOKE ALL ON FUNCTION public.mark_knowledge_item_failed(uuid, text, uuid, text) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.mark_knowledge_item_failed(uuid, text, uuid, text) TO awp_gateway, service_role;

-- Expired embedding leases: released; an item whose attempts ran out becomes failed.
CREATE OR REPLACE FUNCTION public.awp_expire_knowledge_leases() RETURNS integer
LANGUAGE plpgsql
SET search_path = ''
AS $$
DECLARE
  v_n integer;
BEGIN
  WITH expired AS (
    SELECT k.id FROM public.knowledge_items k
     WHERE k.embedding_lease_expires_at < now() FOR UPDATE SKIP LOCKED)
  UPDATE public.knowledge_items k
     SET embedding_lease_token = NULL, embedding_leased_by = NULL, embedding_lease_expires_at = NULL,
         embedding_status = CASE WHEN k.embedding_attempts >= public.awp_embedding_max_attempts()
                                 THEN 'failed' ELSE k.embedding_status END,
         embedding_error = CASE WHEN k.embedding_attempts >= public.awp_embedding_max_attempts()
                                THEN format('lease expired %s times (held last by %s)', k.embedding_attempts,
                                            coalesce(k.embedding_leased_by, 'unknown'))
                                ELSE k.embedding_error END
    FROM expired WHERE k.id = expired.id;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  RETURN v_n;
END
$$;
REVOKE ALL ON FUNCTION public.awp_expire_knowledge_leases() FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_expire_knowledge_leases() TO awp_gateway, service_role;

-- The searches' common argument checks (AW004): match_count 1-500, filter_kind a known kind.
CREATE OR REPLACE FUNCTION public.awp_check_search_args(p_fn text, p_match_count integer, p_filter_kind text)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE
SET search_path = ''
AS $$
BEGIN
  IF p_match_count IS NOT NULL AND (p_match_count < 1 OR p_match_count > 500) THEN
    RAISE EXCEPTION '%: match_count must be between 1 and 500, got %', p_fn, p_match_count
      USING ERRCODE = 'AW004';
  END IF;
  IF p_filter_kind IS NOT NULL AND p_filter_kind NOT IN ('page', 'skill', 'file', 'source') THEN
    RAISE EXCEPTION '%: filter_kind must be page, skill, file or source, got "%"', p_fn, p_filter_kind
      USING ERRCODE = 'AW004';
  END IF;
  RETURN p_match_count;
END
$$;
REVOKE ALL ON FUNCTION public.awp_check_search_args(text, integer, text) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_check_search_args(text, integer, text) TO authenticated, service_role;

-- HNSW with filters: let pgvector (0.8+) keep scanning until enough rows pass the filters.
-- Transaction-local; older pgvector ignores it.
CREATE OR REPLACE FUNCTION public.awp_hnsw_iterative_scan() RETURNS void
LANGUAGE plpgsql
SET search_path = ''
AS $$
BEGIN
  PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
EXCEPTION WHEN OTHERS THEN
  NULL;
END
$$;
REVOKE ALL ON FUNCTION public.awp_hnsw_iterative_scan() FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.awp_hnsw_iterative_scan() TO authenticated, service_role;

-- Items nearest to the query vector by cosine similarity (1 - cosine distance). RLS applies:
-- a user sees only its tenant; filter_tenant_id narrows a service-role call to one tenant.
CREATE OR REPLACE FUNCTION public.search_knowledge_items(query_embedding vector(384), match_count integer DEFAULT 5,
                                              filter_tags text[] DEFAULT NULL,
                                              filter_folder_id uuid DEFAULT NULL,
                                              filter_kind text DEFAULT NULL,
                                              filter_tenant_id uuid DEFAULT NULL)
RETURNS TABLE (id uuid, title text, kind text, content jsonb, tags text[], folder_id uuid, scope text,
               updated_at timestamptz, meta jsonb, source_connection_id uuid, source_external_id text,
               similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = public, extensions, pg_temp
AS $$
DECLARE
  v_count integer := coalesce(public.awp_check_search_args('search_knowledge_items', match_count, filter_kind), 5);
BEGIN
  IF query_embedding IS NULL THEN
    RAISE EXCEPTION 'search_knowledge_items: query_embedding is required' USING ERRCODE = 'AW004';
  END IF;
  PERFORM public.awp_hnsw_iterative_scan();
  RETURN QUERY
  SELECT r.* FROM (
    SELECT k.id, k.title, k.kind, k.content, k.tags, k.folder_id, k.scope, k.updated_at, k.meta,
           k.source_connection_id, k.source_external_id,
           (1 - (k.embedding <=> query_embedding))::double precision AS similarity
      FROM public.knowledge_items k
     WHERE k.embedding IS NOT NULL AND k.archived_at IS NULL
       AND (filter_tags IS NULL OR cardinality(filter_tags) = 0 OR k.tags && filter_tags)
       AND (filter_folder_id IS NULL OR k.folder_id = filter_folder_id)
       AND (filter_kind IS NULL OR k.kind = filter_kind)
       AND (filter_tenant_id IS NULL OR k.tenant_id = filter_tenant_id)
     ORDER BY k.embedding <=> query_embedding
     LIMIT v_count) r
  ORDER BY r.similarity DESC;
END
$$;
REVOKE ALL ON FUNCTION public.search_knowledge_items(vector(384), integer, text[], uuid, text, uuid) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.search_knowledge_items(vector(384), integer, text[], uuid, text, uuid) TO authenticated, service_role;

-- Full-text search over title (weight A), tags (B) and plain_text (C), ranked by ts_rank_cd;
-- "similarity" holds the rank. A blank query returns the most recently updated items (rank 0).
CREATE OR REPLACE FUNCTION public.search_knowledge_items_text(query_text text, match_count integer DEFAULT 10,
                                                   filter_tags text[] DEFAULT NULL,
                                                   filter_folder_id uuid DEFAULT NULL,
                                                   filter_kind text DEFAULT NULL,
                                                   filter_tenant_id uuid DEFAULT NULL)
RETURNS TABLE (id uuid, title text, kind text, content jsonb, tags text[], folder_id uuid, scope text,
               updated_at timestamptz, meta jsonb, source_connection_id uuid, source_external_id text,
               similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_count integer := coalesce(public.awp_check_search_args('search_knowledge_items_text', match_count, filter_kind), 10);
  v_query tsquery;
BEGIN
  IF query_text IS NOT NULL AND btrim(query_text) <> '' THEN
    v_query := websearch_to_tsquery('english'::regconfig, query_text);
  END IF;
  RETURN QUERY
  SELECT k.id, k.title, k.kind, k.content, k.tags, k.folder_id, k.scope, k.updated_at, k.meta,
         k.source_connection_id, k.source_external_id,
         CASE WHEN v_query IS NULL THEN 0::double precision
              ELSE ts_rank_cd(k.search_vector, v_query)::double precision END AS similarity
    FROM public.knowledge_items k
   WHERE k.archived_at IS NULL
     AND (v_query IS NULL OR k.search_vector @@ v_query)
     AND (filter_tags IS NULL OR cardinality(filter_tags) = 0 OR k.tags && filter_tags)
     AND (filter_folder_id IS NULL OR k.folder_id = filter_folder_id)
     AND (filter_kind IS NULL OR k.kind = filter_kind)
     AND (filter_tenant_id IS NULL OR k.tenant_id = filter_tenant_id)
   ORDER BY 12 DESC, k.updated_at DESC, k.id
   LIMIT v_count;
END
$$;
REVOKE ALL ON FUNCTION public.search_knowledge_items_text(text, integer, text[], uuid, text, uuid) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.search_knowledge_items_text(text, integer, text[], uuid, text, uuid) TO authenticated, service_role;

-- Chunks nearest to the query vector. filter_source_type matches the item's kind or its source
-- connection's provider; filter_source_id matches the item id or its source connection id.
CREATE OR REPLACE FUNCTION public.search_knowledge_chunks(query_embedding vector(384), match_count integer DEFAULT 10,
                                               filter_tags text[] DEFAULT NULL,
                                               filter_folder_id uuid DEFAULT NULL,
                                               filter_source_type text DEFAULT NULL,
                                               filter_source_id uuid DEFAULT NULL,
                                               filter_tenant_id uuid DEFAULT NULL)
RETURNS TABLE (knowledge_item_id uuid, kind text, title text, tags text[], chunk_id uuid,
               chunk_index integer, content text, char_start integer, char_end integer,
               page_number integer, section_path text[], meta jsonb, similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = public, extensions, pg_temp
AS $$
DECLARE
  v_count integer := coalesce(public.awp_check_search_args('search_knowledge_chunks', match_count, NULL), 10);
BEGIN
  IF query_embedding IS NULL THEN
    RAISE EXCEPTION 'search_knowledge_chunks: query_embedding is required' USING ERRCODE = 'AW004';
  END IF;
  PERFORM public.awp_hnsw_iterative_scan();
  RETURN QUERY
  SELECT r.* FROM (
    SELECT c.knowledge_item_id, k.kind, k.title, k.tags, c.id, c.chunk_index, c.content, c.char_start,
           c.char_end, c.page_number, c.section_path, c.meta,
           (1 - (c.embedding <=> query_embedding))::double precision AS similarity
      FROM public.knowledge_chunks c
      JOIN public.knowledge_items k ON k.id = c.knowledge_item_id
     WHERE c.embedding IS NOT NULL AND k.archived_at IS NULL
       AND (filter_tags IS NULL OR cardinality(filter_tags) = 0 OR k.tags && filter_tags)
       AND (filter_folder_id IS NULL OR k.folder_id = filter_folder_id)
       AND (filter_source_type IS NULL OR k.kind = filter_source_type
            OR EXISTS (SELECT 1 FROM public.source_connections s
                        WHERE s.id = k.source_connection_id AND s.provider = filter_source_type))
       AND (filter_source_id IS NULL OR k.id = filter_source_id OR k.source_connection_id = filter_source_id)
       AND (filter_tenant_id IS NULL OR c.tenant_id = filter_tenant_id)
     ORDER BY c.embedding <=> query_embedding
     LIMIT v_count) r
  ORDER BY r.similarity DESC;
END
$$;
REVOKE ALL ON FUNCTION public.search_knowledge_chunks(vector(384), integer, text[], uuid, text, uuid, uuid) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.search_knowledge_chunks(vector(384), integer, text[], uuid, text, uuid, uuid) TO authenticated, service_role;

-- Full-text search over chunk content; same columns as search_knowledge_chunks, "similarity"
-- holds the ts_rank_cd rank. A blank query returns the newest chunks (rank 0).
CREATE OR REPLACE FUNCTION public.search_knowledge_chunks_text(query_text text, match_count integer DEFAULT 10,
                                                    filter_tags text[] DEFAULT NULL,
                                                    filter_folder_id uuid DEFAULT NULL,
                                                    filter_source_type text DEFAULT NULL,
                                                    filter_source_id uuid DEFAULT NULL,
                                                    filter_tenant_id uuid DEFAULT NULL)
RETURNS TABLE (knowledge_item_id uuid, kind text, title text, tags text[], chunk_id uuid,
               chunk_index integer, content text, char_start integer, char_end integer,
               page_number integer, section_path text[], meta jsonb, similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = ''
AS $$
DECLARE
  v_count integer := coalesce(public.awp_check_search_args('search_knowledge_chunks_text', match_count, NULL), 10);
  v_query tsquery;
BEGIN
  IF query_text IS NOT NULL AND btrim(query_text) <> '' THEN
    v_query := websearch_to_tsquery('english'::regconfig, query_text);
  END IF;
  RETURN QUERY
  SELECT c.knowledge_item_id, k.kind, k.title, k.tags, c.id, c.chunk_index, c.content, c.char_start,
         c.char_end, c.page_number, c.section_path, c.meta,
         CASE WHEN v_query IS NULL THEN 0::double precision
              ELSE ts_rank_cd(c.search_vector, v_query)::double precision END AS similarity
    FROM public.knowledge_chunks c
    JOIN public.knowledge_items k ON k.id = c.knowledge_item_id
   WHERE k.archived_at IS NULL
     AND (v_query IS NULL OR c.search_vector @@ v_query)
     AND (filter_tags IS NULL OR cardinality(filter_tags) = 0 OR k.tags && filter_tags)
     AND (filter_folder_id IS NULL OR k.folder_id = filter_folder_id)
     AND (filter_source_type IS NULL OR k.kind = filter_source_type
          OR EXISTS (SELECT 1 FROM public.source_connections s
                      WHERE s.id = k.source_connection_id AND s.provider = filter_source_type))
     AND (filter_source_id IS NULL OR k.id = filter_source_id OR k.source_connection_id = filter_source_id)
     AND (filter_tenant_id IS NULL OR c.tenant_id = filter_tenant_id)
   ORDER BY 13 DESC, c.created_at DESC, c.id
   LIMIT v_count;
END
$$;
REVOKE ALL ON FUNCTION public.search_knowledge_chunks_text(text, integer, text[], uuid, text, uuid, uuid) FROM PUBLIC, anon;
GRANT EXECUTE ON FUNCTION public.search_knowledge_chunks_text(text, integer, text[], uuid, text, uuid, uuid) TO authenticated, service_role;
