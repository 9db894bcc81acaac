-- The original product's data model as its web UI uses it (issue 38; docs/product-ui.md): the
-- tables the UI reads and writes that awp did not have, the columns it uses on tables awp has,
-- and the foreign keys its embed hints name. Names, types and defaults are the product's (its
-- db/migrations at 86f99c2: they are the interface); the SQL is awp's: every tenant table has
-- tenant_id defaulting to the session's tenant (AW009 without one, sql/0017), composite
-- (tenant_id, x) foreign keys named <table>_<column>_fkey (a row can only point into its own
-- tenant, and PostgREST's embed hints find them under the product's names), and CHECKs where the
-- product leaves bad values to fail later. Security (RLS, grants) is sql/0036; behaviour
-- (triggers, RPCs, the seeded workspace row) sql/0037 and sql/0038.

-- Enums of the product that awp lacked ------------------------------------------------------

-- stream_type: the product's three, and the two its setup wizard's stream templates also name
-- (project, custom), which its own enum refuses.
CREATE TYPE public.stream_type AS ENUM ('functional', 'geographic', 'channel', 'project', 'custom');
-- The product's audit actions plus the three its UI writes and its own enum lacks (uploaded,
-- moved, restored): an archived task restored in the UI is logged instead of failing.
CREATE TYPE public.audit_action AS ENUM ('created', 'updated', 'deleted', 'archived',
  'status_changed', 'assigned', 'commented', 'attached', 'sent', 'uploaded', 'moved', 'restored');
CREATE TYPE public.budget_status AS ENUM ('ok', 'warned', 'exceeded', 'unmetered');
CREATE TYPE public.plugin_event_status AS ENUM ('success', 'error', 'timeout', 'skipped');

-- Workspace: the tenant's one settings row ---------------------------------------------------

-- The product's workspace row is a singleton per tenant (its UI reads it with limit(1)); awp's
-- table had no such rule, so a tenant with several rows is named and the migration stops: an
-- operator decides which row stays (awp itself never wrote this table).
DO $$
DECLARE
  v_tenants text;
BEGIN
  SELECT string_agg(tenant_id::text, ', ') INTO v_tenants
    FROM (SELECT tenant_id FROM public.workspace GROUP BY tenant_id HAVING count(*) > 1) d;
  IF v_tenants IS NOT NULL THEN
    RAISE EXCEPTION 'workspace: tenants % have more than one row; the product UI needs one per tenant', v_tenants
      USING HINT = 'DELETE the extra public.workspace rows of each, then run awpctl migrate again';
  END IF;
END
$$;
ALTER TABLE public.workspace
  ADD COLUMN name text,
  ADD COLUMN description text,
  ADD COLUMN default_agent_budget_usd numeric(10, 2)
    CHECK (default_agent_budget_usd IS NULL OR default_agent_budget_usd >= 0),
  ADD COLUMN default_soft_threshold_pct integer NOT NULL DEFAULT 80
    CHECK (default_soft_threshold_pct BETWEEN 0 AND 100),
  ADD COLUMN default_hard_cutoff boolean NOT NULL DEFAULT true;
UPDATE public.workspace SET name = label;
ALTER TABLE public.workspace
  ALTER COLUMN name SET NOT NULL,
  ALTER COLUMN name SET DEFAULT 'HQ',
  ADD CONSTRAINT workspace_name_check CHECK (btrim(name) <> ''),
  ALTER COLUMN label SET DEFAULT 'HQ',
  ADD CONSTRAINT workspace_tenant_id_key UNIQUE (tenant_id);

-- Streams, task series, labels, task templates ----------------------------------------------

CREATE TABLE public.streams (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (btrim(name) <> ''),
  description text,
  color text DEFAULT '#6b7280',
  icon text,
  sort_order integer DEFAULT 0,
  type public.stream_type NOT NULL DEFAULT 'functional',
  is_archived boolean DEFAULT false,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT streams_tenant_id_key UNIQUE (tenant_id, id)
);

