// Issue 33's "done when", as a UI lives it: configured from GET /api/config only, signed in through
// /auth/v1, it subscribes with the unmodified client's realtime channel to agent_commands filtered
// by its agent, inserts a command through /rest/v1, and watches it go pending -> running -> done
// as the real awp-command-runner runs it with the real agent runtime (openclaw from npm,
// AWP_OPENCLAW) — no polling. The runner serves a gateway of a tenant of this file's own (C), so
// the other files' commands on tenant A's gateways stay pending as they expect. Skipped, saying
// so, without AWP_OPENCLAW (scripts/test.sh and .ci/run set it).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { anonClient, eventually, password, psql } from './lib/world.mjs'

const runtime = process.env.AWP_OPENCLAW
const bin = process.env.AWP_BIN_DIR
const daemonDsn = process.env.AWP_DATA_API_DAEMON_DSN
const repo = process.env.AWP_REPO
const skip = !runtime ? 'AWP_OPENCLAW is not set (scripts/install-runtime.sh): the real runtime is needed' : false

const c = {
  tenant: 'c0000000-0000-4000-8000-00000000000c',
  gateway: 'c0000000-0000-4000-8000-0000000000c1',
  agent: 'c0000000-0000-4000-8000-000000000101',
  other: 'c0000000-0000-4000-8000-000000000102',
  email: 'cleo@cargo.test',
}

let runner
let runnerLog
let dir
const runnerTail = () => {
  try {
    return readFileSync(join(dir, 'runner.log'), 'utf8').split('\n').slice(-30).join('\n')
  } catch {
    return '(no runner log)'
  }
}
before(() => {
  if (skip) return
  for (const [k, v] of Object.entries({ AWP_BIN_DIR: bin, AWP_DATA_API_DAEMON_DSN: daemonDsn, AWP_REPO: repo })) {
    if (!v) throw new Error(`${k} is not set: run the suite through tests/data-api/run.sh`)
  }
  psql(`
    INSERT INTO public.tenants (id, name, slug) VALUES (:'t', 'Cargo', 'cargo');
    INSERT INTO public.gateways (id, tenant_id, slug, label, status) VALUES (:'g', :'t', 'cargo-main', 'Cargo main', 'ready');
    INSERT INTO public.agents (id, tenant_id, gateway_id, name, slug, status) VALUES
      (:'a', :'t', :'g', 'Cleo', 'cleo', 'ready'),
      (:'o', :'t', :'g', 'Otto', 'otto', 'ready');
  `, { t: c.tenant, g: c.gateway, a: c.agent, o: c.other })
  const add = spawnSync(join(bin, 'awpctl'), ['--database-url', process.env.AWP_DATA_API_ADMIN_DSN, 'user', 'add',
    '--email', c.email, '--tenant-id', c.tenant], { encoding: 'utf8', env: { ...process.env, AWP_USER_PASSWORD: password } })
  assert.equal(add.status, 0, `awpctl user add: ${add.stderr}`)

  dir = mkdtempSync(join(tmpdir(), 'awp-rt-runner-'))
  // The runner as run-stack.sh runs one, with an allowlisted environment of its own.
  runner = spawn(join(bin, 'awp-command-runner'), [], {
    env: {
      PATH: process.env.PATH,
      HOME: join(dir, 'home'),
      DATABASE_URL: daemonDsn,
      GATEWAY_ID: 'cargo-main',
      AGENT_RUNTIME: runtime,
      OPENCLAW_STATE_DIR: join(dir, 'openclaw'),
      SECRETS_DIR: join(dir, 'secrets'),
      AWP_STATE_DIR: join(dir, 'runner'),
      AWP_RUNTIME_SCRIPTS: join(repo, 'deploy/runtime'),
      RUNTIME_MODE: 'service_manager',
      NETWORKING_MODE: 'remote',
      COMMAND_TIMEOUT: '120',
      LOG_LEVEL: 'warn',
    },
    // Its log goes to a file (printed when the test fails), never through this process's pipes.
    stdio: ['ignore', 'ignore', runnerLog = openSync(join(dir, 'runner.log'), 'a')],
  })
})

