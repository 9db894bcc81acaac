// Embedded resources as the original UI writes them: the foreign-key hints it uses
// (agents!tasks_assignee_agent_id_fkey, ...), counts of an embed, !inner with a filter on the
// embed, nesting, and ordering by or within an embed. Each answer equals psql's under the same
// claims (the embed written as the correlated subquery it means).
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { claimsOf, ids, sameAsPsql, signedIn } from './lib/world.mjs'

// The assignee of task t as PostgREST embeds it: a to-one object or null.
const assignee = (cols) => `(SELECT row_to_json(e) FROM (SELECT ${cols} FROM public.agents x
   WHERE x.tenant_id = t.tenant_id AND x.id = t.assignee_agent_id) e)`

describe('embedded resources', () => {
  let ada
  let claims
  before(async () => {
    ada = await signedIn('ada')
    claims = await claimsOf(ada)
  })

  test('tasks with their assignee: *, assignee_agent:agents!tasks_assignee_agent_id_fkey(...)', async () => {
    const data = await sameAsPsql(
      ada.from('tasks').select('*, assignee_agent:agents!tasks_assignee_agent_id_fkey(id, name, slug, avatar_url, meta)'),
      claims,
      `SELECT t.*, ${assignee('x.id, x.name, x.slug, x.avatar_url, x.meta')} AS assignee_agent
         FROM public.tasks t`,
    )
    const task = Object.fromEntries(data.map((t) => [t.id, t]))
    assert.deepEqual(task[ids.taskA1].assignee_agent, {
      id: ids.ada,
      name: 'Ada',
      slug: 'ada',
      avatar_url: 'https://example.test/ada.png',
      meta: { team: 'core', level: 3 },
    })
    assert.equal(task[ids.taskA7].assignee_agent, null, 'an unassigned task embeds null')
  })

  test('routines with their agent: agents!routines_agent_id_fkey', async () => {
    const data = await sameAsPsql(
      ada.from('routines').select('id, name, agent:agents!routines_agent_id_fkey(id, name, slug)'),
      claims,
      `SELECT r.id, r.name, (SELECT row_to_json(e) FROM (SELECT x.id, x.name, x.slug
          FROM public.agents x WHERE x.tenant_id = r.tenant_id AND x.id = r.agent_id) e) AS agent
         FROM public.routines r`,
    )
    assert.equal(data.find((r) => r.id === ids.routineA1).agent.slug, 'ada')
  })

  test('inbox items with agent and contact: agents!agent_inbox_items_agent_id_fkey, contacts!agent_inbox_items_contact_id_fkey', async () => {
    const data = await sameAsPsql(
      ada
        .from('agent_inbox_items')
        .select(
          'id, title, summary, agent:agents!agent_inbox_items_agent_id_fkey(slug, name), contact:contacts!agent_inbox_items_contact_id_fkey(name, email)',
        ),
      claims,
      `SELECT i.id, i.title, i.summary,
              (SELECT row_to_json(e) FROM (SELECT x.slug, x.name FROM public.agents x
                WHERE x.tenant_id = i.tenant_id AND x.id = i.agent_id) e) AS agent,
              (SELECT row_to_json(e) FROM (SELECT c.name, c.email FROM public.contacts c
                WHERE c.tenant_id = i.tenant_id AND c.id = i.contact_id) e) AS contact
         FROM public.agent_inbox_items i`,
    )
    const checkIn = data.find((i) => i.summary === 'Weekly check-in with Ann')
    assert.deepEqual(checkIn.agent, { slug: 'ada', name: 'Ada' })
    assert.deepEqual(checkIn.contact, { name: 'Ann Client', email: 'ann@client.test' })
    assert.ok(data.some((i) => i.contact === null), 'an item without a contact embeds null')
  })

  test('the UI\'s unhinted embed: agent_id, summary, task:tasks(title)', async () => {
    await sameAsPsql(
      ada.from('agent_inbox_items').select('id, agent_id, summary, task:tasks(title)'),
      claims,
      `SELECT i.id, i.agent_id, i.summary, (SELECT row_to_json(e) FROM (SELECT t.title
          FROM public.tasks t WHERE t.tenant_id = i.tenant_id AND t.id = i.task_id) e) AS task
         FROM public.agent_inbox_items i`,
    )
  })

  test('counts of an embed: *, contacts(count) and tasks(count)', async () => {
    const tenants = await sameAsPsql(
      ada.from('tenants').select('*, contacts(count)'),
      claims,
      `SELECT n.*, (SELECT json_agg(e) FROM (SELECT count(*) FROM public.contacts c
          WHERE c.tenant_id = n.id) e) AS contacts FROM public.tenants n`,
    )
    assert.deepEqual(
      tenants.map((n) => [n.id, n.contacts]),
      [[ids.tenantA, [{ count: 3 }]]],
      'one tenant (its own) with its three contacts',
    )
    const agents = await sameAsPsql(
      ada.from('agents').select('id, slug, tasks(count)'),
      claims,
      `SELECT a.id, a.slug, (SELECT json_agg(e) FROM (SELECT count(*) FROM public.tasks t
          WHERE t.tenant_id = a.tenant_id AND t.assignee_agent_id = a.id) e) AS tasks
         FROM public.agents a`,
    )
    assert.deepEqual(agents.find((a) => a.id === ids.ada).tasks, [{ count: 5 }])
  })

  test('!inner with a filter on the embed keeps only the rows whose embed matches', async () => {
    const data = await sameAsPsql(
      ada
        .from('tasks')
        .select('id, title, assignee_agent:agents!tasks_assignee_agent_id_fkey!inner(slug)')
        .eq('assignee_agent.slug', 'bob'),
      claims,
      `SELECT t.id, t.title, ${assignee('x.slug')} AS assignee_agent FROM public.tasks t
        WHERE EXISTS (SELECT 1 FROM public.agents x WHERE x.tenant_id = t.tenant_id
                         AND x.id = t.assignee_agent_id AND x.slug = 'bob')`,
    )
    assert.deepEqual(
      data.map((t) => t.id),
      [ids.taskA6],
    )
  })

  test('without !inner the same filter only empties the embed of the other rows', async () => {
    const data = await sameAsPsql(
      ada
        .from('tasks')
        .select('id, assignee_agent:agents!tasks_assignee_agent_id_fkey(slug)')
        .eq('assignee_agent.slug', 'bob'),
      claims,
      `SELECT t.id, (SELECT row_to_json(e) FROM (SELECT x.slug FROM public.agents x
          WHERE x.tenant_id = t.tenant_id AND x.id = t.assignee_agent_id AND x.slug = 'bob') e)
          AS assignee_agent FROM public.tasks t`,
    )
    assert.equal(data.length, 8, 'every task of the tenant')
    assert.equal(data.filter((t) => t.assignee_agent !== null).length, 1)
  })

  test('nested embeds: an inbox item\'s task with that task\'s assignee', async () => {
    await sameAsPsql(
      ada
        .from('agent_inbox_items')
        .select('id, task:tasks(title, assignee_agent:agents!tasks_assignee_agent_id_fkey(slug))'),
      claims,
      `SELECT i.id, (SELECT row_to_json(e) FROM (SELECT t.title, ${assignee('x.slug')} AS assignee_agent
          FROM public.tasks t WHERE t.tenant_id = i.tenant_id AND t.id = i.task_id) e) AS task
         FROM public.agent_inbox_items i`,
    )
  })

  test('a to-many embed ordered and filtered inside: gateways with their ready agents by name', async () => {
    const data = await sameAsPsql(
      ada
        .from('gateways')
        .select('slug, agents(slug, name)')
        .in('agents.status', ['ready', 'paused'])
        .order('name', { referencedTable: 'agents' })
        .order('slug'),
      claims,
      `SELECT g.slug, (SELECT coalesce(json_agg(e), '[]'::json) FROM (SELECT a.slug, a.name
          FROM public.agents a WHERE a.tenant_id = g.tenant_id AND a.gateway_id = g.id
           AND a.status IN ('ready', 'paused') ORDER BY a.name) e) AS agents
         FROM public.gateways g ORDER BY g.slug`,
      { ordered: true },
    )
    assert.deepEqual(data, [
      { slug: 'acme-edge', agents: [] },
      {
        slug: 'acme-main',
        agents: [
          { slug: 'abe', name: 'Abe' },
          { slug: 'ada', name: 'Ada' },
          { slug: 'bob', name: 'Bob' },
        ],
      },
    ])
  })

  test('rows ordered by a column of their to-one embed, nulls last', async () => {
    const data = await sameAsPsql(
      ada
        .from('tasks')
        .select('id, sort_order, assignee_agent:agents!tasks_assignee_agent_id_fkey(name)')
        .order('assignee_agent(name)', { ascending: false, nullsFirst: false })
        .order('sort_order'),
      claims,
      `SELECT t.id, t.sort_order, ${assignee('x.name')} AS assignee_agent FROM public.tasks t
        ORDER BY (SELECT x.name FROM public.agents x WHERE x.tenant_id = t.tenant_id
                   AND x.id = t.assignee_agent_id) DESC NULLS LAST, t.sort_order`,
      { ordered: true },
    )
    assert.deepEqual(
      data.map((t) => t.assignee_agent?.name ?? null),
      ['Cy', 'Bob', 'Ada', 'Ada', 'Ada', 'Ada', 'Ada', null],
    )
  })
})