-- A recurring task: the template of each occurrence and its cadence (days_of_week 0 = Sunday to
-- 6 = Saturday, day_of_month -1 = the month's last day, as in the product).
CREATE TABLE public.task_series (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  stream_id uuid,
  title text NOT NULL CHECK (btrim(title) <> ''),
  description text,
  priority public.task_priority NOT NULL DEFAULT 'medium',
  assignee_type public.actor_type,
  assignee_agent_id uuid,
  model_override text,
  thinking_override text,
  tags text[] NOT NULL DEFAULT '{}',
  linked_entity_type text,
  linked_entity_id uuid,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  cadence_type text NOT NULL
    CHECK (cadence_type IN ('daily', 'weekdays', 'weekly', 'monthly', 'every_n_days')),
  interval_n integer NOT NULL DEFAULT 1 CHECK (interval_n BETWEEN 1 AND 366),
  days_of_week smallint[] NOT NULL DEFAULT '{}'
    CHECK (days_of_week <@ ARRAY[0, 1, 2, 3, 4, 5, 6]::smallint[]),
  day_of_month smallint CHECK (day_of_month = -1 OR day_of_month BETWEEN 1 AND 31),
  time_of_day time NOT NULL DEFAULT '09:00',
  timezone text NOT NULL,
  is_paused boolean NOT NULL DEFAULT false,
  starts_on date NOT NULL DEFAULT current_date,
  ends_on date,
  ends_after_count integer CHECK (ends_after_count IS NULL OR ends_after_count >= 1),
  spawned_count integer NOT NULL DEFAULT 0 CHECK (spawned_count >= 0),
  next_occurrence_at timestamptz,
  last_spawned_at timestamptz,
  missed_policy text NOT NULL DEFAULT 'auto_skip' CHECK (missed_policy IN ('auto_skip', 'queue')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT task_series_tenant_id_key UNIQUE (tenant_id, id),
  CONSTRAINT task_series_stream_id_fkey FOREIGN KEY (tenant_id, stream_id)
    REFERENCES public.streams (tenant_id, id) ON DELETE SET NULL (stream_id),
  CONSTRAINT task_series_assignee_agent_id_fkey FOREIGN KEY (tenant_id, assignee_agent_id)
    REFERENCES public.agents (tenant_id, id) ON DELETE SET NULL (assignee_agent_id)
);
CREATE INDEX task_series_due_idx ON public.task_series (next_occurrence_at) WHERE NOT is_paused;
CREATE INDEX task_series_stream_idx ON public.task_series (stream_id);
CREATE INDEX task_series_assignee_idx ON public.task_series (assignee_agent_id);

CREATE TABLE public.labels (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (btrim(name) <> ''),
  color text NOT NULL DEFAULT '#6b7280',
  description text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT labels_tenant_name_key UNIQUE (tenant_id, name),
  CONSTRAINT labels_tenant_id_key UNIQUE (tenant_id, id)
);

CREATE TABLE public.task_labels (
  task_id uuid NOT NULL,
  label_id uuid NOT NULL,
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  PRIMARY KEY (task_id, label_id),
  CONSTRAINT task_labels_task_id_fkey FOREIGN KEY (tenant_id, task_id)
    REFERENCES public.tasks (tenant_id, id) ON DELETE CASCADE,
  CONSTRAINT task_labels_label_id_fkey FOREIGN KEY (tenant_id, label_id)
    REFERENCES public.labels (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX task_labels_label_idx ON public.task_labels (label_id);

CREATE TABLE public.task_templates (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (btrim(name) <> ''),
  description text,
  icon text,
  color text,
  items jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(items) = 'array'),
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT task_templates_tenant_name_key UNIQUE (tenant_id, name)
);

-- CRM ---------------------------------------------------------------------------------------

CREATE TABLE public.campaigns (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (btrim(name) <> ''),
  description text,
  channel text,
  is_active boolean NOT NULL DEFAULT true,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT campaigns_tenant_id_key UNIQUE (tenant_id, id)
);

CREATE TABLE public.organizations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (btrim(name) <> ''),
  type text,
  website text,
  industry text,
  size text,
  location text,
  description text,
  notes text,
  tags text[] NOT NULL DEFAULT '{}',
  status text,
  extended jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(extended) = 'object'),
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT organizations_tenant_id_key UNIQUE (tenant_id, id)
);
CREATE INDEX organizations_active_idx ON public.organizations (tenant_id, created_at DESC)
  WHERE archived_at IS NULL;

-- Message templates of the CRM (outreach), not agent templates.
CREATE TABLE public.templates (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  name text NOT NULL CHECK (btrim(name) <> ''),
  channel text,
  stage text,
  subject text,
  body text NOT NULL,
  is_active boolean NOT NULL DEFAULT true,
  use_count integer NOT NULL DEFAULT 0 CHECK (use_count >= 0),
  family text,
  angle text,
  audience text,
  overlays jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(overlays) = 'array'),
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT templates_tenant_id_key UNIQUE (tenant_id, id)
);

-- The contact columns the UI edits (awp's contacts had identity, tags and notes only).
ALTER TABLE public.contacts
  ADD COLUMN linkedin_url text,
  ADD COLUMN twitter_url text,
  ADD COLUMN website_url text,
  ADD COLUMN location text,
  ADD COLUMN avatar_url text,
  ADD COLUMN handle text,
  ADD COLUMN how_we_met text,
  ADD COLUMN source text,
  ADD COLUMN campaign_id uuid,
  ADD COLUMN status_changed_at timestamptz,
  ADD COLUMN priority text,
  ADD COLUMN relationship_strength text DEFAULT 'stranger',
  ADD COLUMN last_contact_date timestamptz,
  ADD COLUMN extended jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(extended) = 'object'),
  ALTER COLUMN status SET DEFAULT 'new',
  ADD CONSTRAINT contacts_campaign_id_fkey FOREIGN KEY (tenant_id, campaign_id)
    REFERENCES public.campaigns (tenant_id, id) ON DELETE SET NULL (campaign_id);