after(() => {
  if (skip) return
  runner?.kill('SIGTERM')
  if (runnerLog !== undefined) closeSync(runnerLog)
  psql(`DELETE FROM public.agent_commands WHERE tenant_id = :'t'`, { t: c.tenant })
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('a command inserted by a UI is seen pending -> running -> done through its realtime subscription', { skip, timeout: 150000 }, async () => {
  const supabase = await anonClient()
  const { error: signInError } = await supabase.auth.signInWithPassword({ email: c.email, password })
  assert.equal(signInError, null)

  const events = []
  const subscribed = new Promise((resolve, reject) => {
    supabase
      .channel('commands-of-cleo')
      .on('postgres_changes', { event: '*', schema: 'public', table: 'agent_commands', filter: `agent_id=eq.${c.agent}` },
        (p) => events.push(p))
      .subscribe((status, err) => {
        if (status === 'SUBSCRIBED') resolve()
        else if (status !== 'CLOSED') reject(new Error(`${status}: ${err?.message}`))
      })
  })
  await subscribed

  // Another agent's command: the filter keeps it out of this channel.
  const noise = await supabase.from('agent_commands')
    .insert({ gateway_id: c.gateway, agent_id: c.other, action: 'list_models', payload: {}, status: 'pending' })
    .select('id').single()
  assert.equal(noise.error, null)
  const { data: command, error } = await supabase.from('agent_commands')
    .insert({ gateway_id: c.gateway, agent_id: c.agent, action: 'list_models', payload: { provider: 'openai' }, status: 'pending' })
    .select().single()
  assert.equal(error, null)

  try {
    await eventually('the command is done, seen through the channel', () =>
      events.some((e) => e.new?.id === command.id && e.new.status === 'done'), { timeoutMs: 120000 })
  } catch (e) {
    const row = psql(`SELECT status || ' ' || coalesce(error, '') FROM public.agent_commands WHERE id = :'id'`, { id: command.id })
    throw new Error(`${e.message}; the row: ${row}; events: ${JSON.stringify(events.map((x) => [x.eventType, x.new?.status]))}\nrunner log:\n${runnerTail()}`)
  }

  const mine = events.filter((e) => e.new?.id === command.id)
  assert.equal(mine[0].eventType, 'INSERT')
  assert.equal(mine[0].new.status, 'pending')
  assert.equal(mine[0].schema, 'public')
  assert.equal(mine[0].table, 'agent_commands')
  assert.ok(!Number.isNaN(Date.parse(mine[0].commit_timestamp)), 'commit_timestamp is a time')
  const statuses = mine.map((e) => e.new.status)
  assert.ok(statuses.includes('running'), `saw it running (saw ${statuses.join(' -> ')})`)
  assert.ok(statuses.indexOf('running') < statuses.indexOf('done'), `running before done (${statuses.join(' -> ')})`)
  for (const e of mine.slice(1)) assert.equal(e.eventType, 'UPDATE')

  // The row as the client types it: jsonb an object, integers numbers, as a select returns it.
  const done = mine.find((e) => e.new.status === 'done').new
  assert.deepEqual(done.payload, { provider: 'openai' })
  assert.equal(done.exit_code, 0)
  assert.equal(typeof done.stdout, 'string')
  const { data: row } = await supabase.from('agent_commands').select('id, status, exit_code, agent_id, payload').eq('id', command.id).single()
  assert.deepEqual({ id: done.id, status: done.status, exit_code: done.exit_code, agent_id: done.agent_id, payload: done.payload }, row)

  assert.ok(!events.some((e) => e.new?.id === noise.data.id), 'the other agent\'s command did not reach this channel')
  await supabase.removeAllChannels()
})
