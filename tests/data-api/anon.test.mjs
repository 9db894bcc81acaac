// What a caller without a session gets: the anon key alone, no key at all, and tokens that are
// not what they claim (a foreign signature, expired, an unknown role). awp's tables grant nothing
// to anon, so each is refused (PostgREST: 42501 without a JWT role is 401) and no row leaves.
import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { anonClient, config, http, ids, psql } from './lib/world.mjs'

const tables = ['agents', 'tasks', 'contacts', 'tenants', 'gateways', 'agent_commands', 'knowledge_items', 'app_users']

function sign(claims, secret) {
  const part = (o) => Buffer.from(JSON.stringify(o)).toString('base64url')
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(claims)}`
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
}

function jwtSecret() {
  const s = process.env.AWP_DATA_API_JWT_SECRET
  if (!s) throw new Error('AWP_DATA_API_JWT_SECRET is not set: run the suite through tests/data-api/run.sh')
  return s
}

describe('the anon key alone', () => {
  for (const table of tables) {
    test(`reads no ${table} (401 42501)`, async () => {
      const supabase = await anonClient()
      const { data, error, status } = await supabase.from(table).select('*')
      assert.equal(status, 401)
      assert.equal(data, null)
      assert.equal(error.code, '42501')
    })
  }

  test('cannot enqueue a command, write a row or call an RPC', async () => {
    const supabase = await anonClient()
    const cmd = await supabase.from('agent_commands').insert({ gateway_id: ids.gatewayA, action: 'update_all', status: 'pending' })
    assert.equal(cmd.status, 401)
    assert.equal(cmd.error.code, '42501')
    const contact = await supabase.from('contacts').insert({ tenant_id: ids.tenantA, name: 'Anonymous' })
    assert.equal(contact.status, 401)
    const update = await supabase.from('tasks').update({ title: 'Defaced' }).eq('id', ids.taskA1)
    assert.equal(update.status, 401)
    const del = await supabase.from('contacts').delete().eq('id', ids.contactA1)
    assert.equal(del.status, 401)
    const rpc = await supabase.rpc('search_knowledge_items_text', { query_text: 'refund' })
    assert.equal(rpc.status, 401)
    assert.equal(rpc.data, null)
    assert.equal(psql(`SELECT count(*) FROM public.agent_commands WHERE action = 'update_all'`), '0')
    assert.equal(psql(`SELECT title FROM public.tasks WHERE id = :'id'`, { id: ids.taskA1 }), 'Write the deploy guide')
    assert.equal(psql(`SELECT count(*) FROM public.contacts WHERE id = :'id'`, { id: ids.contactA1 }), '1')
  })
})

describe('no key at all', () => {
  test('is served as anon: refused, no rows', async () => {
    for (const table of ['agents', 'tasks', 'tenants']) {
      const r = await http(`/rest/v1/${table}?select=*`)
      assert.equal(r.status, 401, `${table}: ${r.text}`)
      assert.equal(r.json.code, '42501')
    }
    const rpc = await http('/rest/v1/rpc/agent_reports_chain', { method: 'POST', body: { p_agent_id: ids.ada } })
    assert.equal(rpc.status, 401)
  })
})

describe('tokens that are not what they claim', () => {
  const now = () => Math.floor(Date.now() / 1000)
  const userClaims = () => ({
    sub: '0e000000-0000-4000-8000-000000000001',
    role: 'authenticated',
    aud: 'authenticated',
    exp: now() + 3600,
    app_metadata: { tenant_id: ids.tenantA },
  })

  async function refused(token, code) {
    const { anonKey } = await config()
    const r = await http('/rest/v1/agents?select=id', { token, apikey: anonKey })
    assert.equal(r.status, 401, r.text)
    if (code) assert.equal(r.json.code, code)
    assert.ok(!Array.isArray(r.json), 'no rows')
    assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer/)
  }

  test('a token signed with another secret: 401 PGRST301', async () => {
    await refused(sign(userClaims(), 'not-the-instance-secret-0123456789abcdef'), 'PGRST301')
  })

  test('a token that is not a JWT: 401 PGRST301', async () => {
    await refused('not.a.jwt.at-all', 'PGRST301')
  })

  test('an expired token of the right secret: 401 PGRST303', async () => {
    await refused(sign({ ...userClaims(), exp: now() - 600 }, jwtSecret()), 'PGRST303')
  })

  test('a token naming a role beyond anon, authenticated and service_role is refused', async () => {
    const { anonKey } = await config()
    const r = await http('/rest/v1/agents?select=id', {
      token: sign({ ...userClaims(), role: 'postgres' }, jwtSecret()),
      apikey: anonKey,
    })
    assert.ok(r.status === 401 || r.status === 403, `${r.status} ${r.text}`)
    assert.ok(!Array.isArray(r.json), 'no rows')
  })

  test('a well-signed user token of the right secret works (the refusals above are about the token)', async () => {
    const { anonKey } = await config()
    const r = await http('/rest/v1/agents?select=id', { token: sign(userClaims(), jwtSecret()), apikey: anonKey })
    assert.equal(r.status, 200, r.text)
    assert.ok(r.json.length >= 5)
  })
})