CREATE INDEX contacts_campaign_idx ON public.contacts (campaign_id) WHERE campaign_id IS NOT NULL;
CREATE INDEX contacts_active_idx ON public.contacts (tenant_id, created_at DESC)
  WHERE archived_at IS NULL;

CREATE TABLE public.contact_organizations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  contact_id uuid NOT NULL,
  org_id uuid NOT NULL,
  role text,
  is_current boolean NOT NULL DEFAULT true,
  started_at date,
  ended_at date,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT contact_organizations_unique UNIQUE (tenant_id, contact_id, org_id, role),
  CONSTRAINT contact_organizations_current_check CHECK (NOT is_current OR ended_at IS NULL),
  CONSTRAINT contact_organizations_contact_id_fkey FOREIGN KEY (tenant_id, contact_id)
    REFERENCES public.contacts (tenant_id, id) ON DELETE CASCADE,
  CONSTRAINT contact_organizations_org_id_fkey FOREIGN KEY (tenant_id, org_id)
    REFERENCES public.organizations (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX contact_organizations_contact_idx ON public.contact_organizations (contact_id);
CREATE INDEX contact_organizations_org_idx ON public.contact_organizations (org_id);

-- The contact pipeline's stages (contacts.status holds a stage_key) and the custom fields of
-- contacts (contacts.extended holds their values by field_key).
CREATE TABLE public.pipeline_stages (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  entity_type text NOT NULL DEFAULT 'contact',
  stage_key text NOT NULL CHECK (btrim(stage_key) <> ''),
  label text NOT NULL CHECK (btrim(label) <> ''),
  color text,
  sort_order integer DEFAULT 0,
  is_terminal boolean DEFAULT false,
  is_default boolean DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT pipeline_stages_key UNIQUE (tenant_id, entity_type, stage_key)
);
CREATE UNIQUE INDEX pipeline_stages_one_default ON public.pipeline_stages (tenant_id, entity_type)
  WHERE is_default;

CREATE TABLE public.field_definitions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  entity_type text NOT NULL DEFAULT 'contact',
  field_key text NOT NULL CHECK (btrim(field_key) <> ''),
  field_type text NOT NULL CHECK (btrim(field_type) <> ''),
  label text NOT NULL CHECK (btrim(label) <> ''),
  field_group text,
  sort_order integer DEFAULT 0,
  required boolean DEFAULT false,
  options jsonb,
  description text,
  is_active boolean DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT field_definitions_key UNIQUE (tenant_id, entity_type, field_key)
);

-- The contact (or organization) timeline.
CREATE TABLE public.interactions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  contact_id uuid,
  org_id uuid,
  type text NOT NULL CHECK (btrim(type) <> ''),
  direction text,
  channel text,
  subject text,
  summary text,
  body text,
  occurred_at timestamptz NOT NULL DEFAULT now(),
  next_action text,
  next_action_date timestamptz,
  template_id uuid,
  actor_type public.actor_type NOT NULL DEFAULT 'human',
  actor_agent_id uuid,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT interactions_has_owner CHECK (contact_id IS NOT NULL OR org_id IS NOT NULL),
  CONSTRAINT interactions_contact_id_fkey FOREIGN KEY (tenant_id, contact_id)
    REFERENCES public.contacts (tenant_id, id) ON DELETE CASCADE,
  CONSTRAINT interactions_org_id_fkey FOREIGN KEY (tenant_id, org_id)
    REFERENCES public.organizations (tenant_id, id) ON DELETE SET NULL (org_id),
  CONSTRAINT interactions_template_id_fkey FOREIGN KEY (tenant_id, template_id)
    REFERENCES public.templates (tenant_id, id) ON DELETE SET NULL (template_id),
  CONSTRAINT interactions_actor_agent_id_fkey FOREIGN KEY (tenant_id, actor_agent_id)
    REFERENCES public.agents (tenant_id, id) ON DELETE SET NULL (actor_agent_id)
);
CREATE INDEX interactions_contact_idx ON public.interactions (contact_id, occurred_at DESC);
CREATE INDEX interactions_org_idx ON public.interactions (org_id, occurred_at DESC)
  WHERE org_id IS NOT NULL;
CREATE INDEX interactions_next_action_idx ON public.interactions (tenant_id, next_action_date)
  WHERE next_action_date IS NOT NULL;

