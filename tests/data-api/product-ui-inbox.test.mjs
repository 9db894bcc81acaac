// The two writes the original product's UI makes to the agent inbox as the signed-in user
// (yourhq/yourhq at 86f99c2, apps/ui): a routine's "Run now" inserts a pending item for the
// routine's agent, and the triage page re-drives a failed item by setting it pending again
// (sql/0046). Each is made exactly as the UI makes it; around them, what a user may not do with
// the same grant: another tenant's agent or item, another event type, a dedup key of the form the
// scheduler uses, a lease column, a transition other than back to pending.
import { describe, test, after } from 'node:test'
import assert from 'node:assert/strict'
import { ids, psql, signedIn } from './lib/world.mjs'
import { cleanup, ok, track, ui } from './lib/product-ui.mjs'

const routine = { id: ids.routineA1, agent_id: ids.ada, agent_slug: 'ada', trigger_type: 'schedule', name: 'Morning digest', instruction: 'Summarise the night' }

// hooks/use-routines.ts's runNow, its insert as written there.
const runNow = (supabase, r, overrides = {}) =>
  supabase.from('agent_inbox_items').insert({
    agent_id: r.agent_id,
    agent_slug: r.agent_slug,
    event_type: r.trigger_type === 'schedule' ? 'routine_schedule' : 'routine_event',
    status: 'pending',
    summary: r.instruction || r.name,
    context: { routine_id: r.id, routine_name: r.name, instruction: r.instruction, manual_trigger: true },
    dedup_key: `routine_manual:${r.id}:${Date.now()}`,
    ...overrides,
  })

// app/dashboard/actions/triage.ts's retryFailedInboxItem.
const retry = (supabase, itemId) =>
  supabase.from('agent_inbox_items').update({ status: 'pending', attempt_count: 0, failed_at: null }).eq('id', itemId)

function deadLetter(agent, tenant) {
  const id = psql(`INSERT INTO public.agent_inbox_items (tenant_id, agent_id, event_type, dedup_key, status, attempts, max_attempts, last_error, failed_at)
    VALUES (:'t', :'a', 'task_assignment', 'test-dead:' || gen_random_uuid(), 'dead_letter', 3, 3, 'the runtime said no', now()) RETURNING id`, { t: tenant, a: agent })
  return track('agent_inbox_items', id)
}
const row = (id) => JSON.parse(psql(`SELECT row_to_json(i) FROM (SELECT status, attempts, attempt_count, tenant_id, gateway_id, agent_slug, payload, lease_token FROM public.agent_inbox_items WHERE id = :'id') i`, { id }) || 'null')

