// Writes as a UI makes them: insert then .select().single(), arrays with and without
// missing=default, upsert (merge and ignore duplicates, on_conflict), update and delete with
// filters, and enqueueing a command (the spec's "a client may also insert an agent_commands row")
// then reading it back. psql (as the superuser) checks what the database really holds.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { claimsOf, ids, psql, psqlAs, signedIn } from './lib/world.mjs'

// Rows this file makes carry this mark, so they are told apart and removed at the end.
const mark = `writes-${process.pid}`

describe('writes', () => {
  let ada
  let claims
  before(async () => {
    ada = await signedIn('ada')
    claims = await claimsOf(ada)
  })
  after(() => {
    psql(`DELETE FROM public.contacts WHERE notes = :'mark';
          DELETE FROM public.tasks WHERE description = :'mark';
          DELETE FROM public.agents WHERE description = :'mark';`, { mark })
  })

  test('insert then .select().single() answers the stored row, defaults and tenant filled in', async () => {
    const { data, error, status } = await ada
      .from('contacts')
      .insert({ name: 'Dana Driver', email: 'dana@driver.test', notes: mark })
      .select()
      .single()
    assert.equal(error, null)
    assert.equal(status, 201)
    assert.equal(data.name, 'Dana Driver')
    assert.equal(data.tenant_id, ids.tenantA, 'the tenant comes from the session')
    assert.deepEqual(data.tags, [], 'the column default')
    assert.deepEqual(psqlAs(claims, `SELECT * FROM public.contacts WHERE id = :'id'`, { id: data.id }), [data])
  })

  test('insert of an array: missing keys are NULL unless missing=default (defaultToNull: false)', async () => {
    const rows = [
      { name: 'Eli Early', tags: ['early'], notes: mark },
      { name: 'Fay Late', notes: mark },
    ]
    // Without missing=default the second row's tags is an explicit NULL: the NOT NULL refuses it.
    const nulls = await ada.from('contacts').insert(rows).select()
    assert.equal(nulls.data, null)
    assert.equal(nulls.error.code, '23502')
    assert.equal(nulls.status, 400)
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE name IN ('Eli Early', 'Fay Late')`), '0',
      'nothing of a refused insert stays')

    const { data, error } = await ada.from('contacts').insert(rows, { defaultToNull: false }).select('name, tags')
    assert.equal(error, null)
    assert.deepEqual(
      data.sort((a, b) => a.name.localeCompare(b.name)),
      [
        { name: 'Eli Early', tags: ['early'] },
        { name: 'Fay Late', tags: [] },
      ],
    )
  })

  test('upsert on a unique key: merge-duplicates updates, ignore-duplicates keeps the row', async () => {
    const first = await ada
      .from('agents')
      .upsert({ slug: 'eve', name: 'Eve', description: mark }, { onConflict: 'tenant_id,slug' })
      .select()
      .single()
    assert.equal(first.error, null)
    assert.equal(first.data.name, 'Eve')

    const merged = await ada
      .from('agents')
      .upsert({ slug: 'eve', name: 'Eve Two', description: mark }, { onConflict: 'tenant_id,slug' })
      .select()
      .single()
    assert.equal(merged.error, null)
    assert.equal(merged.data.id, first.data.id, 'the same row')
    assert.equal(merged.data.name, 'Eve Two')

    const ignored = await ada
      .from('agents')
      .upsert({ slug: 'eve', name: 'Eve Three', description: mark }, { onConflict: 'tenant_id,slug', ignoreDuplicates: true })
      .select()
    assert.equal(ignored.error, null)
    assert.deepEqual(ignored.data, [], 'a duplicate that is ignored is not returned')
    assert.equal(psql(`SELECT name FROM public.agents WHERE id = :'id'`, { id: first.data.id }), 'Eve Two')
    assert.equal(psql(`SELECT count(*) FROM public.agents WHERE slug = 'eve'`), '1')
  })

  test('upsert of an array on the primary key: one row updated, one inserted', async () => {
    const { data: made } = await ada.from('contacts').insert({ name: 'Gil Before', notes: mark }).select().single()
    const fresh = '0f000000-0000-4000-8000-000000000001'
    const { data, error } = await ada
      .from('contacts')
      .upsert([
        { id: made.id, name: 'Gil After', notes: mark },
        { id: fresh, name: 'Hal New', notes: mark },
      ])
      .select('id, name')
    assert.equal(error, null)
    assert.deepEqual(
      data.sort((a, b) => a.name.localeCompare(b.name)),
      [
        { id: made.id, name: 'Gil After' },
        { id: fresh, name: 'Hal New' },
      ],
    )
    assert.equal(psql(`SELECT tenant_id FROM public.contacts WHERE id = :'id'`, { id: fresh }), ids.tenantA)
  })

  test('update with filters changes exactly the matching rows', async () => {
    const { data: made } = await ada
      .from('tasks')
      .insert([
        { title: 'Write tests', description: mark, priority: 'low' },
        { title: 'Read tests', description: mark, priority: 'low' },
        { title: 'Keep me', description: mark, priority: 'low' },
      ])
      .select('id, title')
    const pick = made.filter((t) => t.title !== 'Keep me').map((t) => t.id)
    const { data, error, count } = await ada
      .from('tasks')
      .update({ priority: 'urgent', status: 'in_progress' }, { count: 'exact' })
      .in('id', pick)
      .eq('priority', 'low')
      .select('id, priority, status')
    assert.equal(error, null)
    assert.equal(count, 2)
    assert.deepEqual(
      data.map((t) => t.id).sort(),
      pick.sort(),
    )
    assert.ok(data.every((t) => t.priority === 'urgent' && t.status === 'in_progress'))
    assert.equal(psql(`SELECT priority FROM public.tasks WHERE title = 'Keep me' AND description = :'mark'`, { mark }), 'low')

    const none = await ada.from('tasks').update({ priority: 'high' }).eq('title', 'no such task').select()
    assert.equal(none.error, null)
    assert.deepEqual(none.data, [])
  })

  test('delete with filters removes exactly the matching rows and answers them', async () => {
    const { data: made } = await ada
      .from('contacts')
      .insert([
        { name: 'Ivy Gone', notes: mark },
        { name: 'Jo Stays', notes: mark },
      ])
      .select('id, name')
    const gone = made.find((c) => c.name === 'Ivy Gone')
    const { data, error } = await ada.from('contacts').delete().eq('notes', mark).like('name', 'Ivy%').select('id, name')
    assert.equal(error, null)
    assert.deepEqual(data, [{ id: gone.id, name: 'Ivy Gone' }])
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE id = :'id'`, { id: gone.id }), '0')
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE name = 'Jo Stays'`), '1')

    // Without .select() a delete answers no body (return=minimal), 204.
    const quiet = await ada.from('contacts').delete().eq('name', 'Jo Stays')
    assert.equal(quiet.error, null)
    assert.equal(quiet.status, 204)
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE name = 'Jo Stays'`), '0')
  })
})

