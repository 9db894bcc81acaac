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
