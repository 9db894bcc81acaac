// The error shapes a UI branches on, as PostgREST gives them (code, message, details, hint and
// the HTTP status): .single() on two rows or none, unknown columns, tables, functions and
// relationships, an RLS refusal, and a filter the grammar refuses. None leaks a row.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { accessToken, config, http, ids, psql, signedIn } from './lib/world.mjs'

describe('error shapes', () => {
  let ada
  before(async () => {
    ada = await signedIn('ada')
  })

  test('.single() on two rows: 406 PGRST116, "The result contains 2 rows"', async () => {
    const { data, error, status } = await ada.from('tasks').select('id').eq('priority', 'high').single()
    assert.equal(status, 406)
    assert.equal(data, null)
    assert.equal(error.code, 'PGRST116')
    assert.equal(error.message, 'Cannot coerce the result to a single JSON object')
    assert.equal(error.details, 'The result contains 2 rows')
  })

  test('.single() on no row is PGRST116 too; .maybeSingle() answers null', async () => {
    const none = await ada.from('tasks').select('id').eq('title', 'no such task').single()
    assert.equal(none.status, 406)
    assert.equal(none.error.code, 'PGRST116')
    assert.equal(none.error.details, 'The result contains 0 rows')
    const maybe = await ada.from('tasks').select('id').eq('title', 'no such task').maybeSingle()
    assert.equal(maybe.error, null)
    assert.equal(maybe.data, null)
  })

  test('a write with .single() that touches two rows is refused and rolled back', async () => {
    const before = psql(`SELECT string_agg(priority::text, ',' ORDER BY id) FROM public.tasks
                          WHERE tenant_id = :'t' AND status = 'todo'`, { t: ids.tenantA })
    const { error, status } = await ada.from('tasks').update({ priority: 'urgent' }).eq('status', 'todo').select().single()
    assert.equal(status, 406)
    assert.equal(error.code, 'PGRST116')
    assert.equal(
      psql(`SELECT string_agg(priority::text, ',' ORDER BY id) FROM public.tasks
             WHERE tenant_id = :'t' AND status = 'todo'`, { t: ids.tenantA }),
      before,
      'nothing changed',
    )
  })

  test('an unknown column in select is Postgres\' 42703, 400', async () => {
    const { data, error, status } = await ada.from('agents').select('id, nope')
    assert.equal(status, 400)
    assert.equal(data, null)
    assert.equal(error.code, '42703')
    assert.match(error.message, /nope/)
  })

  test('an unknown column in a body is PGRST204, 400', async () => {
    const { data, error, status } = await ada.from('contacts').insert({ name: 'Nope', nope: 1 }).select()
    assert.equal(status, 400)
    assert.equal(data, null)
    assert.equal(error.code, 'PGRST204')
    assert.equal(error.message, "Could not find the 'nope' column of 'contacts' in the schema cache")
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE name = 'Nope'`), '0')
  })

  test('an unknown table is PGRST205, 404', async () => {
    const { error, status } = await ada.from('no_such_table').select()
    assert.equal(status, 404)
    assert.equal(error.code, 'PGRST205')
    assert.match(error.message, /^Could not find the table 'public\.no_such_table' in the schema cache/)
  })

  test('an unknown function is PGRST202, 404', async () => {
    const { error, status } = await ada.rpc('no_such_function', { a: 1 })
    assert.equal(status, 404)
    assert.equal(error.code, 'PGRST202')
    assert.match(error.message, /^Could not find the function public\.no_such_function\(a\) in the schema cache/)
  })

  test('an embed without a relationship is PGRST200, 400; an ambiguous one PGRST201, 300', async () => {
    const missing = await ada.from('agents').select('id, workspace(*)')
    assert.equal(missing.status, 400)
    assert.equal(missing.error.code, 'PGRST200')
    assert.match(missing.error.message, /^Could not find a relationship between 'agents' and 'workspace' in the schema cache/)
    // work_products names agents twice (reviewer and submitter): the UI must hint.
    const ambiguous = await ada.from('work_products').select('id, agents(*)')
    assert.equal(ambiguous.status, 300)
    assert.equal(ambiguous.error.code, 'PGRST201')
    assert.ok(Array.isArray(ambiguous.error.details), 'the candidate relationships')
  })

  test('an RLS refusal: a row for another tenant is 42501, 403', async () => {
    const { data, error, status } = await ada
      .from('agents')
      .insert({ tenant_id: ids.tenantB, name: 'Mole', slug: 'mole' })
      .select()
    assert.equal(status, 403)
    assert.equal(data, null)
    assert.equal(error.code, '42501')
    assert.equal(error.message, 'new row violates row-level security policy for table "agents"')
    assert.equal(psql(`SELECT count(*) FROM public.agents WHERE slug = 'mole'`), '0')
  })

  test('a table the role may not read: 42501, 403 for a signed-in user', async () => {
    const { data, error, status } = await ada.from('app_users').select('id')
    assert.equal(status, 403)
    assert.equal(data, null)
    assert.equal(error.code, '42501')
  })

  test('a bad filter is PGRST100, 400, with PostgREST\'s parse error', async () => {
    const { data, error, status } = await ada.from('tasks').select('id').filter('status', 'eqq', 'todo')
    assert.equal(status, 400)
    assert.equal(data, null)
    assert.equal(error.code, 'PGRST100')
    assert.match(error.message, /failed to parse filter \(eqq\.todo\)/)
    assert.ok(error.details, 'says what was expected')
  })

  test('hostile query strings are a 4xx with PostgREST\'s body, never a 500', async () => {
    const { anonKey } = await config()
    const token = await accessToken(ada)
    const hostile = [
      '/rest/v1/tasks?select=id&status=in.(todo',
      '/rest/v1/tasks?select=id&or=(status.eq.todo',
      '/rest/v1/tasks?select=*,agents!inner(',
      '/rest/v1/tasks?select=id&limit=-1',
      '/rest/v1/tasks?select=id&tags=cs.{',
      '/rest/v1/tasks?select=id::nosuchtype',
      `/rest/v1/tasks?select=id&${'a'.repeat(20000)}=eq.1`,
      `/rest/v1/tasks?select=${'x(' .repeat(200)}`,
    ]
    for (const path of hostile) {
      const r = await http(path, { token, apikey: anonKey })
      assert.ok(r.status >= 400 && r.status < 500, `${path.slice(0, 80)}: ${r.status} ${r.text.slice(0, 200)}`)
      // 414 and 431 come from the HTTP layer, before the data API reads the request.
      if (r.status !== 414 && r.status !== 431) {
        assert.ok(r.json && typeof r.json.code === 'string' && 'message' in r.json, `${path.slice(0, 80)}: ${r.text.slice(0, 200)}`)
      }
    }
    // PostgREST splits a query string at ';' as at '&' (http-types' parseQuery) and drops a key
    // without a value: what follows the semicolon is never anything but an ignored key.
    for (const path of ['/rest/v1/tasks?select=id;drop%20table%20tasks', '/rest/v1/tasks?select=id&order=title;delete']) {
      const trailing = await http(path, { token, apikey: anonKey })
      assert.equal(trailing.status, 200, path)
      assert.ok(trailing.json.length >= 8 && trailing.json.every((t) => Object.keys(t).join() === 'id'), path)
    }
    // A value is a value: quotes and SQL in it select nothing and break nothing.
    const injected = await http('/rest/v1/tasks?select=id&title=eq.x%27%3B%20drop%20table%20tasks%3B--', {
      token,
      apikey: anonKey,
    })
    assert.equal(injected.status, 200)
    assert.deepEqual(injected.json, [])
    assert.ok(Number(psql(`SELECT count(*) FROM public.tasks WHERE tenant_id = :'t'`, { t: ids.tenantA })) >= 8)
  })
})

// Issue 37: what a hostile user tries through the client, refused before it costs anything or
// reaches anything internal (docs/security.md, "The data API").
describe('the data API closed to a hostile user', () => {
  let ada
  before(async () => {
    ada = await signedIn('ada')
  })

  test('200 embeds are 400 PGRST100 at once, before Postgres plans them', async () => {
    const select = ['id', ...Array.from({ length: 200 }, (_, i) => `a${i}:agents!tasks_assignee_agent_id_fkey(*)`)].join(',')
    const started = Date.now()
    const { data, error, status } = await ada.from('tasks').select(select)
    const ms = Date.now() - started
    assert.equal(status, 400)
    assert.equal(data, null)
    assert.equal(error.code, 'PGRST100')
    assert.equal(error.message, 'Too many embedded resources')
    assert.ok(ms < 2000, `answered in ${ms} ms`)
  })

  test('a body over the limit is 413 in PostgREST\'s shape, and nothing is written', async () => {
    const before = psql(`SELECT count(*) FROM public.contacts WHERE tenant_id = :'t'`, { t: ids.tenantA })
    const rows = Array.from({ length: 1200 }, (_, i) => ({ name: `big ${i}`, notes: 'x'.repeat(1000) }))
    const { data, error, status } = await ada.from('contacts').insert(rows)
    assert.equal(status, 413)
    assert.equal(data, null)
    assert.equal(error.code, 'PGRST102')
    assert.equal(typeof error.message, 'string')
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE tenant_id = :'t'`, { t: ids.tenantA }), before)
  })

  test('awp_notify_gateway is not callable: 403 42501', async () => {
    const { error, status } = await ada.rpc('awp_notify_gateway', { p_channel: 'pgrst', p_payload: 'reload schema' })
    assert.equal(status, 403)
    assert.equal(error.code, '42501')
  })

  test('a VOLATILE function is not called by { get: true }: 405 25006, and nothing changes', async () => {
    const { data: queued, error: qe } = await ada
      .from('agent_commands')
      .insert({ gateway_id: ids.gatewayA, action: 'list_models', status: 'pending' })
      .select('id')
      .single()
    assert.equal(qe, null)
    const { error, status } = await ada.rpc('cancel_command', { p_command_id: queued.id }, { get: true })
    assert.equal(status, 405)
    assert.equal(error.code, '25006')
    assert.notEqual(psql(`SELECT status FROM public.agent_commands WHERE id = :'id'`, { id: queued.id }), 'cancelled')
    // By POST it runs (and the command leaves the queue again).
    const { error: pe } = await ada.rpc('cancel_command', { p_command_id: queued.id })
    assert.equal(pe, null)
    assert.equal(psql(`SELECT status FROM public.agent_commands WHERE id = :'id'`, { id: queued.id }), 'cancelled')
    psql(`DELETE FROM public.agent_commands WHERE id = :'id'`, { id: queued.id })
  })

  test('limit and offset that are not integers are 400, never every row', async () => {
    const { anonKey } = await config()
    const token = await accessToken(ada)
    for (const q of ['limit=-1abc', 'offset=x']) {
      const r = await http(`/rest/v1/tasks?select=id&${q}`, { token, apikey: anonKey })
      assert.equal(r.status, 400, q)
      assert.equal(r.json.code, 'PGRST100', q)
    }
  })
})
