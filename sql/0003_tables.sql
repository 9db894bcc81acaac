-- Every table of the spec. Each has tenant_id; references between tenant tables are composite
-- (tenant_id, x_id) so a row can never point at another tenant's row, even by a guessed uuid.

-- Immutable helpers for generated columns (array_to_string is only STABLE in general; for text[]
-- it is immutable).
CREATE FUNCTION public.awp_text_array_to_string(p text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = ''
AS $$ SELECT coalesce(array_to_string(p, ' '), '') $$;
REVOKE ALL ON FUNCTION public.awp_text_array_to_string(text[]) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_text_array_to_string(text[]) TO authenticated, service_role;

-- SHA-256 hex of the UTF-8 text (convert_to is only STABLE in general; for UTF8 it is immutable).
CREATE FUNCTION public.awp_sha256_hex(p text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = ''
AS $$ SELECT encode(sha256(convert_to(p, 'UTF8')), 'hex') $$;
REVOKE ALL ON FUNCTION public.awp_sha256_hex(text) FROM PUBLIC, anon, authenticated;
GRANT EXECUTE ON FUNCTION public.awp_sha256_hex(text) TO authenticated, service_role;

-- Workspaces ----------------------------------------------------------------------------------

-- The workspace registry (fields of POST /api/workspaces). The service-role key is only ever
-- stored encrypted (enc:v1: format of the secrets table).
CREATE TABLE public.workspace (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  label text NOT NULL CHECK (btrim(label) <> ''),
  emoji text,
  url text,
  anon_key text,
  service_role_key_encrypted text CHECK (service_role_key_encrypted LIKE 'enc:v1:%'),
  is_default boolean NOT NULL DEFAULT false,
  owner_name text,
  owner_preferred_name text,
  owner_timezone text,
  settings jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(settings) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX workspace_one_default ON public.workspace (tenant_id) WHERE is_default;

-- Gateways ------------------------------------------------------------------------------------

CREATE TABLE public.gateways (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  slug text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  label text NOT NULL DEFAULT 'Gateway',
  status public.gateway_status NOT NULL DEFAULT 'provisioning',
  last_seen_at timestamptz,
  last_heartbeat_at timestamptz,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT gateways_tenant_slug_key UNIQUE (tenant_id, slug),
  CONSTRAINT gateways_tenant_id_key UNIQUE (tenant_id, id)
);
CREATE INDEX gateways_slug_idx ON public.gateways (slug);

INSERT INTO public.gateways (tenant_id, slug, label, status)
VALUES ('00000000-0000-0000-0000-000000000000', 'default', 'Primary gateway', 'ready');

-- Single-use registration tokens, stored as SHA-256 hex; the plaintext is shown once.
CREATE TABLE public.gateway_registration_tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  token_hash text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  label text,
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz,
  consumed_by_gateway_id uuid,
  created_by text,
  created_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (tenant_id, consumed_by_gateway_id) REFERENCES public.gateways (tenant_id, id)
    ON DELETE SET NULL (consumed_by_gateway_id)
);

-- Liveness of every daemon instance (awpctl status, fault drills).
CREATE TABLE public.daemon_heartbeats (
  tenant_id uuid NOT NULL REFERENCES public.tenants (id) ON DELETE CASCADE,
  gateway_id uuid NOT NULL,
  daemon text NOT NULL CHECK (daemon ~ '^[a-z][a-z0-9_-]{0,62}$'),
  instance text NOT NULL DEFAULT 'default' CHECK (btrim(instance) <> ''),
  pid integer,
  version text,
  started_at timestamptz,
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  PRIMARY KEY (gateway_id, daemon, instance),
  FOREIGN KEY (tenant_id, gateway_id) REFERENCES public.gateways (tenant_id, id) ON DELETE CASCADE
);

-- Agents --------------------------------------------------------------------------------------

CREATE TABLE public.agents (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  gateway_id uuid,
  name text NOT NULL CHECK (btrim(name) <> ''),
  -- The slug names paths on the gateway (workspace-<slug>): no traversal characters.
  slug text NOT NULL CHECK (slug ~ '^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$' AND slug NOT LIKE '%..%'),
  description text,
  avatar_url text,
  status public.agent_status NOT NULL DEFAULT 'ready',
  last_seen_at timestamptz,
  last_heartbeat_at timestamptz,
  model text,
  thinking text,
  reports_to_id uuid,
  domains text[] NOT NULL DEFAULT '{}',
  capabilities text[] NOT NULL DEFAULT '{}',
  config jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object'),
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT agents_tenant_slug_key UNIQUE (tenant_id, slug),
  CONSTRAINT agents_tenant_id_key UNIQUE (tenant_id, id),
  CONSTRAINT agents_not_own_manager CHECK (reports_to_id IS DISTINCT FROM id),
  FOREIGN KEY (tenant_id, gateway_id) REFERENCES public.gateways (tenant_id, id)
    ON DELETE SET NULL (gateway_id),
  FOREIGN KEY (tenant_id, reports_to_id) REFERENCES public.agents (tenant_id, id)
    ON DELETE SET NULL (reports_to_id)
);
-- Query pattern 1: agents of a gateway ordered by name.
CREATE INDEX agents_gateway_name_idx ON public.agents (gateway_id, name);
CREATE INDEX agents_reports_to_idx ON public.agents (reports_to_id) WHERE reports_to_id IS NOT NULL;

-- Secrets and sources -------------------------------------------------------------------------

-- Channel and provider tokens, encrypted by the UI ("enc:v1:" + iv.tag.ciphertext, AES-256-GCM);
-- plaintext is refused.
CREATE TABLE public.secrets (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  gateway_id uuid NOT NULL,
  agent_id uuid,
  key text NOT NULL CHECK (key ~ '^[A-Za-z_][A-Za-z0-9_]{0,127}$'),
  name text,
  encrypted_value text NOT NULL CONSTRAINT secrets_encrypted_value_format
    CHECK (encrypted_value ~ '^enc:v1:\.?[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$'),
  category text NOT NULL DEFAULT 'user' CHECK (category IN ('user', 'channel', 'integration')),
  note text,
  sync_status text NOT NULL DEFAULT 'pending'
    CHECK (sync_status IN ('pending', 'active', 'error', 'waiting')),
  sync_error text,
  last_synced_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT secrets_tenant_id_key UNIQUE (tenant_id, id),
  FOREIGN KEY (tenant_id, gateway_id) REFERENCES public.gateways (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, agent_id) REFERENCES public.agents (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX secrets_gateway_key_idx ON public.secrets (tenant_id, gateway_id, key)
  WHERE agent_id IS NULL;
CREATE UNIQUE INDEX secrets_agent_key_idx ON public.secrets (tenant_id, gateway_id, agent_id, key)
  WHERE agent_id IS NOT NULL;
CREATE INDEX secrets_gateway_idx ON public.secrets (gateway_id);

CREATE TABLE public.source_connections (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  provider text NOT NULL CHECK (btrim(provider) <> ''),
  account_label text,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'error', 'revoked')),
  writable boolean NOT NULL DEFAULT false,
  secret_id uuid,
  config jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object'),
  last_synced_at timestamptz,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT source_connections_tenant_id_key UNIQUE (tenant_id, id),
  FOREIGN KEY (tenant_id, secret_id) REFERENCES public.secrets (tenant_id, id)
    ON DELETE SET NULL (secret_id)
);

-- Knowledge -----------------------------------------------------------------------------------

CREATE TABLE public.knowledge_folders (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  parent_id uuid,
  name text NOT NULL CHECK (btrim(name) <> ''),
  scope text NOT NULL DEFAULT 'workspace' CHECK (scope IN ('workspace', 'agent')),
  sort_order integer NOT NULL DEFAULT 0,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT knowledge_folders_tenant_id_key UNIQUE (tenant_id, id),
  CONSTRAINT knowledge_folders_not_own_parent CHECK (parent_id IS DISTINCT FROM id),
  FOREIGN KEY (tenant_id, parent_id) REFERENCES public.knowledge_folders (tenant_id, id)
    ON DELETE CASCADE
);

CREATE TABLE public.knowledge_items (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  folder_id uuid,
  kind text NOT NULL DEFAULT 'page' CHECK (kind IN ('page', 'skill', 'file', 'source')),
  title text NOT NULL CHECK (btrim(title) <> ''),
  content jsonb,
  plain_text text,
  scope text NOT NULL DEFAULT 'workspace' CHECK (scope IN ('workspace', 'agent')),
  -- The owning agent of agent-scoped items (skills of GET /api/agents/[slug]/skills).
  agent_id uuid,
  tags text[] NOT NULL DEFAULT '{}',
  pinned boolean NOT NULL DEFAULT false,
  icon text,
  mime_type text,
  file_url text,
  file_size bigint,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  -- Embedding pipeline (DESIGN §3).
  embedding vector(384),
  embedding_status text NOT NULL DEFAULT 'pending'
    CHECK (embedding_status IN ('pending', 'indexed', 'failed')),
  embedding_model text,
  embedding_dimensions integer,
  embedding_source_hash text,
  embedding_updated_at timestamptz,
  embedding_error text,
  embedding_attempts integer NOT NULL DEFAULT 0,
  embedding_not_before timestamptz,
  embedding_lease_token uuid,
  embedding_leased_by text,
  embedding_lease_expires_at timestamptz,
  chunk_status text NOT NULL DEFAULT 'pending' CHECK (chunk_status IN ('pending', 'indexed', 'failed')),
  chunk_count integer NOT NULL DEFAULT 0,
  chunk_source_hash text,
  chunks_updated_at timestamptz,
  chunk_error text,
  processing_status text NOT NULL DEFAULT 'ready'
    CHECK (processing_status IN ('ready', 'processing', 'done', 'failed')),
  processing_error text,
  source_connection_id uuid,
  source_external_id text,
  source_sync_status text
    CHECK (source_sync_status IN ('synced', 'stale', 'error', 'source_deleted')),
  source_synced_at timestamptz,
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  -- What the embedder reads, hashed by the database: the lease hands it out and
  -- mark_knowledge_item_indexed refuses a hash that no longer matches.
  source_hash text GENERATED ALWAYS AS (public.awp_sha256_hex(
    title || chr(31) || public.awp_text_array_to_string(tags) || chr(31) ||
    coalesce(plain_text, '') || chr(31) || coalesce(content::text, ''))) STORED,
  search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english'::regconfig, title), 'A') ||
    setweight(to_tsvector('english'::regconfig, public.awp_text_array_to_string(tags)), 'B') ||
    setweight(to_tsvector('english'::regconfig, coalesce(plain_text, '')), 'C')) STORED,
  CONSTRAINT knowledge_items_tenant_id_key UNIQUE (tenant_id, id),
  FOREIGN KEY (tenant_id, folder_id) REFERENCES public.knowledge_folders (tenant_id, id)
    ON DELETE SET NULL (folder_id),
  FOREIGN KEY (tenant_id, agent_id) REFERENCES public.agents (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, source_connection_id) REFERENCES public.source_connections (tenant_id, id)
    ON DELETE SET NULL (source_connection_id)
);
CREATE INDEX knowledge_items_embedding_hnsw ON public.knowledge_items
  USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX knowledge_items_search_vector_gin ON public.knowledge_items USING gin (search_vector);
CREATE INDEX knowledge_items_embedding_queue ON public.knowledge_items (updated_at, id)
  WHERE embedding_status <> 'indexed' AND archived_at IS NULL;
CREATE INDEX knowledge_items_folder_idx ON public.knowledge_items (folder_id);
CREATE INDEX knowledge_items_agent_idx ON public.knowledge_items (agent_id) WHERE agent_id IS NOT NULL;
CREATE INDEX knowledge_items_tags_gin ON public.knowledge_items USING gin (tags);

-- Searchable pieces of an item, written with their embeddings by mark_knowledge_item_indexed.
CREATE TABLE public.knowledge_chunks (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  chunk_id uuid GENERATED ALWAYS AS (id) STORED,
  tenant_id uuid NOT NULL REFERENCES public.tenants (id) ON DELETE CASCADE,
  knowledge_item_id uuid NOT NULL,
  chunk_index integer NOT NULL CHECK (chunk_index >= 0),
  content text NOT NULL,
  content_hash text,
  char_start integer CHECK (char_start >= 0),
  char_end integer CHECK (char_end >= char_start),
  page_number integer,
  section_path text[],
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  embedding vector(384),
  embedding_status text NOT NULL DEFAULT 'pending'
    CHECK (embedding_status IN ('pending', 'indexed', 'failed')),
  embedding_model text,
  embedding_dimensions integer,
  embedding_error text,
  embedding_updated_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  search_vector tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
  CONSTRAINT knowledge_chunks_item_index_key UNIQUE (knowledge_item_id, chunk_index),
  FOREIGN KEY (tenant_id, knowledge_item_id) REFERENCES public.knowledge_items (tenant_id, id)
    ON DELETE CASCADE
);
CREATE INDEX knowledge_chunks_embedding_hnsw ON public.knowledge_chunks
  USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE INDEX knowledge_chunks_search_vector_gin ON public.knowledge_chunks USING gin (search_vector);

-- Every saved version of a skill (written by trigger, see 0007).
CREATE TABLE public.knowledge_item_versions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL REFERENCES public.tenants (id) ON DELETE CASCADE,
  knowledge_item_id uuid NOT NULL,
  version integer NOT NULL CHECK (version >= 1),
  title text NOT NULL,
  content jsonb,
  plain_text text,
  reason text,
  changed_by text,
  changed_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT knowledge_item_versions_item_version_key UNIQUE (knowledge_item_id, version),
  FOREIGN KEY (tenant_id, knowledge_item_id) REFERENCES public.knowledge_items (tenant_id, id)
    ON DELETE CASCADE
);

