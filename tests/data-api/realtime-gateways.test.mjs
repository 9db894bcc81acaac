// Several api-gateway processes on one database, as an operator scales the HTTP face behind one
// address (issue 40): each gateway reads a replication slot of its own (REALTIME_SLOT + its
// instance), so a subscriber on either sees every change it may; killing one (-9) disturbs no
// subscriber of the other; the killed one, started again on its port, resumes its slot and its
// clients resubscribe by themselves. Through the unmodified client, signed in on the gateway it
// subscribes on (the sessions are the database's: any gateway takes them).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { createClient } from '@supabase/supabase-js'
import { config, ids, password, psql, users } from './lib/world.mjs'

const need = (k) => {
  const v = process.env[k]
  if (!v) throw new Error(`${k} is not set: run the suite through tests/data-api/run.sh`)
  return v
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })

const gateways = new Map() // name -> {port, child}
function start(name, port) {
  const scratch = need('AWP_DATA_API_SCRATCH')
  const log = openSync(join(scratch, `gateway-${name}.log`), 'a')
  const child = spawn(join(need('AWP_BIN_DIR'), 'awp-api-gateway'), [], {
    env: {
      PATH: '/usr/bin:/bin',
      HOME: scratch,
      JWT_SECRET: need('AWP_DATA_API_JWT_SECRET'),
      SERVICE_ROLE_KEY: need('AWP_DATA_API_SERVICE_ROLE_KEY'),
      AWP_API_DATABASE_URL: need('AWP_DATA_API_API_DSN'),
      REALTIME_DATABASE_URL: need('AWP_DATA_API_REALTIME_DSN'),
      REALTIME_SLOT: need('AWP_DATA_API_SLOT'),
      API_BIND: '127.0.0.1',
      API_PORT: String(port),
      API_THREADS: '2',
      API_DB_POOL: '4',
      AWP_CONFIG_DIR: join(scratch, `config-${name}`),
      API_TEMPLATES_DIR: join(need('AWP_REPO'), 'deploy/templates'),
      API_CONNECTORS_DIR: join(need('AWP_REPO'), 'deploy/connectors'),
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'ignore', log],
  })
  closeSync(log)
  gateways.set(name, { port, child })
}
const logOf = (name) => {
  try {
    return readFileSync(join(need('AWP_DATA_API_SCRATCH'), `gateway-${name}.log`), 'utf8').split('\n').slice(-20).join('\n')
  } catch {
    return '(none)'
  }
}
async function until(what, pred, ms = 30000) {
  const end = Date.now() + ms
  for (;;) {
    if (await pred()) return
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms\n${[...gateways.keys()].map((n) => `${n}:\n${logOf(n)}`).join('\n')}`)
    await sleep(100)
  }
}
async function health(port) {
  try {
    return await (await fetch(`http://127.0.0.1:${port}/api/health`)).json()
  } catch {
    return null
  }
}
const streaming = (port) => async () => (await health(port))?.realtime?.capture?.state === 'streaming'

after(() => {
  for (const { child } of gateways.values()) child.kill('SIGKILL')
})

// A UI on one gateway: signed in there, subscribed to its tenant's tasks; counts SUBSCRIBED.
async function ui(port, who) {
  const { anonKey } = await config()
  const c = createClient(`http://127.0.0.1:${port}`, anonKey, {
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
  })
  const { error } = await c.auth.signInWithPassword({ email: users[who].email, password })
  assert.equal(error, null)
  const state = { seen: [], subscribed: 0, client: c }
  c.channel(`tasks-${port}`)
    .on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'tasks' }, (p) => state.seen.push(p.new.title))
    .subscribe((status) => {
      if (status === 'SUBSCRIBED') state.subscribed++
    })
  return state
}

test('two gateways: a subscriber on each sees every change; one killed -9, the other keeps delivering; back, it resumes', { timeout: 240000 }, async () => {
  const [p1, p2] = [await freePort(), await freePort()]
  start('one', p1)
  start('two', p2)
  await until('both gateways stream changes', async () => (await streaming(p1)()) && (await streaming(p2)()))
  // Each its own slot, of the suite's prefix.
  const slots = psql(`SELECT count(*) FROM pg_replication_slots WHERE active AND left(slot_name, length('${need('AWP_DATA_API_SLOT')}') + 1) = '${need('AWP_DATA_API_SLOT')}_'`)
  assert.ok(Number(slots) >= 3, `one active slot per gateway (the suite's and these two): ${slots}`)

  const a1 = await ui(p1, 'ada')
  const a2 = await ui(p2, 'dot')
  const b2 = await ui(p2, 'zed')
  await until('subscribed', () => a1.subscribed === 1 && a2.subscribed === 1 && b2.subscribed === 1)
  const made = []
  const insert = (tenant, title) => made.push(psql(`INSERT INTO public.tasks (tenant_id, title, status) VALUES ('${tenant}', '${title}', 'todo') RETURNING id`))
  try {
    insert(ids.tenantA, 'gw-1')
    insert(ids.tenantB, 'gw-b-1')
    await until('both gateways deliver', () => a1.seen.includes('gw-1') && a2.seen.includes('gw-1') && b2.seen.includes('gw-b-1'))

    // Kill the first: the second's subscribers notice nothing.
    gateways.get('one').child.kill('SIGKILL')
    await sleep(300)
    for (let i = 2; i <= 4; i++) {
      insert(ids.tenantA, `gw-${i}`)
      insert(ids.tenantB, `gw-b-${i}`)
    }
    await until('the second keeps delivering', () => a2.seen.includes('gw-4') && b2.seen.includes('gw-b-4'))
    assert.deepEqual(a2.seen, ['gw-1', 'gw-2', 'gw-3', 'gw-4'])
    assert.deepEqual(b2.seen, ['gw-b-1', 'gw-b-2', 'gw-b-3', 'gw-b-4'])
    assert.equal(a2.subscribed, 1, 'never resubscribed: its socket was not disturbed')
    assert.deepEqual(a1.seen, ['gw-1'])

    // Back on its port: it resumes its slot, its client rejoins by itself and is served again.
    start('one', p1)
    await until('the first streams again', streaming(p1), 60000)
    await until('its client resubscribed', () => a1.subscribed >= 2, 60000)
    insert(ids.tenantA, 'gw-5')
    await until('both deliver again', () => a1.seen.includes('gw-5') && a2.seen.includes('gw-5'))
    await sleep(300)
    // Nothing of tenant B's on A's sockets, nothing twice after the return.
    assert.equal(a1.seen.filter((t) => t === 'gw-5').length, 1)
    assert.ok(a1.seen.every((t) => !t.startsWith('gw-b')))
    assert.ok(a2.seen.every((t) => !t.startsWith('gw-b')))
  } finally {
    for (const s of [a1, a2, b2]) await s.client.removeAllChannels()
    psql(`DELETE FROM public.tasks WHERE id IN (${made.map((id) => `'${id}'`).join(',')})`)
  }
})
