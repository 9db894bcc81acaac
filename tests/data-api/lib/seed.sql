-- The data API suite's rows (run by lib/seed.mjs as the superuser, ids as psql variables from
-- lib/world.mjs): two tenants that must never see each other, each with gateways, agents in a
-- reporting chain, tasks in every open and closed status, contacts, routines, inbox items, usage
-- over two months and knowledge to search. Rows are inserted out of name order on purpose, so an
-- ordered answer cannot pass by insertion order.
BEGIN;

INSERT INTO public.tenants (id, name, slug) VALUES
  (:'tenant_a', 'Acme', 'acme'),
  (:'tenant_b', 'Bolt', 'bolt');

INSERT INTO public.gateways (id, tenant_id, slug, label, status) VALUES
  (:'gateway_a', :'tenant_a', 'acme-main', 'Acme main', 'ready'),
  (:'gateway_a2', :'tenant_a', 'acme-edge', 'Acme edge', 'ready'),
  (:'gateway_b', :'tenant_b', 'bolt-main', 'Bolt main', 'ready');

-- Managers first (reports_to_id is a foreign key).
INSERT INTO public.agents (id, tenant_id, gateway_id, name, slug, description, avatar_url, status,
                           model, reports_to_id, domains, capabilities, meta) VALUES
  (:'ada', :'tenant_a', :'gateway_a', 'Ada', 'ada', 'Leads operations',
   'https://example.test/ada.png', 'ready', 'anthropic/claude-sonnet', NULL,
   '{ops,infra}', '{deploy,review}', '{"team": "core", "level": 3}'),
  (:'zed', :'tenant_b', :'gateway_b', 'Zed', 'zed', 'Bolt''s lead', NULL, 'ready',
   'openai/gpt', NULL, '{ops}', '{deploy}', '{"team": "core", "level": 3}');
INSERT INTO public.agents (id, tenant_id, gateway_id, name, slug, description, avatar_url, status,
                           model, reports_to_id, domains, capabilities, meta) VALUES
  (:'bob', :'tenant_a', :'gateway_a', 'Bob', 'bob', 'Answers customers', NULL, 'paused',
   'anthropic/claude-haiku', :'ada', '{support}', '{triage}', '{"team": "support", "level": 2}'),
  (:'yan', :'tenant_b', :'gateway_b', 'Yan', 'yan', NULL, NULL, 'ready', NULL, :'zed',
   '{support}', '{triage}', '{"team": "support", "level": 1}');
INSERT INTO public.agents (id, tenant_id, gateway_id, name, slug, description, avatar_url, status,
                           model, reports_to_id, domains, capabilities, meta) VALUES
  (:'cy', :'tenant_a', :'gateway_a', 'Cy', 'cy', NULL, 'https://example.test/cy.png', 'error',
   NULL, :'bob', '{support,infra}', '{triage,deploy}', '{"team": "support", "level": 1}'),
  (:'dee', :'tenant_a', :'gateway_a2', 'Dee', 'dee', 'On the edge box', NULL, 'hibernating',
   NULL, :'ada', '{}', '{}', '{}');
-- An agent named to sort between the others on gateway A, inserted last.
INSERT INTO public.agents (tenant_id, gateway_id, name, slug, domains, capabilities, meta) VALUES
  (:'tenant_a', :'gateway_a', 'Abe', 'abe', '{infra}', '{}', '{"team": "core", "level": 1}');

INSERT INTO public.contacts (id, tenant_id, name, email, phone, company, status, tags, notes) VALUES
  (:'contact_a1', :'tenant_a', 'Ann Client', 'ann@client.test', NULL, 'Client Co', 'active',
   '{vip}', 'Wants a refund'),
  (:'contact_a2', :'tenant_a', 'Ben Buyer', 'ben@buyer.test', '+49 30 1234', 'Buyer GmbH',
   'lead', '{}', NULL),
  (:'contact_a3', :'tenant_a', 'Cat Caller', NULL, '+1 555 0100', NULL, NULL, '{phone}', NULL),
  (:'contact_b1', :'tenant_b', 'Bolt Customer', 'customer@bolt.test', NULL, 'Bolt Co', 'active',
   '{vip}', 'Bolt''s secret customer');

