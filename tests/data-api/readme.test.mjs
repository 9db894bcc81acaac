// The README's "first five minutes" stay true: its node snippet and its curl commands are taken
// from README.md as they are written and run against the gateway under test, as a newcomer would
// run them (their user: dot of tenant A, through AWP_EMAIL and AWP_PASSWORD as the README says).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { env, ids, password, psql, users } from './lib/world.mjs'

const here = dirname(fileURLToPath(import.meta.url))

// The fenced block right after the marker comment `<!-- first-five-minutes:<name> ...-->`.
function block(name) {
  const readme = readFileSync(env.readme, 'utf8')
  const at = readme.indexOf(`<!-- first-five-minutes:${name}`)
  assert.ok(at >= 0, `README.md has the ${name} block`)
  const m = /```[a-z]*\n([\s\S]*?)\n```/.exec(readme.slice(at))
  assert.ok(m, `a fenced block follows the ${name} marker`)
  return m[1]
}

const runEnv = () => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME ?? tmpdir(),
  AWP_URL: env.base,
  AWP_EMAIL: users.dot.email,
  AWP_PASSWORD: password,
})

let dir
before(() => {
  // A folder of its own, where `import '@supabase/supabase-js'` finds the suite's install.
  dir = mkdtempSync(join(tmpdir(), 'awp-readme-'))
  symlinkSync(join(here, 'node_modules'), join(dir, 'node_modules'))
})
after(() => {
  rmSync(dir, { recursive: true, force: true })
  psql(`DELETE FROM public.agent_commands WHERE action = 'list_models' AND tenant_id = :'t'`, { t: ids.tenantA })
})

test('the README\'s node snippet signs in, lists the agents and enqueues a command it reads back', () => {
  writeFileSync(join(dir, 'first.mjs'), block('node'))
  const r = spawnSync(process.execPath, ['first.mjs'], {
    cwd: dir,
    env: runEnv(),
    encoding: 'utf8',
    timeout: 60000,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  assert.equal(r.status, 0, `node first.mjs failed:\n${r.stderr}\n${r.stdout}`)
  assert.match(r.stdout, /agents: \[/)
  for (const name of ['Abe', 'Ada', 'Bob', 'Cy', 'Dee']) assert.ok(r.stdout.includes(`name: '${name}'`), `lists ${name}`)
  assert.ok(r.stdout.indexOf("name: 'Abe'") < r.stdout.indexOf("name: 'Ada'"), 'ordered by name')
  assert.match(r.stdout, /command: \{[\s\S]*action: 'list_models'[\s\S]*status: 'pending'/)
  const id = /command: \{\s*id: '([0-9a-f-]{36})'/.exec(r.stdout)?.[1]
  assert.ok(id, 'the command\'s id is printed')
  assert.equal(psql(`SELECT gateway_id FROM public.agent_commands WHERE id = :'id'`, { id }), ids.gatewayA2,
    'on the first gateway by slug (acme-edge)')
})

test('the README\'s curl commands do the same over plain HTTP', () => {
  // stdin from /dev/null: bash reads /etc/bash.bashrc when its stdin is a socket, as node's pipes are.
  const r = spawnSync('bash', ['-euo', 'pipefail', '-c', block('curl')], {
    env: runEnv(),
    encoding: 'utf8',
    timeout: 60000,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  assert.equal(r.status, 0, `the curl block failed:\n${r.stderr}\n${r.stdout}`)
  // Two JSON arrays, one per echo (each may span lines: json_agg puts a newline between rows).
  const docs = r.stdout.trim().split(/(?<=\])\n(?=\[)/)
  assert.equal(docs.length, 2, `two answers (the agents, the command):\n${r.stdout}\n${r.stderr}`)
  const [agentsLine, commandLine] = docs
  const agents = JSON.parse(agentsLine)
  assert.deepEqual(
    agents.map((a) => a.name),
    ['Abe', 'Ada', 'Bob', 'Cy', 'Dee'],
  )
  const [command] = JSON.parse(commandLine)
  assert.equal(command.action, 'list_models')
  assert.equal(command.status, 'pending')
  assert.equal(command.stdout, null)
})
