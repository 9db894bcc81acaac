// Ordering with nulls first or last, and pages: range() with an exact count, a head-only count,
// and the Content-Range header the client reads them from.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { accessToken, claimsOf, config, http, ids, sameAsPsql, signedIn } from './lib/world.mjs'

describe('order and pages', () => {
  let ada
  let claims
  before(async () => {
    ada = await signedIn('ada')
    claims = await claimsOf(ada)
  })

  test('order with nullsfirst', async () => {
    const data = await sameAsPsql(
      ada.from('tasks').select('id, due_at').order('due_at', { ascending: true, nullsFirst: true }).order('sort_order'),
      claims,
      `SELECT id, due_at FROM public.tasks ORDER BY due_at ASC NULLS FIRST, sort_order`,
      { ordered: true },
    )
    assert.deepEqual(
      data.slice(0, 3).map((t) => t.id),
      [ids.taskA3, ids.taskA5, ids.taskA7],
    )
  })

  test('order descending with nullslast', async () => {
    const data = await sameAsPsql(
      ada.from('tasks').select('id, due_at').order('due_at', { ascending: false, nullsFirst: false }).order('sort_order'),
      claims,
      `SELECT id, due_at FROM public.tasks ORDER BY due_at DESC NULLS LAST, sort_order`,
      { ordered: true },
    )
    assert.equal(data[0].id, ids.taskA1)
    assert.equal(data.at(-1).due_at, null)
  })

  test('range() with count exact: the page, the total and 206', async () => {
    const { data, count, status, error } = await ada
      .from('tasks')
      .select('id', { count: 'exact' })
      .order('sort_order')
      .range(0, 2)
    assert.equal(error, null)
    assert.equal(status, 206, 'a partial answer')
    assert.equal(count, 8)
    assert.deepEqual(
      data.map((t) => t.id),
      [ids.taskA1, ids.taskA2, ids.taskA3],
    )
    const last = await ada.from('tasks').select('id', { count: 'exact' }).order('sort_order').range(6, 9)
    assert.equal(last.error, null)
    assert.equal(last.count, 8)
    assert.deepEqual(
      last.data.map((t) => t.id),
      [ids.taskA7, ids.taskA8],
    )
  })

  test('range() is limit and offset on the wire', async () => {
    const { data, error } = await ada.from('tasks').select('id').order('sort_order').range(3, 4)
    assert.equal(error, null)
    assert.deepEqual(
      data.map((t) => t.id),
      [ids.taskA4, ids.taskA5],
    )
    const raw = await http('/rest/v1/tasks?select=id&order=sort_order&limit=2&offset=3', {
      token: await accessToken(ada),
      apikey: (await config()).anonKey,
    })
    assert.equal(raw.status, 200)
    assert.deepEqual(raw.json, data)
  })

  test('count exact with head: the number of rows and no rows', async () => {
    const { data, count, status, error } = await ada
      .from('tasks')
      .select('*', { count: 'exact', head: true })
      .eq('assignee_agent_id', ids.ada)
      .in('status', ['todo', 'in_progress', 'blocked'])
    assert.equal(error, null)
    assert.equal(status, 200)
    assert.equal(data, null)
    assert.equal(count, 3)
  })

  test('a planned count is a number too', async () => {
    const { count, error } = await ada.from('tasks').select('id', { count: 'planned', head: true })
    assert.equal(error, null)
    assert.equal(typeof count, 'number')
  })

  test('Content-Range on the wire: a Range header page and a HEAD count', async () => {
    const { anonKey } = await config()
    const token = await accessToken(ada)
    const page = await http('/rest/v1/tasks?select=id&order=sort_order', {
      token,
      apikey: anonKey,
      headers: { 'Range-Unit': 'items', Range: '0-2', Prefer: 'count=exact' },
    })
    assert.equal(page.status, 206)
    assert.equal(page.headers.get('content-range'), '0-2/8')
    assert.equal(page.json.length, 3)
    const head = await http('/rest/v1/tasks?select=id', { method: 'HEAD', token, apikey: anonKey, headers: { Prefer: 'count=exact' } })
    assert.equal(head.status, 200)
    assert.equal(head.headers.get('content-range'), '0-7/8')
    assert.equal(head.text, '')
    const none = await http('/rest/v1/tasks?select=id&title=eq.nothing', { token, apikey: anonKey, headers: { Prefer: 'count=exact' } })
    assert.equal(none.status, 200)
    assert.equal(none.headers.get('content-range'), '*/0')
    assert.deepEqual(none.json, [])
  })

  test('a page past the end with count exact is 416 PGRST103', async () => {
    const { data, error, status } = await ada.from('tasks').select('id', { count: 'exact' }).order('sort_order').range(10, 12)
    assert.equal(status, 416)
    assert.equal(error.code, 'PGRST103')
    assert.equal(error.message, 'Requested range not satisfiable')
    assert.equal(error.details, 'An offset of 10 was requested, but there are only 8 rows.')
    assert.equal(data, null)
  })
})
