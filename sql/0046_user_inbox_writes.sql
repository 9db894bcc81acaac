-- A user wakes an agent of their tenant by hand (issue 38; docs/product-ui.md): the product's UI
-- runs a routine now by inserting an inbox item (hooks/use-routines.ts:236) and re-drives a failed
-- one from its triage page by setting it pending again (app/dashboard/actions/triage.ts:428), both
-- as the signed-in user. Until now users could only read agent_inbox_items (the dispatcher's
-- queue); this grants exactly those two writes and nothing more:
--   - INSERT of a pending routine item (event_type routine_schedule or routine_event) for an agent
--     of the user's own tenant (awp_inbox_before_insert refuses another tenant's agent, AW003, and
--     fills agent_slug and gateway_id from it), with a dedup_key of the manual-run form
--     `routine_manual:…` — dedup keys are unique across tenants, so a user may not take a key of
--     the form the scheduler and the producers use (`routine:…`, `routine_event:…`, …) and so
--     suppress another tenant's item. Only the columns the UI writes (and title, payload,
--     routine_id): no lease, attempt, gateway or tenant column.
--   - UPDATE of the user's tenant's failed or dead-lettered items back to pending (status,
--     attempt_count, failed_at): awp_inbox_check_transition starts a dead letter afresh (attempts
--     0, no back-off). Nothing else of an item is changed by a user, and no other transition.
-- Whoever inserts, the item wakes its gateway's dispatcher through the queue's NOTIFY trigger.

GRANT INSERT (agent_id, agent_slug, event_type, status, title, summary, payload, context,
              dedup_key, routine_id)
  ON public.agent_inbox_items TO authenticated;
GRANT UPDATE (status, attempt_count, failed_at) ON public.agent_inbox_items TO authenticated;

CREATE POLICY tenant_manual_run ON public.agent_inbox_items FOR INSERT TO authenticated
  WITH CHECK (tenant_id = (SELECT public.current_tenant_id())
              AND status = 'pending'
              AND event_type IN ('routine_schedule', 'routine_event')
              AND dedup_key LIKE 'routine\_manual:%');

CREATE POLICY tenant_redrive ON public.agent_inbox_items FOR UPDATE TO authenticated
  USING (tenant_id = (SELECT public.current_tenant_id()) AND status IN ('failed', 'dead_letter'))
  WITH CHECK (tenant_id = (SELECT public.current_tenant_id()) AND status = 'pending');
