// Realtime's restart drills through the unmodified @supabase/supabase-js (tests/data-api/drills.sh
// runs this on a private cluster of its own, so restarting Postgres touches no other test): a UI's
// subscription lives through a Postgres restart and through the delivering gateway killed -9 and
// started again — the client reconnects and resubscribes by itself, nothing committed after the
// subscription is back is missed, and nothing delivered before comes twice.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createClient } from '@supabase/supabase-js'

const need = (k) => {
  const v = process.env[k]
  if (!v) throw new Error(`${k} is not set: run tests/data-api/drills.sh`)
  return v
}
const bin = need('DRILL_BIN')
const repo = need('DRILL_REPO')
const logDir = need('DRILL_LOG_DIR')
const adminDsn = need('DRILL_ADMIN_DSN')
const base = `http://127.0.0.1:${need('DRILL_API_PORT')}`
const tenant = need('DRILL_TENANT')

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
async function until(what, pred, ms = 30000) {
  const end = Date.now() + ms
  for (;;) {
    if (await pred()) return
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms\ngateway log:\n${tail()}`)
    await sleep(100)
  }
}
const tail = () => {
  try {
    return readFileSync(join(logDir, 'gateway.log'), 'utf8').split('\n').slice(-25).join('\n')
  } catch {
    return '(none)'
  }
}

function psql(sql) {
  const r = spawnSync('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-At', adminDsn, '-c', sql], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`psql: ${r.stderr}`)
  return r.stdout.trim()
}
const insertTask = (title) =>
  psql(`INSERT INTO public.tasks (tenant_id, title, status) VALUES ('${tenant}', '${title}', 'todo')`)

// The gateway as run-stack.sh runs it, realtime on; its log appended to one file across starts.
let gateway
function startGateway() {
  const log = openSync(join(logDir, 'gateway.log'), 'a')
  gateway = spawn(join(bin, 'awp-api-gateway'), [], {
    env: {
      PATH: process.env.PATH,
      HOME: logDir,
      JWT_SECRET: need('DRILL_JWT_SECRET'),
      AWP_API_DATABASE_URL: need('DRILL_API_DSN'),
      REALTIME_DATABASE_URL: need('DRILL_RT_DSN'),
      API_BIND: '127.0.0.1',
      API_PORT: need('DRILL_API_PORT'),
      AWP_CONFIG_DIR: join(logDir, 'config'),
      API_TEMPLATES_DIR: join(repo, 'deploy/templates'),
      API_CONNECTORS_DIR: join(repo, 'deploy/connectors'),
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'ignore', log],
  })
  closeSync(log)
  writeFileSync(join(logDir, 'gateway.pid'), `${gateway.pid}\n`)
}
async function health() {
  try {
    const res = await fetch(`${base}/api/health`)
    return await res.json()
  } catch {
    return null
  }
}
const streaming = async () => (await health())?.realtime?.capture?.state === 'streaming'

after(() => {
  gateway?.kill('SIGKILL')
})

test('a subscription lives through a Postgres restart and the gateway killed -9: nothing after it is back is missed, nothing comes twice', { timeout: 240000 }, async () => {
  startGateway()
  await until('the gateway streams changes', streaming)

  const { workspace } = await (await fetch(`${base}/api/config`)).json()
  const supabase = createClient(workspace.url, workspace.anonKey, {
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
  })
  const signIn = await supabase.auth.signInWithPassword({ email: need('DRILL_EMAIL'), password: need('DRILL_PASSWORD') })
  assert.equal(signIn.error, null)

  const seen = new Map() // title -> times received
  let subscribed = 0
  supabase
    .channel('tasks-board')
    .on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'tasks' }, (p) => {
      seen.set(p.new.title, (seen.get(p.new.title) ?? 0) + 1)
    })
    .subscribe((status) => {
      if (status === 'SUBSCRIBED') subscribed++
    })
  await until('subscribed', () => subscribed === 1)

  insertTask('before')
  await until('the first row arrives', () => seen.get('before') === 1)

  // Postgres restarted under the live subscription: the gateway stays up, its capture reconnects
  // to the slot, the socket is never closed.
  const cluster = { ...process.env, AWP_STATE_DIR: need('DRILL_STATE_DIR'), AWP_PG_PORT: need('DRILL_PG_PORT') }
  const stop = spawnSync(join(repo, 'scripts/pg-cluster.sh'), ['stop'], { env: cluster, encoding: 'utf8' })
  assert.equal(stop.status, 0, stop.stderr)
  const start = spawnSync(join(repo, 'scripts/pg-cluster.sh'), ['start'], { env: cluster, encoding: 'utf8' })
  assert.equal(start.status, 0, start.stderr)
  await until('the capture streams again after the restart', streaming, 60000)
  for (let i = 0; i < 5; i++) insertTask(`after-postgres-${i}`)
  await until('every row committed after Postgres is back arrives', () =>
    [0, 1, 2, 3, 4].every((i) => seen.get(`after-postgres-${i}`) === 1))

  // The delivering process killed -9: the client reconnects and rejoins by itself once a new
  // gateway is up; the slot resumes from what was confirmed.
  await sleep(1000) // what was delivered is confirmed to the slot (within 200 ms)
  gateway.kill('SIGKILL')
  await new Promise((r) => gateway.once('exit', r))
  startGateway()
  await until('the gateway streams again after kill -9', streaming)
  await until('the client resubscribed by itself', () => subscribed >= 2, 60000)
  for (let i = 0; i < 5; i++) insertTask(`after-kill-${i}`)
  await until('every row committed after the client is back arrives', () =>
    [0, 1, 2, 3, 4].every((i) => seen.get(`after-kill-${i}`) === 1))

  await sleep(1000)
  const twice = [...seen].filter(([, n]) => n !== 1)
  assert.deepEqual(twice, [], 'no row delivered twice')
  await supabase.removeAllChannels()
})