CREATE TABLE public.draft_sets (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  contact_id uuid NOT NULL,
  template_id uuid,
  channel text NOT NULL,
  stage text NOT NULL,
  version integer NOT NULL DEFAULT 1 CHECK (version >= 1),
  variants jsonb NOT NULL CHECK (jsonb_typeof(variants) = 'array'),
  selected_variant_index integer,
  based_on_draft_set_id uuid,
  feedback_notes text,
  status text NOT NULL DEFAULT 'draft',
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT draft_sets_tenant_id_key UNIQUE (tenant_id, id),
  CONSTRAINT draft_sets_version_key UNIQUE (tenant_id, contact_id, channel, stage, version),
  CONSTRAINT draft_sets_contact_id_fkey FOREIGN KEY (tenant_id, contact_id)
    REFERENCES public.contacts (tenant_id, id) ON DELETE CASCADE,
  CONSTRAINT draft_sets_template_id_fkey FOREIGN KEY (tenant_id, template_id)
    REFERENCES public.templates (tenant_id, id) ON DELETE SET NULL (template_id),
  CONSTRAINT draft_sets_based_on_draft_set_id_fkey FOREIGN KEY (tenant_id, based_on_draft_set_id)
    REFERENCES public.draft_sets (tenant_id, id) ON DELETE SET NULL (based_on_draft_set_id)
);

-- Tasks: the product's columns, and the foreign keys of stream_id, series_id and org_id ------

ALTER TABLE public.tasks
  ADD COLUMN linked_entity_type text,
  ADD COLUMN linked_entity_id uuid,
  ADD COLUMN series_occurrence_at timestamptz,
  ADD COLUMN is_recurring boolean DEFAULT false,
  ADD COLUMN recurrence_rule text,
  ADD COLUMN last_completed_at timestamptz;

-- stream_id, org_id and series_id were plain uuids until now (nothing to point at). A value
-- already there keeps its meaning: it gets a row to point at (a stream or an organization named
-- after the id; a paused series with the newest task's title), so no task loses what it was
-- filed under. The product's tasks only ever point at rows that exist.
INSERT INTO public.streams (id, tenant_id, name)
SELECT DISTINCT ON (t.stream_id) t.stream_id, t.tenant_id, 'Stream ' || left(t.stream_id::text, 8)
  FROM public.tasks t
 WHERE t.stream_id IS NOT NULL
 ORDER BY t.stream_id, t.created_at;
UPDATE public.tasks t SET stream_id = NULL  -- one uuid used in two tenants: the later tenant's
 WHERE t.stream_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM public.streams s WHERE s.id = t.stream_id AND s.tenant_id = t.tenant_id);
INSERT INTO public.organizations (id, tenant_id, name)
SELECT DISTINCT ON (t.org_id) t.org_id, t.tenant_id, 'Organization ' || left(t.org_id::text, 8)
  FROM public.tasks t
 WHERE t.org_id IS NOT NULL
 ORDER BY t.org_id, t.created_at;
UPDATE public.tasks t SET org_id = NULL
 WHERE t.org_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM public.organizations o WHERE o.id = t.org_id AND o.tenant_id = t.tenant_id);
INSERT INTO public.task_series (id, tenant_id, title, cadence_type, timezone, is_paused)
SELECT DISTINCT ON (t.series_id) t.series_id, t.tenant_id, t.title, 'daily', 'UTC', true
  FROM public.tasks t
 WHERE t.series_id IS NOT NULL
 ORDER BY t.series_id, t.created_at DESC;
UPDATE public.tasks t SET series_id = NULL
 WHERE t.series_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM public.task_series s WHERE s.id = t.series_id AND s.tenant_id = t.tenant_id);

ALTER TABLE public.tasks
  ADD CONSTRAINT tasks_stream_id_fkey FOREIGN KEY (tenant_id, stream_id)
    REFERENCES public.streams (tenant_id, id) ON DELETE SET NULL (stream_id),
  ADD CONSTRAINT tasks_series_id_fkey FOREIGN KEY (tenant_id, series_id)
    REFERENCES public.task_series (tenant_id, id) ON DELETE SET NULL (series_id),
  ADD CONSTRAINT tasks_org_id_fkey FOREIGN KEY (tenant_id, org_id)
    REFERENCES public.organizations (tenant_id, id) ON DELETE SET NULL (org_id),
  -- One task per occurrence of a series: the spawn may run twice for the same minute.
  ADD CONSTRAINT tasks_series_occurrence_key UNIQUE (series_id, series_occurrence_at);
CREATE INDEX tasks_stream_idx ON public.tasks (stream_id) WHERE stream_id IS NOT NULL;
CREATE INDEX tasks_top_level_idx ON public.tasks (tenant_id, created_at DESC)
  WHERE parent_id IS NULL AND archived_at IS NULL;

-- Comments, links, deliverables -------------------------------------------------------------

