// Every horizontal filter operator PostgREST documents, on awp's columns (text, enums, numbers,
// timestamps, arrays, jsonb, tsvector; the range operators on the task_windows view seed.sql
// makes, since awp's tables have no range column), through the client's own methods. Each picks a
// proper subset of the caller's rows (so a filter that is ignored, or that drops everything,
// fails) and equals psql's WHERE under the same claims.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { claimsOf, config, http, accessToken, ids, psqlAs, sameAsPsql, signedIn } from './lib/world.mjs'

const tasks = (...keys) => keys.map((k) => ids[k]).sort()

// [operator, table, the client's filter, psql's WHERE, the ids it must pick (when fixed)]
const cases = [
  ['eq', 'tasks', (q) => q.eq('priority', 'high'), `priority = 'high'`, tasks('taskA1', 'taskA4')],
  ['neq', 'tasks', (q) => q.neq('status', 'todo'), `status <> 'todo'`],
  ['gt', 'tasks', (q) => q.gt('sort_order', 5), `sort_order > 5`, tasks('taskA6', 'taskA7', 'taskA8')],
  ['gte on a timestamp', 'tasks', (q) => q.gte('due_at', '2026-06-01T12:00:00Z'),
    `due_at >= '2026-06-01T12:00:00Z'`, tasks('taskA1', 'taskA2')],
  ['lt', 'tasks', (q) => q.lt('sort_order', 3), `sort_order < 3`, tasks('taskA1', 'taskA2')],
  ['lte', 'agent_usage', (q) => q.lte('input_tokens', 800), `input_tokens <= 800`],
  ['like', 'agents', (q) => q.like('name', 'A%'), `name LIKE 'A%'`],
  ['like with * for %', 'tasks', (q) => q.like('title', '*the*'), `title LIKE '%the%'`],
  ['ilike', 'tasks', (q) => q.ilike('title', '%REFUND%'), `title ILIKE '%REFUND%'`, tasks('taskA6')],
  ['match (regex)', 'agents', (q) => q.regexMatch('slug', '^[ab]'), `slug ~ '^[ab]'`],
  ['imatch (regex, any case)', 'agents', (q) => q.regexIMatch('name', '^c'), `name ~* '^c'`, [ids.cy]],
  ['is null', 'tasks', (q) => q.is('assignee_agent_id', null), `assignee_agent_id IS NULL`, tasks('taskA7')],
  ['is false', 'knowledge_items', (q) => q.is('pinned', false).neq('kind', 'skill'), `pinned IS FALSE AND kind <> 'skill'`],
  ['isdistinct (nulls count as distinct)', 'tasks', (q) => q.isDistinct('assignee_agent_id', ids.ada),
    `assignee_agent_id IS DISTINCT FROM '${ids.ada}'`, tasks('taskA6', 'taskA7', 'taskA8')],
  ['in', 'tasks', (q) => q.in('status', ['todo', 'blocked']), `status IN ('todo', 'blocked')`,
    tasks('taskA1', 'taskA3', 'taskA6', 'taskA7')],
  ['cs on text[]', 'tasks', (q) => q.contains('tags', ['support']), `tags @> '{support}'`, tasks('taskA6', 'taskA8')],
  ['cs on jsonb', 'agents', (q) => q.contains('meta', { team: 'support' }), `meta @> '{"team":"support"}'`, [ids.bob, ids.cy].sort()],
  ['cd', 'tasks', (q) => q.containedBy('tags', ['docs', 'ops', 'bug']), `tags <@ '{docs,ops,bug}'`,
    tasks('taskA1', 'taskA2', 'taskA5', 'taskA7')],
  ['ov on text[]', 'tasks', (q) => q.overlaps('tags', ['bug', 'vendor']), `tags && '{bug,vendor}'`, tasks('taskA2', 'taskA3')],
  ['ov on a range', 'task_windows', (q) => q.overlaps('sort_span', '[7,8)'), `sort_span && '[7,8)'`,
    tasks('taskA5', 'taskA6', 'taskA7')],
  ['sl (rangeLt)', 'task_windows', (q) => q.rangeLt('sort_span', '[6,7)'), `sort_span << '[6,7)'`,
    tasks('taskA1', 'taskA2', 'taskA3')],
  ['sr (rangeGt)', 'task_windows', (q) => q.rangeGt('sort_span', '[1,6)'), `sort_span >> '[1,6)'`,
    tasks('taskA6', 'taskA7', 'taskA8')],
  ['nxl (rangeGte)', 'task_windows', (q) => q.rangeGte('sort_span', '[5,6)'), `sort_span &> '[5,6)'`,
    tasks('taskA5', 'taskA6', 'taskA7', 'taskA8')],
  ['nxr (rangeLte)', 'task_windows', (q) => q.rangeLte('sort_span', '[1,6)'), `sort_span &< '[1,6)'`,
    tasks('taskA1', 'taskA2', 'taskA3')],
  ['adj (rangeAdjacent)', 'task_windows', (q) => q.rangeAdjacent('sort_span', '[9,12)'), `sort_span -|- '[9,12)'`,
    tasks('taskA6')],
  ['sl on a timestamp range', 'task_windows',
    (q) => q.rangeLt('due_window', '[2026-05-25T00:00:00Z,2026-12-31T00:00:00Z)'),
    `due_window << '[2026-05-25T00:00:00Z,2026-12-31T00:00:00Z)'`, tasks('taskA4', 'taskA6', 'taskA8')],
  ['fts (to_tsquery, english)', 'knowledge_items', (q) => q.textSearch('search_vector', 'refund & card', { config: 'english' }),
    `search_vector @@ to_tsquery('english', 'refund & card')`, [ids.knowledgeRefunds]],
  ['fts with the default configuration', 'knowledge_items', (q) => q.textSearch('search_vector', 'systemd'),
    `search_vector @@ to_tsquery('systemd')`, [ids.knowledgeDeploy]],
  ['plfts (plainto_tsquery)', 'knowledge_items',
    (q) => q.textSearch('search_vector', 'refund policy', { type: 'plain', config: 'english' }),
    `search_vector @@ plainto_tsquery('english', 'refund policy')`, [ids.knowledgeRefunds]],
  ['phfts (phraseto_tsquery)', 'knowledge_items',
    (q) => q.textSearch('search_vector', 'original card', { type: 'phrase', config: 'english' }),
    `search_vector @@ phraseto_tsquery('english', 'original card')`, [ids.knowledgeRefunds]],
  ['wfts (websearch_to_tsquery)', 'knowledge_items',
    (q) => q.textSearch('search_vector', 'refund -card', { type: 'websearch', config: 'english' }),
    `search_vector @@ websearch_to_tsquery('english', 'refund -card')`],
  ['not.in', 'tasks', (q) => q.not('status', 'in', '(done,cancelled)'), `status NOT IN ('done', 'cancelled')`],
  ['not.is', 'tasks', (q) => q.not('assignee_agent_id', 'is', null), `assignee_agent_id IS NOT NULL`],
  ['not.like', 'agents', (q) => q.not('name', 'like', 'A*'), `name NOT LIKE 'A%'`],
  ['or', 'tasks', (q) => q.or('priority.eq.urgent,status.eq.blocked'), `priority = 'urgent' OR status = 'blocked'`,
    tasks('taskA2', 'taskA3')],
  ['or with a nested and', 'tasks', (q) => q.or('status.eq.blocked,and(priority.eq.high,status.eq.todo)'),
    `status = 'blocked' OR (priority = 'high' AND status = 'todo')`, tasks('taskA1', 'taskA3')],
  // Inside or() the negation follows the column (PostgREST's logic tree: field.not.op.value).
  ['or with not and in', 'tasks', (q) => q.or('status.not.in.(todo,in_progress,blocked),tags.cs.{bug}'),
    `status NOT IN ('todo', 'in_progress', 'blocked') OR tags @> '{bug}'`, tasks('taskA2', 'taskA4', 'taskA5')],
  ['like(any)', 'tasks', (q) => q.likeAnyOf('title', ['%bug%', '%vendor%']), `title LIKE ANY ('{%bug%,%vendor%}')`,
    tasks('taskA2', 'taskA3')],
  ['ilike(all)', 'tasks', (q) => q.ilikeAllOf('title', ['%THE%', '%guide%']), `title ILIKE ALL ('{%THE%,%guide%}')`,
    tasks('taskA1')],
  ['eq(any)', 'tasks', (q) => q.filter('priority', 'eq(any)', '{urgent,low}'), `priority = ANY ('{urgent,low}')`],
  ['match (several eq)', 'tasks', (q) => q.match({ status: 'todo', priority: 'medium' }),
    `status = 'todo' AND priority = 'medium'`, tasks('taskA6')],
  ['filter() with an operator string', 'tasks', (q) => q.filter('status', 'in', '(in_progress,blocked)'),
    `status IN ('in_progress', 'blocked')`, tasks('taskA2', 'taskA3', 'taskA8')],
  ['eq on a JSON path ->>', 'agents', (q) => q.eq('meta->>team', 'core'), `meta->>'team' = 'core'`],
  ['gt on a JSON path ->', 'agents', (q) => q.gt('meta->level', 1), `meta->'level' > '1'`, [ids.ada, ids.bob].sort()],
]