INSERT INTO public.tasks (id, tenant_id, title, description, status, priority, assignee_agent_id,
                          due_at, contact_id, tags, sort_order, meta) VALUES
  (:'task_a1', :'tenant_a', 'Write the deploy guide', 'systemd and compose', 'todo', 'high',
   :'ada', '2026-07-01T09:00:00Z', NULL, '{docs,ops}', 1, '{"estimate": 5}'),
  (:'task_a2', :'tenant_a', 'Fix the login bug', NULL, 'in_progress', 'urgent', :'ada',
   '2026-06-01T12:00:00Z', NULL, '{bug}', 2, '{"estimate": 2}'),
  (:'task_a3', :'tenant_a', 'Wait for the vendor', NULL, 'blocked', 'medium', :'ada', NULL,
   NULL, '{vendor}', 3, '{}'),
  (:'task_a4', :'tenant_a', 'Ship release 1.0', NULL, 'done', 'high', :'ada',
   '2026-03-01T00:00:00Z', NULL, '{release}', 4, '{}'),
  (:'task_a5', :'tenant_a', 'Old idea', NULL, 'cancelled', 'low', :'ada', NULL, NULL, '{}', 5,
   '{}'),
  (:'task_a6', :'tenant_a', 'Answer the refund mail', 'Ann wants her money back', 'todo',
   'medium', :'bob', '2026-05-15T08:30:00Z', :'contact_a1', '{support,refunds}', 6,
   '{"estimate": 1}'),
  (:'task_a7', :'tenant_a', 'Unassigned chore', NULL, 'todo', 'low', NULL, NULL, NULL, '{}', 7,
   '{}'),
  (:'task_a8', :'tenant_a', 'Triage the queue', NULL, 'in_progress', 'low', :'cy',
   '2026-05-20T17:00:00Z', :'contact_a2', '{support}', 8, '{}'),
  (:'task_b1', :'tenant_b', 'Bolt secret plan', 'Only Bolt may read this', 'todo', 'urgent',
   :'zed', '2026-06-15T00:00:00Z', :'contact_b1', '{secret}', 1, '{}');

INSERT INTO public.routines (id, tenant_id, agent_id, agent_slug, name, instruction, trigger_type,
                             cadence_type, interval_n, days_of_week, time_of_day, timezone) VALUES
  (:'routine_a1', :'tenant_a', :'ada', 'ada', 'Morning report', 'Summarise yesterday',
   'schedule', 'daily', NULL, NULL, '09:00', 'Europe/Berlin'),
  (:'routine_b1', :'tenant_b', :'zed', 'zed', 'Bolt sweep', 'Sweep', 'schedule', 'daily', NULL,
   NULL, '07:00', 'UTC');
INSERT INTO public.routines (tenant_id, agent_id, agent_slug, name, instruction, trigger_type,
                             cadence_type, days_of_week, time_of_day, timezone) VALUES
  (:'tenant_a', :'bob', 'bob', 'Support sweep', 'Clear the queue', 'schedule', 'weekly',
   '{1,3}', '16:30', 'America/New_York');

-- Inbox items the UI shows with their agent and contact (beside those the task assignments above
-- made through the producer trigger).
INSERT INTO public.agent_inbox_items (tenant_id, agent_id, agent_slug, event_type, title, summary,
                                      task_id, contact_id, dedup_key) VALUES
  (:'tenant_a', :'ada', 'ada', 'heartbeat', 'Check in', 'Weekly check-in with Ann', NULL,
   :'contact_a1', 'data-api-seed:a:1'),
  (:'tenant_a', :'bob', 'bob', 'task_comment_mention', 'Mentioned', 'Ben asked about delivery',
   :'task_a6', :'contact_a2', 'data-api-seed:a:2'),
  (:'tenant_b', :'zed', 'zed', 'heartbeat', 'Bolt check', 'Bolt''s own item', NULL,
   :'contact_b1', 'data-api-seed:b:1');