-- Comments on any entity (entity_type, entity_id: a task, a contact, ...), threaded by
-- parent_id. awp's task_comments stay for what wrote them before; the UI writes these.
CREATE TABLE public.comments (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  entity_type text NOT NULL CHECK (btrim(entity_type) <> ''),
  entity_id uuid NOT NULL,
  parent_id uuid,
  body text NOT NULL CHECK (btrim(body) <> ''),
  actor_type public.actor_type NOT NULL DEFAULT 'human',
  actor_agent_id uuid,
  mentions text[] NOT NULL DEFAULT '{}',
  -- The UI reads attachments from it (its own schema lacks the column: the write fails there).
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT comments_tenant_id_key UNIQUE (tenant_id, id),
  CONSTRAINT comments_not_own_parent CHECK (parent_id IS DISTINCT FROM id),
  CONSTRAINT comments_parent_id_fkey FOREIGN KEY (tenant_id, parent_id)
    REFERENCES public.comments (tenant_id, id) ON DELETE CASCADE,
  CONSTRAINT comments_actor_agent_id_fkey FOREIGN KEY (tenant_id, actor_agent_id)
    REFERENCES public.agents (tenant_id, id) ON DELETE SET NULL (actor_agent_id)
);
CREATE INDEX comments_entity_idx ON public.comments (tenant_id, entity_type, entity_id, created_at);
CREATE INDEX comments_parent_idx ON public.comments (parent_id) WHERE parent_id IS NOT NULL;

-- Links from an owner (a task, a contact, ...) to another entity or a URL; a link may be a
-- deliverable an agent submitted for review (review_status).
CREATE TABLE public.entity_links (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  owner_type text NOT NULL CHECK (btrim(owner_type) <> ''),
  owner_id uuid NOT NULL,
  target_type text NOT NULL CHECK (btrim(target_type) <> ''),
  target_id uuid,
  url text,
  label text,
  sort_order integer DEFAULT 0,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  is_deliverable boolean NOT NULL DEFAULT false,
  review_status text CHECK (review_status IN ('draft', 'in_review', 'approved',
    'revision_requested', 'rejected')),
  review_note text,
  reviewed_by uuid,
  reviewed_at timestamptz,
  submitted_by_agent_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT entity_links_target_check CHECK (
    (target_type = 'url' AND url IS NOT NULL AND target_id IS NULL) OR
    (target_type <> 'url' AND target_id IS NOT NULL AND url IS NULL)),
  CONSTRAINT entity_links_unique UNIQUE (tenant_id, owner_type, owner_id, target_type, target_id),
  CONSTRAINT entity_links_submitted_by_agent_id_fkey FOREIGN KEY (tenant_id, submitted_by_agent_id)
    REFERENCES public.agents (tenant_id, id) ON DELETE SET NULL (submitted_by_agent_id)
);
CREATE INDEX entity_links_owner_idx ON public.entity_links (tenant_id, owner_type, owner_id);
CREATE INDEX entity_links_target_idx ON public.entity_links (target_type, target_id);
CREATE UNIQUE INDEX entity_links_url_unique ON public.entity_links (tenant_id, owner_type, owner_id, url)
  WHERE target_type = 'url';

-- Activity and notifications ----------------------------------------------------------------

-- What happened, by whom (every write of the UI logs one row; the Activity page reads them).
CREATE TABLE public.audit_log (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  actor_type public.actor_type NOT NULL DEFAULT 'human',
  actor_agent_id uuid,
  module text NOT NULL CHECK (btrim(module) <> ''),
  entity_type text NOT NULL CHECK (btrim(entity_type) <> ''),
  entity_id uuid NOT NULL,
  action public.audit_action NOT NULL,
  summary text,
  changes jsonb,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT audit_log_actor_agent_id_fkey FOREIGN KEY (tenant_id, actor_agent_id)
    REFERENCES public.agents (tenant_id, id) ON DELETE SET NULL (actor_agent_id)
);
CREATE INDEX audit_log_created_idx ON public.audit_log (tenant_id, created_at DESC);
CREATE INDEX audit_log_entity_idx ON public.audit_log (tenant_id, entity_type, entity_id, created_at DESC);

-- The bell: what the workspace's people should look at.
CREATE TABLE public.notifications (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  type text NOT NULL CHECK (btrim(type) <> ''),
  title text NOT NULL,
  body text,
  entity_type text,
  entity_id uuid,
  actor_type public.actor_type DEFAULT 'system',
  actor_agent_id uuid,
  read_at timestamptz,
  dismissed_at timestamptz,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT notifications_actor_agent_id_fkey FOREIGN KEY (tenant_id, actor_agent_id)
    REFERENCES public.agents (tenant_id, id) ON DELETE SET NULL (actor_agent_id)
);
CREATE INDEX notifications_unread_idx ON public.notifications (tenant_id, created_at DESC)
  WHERE read_at IS NULL AND dismissed_at IS NULL;