describe('filter operators', () => {
  let ada
  let claims
  const totals = {}
  before(async () => {
    ada = await signedIn('ada')
    claims = await claimsOf(ada)
    for (const table of new Set(cases.map((c) => c[1]))) {
      totals[table] = psqlAs(claims, `SELECT id FROM public.${table}`).length
    }
  })

  for (const [name, table, filter, where, want] of cases) {
    test(`${name} (${table})`, async () => {
      const data = await sameAsPsql(
        filter(ada.from(table).select('id')),
        claims,
        `SELECT id FROM public.${table} WHERE ${where}`,
      )
      assert.ok(data.length > 0, 'the filter picks some rows')
      assert.ok(data.length < totals[table], `the filter leaves some of the ${totals[table]} rows out`)
      if (want) assert.deepEqual(data.map((r) => r.id).sort(), want)
    })
  }

  test('and=(...) at the top level, with an or inside (the client has no method for it)', async () => {
    const { anonKey } = await config()
    const r = await http(
      '/rest/v1/tasks?select=id&and=(priority.eq.low,or(status.eq.todo,status.eq.in_progress))',
      { token: await accessToken(ada), apikey: anonKey },
    )
    assert.equal(r.status, 200, r.text)
    assert.deepEqual(
      r.json.map((t) => t.id).sort(),
      tasks('taskA7', 'taskA8'),
    )
  })

  test('filters on an embedded resource: or() inside agents of gateways', async () => {
    const data = await sameAsPsql(
      ada
        .from('gateways')
        .select('id, agents(slug)')
        .or('slug.eq.ada,slug.eq.dee', { referencedTable: 'agents' })
        .order('slug', { referencedTable: 'agents' }),
      claims,
      `SELECT g.id, (SELECT coalesce(json_agg(e), '[]'::json) FROM (SELECT a.slug FROM public.agents a
          WHERE a.tenant_id = g.tenant_id AND a.gateway_id = g.id AND (a.slug = 'ada' OR a.slug = 'dee')
          ORDER BY a.slug) e) AS agents FROM public.gateways g`,
    )
    assert.deepEqual(
      Object.fromEntries(data.map((g) => [g.id, g.agents.map((a) => a.slug)])),
      { [ids.gatewayA]: ['ada'], [ids.gatewayA2]: ['dee'] },
    )
  })
})