INSERT INTO public.agent_usage (tenant_id, agent_id, model, provider, input_tokens, output_tokens,
                                cost_usd, created_at, occurred_at) VALUES
  (:'tenant_a', :'ada', 'anthropic/claude-sonnet', 'anthropic', 1200, 300, 0.0123, '2026-01-05T10:00:00Z', '2026-01-05T10:00:00Z'),
  (:'tenant_a', :'ada', 'anthropic/claude-sonnet', 'anthropic', 800, 200, 0.0081, '2026-01-20T10:00:00Z', '2026-01-20T10:00:00Z'),
  (:'tenant_a', :'ada', 'anthropic/claude-sonnet', 'anthropic', 500, 100, 0.0042, '2026-01-10T10:00:00Z', '2026-01-10T10:00:00Z'),
  (:'tenant_a', :'ada', 'anthropic/claude-haiku', 'anthropic', 3000, 900, 0.0020, '2026-02-02T10:00:00Z', '2026-02-02T10:00:00Z'),
  (:'tenant_a', :'ada', 'anthropic/claude-sonnet', 'anthropic', 50, 10, 0.0005, '2026-02-15T10:00:00Z', '2026-02-15T10:00:00Z'),
  (:'tenant_a', :'bob', 'anthropic/claude-haiku', 'anthropic', 700, 70, 0.0007, '2026-01-12T10:00:00Z', '2026-01-12T10:00:00Z'),
  (:'tenant_b', :'zed', 'openai/gpt', 'openai', 9999, 999, 0.9999, '2026-01-15T10:00:00Z', '2026-01-15T10:00:00Z');

-- Knowledge the embedder indexes (embedding_status pending until it has).
INSERT INTO public.knowledge_items (id, tenant_id, kind, title, plain_text, tags, scope) VALUES
  (:'knowledge_deploy', :'tenant_a', 'page', 'Deploying the gateway with systemd',
   'Install the systemd units, then start awp.target. The gateway listens on port 3000 and '
   'reconnects to Postgres after a restart. Check the journal when a daemon does not start.',
   '{ops,deploy}', 'workspace'),
  (:'knowledge_refunds', :'tenant_a', 'page', 'Refund policy',
   'Customers may ask for a refund within thirty days of purchase. Refunds go back to the '
   'original card. Ask the customer for the order number first.',
   '{support,refunds}', 'workspace'),
  (:'knowledge_zebra', :'tenant_b', 'page', 'Zebrafish breeding notes',
   'Zebrafish tanks are cleaned every Tuesday. The secret ingredient is brine shrimp; '
   'refund requests for fish go to the lab manager.',
   '{lab}', 'workspace');
INSERT INTO public.knowledge_items (tenant_id, kind, title, plain_text, tags, scope) VALUES
  (:'tenant_a', 'skill', 'Triage checklist',
   'Read the ticket, tag it, and assign it to the right agent. Refund questions go to Bob.',
   '{support}', 'workspace');

-- Range columns for the range operators (sl sr nxl nxr adj ov on ranges): awp's tables have
-- none, so a view over tasks gives two, with the caller's row-level security (security_invoker).
CREATE VIEW public.task_windows WITH (security_invoker = true) AS
  SELECT t.id, t.tenant_id, t.title, t.status,
         int4range(t.sort_order, t.sort_order + 3) AS sort_span,
         CASE WHEN t.due_at IS NOT NULL THEN tstzrange(t.due_at - interval '10 days', t.due_at) END
           AS due_window
    FROM public.tasks t;
GRANT SELECT ON public.task_windows TO authenticated, service_role;

COMMIT;
