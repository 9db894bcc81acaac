// Seeds the suite's scratch database (run.sh runs it once, before the daemons start): the rows of
// seed.sql, with the ids of world.mjs as psql variables, then the users through `awpctl user add`,
// the way an operator makes them.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { ids, users, password, psql, env } from './world.mjs'

const snake = (name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
const vars = Object.fromEntries(Object.entries(ids).map(([k, v]) => [snake(k), v]))
psql(readFileSync(new URL('./seed.sql', import.meta.url), 'utf8'), vars)

const awpctl = process.env.AWPCTL
if (!awpctl) throw new Error('AWPCTL is not set: run the suite through tests/data-api/run.sh')
for (const { email, tenant } of Object.values(users)) {
  const args = ['--json', '--database-url', env.adminDsn, 'user', 'add', '--email', email]
  args.push(...(tenant ? ['--tenant-id', tenant] : ['--no-tenant']))
  const r = spawnSync(awpctl, args, {
    encoding: 'utf8',
    env: { ...process.env, AWP_USER_PASSWORD: password },
  })
  if (r.status !== 0) throw new Error(`awpctl user add --email ${email}: ${r.stderr}`)
}
console.log(`seeded ${Object.keys(users).length} users, tenants ${ids.tenantA} and ${ids.tenantB}`)