describe('enqueue a command', () => {
  let ada
  before(async () => {
    ada = await signedIn('ada')
  })
  after(() => {
    psql(`DELETE FROM public.agent_commands WHERE payload->>'mark' = :'mark'`, { mark })
  })

  test('insert into agent_commands, then read it back pending', async () => {
    const { data: command, error } = await ada
      .from('agent_commands')
      .insert({ gateway_id: ids.gatewayA, agent_id: ids.ada, action: 'update', payload: { mark }, status: 'pending' })
      .select()
      .single()
    assert.equal(error, null)
    assert.equal(command.status, 'pending')
    assert.equal(command.agent_slug, 'ada', 'filled in from the agent')
    assert.equal(command.tenant_id, ids.tenantA)
    assert.equal(command.requested_by_operator, false)

    const { data: back, error: readError } = await ada
      .from('agent_commands')
      .select('id, action, status, agent_slug, payload, exit_code, stdout')
      .eq('id', command.id)
      .single()
    assert.equal(readError, null)
    assert.deepEqual(back, {
      id: command.id,
      action: 'update',
      status: 'pending',
      agent_slug: 'ada',
      payload: { mark },
      exit_code: null,
      stdout: null,
    })

    // The user may cancel it while it waits.
    const cancelled = await ada.from('agent_commands').update({ status: 'cancelled' }).eq('id', command.id).select('status').single()
    assert.equal(cancelled.error, null)
    assert.equal(cancelled.data.status, 'cancelled')
  })

  test('a user cannot write a command\'s result or mark it done', async () => {
    const forged = await ada
      .from('agent_commands')
      .insert({ gateway_id: ids.gatewayA, agent_id: ids.ada, action: 'update', payload: { mark }, status: 'pending', stdout: 'all good' })
      .select()
    assert.equal(forged.data, null)
    assert.equal(forged.error.code, '42501', 'no insert privilege on stdout')
    assert.equal(forged.status, 403)

    const { data: command } = await ada
      .from('agent_commands')
      .insert({ gateway_id: ids.gatewayA, agent_id: ids.ada, action: 'update', payload: { mark }, status: 'pending' })
      .select('id')
      .single()
    const done = await ada.from('agent_commands').update({ status: 'done' }).eq('id', command.id).select()
    assert.ok(done.error, 'refused')
    assert.equal(done.data, null)
    assert.equal(psql(`SELECT status FROM public.agent_commands WHERE id = :'id'`, { id: command.id }), 'pending')
  })

  test('awp\'s own refusal (run_shell needs an operator) reaches the client with its SQLSTATE', async () => {
    const { data, error, status } = await ada
      .from('agent_commands')
      .insert({ gateway_id: ids.gatewayA, action: 'run_shell', payload: { mark, command: 'id' }, status: 'pending' })
      .select()
    assert.equal(data, null)
    assert.equal(error.code, 'AW010')
    assert.equal(status, 400)
    assert.match(error.message, /needs an operator/)
  })
})