-- Contacts and collections --------------------------------------------------------------------

CREATE TABLE public.contacts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (btrim(name) <> ''),
  email text,
  phone text,
  company text,
  title text,
  org_id uuid,
  status text,
  tags text[] NOT NULL DEFAULT '{}',
  notes text,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT contacts_tenant_id_key UNIQUE (tenant_id, id)
);

CREATE TABLE public.collections (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  slug text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  name text NOT NULL CHECK (btrim(name) <> ''),
  description text,
  -- Field definitions: [{"key": "...", "label": "...", "type": "..."}, ...]
  fields jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(fields) = 'array'),
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT collections_tenant_slug_key UNIQUE (tenant_id, slug),
  CONSTRAINT collections_tenant_id_key UNIQUE (tenant_id, id)
);

CREATE TABLE public.collection_records (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  collection_id uuid NOT NULL,
  "values" jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof("values") = 'object'),
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT collection_records_tenant_id_key UNIQUE (tenant_id, id),
  FOREIGN KEY (tenant_id, collection_id) REFERENCES public.collections (tenant_id, id)
    ON DELETE CASCADE
);
CREATE INDEX collection_records_collection_idx ON public.collection_records (collection_id);

-- Tasks ---------------------------------------------------------------------------------------

CREATE TABLE public.tasks (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  title text NOT NULL CHECK (btrim(title) <> ''),
  description text,
  status public.task_status NOT NULL DEFAULT 'todo',
  priority public.task_priority NOT NULL DEFAULT 'medium',
  stream_id uuid,
  parent_id uuid,
  assignee_type public.actor_type,
  assignee_agent_id uuid,
  assignee_user_id uuid,
  due_date timestamptz,
  due_at timestamptz,
  completed_at timestamptz,
  contact_id uuid,
  org_id uuid,
  tags text[] NOT NULL DEFAULT '{}',
  sort_order integer NOT NULL DEFAULT 0,
  model_override text,
  thinking_override text,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT tasks_tenant_id_key UNIQUE (tenant_id, id),
  CONSTRAINT tasks_not_own_parent CHECK (parent_id IS DISTINCT FROM id),
  FOREIGN KEY (tenant_id, parent_id) REFERENCES public.tasks (tenant_id, id)
    ON DELETE SET NULL (parent_id),
  FOREIGN KEY (tenant_id, assignee_agent_id) REFERENCES public.agents (tenant_id, id)
    ON DELETE SET NULL (assignee_agent_id),
  FOREIGN KEY (tenant_id, contact_id) REFERENCES public.contacts (tenant_id, id)
    ON DELETE SET NULL (contact_id)
);
-- Query pattern 2: open tasks of an agent (status IN todo, in_progress, blocked).
CREATE INDEX tasks_assignee_status_idx ON public.tasks (assignee_agent_id, status)
  WHERE assignee_agent_id IS NOT NULL;