-- A budget warns (and is exceeded) once per agent and budget period.
CREATE UNIQUE INDEX notifications_budget_once ON public.notifications (entity_id, type, (meta ->> 'period_start'))
  WHERE entity_type = 'agent_budget' AND type IN ('budget.warned', 'budget.exceeded');

-- Collections: user-defined tables ------------------------------------------------------------

-- awp's collections become the product's collection_definitions (same rows, same ids; the
-- records and routines that point at them follow), with the product's columns added.
ALTER TABLE public.collections RENAME TO collection_definitions;
ALTER TABLE public.collection_definitions RENAME CONSTRAINT collections_pkey TO collection_definitions_pkey;
ALTER TABLE public.collection_definitions RENAME CONSTRAINT collections_tenant_id_key TO collection_definitions_tenant_id_key;
ALTER TABLE public.collection_definitions RENAME CONSTRAINT collections_tenant_slug_key TO collection_definitions_slug_unique;
ALTER TABLE public.collection_definitions RENAME CONSTRAINT collections_tenant_id_fkey TO collection_definitions_tenant_id_fkey;
ALTER TABLE public.collection_definitions RENAME CONSTRAINT collections_name_check TO collection_definitions_name_check;
ALTER TABLE public.collection_definitions RENAME CONSTRAINT collections_slug_check TO collection_definitions_slug_check;
ALTER TABLE public.collection_definitions RENAME CONSTRAINT collections_fields_check TO collection_definitions_fields_check;
ALTER TABLE public.collection_definitions RENAME CONSTRAINT collections_meta_check TO collection_definitions_meta_check;
ALTER TRIGGER collections_updated_at ON public.collection_definitions RENAME TO collection_definitions_updated_at;
ALTER TABLE public.collection_definitions
  ADD COLUMN icon text,
  ADD COLUMN color text DEFAULT '#6b7280',
  ADD COLUMN sort_order integer DEFAULT 0;
ALTER TABLE public.collection_records ADD COLUMN sort_order integer DEFAULT 0;
CREATE INDEX collection_records_active_idx ON public.collection_records (collection_id, created_at DESC)
  WHERE archived_at IS NULL;

