// Realtime through the unmodified client: supabase.channel(...).on('postgres_changes', ...)
// against the real gateway and its change capture. A UI's view of a command: subscribed to
// agent_commands filtered by agent_id, it sees the INSERT and then each UPDATE as the command
// moves pending -> running -> done, with new/old typed as the client types them; filters, '*',
// DELETE with the key only, two tenants that never see each other's rows, a refreshed token.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { ids, psql, signedIn } from './lib/world.mjs'
import { quiet, streaming, subscribe, until } from './lib/realtime.mjs'

let clients = []
// The commands these tests make, removed after them: the suite's files share the seeded
// database and others count what each tenant has.
const made = []

before(async () => {
  await streaming()
})

after(async () => {
  for (const c of clients) await c.removeAllChannels()
  if (made.length) psql(`DELETE FROM public.agent_commands WHERE id IN (${made.map((id) => `'${id}'`).join(',')})`)
})

async function client(who) {
  const c = await signedIn(who)
  clients.push(c)
  return c
}

// The runner's steps as it writes them (leased under a new lease, running, done), made here
// with psql: the suite runs no runner.
function runnerStep(id, sql) {
  psql(`UPDATE public.agent_commands SET ${sql} WHERE id = '${id}'`)
}

test('a command is seen going pending -> running -> done through a filtered subscription', async () => {
  const ada = await client('ada')
  const zed = await client('zed')
  const mine = await subscribe(ada, 'cmd-ada', [
    { event: '*', schema: 'public', table: 'agent_commands', filter: `agent_id=eq.${ids.ada}` },
  ])
  const other = await subscribe(ada, 'cmd-bob', [
    { event: '*', schema: 'public', table: 'agent_commands', filter: `agent_id=eq.${ids.bob}` },
  ])
  const tenantB = await subscribe(zed, 'cmd-zed', [{ event: '*', schema: 'public', table: 'agent_commands' }])

  const { data, error } = await ada
    .from('agent_commands')
    .insert({ agent_id: ids.ada, gateway_id: ids.gatewayA, action: 'execute_prompt', payload: { prompt: 'hi', n: 2 } })
    .select('id')
    .single()
  assert.equal(error, null, JSON.stringify(error))
  const id = data.id
  made.push(id)
  await until(() => mine.events.length >= 1, 'the INSERT')
  const ins = mine.events[0]
  assert.equal(ins.eventType, 'INSERT')
  assert.equal(ins.schema, 'public')
  assert.equal(ins.table, 'agent_commands')
  assert.equal(ins.new.id, id)
  assert.equal(ins.new.status, 'pending')
  assert.deepEqual(ins.new.payload, { prompt: 'hi', n: 2 }) // jsonb: an object
  assert.equal(ins.new.attempts, 0) // int4: a number
  assert.equal(ins.new.exit_code, null)
  assert.match(ins.commit_timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/)
  assert.deepEqual(ins.old, {})
  assert.equal(ins.errors, null)

  runnerStep(
    id,
    `status = 'leased', lease_token = gen_random_uuid(), leased_by = 'test-runner', leased_at = now(),
     lease_expires_at = now() + interval '5 minutes', attempts = attempts + 1`,
  )
  runnerStep(id, `status = 'running', started_at = now()`)
  runnerStep(id, `status = 'done', exit_code = 0, stdout = 'ok', finished_at = now()`)
  await until(() => mine.events.length >= 4, 'leased, running and done')
  const [, leased, running, done] = mine.events
  assert.deepEqual(
    mine.events.map((e) => `${e.eventType} ${e.new.status}`),
    ['INSERT pending', 'UPDATE leased', 'UPDATE running', 'UPDATE done'],
  )
  assert.equal(leased.new.leased_by, 'test-runner')
  assert.equal(running.eventType, 'UPDATE')
  assert.equal(running.new.status, 'running')
  assert.equal(running.new.attempts, 1)
  assert.equal(typeof running.new.started_at, 'string')
  assert.deepEqual(running.old, { id })
  assert.equal(done.new.status, 'done')
  assert.equal(done.new.exit_code, 0)
  assert.equal(done.new.stdout, 'ok')

  await quiet(300)
  assert.equal(other.events.length, 0, "a filter on another agent sees none of Ada's command")
  assert.equal(tenantB.events.length, 0, "tenant B sees nothing of tenant A's command")
})

test('event filters: INSERT only, UPDATE only, and DELETE with the primary key only', async () => {
  const ada = await client('ada')
  const inserts = await subscribe(ada, 'ins', [{ event: 'INSERT', schema: 'public', table: 'agent_commands' }])
  const updates = await subscribe(ada, 'upd', [{ event: 'UPDATE', schema: 'public', table: 'agent_commands' }])
  const deletes = await subscribe(ada, 'del', [{ event: 'DELETE', schema: 'public', table: 'agent_commands' }])
  const id = psql(
    `INSERT INTO public.agent_commands (tenant_id, agent_id, gateway_id, action)
     VALUES ('${ids.tenantA}', '${ids.bob}', '${ids.gatewayA}', 'restart_session') RETURNING id`,
  )
  runnerStep(id, `status = 'cancelled'`)
  psql(`DELETE FROM public.agent_commands WHERE id = '${id}'`)
  await until(() => deletes.events.length >= 1, 'the DELETE')
  await quiet(200)
  assert.deepEqual(inserts.events.map((e) => e.eventType), ['INSERT'])
  assert.deepEqual(updates.events.map((e) => e.eventType), ['UPDATE'])
  const del = deletes.events[0]
  assert.equal(del.eventType, 'DELETE')
  assert.deepEqual(del.old, { id })
  assert.deepEqual(del.new, {})
})

test('two tenants on one table: each sees only its own rows', async () => {
  const ada = await client('ada')
  const zed = await client('zed')
  const a = await subscribe(ada, 'both-a', [{ event: 'INSERT', schema: 'public', table: 'agent_commands' }])
  const b = await subscribe(zed, 'both-b', [{ event: 'INSERT', schema: 'public', table: 'agent_commands' }])
  made.push(
    ...psql(`INSERT INTO public.agent_commands (tenant_id, agent_id, gateway_id, action) VALUES
          ('${ids.tenantA}', '${ids.ada}', '${ids.gatewayA}', 'restart_session'),
          ('${ids.tenantB}', '${ids.zed}', '${ids.gatewayB}', 'restart_session') RETURNING id`).split('\n'),
  )
  await until(() => a.events.length >= 1 && b.events.length >= 1, 'both inserts')
  await quiet(300)
  assert.deepEqual(a.events.map((e) => e.new.tenant_id), [ids.tenantA])
  assert.deepEqual(b.events.map((e) => e.new.tenant_id), [ids.tenantB])
})

test('a refreshed access token keeps the subscription', async () => {
  const ada = await client('ada')
  const sub = await subscribe(ada, 'refresh', [
    { event: 'INSERT', schema: 'public', table: 'agent_commands', filter: `agent_id=eq.${ids.cy}` },
  ])
  const { data, error } = await ada.auth.refreshSession()
  assert.equal(error, null)
  await ada.realtime.setAuth(data.session.access_token)
  await quiet(200)
  made.push(
    psql(`INSERT INTO public.agent_commands (tenant_id, agent_id, gateway_id, action)
        VALUES ('${ids.tenantA}', '${ids.cy}', '${ids.gatewayA}', 'restart_session') RETURNING id`),
  )
  await until(() => sub.events.length >= 1, 'the INSERT after the refresh')
  assert.equal(sub.events[0].new.agent_id, ids.cy)
})