CREATE INDEX tasks_overdue_idx ON public.tasks ((coalesce(due_at, due_date)))
  WHERE status IN ('todo', 'in_progress', 'blocked') AND archived_at IS NULL;
CREATE INDEX tasks_parent_idx ON public.tasks (parent_id) WHERE parent_id IS NOT NULL;

-- "A blocked_by B" is stored as source = A, target = B.
CREATE TABLE public.task_relations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  source_task_id uuid NOT NULL,
  target_task_id uuid NOT NULL,
  relation_type public.task_relation_type NOT NULL,
  created_by_type public.actor_type,
  created_by_agent_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT task_relations_unique UNIQUE (tenant_id, source_task_id, target_task_id, relation_type),
  CONSTRAINT task_relations_not_self CHECK (source_task_id <> target_task_id),
  FOREIGN KEY (tenant_id, source_task_id) REFERENCES public.tasks (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, target_task_id) REFERENCES public.tasks (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, created_by_agent_id) REFERENCES public.agents (tenant_id, id)
    ON DELETE SET NULL (created_by_agent_id)
);
CREATE INDEX task_relations_target_idx ON public.task_relations (target_task_id);
CREATE INDEX task_relations_source_idx ON public.task_relations (source_task_id);

CREATE TABLE public.task_comments (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  task_id uuid NOT NULL,
  body text NOT NULL CHECK (btrim(body) <> ''),
  actor_type public.actor_type NOT NULL DEFAULT 'human',
  actor_agent_id uuid,
  actor_user_id uuid,
  -- Agent slugs (with or without a leading @) or agent ids; @slug in the body counts too.
  mentions text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT task_comments_tenant_id_key UNIQUE (tenant_id, id),
  FOREIGN KEY (tenant_id, task_id) REFERENCES public.tasks (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, actor_agent_id) REFERENCES public.agents (tenant_id, id)
    ON DELETE SET NULL (actor_agent_id)
);
CREATE INDEX task_comments_task_idx ON public.task_comments (task_id, created_at);