CREATE TABLE public.collection_fields (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  collection_id uuid NOT NULL,
  field_key text NOT NULL CHECK (btrim(field_key) <> ''),
  field_type text NOT NULL CHECK (field_type IN ('text', 'number', 'date', 'datetime', 'boolean',
    'select', 'multi_select', 'url', 'email', 'phone', 'relation', 'rich_text')),
  label text NOT NULL,
  description text,
  sort_order integer DEFAULT 0,
  required boolean DEFAULT false,
  options jsonb,
  default_value jsonb,
  is_title_field boolean DEFAULT false,
  is_active boolean DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT collection_fields_key_unique UNIQUE (collection_id, field_key),
  CONSTRAINT collection_fields_collection_id_fkey FOREIGN KEY (tenant_id, collection_id)
    REFERENCES public.collection_definitions (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE public.collection_views (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  collection_id uuid NOT NULL,
  name text NOT NULL CHECK (btrim(name) <> ''),
  view_type text NOT NULL CHECK (view_type IN ('table', 'kanban', 'calendar')),
  config jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object'),
  is_default boolean DEFAULT false,
  sort_order integer DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT collection_views_collection_id_fkey FOREIGN KEY (tenant_id, collection_id)
    REFERENCES public.collection_definitions (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX collection_views_collection_idx ON public.collection_views (collection_id);

-- Templates of whole collections, the same for every tenant (readable by every user; written by
-- the service role). awp's own three; the onboarding preset "Creating content" installs
-- content-calendar by its slug.
CREATE TABLE public.collection_templates (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL CHECK (btrim(name) <> ''),
  slug text NOT NULL CONSTRAINT collection_templates_slug_key UNIQUE,
  description text,
  icon text,
  category text,
  definition jsonb NOT NULL CHECK (jsonb_typeof(definition) = 'object'),
  sort_order integer DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO public.collection_templates (name, slug, description, icon, category, sort_order, definition)
VALUES
  ('Content Calendar', 'content-calendar', 'Ideas, drafts and what went out where, by date', '📅', 'marketing', 0,
   '{"fields": [{"field_key": "title", "field_type": "text", "label": "Title", "sort_order": 0, "required": true, "is_title_field": true},
     {"field_key": "status", "field_type": "select", "label": "Status", "sort_order": 1, "default_value": "idea", "options": {"choices": [{"value": "idea", "label": "Idea"}, {"value": "drafting", "label": "Drafting"}, {"value": "review", "label": "In review"}, {"value": "scheduled", "label": "Scheduled"}, {"value": "published", "label": "Published"}]}},
     {"field_key": "channel", "field_type": "select", "label": "Channel", "sort_order": 2, "options": {"choices": [{"value": "blog", "label": "Blog"}, {"value": "newsletter", "label": "Newsletter"}, {"value": "social", "label": "Social"}, {"value": "video", "label": "Video"}]}},
     {"field_key": "publish_date", "field_type": "date", "label": "Publish date", "sort_order": 3},
     {"field_key": "owner", "field_type": "text", "label": "Owner", "sort_order": 4},
     {"field_key": "brief", "field_type": "rich_text", "label": "Brief", "sort_order": 5}],
    "views": [{"name": "Everything", "view_type": "table", "is_default": true, "config": {}},
     {"name": "By status", "view_type": "kanban", "config": {"group_by_field": "status"}},
     {"name": "Calendar", "view_type": "calendar", "config": {"date_field": "publish_date"}}]}'),
  ('Job Search', 'job-search', 'Applications from first look to offer', '💼', 'productivity', 1,
   '{"fields": [{"field_key": "company", "field_type": "text", "label": "Company", "sort_order": 0, "required": true, "is_title_field": true},
     {"field_key": "role", "field_type": "text", "label": "Role", "sort_order": 1},
     {"field_key": "stage", "field_type": "select", "label": "Stage", "sort_order": 2, "default_value": "interested", "options": {"choices": [{"value": "interested", "label": "Interested"}, {"value": "applied", "label": "Applied"}, {"value": "interviewing", "label": "Interviewing"}, {"value": "offer", "label": "Offer"}, {"value": "closed", "label": "Closed"}]}},
     {"field_key": "posting_url", "field_type": "url", "label": "Posting", "sort_order": 3},
     {"field_key": "applied_on", "field_type": "date", "label": "Applied on", "sort_order": 4},
     {"field_key": "notes", "field_type": "rich_text", "label": "Notes", "sort_order": 5}],
    "views": [{"name": "All applications", "view_type": "table", "is_default": true, "config": {}},
     {"name": "Pipeline", "view_type": "kanban", "config": {"group_by_field": "stage"}}]}'),
  ('Inventory', 'inventory', 'Items, stock on hand and where to reorder', '📦', 'business', 2,
   '{"fields": [{"field_key": "item", "field_type": "text", "label": "Item", "sort_order": 0, "required": true, "is_title_field": true},
     {"field_key": "sku", "field_type": "text", "label": "SKU", "sort_order": 1},
     {"field_key": "on_hand", "field_type": "number", "label": "On hand", "sort_order": 2, "default_value": 0},
     {"field_key": "reorder_at", "field_type": "number", "label": "Reorder at", "sort_order": 3},
     {"field_key": "supplier", "field_type": "text", "label": "Supplier", "sort_order": 4}],
    "views": [{"name": "All items", "view_type": "table", "is_default": true, "config": {}}]}');

-- Agents: budgets and knowledge ---------------------------------------------------------------

-- An agent's monthly spending limit and the current period's totals (kept by the usage rollup,
-- sql/0037). One row per agent: agent_id is the key, as in the product.
CREATE TABLE public.agent_budgets (
  agent_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  monthly_limit_usd numeric(10, 2) CHECK (monthly_limit_usd IS NULL OR monthly_limit_usd >= 0),
  soft_threshold_pct integer NOT NULL DEFAULT 80 CHECK (soft_threshold_pct BETWEEN 0 AND 100),
  hard_cutoff boolean NOT NULL DEFAULT true,
  period_anchor_tz text NOT NULL DEFAULT 'UTC',
  current_period_start date NOT NULL DEFAULT date_trunc('month', current_date)::date,
  current_period_spend_usd numeric(14, 6) NOT NULL DEFAULT 0,
  current_period_tokens bigint NOT NULL DEFAULT 0,
  current_period_metered_calls integer NOT NULL DEFAULT 0,
  current_period_unmetered_calls integer NOT NULL DEFAULT 0,
  status public.budget_status NOT NULL DEFAULT 'ok',
  warned_at timestamptz,
  exceeded_at timestamptz,
  last_usage_at timestamptz,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT agent_budgets_agent_id_fkey FOREIGN KEY (tenant_id, agent_id)
    REFERENCES public.agents (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX agent_budgets_tenant_idx ON public.agent_budgets (tenant_id);

-- Which agents a knowledge item is shared with.
CREATE TABLE public.knowledge_item_agents (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  knowledge_item_id uuid NOT NULL,
  agent_id uuid NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT knowledge_item_agents_unique UNIQUE (knowledge_item_id, agent_id),
  CONSTRAINT knowledge_item_agents_knowledge_item_id_fkey FOREIGN KEY (tenant_id, knowledge_item_id)
    REFERENCES public.knowledge_items (tenant_id, id) ON DELETE CASCADE,
  CONSTRAINT knowledge_item_agents_agent_id_fkey FOREIGN KEY (tenant_id, agent_id)
    REFERENCES public.agents (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX knowledge_item_agents_agent_idx ON public.knowledge_item_agents (agent_id);

-- The product's knowledge scopes (its "library" beside workspace and agent), its items'
-- content_hash and its folders' icon and colour.
ALTER TABLE public.knowledge_items DROP CONSTRAINT knowledge_items_scope_check;
ALTER TABLE public.knowledge_items
  ADD CONSTRAINT knowledge_items_scope_check CHECK (scope IN ('workspace', 'agent', 'library')),
  ADD COLUMN content_hash text;
ALTER TABLE public.knowledge_folders
  ADD COLUMN icon text,
  ADD COLUMN color text;

-- Usage rows as the product's gateway writes them (its per-turn fields), all optional here.
ALTER TABLE public.agent_usage
  ADD COLUMN agent_slug_snapshot text,
  ADD COLUMN gateway_id uuid,
  ADD COLUMN session_id text,
  ADD COLUMN run_id text,
  ADD COLUMN cache_read bigint NOT NULL DEFAULT 0 CHECK (cache_read >= 0),
  ADD COLUMN cache_write bigint NOT NULL DEFAULT 0 CHECK (cache_write >= 0),
  ADD COLUMN cost_input_usd numeric(14, 6),
  ADD COLUMN cost_output_usd numeric(14, 6),
  ADD COLUMN cost_cache_read_usd numeric(14, 6),
  ADD COLUMN cost_cache_write_usd numeric(14, 6),
  ADD CONSTRAINT agent_usage_gateway_id_fkey FOREIGN KEY (tenant_id, gateway_id)
    REFERENCES public.gateways (tenant_id, id) ON DELETE SET NULL (gateway_id);

-- Gateways and sources ------------------------------------------------------------------------

ALTER TABLE public.gateways
  ADD COLUMN last_backup_at timestamptz,
  ADD COLUMN last_backup_size_bytes bigint CHECK (last_backup_size_bytes >= 0);

ALTER TABLE public.source_connections
  ADD COLUMN meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object');

-- One sync of a source connection (written by whatever syncs it; the UI reads them).
CREATE TABLE public.source_sync_runs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  connection_id uuid NOT NULL,
  status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed')),
  items_synced integer DEFAULT 0,
  items_failed integer DEFAULT 0,
  started_at timestamptz DEFAULT now(),
  completed_at timestamptz,
  error_message text,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT source_sync_runs_connection_id_fkey FOREIGN KEY (tenant_id, connection_id)
    REFERENCES public.source_connections (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX source_sync_runs_connection_idx ON public.source_sync_runs (connection_id, created_at DESC);

-- Plugins of the product's UI (awp's own plugins table stays for what uses it) ---------------

CREATE TABLE public.hq_plugins (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  plugin_id text NOT NULL CHECK (btrim(plugin_id) <> ''),
  name text NOT NULL CHECK (btrim(name) <> ''),
  description text,
  version text NOT NULL DEFAULT '0.1.0',
  source public.plugin_source NOT NULL DEFAULT 'local',
  is_enabled boolean NOT NULL DEFAULT true,
  hooks text[] NOT NULL DEFAULT '{}',
  entry_module text,
  webhook_url text,
  webhook_secret text,
  config jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(config) = 'object'),
  config_schema jsonb,
  capabilities text[] NOT NULL DEFAULT '{}',
  installed_by uuid,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT hq_plugins_plugin_key UNIQUE (tenant_id, plugin_id)
);

CREATE TABLE public.hq_plugin_events (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL DEFAULT public.awp_session_tenant_id()
    REFERENCES public.tenants (id) ON DELETE CASCADE,
  plugin_id text NOT NULL,
  hook text NOT NULL,
  entity_type text,
  entity_id uuid,
  status public.plugin_event_status NOT NULL,
  duration_ms integer,
  error_message text,
  request_payload jsonb,
  response_payload jsonb,
  meta jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(meta) = 'object'),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX hq_plugin_events_plugin_idx ON public.hq_plugin_events (tenant_id, plugin_id, created_at DESC);

-- The product's schema version, as its UI checks it ---------------------------------------------

-- The UI compares the highest version with the one it was built for (25: "Schema update
-- available" below it). awp's own schema version is schema_migrations'; this table says which
-- version of the product's schema awp's serves.
CREATE TABLE public._schema_version (
  version integer PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now(),
  description text
);
INSERT INTO public._schema_version (version, description)
VALUES (25, 'the product''s schema v25 as its UI uses it, served by awp (sql/0035-0038)');

-- updated_at of the new tables -----------------------------------------------------------------

DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['streams', 'task_series', 'labels', 'task_templates', 'campaigns',
    'organizations', 'templates', 'draft_sets', 'comments', 'entity_links', 'collection_fields',
    'collection_views', 'agent_budgets', 'hq_plugins']
  LOOP
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE ON public.%I '
                   'FOR EACH ROW EXECUTE FUNCTION public.awp_set_updated_at()', t || '_updated_at', t);
  END LOOP;
END
$$;
