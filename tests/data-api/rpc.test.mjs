// RPCs through POST (and GET) /rest/v1/rpc/<fn>: the knowledge searches with a real embedding
// from the embedder (POST /api/embed), the two text searches, routine_next_occurrence and
// agent_reports_chain, with select and filters over a set result. Each equals psql's answer to
// the same call under the same claims.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { accessToken, claimsOf, env, ids, knowledgeIndexed, psql, psqlAs, psqlScalarAs, signedIn } from './lib/world.mjs'

// A query vector the way a UI gets one: POST /api/embed with the user's session.
async function embed(supabase, input) {
  const res = await fetch(`${env.base}/api/embed`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${await accessToken(supabase)}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ input }),
  })
  assert.equal(res.status, 200, `POST /api/embed: ${res.status}`)
  const { embedding } = await res.json()
  assert.equal(embedding.length, 384)
  return embedding
}

describe('RPCs', () => {
  let ada
  let claims
  let question
  before(async () => {
    await knowledgeIndexed()
    ada = await signedIn('ada')
    claims = await claimsOf(ada)
    question = await embed(ada, 'a refund back to the original card')
  })

  test('search_knowledge_items with a real embedding: the nearest item first, as psql ranks it', async () => {
    const { data, error } = await ada.rpc('search_knowledge_items', { query_embedding: question, match_count: 3 })
    assert.equal(error, null)
    const expected = psqlAs(claims, `SELECT * FROM public.search_knowledge_items(:'q'::public.vector, 3)`, {
      q: JSON.stringify(question),
    })
    assert.deepStrictEqual(data, expected)
    assert.equal(data[0].id, ids.knowledgeRefunds)
    assert.ok(data.every((r, i) => i === 0 || r.similarity <= data[i - 1].similarity), 'most similar first')
    assert.ok(!data.some((r) => r.id === ids.knowledgeZebra), 'nothing of the other tenant')
  })

  test('search_knowledge_items with its filters (filter_tags, filter_kind)', async () => {
    const { data, error } = await ada.rpc('search_knowledge_items', {
      query_embedding: question,
      match_count: 5,
      filter_tags: ['support'],
      filter_kind: 'skill',
    })
    assert.equal(error, null)
    assert.deepEqual(
      data.map((r) => r.title),
      ['Triage checklist'],
    )
  })

  test('search_knowledge_chunks with a real embedding', async () => {
    const { data, error } = await ada.rpc('search_knowledge_chunks', { query_embedding: question, match_count: 5 })
    assert.equal(error, null)
    const expected = psqlAs(claims, `SELECT * FROM public.search_knowledge_chunks(:'q'::public.vector, 5)`, {
      q: JSON.stringify(question),
    })
    assert.deepStrictEqual(data, expected)
    assert.equal(data[0].knowledge_item_id, ids.knowledgeRefunds)
    assert.match(data[0].content, /original card/)
  })

  test('the text searches: search_knowledge_items_text and search_knowledge_chunks_text', async () => {
    const items = await ada.rpc('search_knowledge_items_text', { query_text: 'refund', match_count: 10 })
    assert.equal(items.error, null)
    assert.deepStrictEqual(items.data, psqlAs(claims, `SELECT * FROM public.search_knowledge_items_text('refund', 10)`))
    assert.deepEqual(
      items.data.map((r) => r.id).sort(),
      [ids.knowledgeRefunds, psql(`SELECT id FROM public.knowledge_items WHERE title = 'Triage checklist'`)].sort(),
    )
    const chunks = await ada.rpc('search_knowledge_chunks_text', { query_text: 'systemd' })
    assert.equal(chunks.error, null)
    assert.deepStrictEqual(chunks.data, psqlAs(claims, `SELECT * FROM public.search_knowledge_chunks_text('systemd')`))
    assert.deepEqual(
      [...new Set(chunks.data.map((c) => c.knowledge_item_id))],
      [ids.knowledgeDeploy],
    )
  })

  test('routine_next_occurrence: a scalar, across a daylight-saving change', async () => {
    const args = {
      p_cadence_type: 'daily',
      p_time_of_day: '09:30',
      p_timezone: 'Europe/Berlin',
      p_from: '2026-03-28T12:00:00Z',
    }
    const { data, error } = await ada.rpc('routine_next_occurrence', args)
    assert.equal(error, null)
    assert.equal(
      data,
      psqlScalarAs(claims, `public.routine_next_occurrence(p_cadence_type => 'daily', p_time_of_day => '09:30',
        p_timezone => 'Europe/Berlin', p_from => '2026-03-28T12:00:00Z')`),
    )
    // 09:30 in Berlin on the 29th, the first day of summer time: 07:30 UTC.
    assert.equal(Date.parse(data), Date.parse('2026-03-29T07:30:00Z'))

    // A stable function may be called with GET (query arguments), as { get: true } does.
    const viaGet = await ada.rpc('routine_next_occurrence', args, { get: true })
    assert.equal(viaGet.error, null)
    assert.equal(viaGet.data, data)

    const weekly = await ada.rpc('routine_next_occurrence', {
      p_cadence_type: 'weekly',
      p_days_of_week: [1, 3],
      p_time_of_day: '16:30',
      p_timezone: 'America/New_York',
      p_from: '2026-03-07T00:00:00Z',
    })
    assert.equal(weekly.error, null)
    assert.equal(Date.parse(weekly.data), Date.parse('2026-03-09T20:30:00Z'))
  })

  test('agent_reports_chain: rows, with select and filters over them, and a head count', async () => {
    const { data, error } = await ada.rpc('agent_reports_chain', { p_agent_id: ids.cy, p_max_depth: 5 })
    assert.equal(error, null)
    assert.deepStrictEqual(
      data,
      psqlAs(claims, `SELECT * FROM public.agent_reports_chain(:'id', 5)`, { id: ids.cy }),
    )
    assert.deepEqual(
      data.map((r) => [r.depth, r.slug]),
      [
        [0, 'cy'],
        [1, 'bob'],
        [2, 'ada'],
      ],
    )
    const managers = await ada
      .rpc('agent_reports_chain', { p_agent_id: ids.cy, p_max_depth: 5 })
      .select('slug, name')
      .gte('depth', 1)
      .order('depth', { ascending: false })
    assert.equal(managers.error, null)
    assert.deepEqual(managers.data, [
      { slug: 'ada', name: 'Ada' },
      { slug: 'bob', name: 'Bob' },
    ])
    const counted = await ada.rpc('agent_reports_chain', { p_agent_id: ids.cy, p_max_depth: 1 }, { head: true, count: 'exact' })
    assert.equal(counted.error, null)
    assert.equal(counted.count, 2)
    assert.equal(counted.data, null)
  })

  test('an RPC error keeps its SQLSTATE: agent_reports_chain with a bad depth', async () => {
    const { data, error, status } = await ada.rpc('agent_reports_chain', { p_agent_id: ids.cy, p_max_depth: 1000 })
    assert.equal(data, null)
    assert.equal(error.code, 'AW004')
    assert.equal(status, 400)
    assert.match(error.message, /p_max_depth must be between 0 and 100/)
  })
})