-- Deliverables of a task and their review.
CREATE TABLE public.work_products (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  task_id uuid,
  title text NOT NULL CHECK (btrim(title) <> ''),
  kind text NOT NULL DEFAULT 'link' CHECK (kind IN ('link', 'file', 'document', 'knowledge_item')),
  url text,
  content text,
  knowledge_item_id uuid,
  status public.work_product_status NOT NULL DEFAULT 'draft',
  is_deliverable boolean NOT NULL DEFAULT true,
  submitted_by_agent_id uuid,
  reviewer_agent_id uuid,
  review_note text,
  reviewed_at timestamptz,
  -- Bumped each time the product is sent for review: part of the inbox dedup keys.
  review_round integer NOT NULL DEFAULT 0,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT work_products_tenant_id_key UNIQUE (tenant_id, id),
  FOREIGN KEY (tenant_id, task_id) REFERENCES public.tasks (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, knowledge_item_id) REFERENCES public.knowledge_items (tenant_id, id)
    ON DELETE SET NULL (knowledge_item_id),
  FOREIGN KEY (tenant_id, submitted_by_agent_id) REFERENCES public.agents (tenant_id, id)
    ON DELETE SET NULL (submitted_by_agent_id),
  FOREIGN KEY (tenant_id, reviewer_agent_id) REFERENCES public.agents (tenant_id, id)
    ON DELETE SET NULL (reviewer_agent_id)
);
CREATE INDEX work_products_task_idx ON public.work_products (task_id);