describe('the agent inbox written by a user', () => {
  after(() => cleanup())

  test(`"Run now" queues the routine's item for its agent, on its gateway ${ui('hooks/use-routines.ts:236')}`, async () => {
    const ada = await signedIn('ada')
    const before = Number(psql(`SELECT count(*) FROM public.agent_inbox_items WHERE agent_id = :'a'`, { a: ids.ada }))
    ok(await runNow(ada, routine))
    const made = psql(`SELECT id FROM public.agent_inbox_items WHERE agent_id = :'a' AND dedup_key LIKE 'routine_manual:%' ORDER BY created_at DESC LIMIT 1`, { a: ids.ada })
    track('agent_inbox_items', made)
    assert.equal(Number(psql(`SELECT count(*) FROM public.agent_inbox_items WHERE agent_id = :'a'`, { a: ids.ada })), before + 1)
    const item = row(made)
    assert.equal(item.status, 'pending')
    assert.equal(item.tenant_id, ids.tenantA)
    assert.equal(item.gateway_id, ids.gatewayA, "the agent's gateway, for its dispatcher")
    assert.equal(item.payload.manual_trigger, true, 'the context the UI wrote is the payload the agent gets')
    // The UI's list of the agent's inbox shows it.
    const listed = ok(await ada.from('agent_inbox_items').select('id, status, context').eq('id', made))
    assert.equal(listed.length, 1)
  })

  test('a user cannot queue for another tenant\'s agent, another event type, with the scheduler\'s dedup keys or any lease column', async () => {
    const ada = await signedIn('ada')
    const zedAgent = { ...routine, agent_id: ids.zed, agent_slug: 'zed' }
    const theirs = await runNow(ada, zedAgent)
    assert.ok(theirs.error, 'another tenant\'s agent is refused')
    assert.equal(psql(`SELECT count(*) FROM public.agent_inbox_items WHERE agent_id = :'a' AND dedup_key LIKE 'routine_manual:%'`, { a: ids.zed }), '0')
    const assignment = await runNow(ada, routine, { event_type: 'task_assignment' })
    assert.equal(assignment.error?.code, '42501', 'only the routine event types')
    const schedulers = await runNow(ada, routine, { dedup_key: `routine:${ids.routineB1}:2026-11-28T09:00` })
    assert.equal(schedulers.error?.code, '42501', 'a key of the scheduler\'s form could suppress another tenant\'s item')
    const leased = await runNow(ada, routine, { status: 'leased' })
    assert.equal(leased.error?.code, '42501')
    const token = await runNow(ada, routine, { lease_token: 'a0000000-0000-4000-8000-00000000ffff' })
    assert.equal(token.error?.code, '42501', 'no column beyond what the UI writes')
    const tenant = await runNow(ada, routine, { tenant_id: ids.tenantB })
    assert.equal(tenant.error?.code, '42501')
    const anon = await (await import('./lib/world.mjs')).anonClient()
    assert.ok((await runNow(anon, routine)).error, 'anon queues nothing')
  })

  test(`the triage page re-drives a dead letter: pending again, attempts afresh ${ui('app/dashboard/actions/triage.ts:428')}`, async () => {
    const ada = await signedIn('ada')
    const id = deadLetter(ids.ada, ids.tenantA)
    ok(await retry(ada, id))
    const item = row(id)
    assert.equal(item.status, 'pending')
    assert.equal(item.attempts, 0)
    assert.equal(item.attempt_count, 0)
  })

  test('a user re-drives nothing of another tenant, nothing leased or done, and no other transition', async () => {
    const ada = await signedIn('ada')
    const zed = await signedIn('zed')
    const theirs = deadLetter(ids.zed, ids.tenantB)
    const r = await zed.from('agent_inbox_items').select('id').eq('id', theirs)
    assert.equal(ok(r).length, 1)
    ok(await retry(ada, theirs)) // PostgREST: no row matched, no error
    assert.equal(row(theirs).status, 'dead_letter', "tenant A's user changed nothing of tenant B's")
    const mine = deadLetter(ids.ada, ids.tenantA)
    const toDone = await ada.from('agent_inbox_items').update({ status: 'done' }).eq('id', mine)
    assert.equal(toDone.error?.code, 'AW001', "a dead letter goes nowhere but pending (the queue's own rule)")
    assert.equal(row(mine).status, 'dead_letter')
    psql(`UPDATE public.agent_inbox_items SET status = 'pending' WHERE id = :'id'`, { id: mine })
    psql(`UPDATE public.agent_inbox_items SET status = 'failed' WHERE id = :'id'`, { id: mine })
    const failedToDone = await ada.from('agent_inbox_items').update({ status: 'done' }).eq('id', mine)
    assert.equal(failedToDone.error?.code, '42501', "a user's only transition is back to pending")
    assert.equal(row(mine).status, 'failed')
    const summary = await ada.from('agent_inbox_items').update({ summary: 'x' }).eq('id', mine)
    assert.equal(summary.error?.code, '42501', 'no other column')
    psql(`UPDATE public.agent_inbox_items SET status = 'leased', lease_token = gen_random_uuid(), leased_by = 'test', leased_at = now(), lease_expires_at = now() + interval '5 minutes' WHERE id = :'id'`, { id: mine })
    ok(await retry(ada, mine))
    assert.equal(row(mine).status, 'leased', 'a leased item is the dispatcher\'s')
  })
})
