// Two tenants see nothing of each other through /rest/v1 — reads, updates, deletes, inserts with
// the other's tenant_id, embeds and RPCs — and a user of no tenant sees nothing at all.
// Row-level security alone decides; psql (as the superuser) checks that nothing changed.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { claimsOf, ids, knowledgeIndexed, psql, psqlAs, signedIn } from './lib/world.mjs'

const tables = [
  'agents',
  'tasks',
  'contacts',
  'routines',
  'agent_inbox_items',
  'agent_usage',
  'knowledge_items',
  'knowledge_chunks',
  'gateways',
  'task_windows',
]

describe('two tenants', () => {
  let ada
  let zed
  before(async () => {
    await knowledgeIndexed() // knowledge_chunks exist once the embedder has run
    ada = await signedIn('ada')
    zed = await signedIn('zed')
  })

  for (const table of tables) {
    test(`each reads only its own ${table}`, async () => {
      for (const [client, own] of [
        [ada, ids.tenantA],
        [zed, ids.tenantB],
      ]) {
        const { data, error } = await client.from(table).select('*')
        assert.equal(error, null)
        assert.ok(data.length > 0, `${own} has ${table}`)
        assert.ok(
          data.every((r) => r.tenant_id === own),
          `only tenant ${own}'s rows`,
        )
        assert.equal(data.length, psqlAs(await claimsOf(client), `SELECT 1 FROM public.${table}`).length)
      }
      // Asking by the other's tenant_id finds nothing either.
      const { data, count } = await ada.from(table).select('*', { count: 'exact' }).eq('tenant_id', ids.tenantB)
      assert.deepEqual(data, [])
      assert.equal(count, 0)
    })
  }

  test('the tenants table shows each its own row', async () => {
    assert.deepEqual((await ada.from('tenants').select('id')).data, [{ id: ids.tenantA }])
    assert.deepEqual((await zed.from('tenants').select('id')).data, [{ id: ids.tenantB }])
  })

  test('a row of the other tenant, asked for by id, is not there', async () => {
    assert.deepEqual((await ada.from('tasks').select('id').eq('id', ids.taskB1)).data, [])
    assert.deepEqual((await zed.from('tasks').select('id').eq('id', ids.taskA1)).data, [])
    const single = await ada.from('agents').select('id').eq('id', ids.zed).single()
    assert.equal(single.status, 406, 'zero rows for .single()')
    assert.equal(single.data, null)
  })

  test('updates of the other tenant\'s rows change nothing', async () => {
    const byId = await ada.from('tasks').update({ title: 'Stolen' }).eq('id', ids.taskB1).select()
    assert.equal(byId.error, null)
    assert.deepEqual(byId.data, [])
    const byTenant = await ada.from('contacts').update({ name: 'Stolen' }).eq('tenant_id', ids.tenantB).select()
    assert.deepEqual(byTenant.data, [])
    assert.equal(psql(`SELECT title FROM public.tasks WHERE id = :'id'`, { id: ids.taskB1 }), 'Bolt secret plan')
    assert.equal(psql(`SELECT name FROM public.contacts WHERE id = :'id'`, { id: ids.contactB1 }), 'Bolt Customer')
  })

  test('deletes of the other tenant\'s rows delete nothing', async () => {
    const byId = await ada.from('contacts').delete().eq('id', ids.contactB1).select()
    assert.equal(byId.error, null)
    assert.deepEqual(byId.data, [])
    const all = await zed.from('agents').delete().eq('tenant_id', ids.tenantA).select()
    assert.deepEqual(all.data, [])
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE id = :'id'`, { id: ids.contactB1 }), '1')
    assert.ok(Number(psql(`SELECT count(*) FROM public.agents WHERE tenant_id = :'t'`, { t: ids.tenantA })) >= 5)
  })

  test('inserts with the other tenant\'s tenant_id are refused (42501)', async () => {
    for (const [table, row] of [
      ['tasks', { tenant_id: ids.tenantB, title: 'Planted task' }],
      ['contacts', { tenant_id: ids.tenantB, name: 'Planted contact' }],
      ['agent_commands', { tenant_id: ids.tenantB, gateway_id: ids.gatewayB, action: 'update_all', status: 'pending' }],
    ]) {
      const { data, error, status } = await ada.from(table).insert(row).select()
      assert.equal(data, null, table)
      assert.equal(error?.code, '42501', `${table}: ${JSON.stringify(error)}`)
      assert.equal(status, 403)
    }
    assert.equal(psql(`SELECT count(*) FROM public.tasks WHERE title = 'Planted task'`), '0')
    assert.equal(psql(`SELECT count(*) FROM public.agent_commands WHERE tenant_id = :'t'`, { t: ids.tenantB }), '0')
  })

  test('a row of one\'s own that points at the other tenant\'s row is refused', async () => {
    // Own tenant, but the other's agent as assignee: the composite foreign key refuses it.
    const { data, error } = await ada.from('tasks').insert({ title: 'Borrowed agent', assignee_agent_id: ids.zed }).select()
    assert.equal(data, null)
    assert.ok(error, 'refused')
    assert.equal(psql(`SELECT count(*) FROM public.tasks WHERE title = 'Borrowed agent'`), '0')
    // A command for the other tenant's gateway under one's own tenant: refused too.
    const cmd = await ada.from('agent_commands').insert({ gateway_id: ids.gatewayB, action: 'update_all', status: 'pending' }).select()
    assert.equal(cmd.data, null)
    assert.ok(cmd.error, 'refused')
  })

  test('embeds reach only the caller\'s rows', async () => {
    const { data, error } = await ada.from('gateways').select('slug, agents(slug, tenant_id)')
    assert.equal(error, null)
    assert.deepEqual(data.map((g) => g.slug).sort(), ['acme-edge', 'acme-main'])
    assert.ok(data.flatMap((g) => g.agents).every((a) => a.tenant_id === ids.tenantA))
    const tasks = await zed.from('tasks').select('id, assignee_agent:agents!tasks_assignee_agent_id_fkey(slug), contacts(name)')
    assert.equal(tasks.error, null)
    assert.deepEqual(tasks.data, [{ id: ids.taskB1, assignee_agent: { slug: 'zed' }, contacts: { name: 'Bolt Customer' } }])
    const counts = await ada.from('tenants').select('id, contacts(count), agents(count)')
    assert.deepEqual(counts.data, [
      {
        id: ids.tenantA,
        contacts: [{ count: Number(psql(`SELECT count(*) FROM public.contacts WHERE tenant_id = :'t'`, { t: ids.tenantA })) }],
        agents: [{ count: Number(psql(`SELECT count(*) FROM public.agents WHERE tenant_id = :'t'`, { t: ids.tenantA })) }],
      },
    ])
  })

  test('RPCs search and walk only the caller\'s rows', async () => {
    const mine = await zed.rpc('search_knowledge_items_text', { query_text: 'zebrafish' })
    assert.equal(mine.error, null)
    assert.deepEqual(
      mine.data.map((r) => r.id),
      [ids.knowledgeZebra],
    )
    const theirs = await ada.rpc('search_knowledge_items_text', { query_text: 'zebrafish' })
    assert.deepEqual(theirs.data, [])
    const chunks = await ada.rpc('search_knowledge_chunks_text', { query_text: 'zebrafish' })
    assert.deepEqual(chunks.data, [])
    // Asking for the other tenant explicitly does not help.
    const pinned = await ada.rpc('search_knowledge_items_text', { query_text: 'zebrafish', filter_tenant_id: ids.tenantB })
    assert.deepEqual(pinned.data, [])
    const vector = `[${Array(384).fill(0.05).join(',')}]`
    const near = await ada.rpc('search_knowledge_items', { query_embedding: vector, match_count: 50, filter_tenant_id: ids.tenantB })
    assert.equal(near.error, null)
    assert.deepEqual(near.data, [])
    const own = await ada.rpc('get_agent_daily_usage', { p_agent_id: ids.ada, p_start_date: '2026-01-01', p_end_date: '2026-02-28' })
    assert.equal(own.error, null)
    assert.equal(own.data.length, 59, 'a row per day of January and February')
    assert.equal(own.data.filter((d) => d.calls > 0).length, 5, 'the five days Ada used a model')
    const usage = await ada.rpc('get_agent_daily_usage', { p_agent_id: ids.zed, p_start_date: '2026-01-01', p_end_date: '2026-02-28' })
    assert.equal(usage.data, null, 'the other tenant\'s agent does not exist for this caller')
    assert.equal(usage.error.code, 'AW003')
    const chain = await ada.rpc('agent_reports_chain', { p_agent_id: ids.yan })
    assert.equal(chain.data, null, 'the other tenant\'s agent does not exist for this caller')
    assert.equal(chain.error.code, 'AW003')
  })
})

describe('counts tell a user nothing of another tenant', () => {
  test('count planned and estimated of the other tenant\'s rows are 0 (the exact count of what it may see)', async () => {
    const ada = await signedIn('ada')
    const theirs = Number(psql(`SELECT count(*) FROM public.tasks WHERE tenant_id = :'t'`, { t: ids.tenantB }))
    assert.ok(theirs > 0, 'tenant B has tasks')
    psql('ANALYZE public.tasks')
    for (const count of ['planned', 'estimated']) {
      const other = await ada.from('tasks').select('id', { count, head: true }).eq('tenant_id', ids.tenantB)
      assert.equal(other.error, null)
      assert.equal(other.count, 0, `count=${count} of tenant B's tasks`)
      const own = await ada.from('tasks').select('id', { count, head: true })
      const mine = Number(psql(`SELECT count(*) FROM public.tasks WHERE tenant_id = :'t'`, { t: ids.tenantA }))
      assert.equal(own.count, mine, `count=${count} of its own tasks`)
    }
  })
})

describe('a user of no tenant', () => {
  let nob
  before(async () => {
    nob = await signedIn('nob')
  })

  for (const table of [...tables, 'tenants']) {
    test(`sees no ${table}`, async () => {
      const { data, error } = await nob.from(table).select('*')
      assert.equal(error, null)
      assert.deepEqual(data, [])
    })
  }

  test('cannot insert into a tenant', async () => {
    const { data, error } = await nob.from('contacts').insert({ tenant_id: ids.tenantA, name: 'Walk-in' }).select()
    assert.equal(data, null)
    assert.equal(error.code, '42501')
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE name = 'Walk-in'`), '0')
  })
})