-- Routines ------------------------------------------------------------------------------------

CREATE TABLE public.routines (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  agent_id uuid NOT NULL,
  agent_slug text NOT NULL,
  name text NOT NULL CHECK (btrim(name) <> ''),
  instruction text,
  trigger_type text NOT NULL DEFAULT 'schedule' CHECK (trigger_type IN ('schedule', 'event')),
  is_active boolean NOT NULL DEFAULT true,
  -- Schedule routines.
  cadence_type text CHECK (cadence_type IN ('every_n_minutes', 'every_n_hours', 'daily', 'weekdays',
                                            'weekly', 'monthly', 'every_n_days')),
  interval_n integer CHECK (interval_n >= 1),
  days_of_week smallint[] CHECK (days_of_week <@ ARRAY[1, 2, 3, 4, 5, 6, 7]::smallint[]),
  day_of_month integer CHECK (day_of_month BETWEEN 1 AND 31),
  time_of_day time,
  timezone text NOT NULL DEFAULT 'UTC',
  next_run_at timestamptz,
  last_run_at timestamptz,
  run_count integer NOT NULL DEFAULT 0,
  last_error text,
  -- Event routines.
  entity_type text CHECK (entity_type IN ('contact', 'collection_record', 'knowledge_item', 'task')),
  collection_id uuid,
  field text,
  condition text CHECK (condition IN ('created', 'changed_to', 'changed_from', 'any_change')),
  value text,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT routines_tenant_id_key UNIQUE (tenant_id, id),
  CONSTRAINT routines_schedule_fields CHECK (trigger_type <> 'schedule' OR cadence_type IS NOT NULL),
  CONSTRAINT routines_event_fields CHECK (trigger_type <> 'event'
    OR (entity_type IS NOT NULL AND condition IS NOT NULL)),
  FOREIGN KEY (tenant_id, agent_id) REFERENCES public.agents (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, collection_id) REFERENCES public.collections (tenant_id, id)
    ON DELETE CASCADE
);
CREATE INDEX routines_due_idx ON public.routines (next_run_at)
  WHERE trigger_type = 'schedule' AND is_active AND archived_at IS NULL;
