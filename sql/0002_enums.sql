-- The spec's enums, each with exactly its values (command_action: every action the runner knows).

CREATE TYPE public.agent_status AS ENUM ('ready', 'paused', 'error', 'provisioning', 'hibernating');

CREATE TYPE public.task_status AS ENUM ('todo', 'in_progress', 'blocked', 'done', 'cancelled', 'missed');

CREATE TYPE public.task_priority AS ENUM ('low', 'medium', 'high', 'urgent');

CREATE TYPE public.command_status AS ENUM ('pending', 'leased', 'running', 'done', 'failed', 'cancelled');

CREATE TYPE public.command_action AS ENUM (
  -- session and shell actions
  'start_session', 'end_session', 'restart_session', 'execute_prompt', 'send_message',
  'run_shell', 'upload_file',
  -- agent lifecycle
  'provision', 'approve_pairing', 'update', 'remove', 'update_all',
  -- gateway services
  'restart_gateway', 'restart_dispatcher', 'update_gateway',
  -- model and provider connections
  'set_agent_model', 'list_models', 'auth_set_api_key', 'auth_start', 'auth_paste',
  'auth_list', 'auth_refresh', 'auth_remove', 'auth_set_default',
  -- external sources
  'source_write'
);

CREATE TYPE public.inbox_event_type AS ENUM (
  'task_assignment', 'task_reassignment', 'task_comment_mention', 'routine_schedule',
  'routine_event', 'heartbeat', 'deliverable_review', 'blocker_resolved'
);

CREATE TYPE public.inbox_item_status AS ENUM ('pending', 'leased', 'done', 'dead_letter', 'failed');

CREATE TYPE public.task_relation_type AS ENUM ('blocks', 'blocked_by', 'relates_to', 'parent_of', 'child_of');

CREATE TYPE public.work_product_status AS ENUM ('draft', 'in_review', 'approved', 'revision_requested', 'rejected');

CREATE TYPE public.actor_type AS ENUM ('human', 'agent', 'system');

CREATE TYPE public.gateway_status AS ENUM ('provisioning', 'ready', 'error', 'hibernating');

CREATE TYPE public.plugin_source AS ENUM ('builtin', 'local', 'webhook', 'marketplace');
