// The spec's three common query patterns ("Common query patterns"), as a UI writes them with the
// client, each answering exactly what psql answers for the same statement under the same claims.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { claimsOf, ids, sameAsPsql, signedIn } from './lib/world.mjs'

describe('the spec\'s common query patterns', () => {
  let ada
  let claims
  before(async () => {
    ada = await signedIn('ada')
    claims = await claimsOf(ada)
  })

  test('agents of a gateway, ordered by name', async () => {
    const data = await sameAsPsql(
      ada.from('agents').select('*').eq('gateway_id', ids.gatewayA).order('name'),
      claims,
      `SELECT * FROM public.agents WHERE gateway_id = :'gw' ORDER BY name`,
      { ordered: true, vars: { gw: ids.gatewayA } },
    )
    // Inserted as Ada, Bob, Cy, Abe: the order is the server's, not the table's.
    assert.deepEqual(
      data.map((a) => a.name),
      ['Abe', 'Ada', 'Bob', 'Cy'],
    )
    assert.deepEqual(data[1].meta, { team: 'core', level: 3 }, 'jsonb as JSON')
    assert.deepEqual(data[1].domains, ['ops', 'infra'], 'text[] as a JSON array')
  })

  test('open tasks of an agent: status in (todo, in_progress, blocked)', async () => {
    const data = await sameAsPsql(
      ada
        .from('tasks')
        .select('*')
        .eq('assignee_agent_id', ids.ada)
        .in('status', ['todo', 'in_progress', 'blocked']),
      claims,
      `SELECT * FROM public.tasks WHERE assignee_agent_id = :'agent'
          AND status IN ('todo', 'in_progress', 'blocked')`,
      { vars: { agent: ids.ada } },
    )
    assert.deepEqual(
      data.map((t) => t.id).sort(),
      [ids.taskA1, ids.taskA2, ids.taskA3].sort(),
      'the done and the cancelled task are left out',
    )
  })

  test('usage of an agent in a period, newest first', async () => {
    const data = await sameAsPsql(
      ada
        .from('agent_usage')
        .select('*')
        .eq('agent_id', ids.ada)
        .gte('created_at', '2026-01-01T00:00:00Z')
        .lt('created_at', '2026-02-01T00:00:00Z')
        .order('created_at', { ascending: false }),
      claims,
      `SELECT * FROM public.agent_usage WHERE agent_id = :'agent'
          AND created_at >= '2026-01-01T00:00:00Z' AND created_at < '2026-02-01T00:00:00Z'
        ORDER BY created_at DESC`,
      { ordered: true, vars: { agent: ids.ada } },
    )
    assert.deepEqual(
      data.map((u) => Date.parse(u.created_at)),
      ['2026-01-20T10:00:00Z', '2026-01-10T10:00:00Z', '2026-01-05T10:00:00Z'].map(Date.parse),
    )
    assert.equal(data[0].cost_usd, 0.0081, 'numeric as a JSON number')
  })
})