CREATE INDEX routines_event_idx ON public.routines (tenant_id, entity_type)
  WHERE trigger_type = 'event' AND is_active AND archived_at IS NULL;

-- Command queue -------------------------------------------------------------------------------

CREATE TABLE public.agent_commands (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  agent_id uuid,
  agent_slug text,
  gateway_id uuid NOT NULL,
  action public.command_action NOT NULL,
  payload jsonb NOT NULL DEFAULT '{}'
    CONSTRAINT agent_commands_payload_is_object CHECK (jsonb_typeof(payload) = 'object'),
  status public.command_status NOT NULL DEFAULT 'pending',
  exit_code integer,
  stdout text,
  stderr text,
  error_message text,
  requested_by uuid,
  -- Lease (DESIGN §3): a new token per lease fences late holders.
  lease_token uuid,
  leased_by text,
  leased_at timestamptz,
  lease_expires_at timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  started_at timestamptz,
  finished_at timestamptz,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (tenant_id, agent_id) REFERENCES public.agents (tenant_id, id)
    ON DELETE SET NULL (agent_id),
  FOREIGN KEY (tenant_id, gateway_id) REFERENCES public.gateways (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX agent_commands_pending_idx ON public.agent_commands (gateway_id, created_at, id)
  WHERE status = 'pending';
CREATE INDEX agent_commands_lease_idx ON public.agent_commands (lease_expires_at)
  WHERE status IN ('leased', 'running');
CREATE INDEX agent_commands_agent_idx ON public.agent_commands (agent_id, created_at DESC);

-- Agent inbox ---------------------------------------------------------------------------------

CREATE TABLE public.agent_inbox_items (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  agent_id uuid NOT NULL,
  agent_slug text NOT NULL,
  -- The agent's gateway when the item was made, so a dispatcher filters by gateway.
  gateway_id uuid,
  event_type public.inbox_event_type NOT NULL,
  status public.inbox_item_status NOT NULL DEFAULT 'pending',
  title text,
  summary text,
  payload jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(payload) = 'object'),
  task_id uuid,
  comment_id uuid,
  contact_id uuid,
  routine_id uuid,
  work_product_id uuid,
  dedup_key text NOT NULL CONSTRAINT agent_inbox_items_dedup_key_key UNIQUE,
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  max_attempts integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
  not_before timestamptz,
  lease_token uuid,
  leased_by text,
  leased_at timestamptz,
  lease_expires_at timestamptz,
  completed_at timestamptz,
  failed_at timestamptz,
  last_error text,
  last_wake_attempt_at timestamptz,
  last_wake_success_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (tenant_id, agent_id) REFERENCES public.agents (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, gateway_id) REFERENCES public.gateways (tenant_id, id)
    ON DELETE SET NULL (gateway_id),
  FOREIGN KEY (tenant_id, task_id) REFERENCES public.tasks (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, comment_id) REFERENCES public.task_comments (tenant_id, id)
    ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, contact_id) REFERENCES public.contacts (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, routine_id) REFERENCES public.routines (tenant_id, id)
    ON DELETE SET NULL (routine_id),
  FOREIGN KEY (tenant_id, work_product_id) REFERENCES public.work_products (tenant_id, id)
    ON DELETE CASCADE
);
CREATE INDEX agent_inbox_items_ready_idx ON public.agent_inbox_items (agent_id, created_at, id)
  WHERE status IN ('pending', 'failed');
CREATE INDEX agent_inbox_items_gateway_idx ON public.agent_inbox_items (gateway_id, agent_id)
  WHERE status IN ('pending', 'failed', 'leased');
CREATE INDEX agent_inbox_items_lease_idx ON public.agent_inbox_items (lease_expires_at)
  WHERE status = 'leased';

-- Usage ---------------------------------------------------------------------------------------

CREATE TABLE public.agent_usage (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  agent_id uuid NOT NULL,
  model text,
  input_tokens bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
  output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
  cost_usd numeric(14, 6) NOT NULL DEFAULT 0,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (tenant_id, agent_id) REFERENCES public.agents (tenant_id, id) ON DELETE CASCADE
);
-- Query pattern 3: usage of an agent in a period, newest first.
CREATE INDEX agent_usage_agent_created_idx ON public.agent_usage (agent_id, created_at DESC);

-- Plugins -------------------------------------------------------------------------------------

CREATE TABLE public.plugins (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.current_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  slug text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
  name text NOT NULL CHECK (btrim(name) <> ''),
  source public.plugin_source NOT NULL,
  version text,
  enabled boolean NOT NULL DEFAULT true,
  webhook_url text,
  config jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT plugins_tenant_slug_key UNIQUE (tenant_id, slug),
  CONSTRAINT plugins_webhook_needs_url CHECK (source <> 'webhook' OR webhook_url IS NOT NULL)
);

-- HTTP login users ----------------------------------------------------------------------------

-- Service role only: authenticated never sees this table.
CREATE TABLE public.app_users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000'
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  email text NOT NULL CHECK (email ~ '^[^@[:space:]]+@[^@[:space:]]+$'),
  -- Argon2id encoded string from libsodium's crypto_pwhash_str ("$argon2id$v=19$...").
  password_hash text NOT NULL CHECK (password_hash LIKE '$argon2id$%'),
  display_name text,
  disabled boolean NOT NULL DEFAULT false,
  last_login_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX app_users_email_key ON public.app_users (lower(email));

-- updated_at on every table that has one.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['workspace', 'gateways', 'agents', 'secrets', 'source_connections',
    'knowledge_folders', 'knowledge_chunks', 'contacts', 'collections', 'collection_records',
    'tasks', 'task_comments', 'work_products', 'routines', 'agent_commands', 'agent_inbox_items',
    'plugins', 'app_users']
  LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE ON public.%I FOR EACH ROW '
                   'EXECUTE FUNCTION public.awp_set_updated_at()', t || '_updated_at', t);
  END LOOP;
END
$$;
