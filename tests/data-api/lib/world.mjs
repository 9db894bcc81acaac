// The data API suite's world: the seeded tenants, users and rows (lib/seed.mjs makes them), the
// gateway under test (from run.sh's environment), clients of the real @supabase/supabase-js, and
// psql under a request's claims, the yardstick a /rest/v1 answer is compared with.
import { spawnSync } from 'node:child_process'
import { createHmac } from 'node:crypto'
import assert from 'node:assert/strict'
import { createClient } from '@supabase/supabase-js'

function required(name) {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set: run the suite through tests/data-api/run.sh`)
  return v
}

export const env = {
  get base() { return required('AWP_DATA_API_URL') },
  get adminDsn() { return required('AWP_DATA_API_ADMIN_DSN') },
  get readme() { return required('AWP_DATA_API_README') },
  get jwtSecret() { return required('AWP_DATA_API_JWT_SECRET') },
  get serviceRoleKey() { return required('AWP_DATA_API_SERVICE_ROLE_KEY') },
}

// Fixed ids, so a test names what it expects and a failure message says which row.
export const ids = {
  tenantA: 'a0000000-0000-4000-8000-00000000000a',
  tenantB: 'b0000000-0000-4000-8000-00000000000b',
  gatewayA: 'a0000000-0000-4000-8000-0000000000a1',
  gatewayA2: 'a0000000-0000-4000-8000-0000000000a2',
  gatewayB: 'b0000000-0000-4000-8000-0000000000b1',
  // Tenant A's agents: Ada leads, Bob reports to Ada, Cy to Bob; Dee is on the second gateway.
  ada: 'a0000000-0000-4000-8000-000000000101',
  bob: 'a0000000-0000-4000-8000-000000000102',
  cy: 'a0000000-0000-4000-8000-000000000103',
  dee: 'a0000000-0000-4000-8000-000000000104',
  zed: 'b0000000-0000-4000-8000-000000000101',
  yan: 'b0000000-0000-4000-8000-000000000102',
  contactA1: 'a0000000-0000-4000-8000-000000000201',
  contactA2: 'a0000000-0000-4000-8000-000000000202',
  contactA3: 'a0000000-0000-4000-8000-000000000203',
  contactB1: 'b0000000-0000-4000-8000-000000000201',
  // Tenant A's tasks: a1-a3 open for Ada (todo, in_progress, blocked), a4 done and a5 cancelled
  // for Ada, a6 Bob's (with a contact), a7 unassigned, a8 Cy's.
  taskA1: 'a0000000-0000-4000-8000-000000000301',
  taskA2: 'a0000000-0000-4000-8000-000000000302',
  taskA3: 'a0000000-0000-4000-8000-000000000303',
  taskA4: 'a0000000-0000-4000-8000-000000000304',
  taskA5: 'a0000000-0000-4000-8000-000000000305',
  taskA6: 'a0000000-0000-4000-8000-000000000306',
  taskA7: 'a0000000-0000-4000-8000-000000000307',
  taskA8: 'a0000000-0000-4000-8000-000000000308',
  taskB1: 'b0000000-0000-4000-8000-000000000301',
  routineA1: 'a0000000-0000-4000-8000-000000000401',
  routineB1: 'b0000000-0000-4000-8000-000000000401',
  knowledgeDeploy: 'a0000000-0000-4000-8000-000000000501',
  knowledgeRefunds: 'a0000000-0000-4000-8000-000000000502',
  knowledgeZebra: 'b0000000-0000-4000-8000-000000000501',
}

// Every user signs in with this password (awpctl user add; at least 8 characters).
export const password = 'data-api-suite-password-1'
// Who is seeded, and for what: tests that sign a user out or fail its password have their own,
// so no test disturbs another's session or trips the sign-in limits for another.
export const users = {
  ada: { email: 'ada@acme.test', tenant: ids.tenantA },
  bea: { email: 'bea@acme.test', tenant: ids.tenantA }, // signs out (every session of hers ends)
  cal: { email: 'cal@acme.test', tenant: ids.tenantA }, // a wrong password
  dot: { email: 'dot@acme.test', tenant: ids.tenantA }, // the README's snippet and curl
  eve: { email: 'eve@acme.test', tenant: ids.tenantA }, // sessions: signed out globally
  fay: { email: 'fay@acme.test', tenant: ids.tenantA }, // sessions: changes her password
  zed: { email: 'zed@bolt.test', tenant: ids.tenantB },
  nob: { email: 'nobody@example.test', tenant: null }, // a user of no tenant
}

// The gateway's own description of itself: what a UI is configured from.
let configCache
export async function config() {
  if (!configCache) {
    const res = await fetch(`${env.base}/api/config`)
    assert.equal(res.status, 200, 'GET /api/config')
    const body = await res.json()
    assert.ok(body.workspace, 'GET /api/config has a workspace')
    configCache = body.workspace
  }
  return configCache
}

// A client as a UI makes it: createClient(url, anonKey) from GET /api/config. Sessions are kept
// in memory and never refreshed behind a test's back.
export async function anonClient(options = {}) {
  const { url, anonKey } = await config()
  return createClient(url, anonKey, {
    ...options,
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false, ...options.auth },
  })
}

// A client with the service-role key, as the product UI's server code makes it
// (createClient(url, serviceRoleKey)): a service_role token signed with the gateway's JWT_SECRET,
// which the gateway takes as it takes its SERVICE_ROLE_KEY.
export async function serviceClient() {
  const secret = process.env.AWP_DATA_API_JWT_SECRET
  if (!secret) throw new Error('AWP_DATA_API_JWT_SECRET is not set: run the suite through tests/data-api/run.sh')
  const part = (o) => Buffer.from(JSON.stringify(o)).toString('base64url')
  const now = Math.floor(Date.now() / 1000)
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ role: 'service_role', iss: 'awp', iat: now, exp: now + 3600 })}`
  const key = `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
  const { url } = await config()
  return createClient(url, key, { auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false } })
}

// A client signed in as one of `users`.
export async function signedIn(who) {
  const supabase = await anonClient()
  const { data, error } = await supabase.auth.signInWithPassword({ email: users[who].email, password })
  assert.equal(error, null, `sign-in of ${users[who].email}: ${error?.message}`)
  assert.ok(data.session?.access_token)
  return supabase
}

// The verified claims a request of this client runs under (its access token's payload).
export async function claimsOf(supabase) {
  const { data } = await supabase.auth.getSession()
  return jwtClaims(data.session.access_token)
}

export function jwtClaims(token) {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'))
}

export async function accessToken(supabase) {
  const { data } = await supabase.auth.getSession()
  return data.session.access_token
}

// A raw HTTP request to the gateway, for what the client cannot express (top-level and=(),
// headers it hides) or must not send (no key at all).
export async function http(path, { method = 'GET', token, apikey, headers = {}, body } = {}) {
  const h = { ...headers }
  if (apikey) h.apikey = apikey
  if (token) h.Authorization = `Bearer ${token}`
  if (body !== undefined && !h['Content-Type']) h['Content-Type'] = 'application/json'
  const res = await fetch(`${env.base}${path}`, {
    method,
    headers: h,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.text()
  let json
  try {
    json = text ? JSON.parse(text) : null
  } catch {
    json = undefined
  }
  return { status: res.status, headers: res.headers, text, json }
}

// psql as the cluster's superuser on the scratch database. Values go in as psql variables
// (:'name' in the SQL), never spliced into the text. Returns stdout, trimmed.
export function psql(sql, vars = {}) {
  const args = ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1']
  for (const [k, v] of Object.entries(vars)) args.push('-v', `${k}=${v}`)
  args.push(env.adminDsn)
  const r = spawnSync('psql', args, {
    input: sql,
    encoding: 'utf8',
    env: { ...process.env, PGOPTIONS: '-c client_min_messages=warning' },
  })
  if (r.status !== 0) throw new Error(`psql failed (${r.status}): ${r.stderr}\n${sql}`)
  return r.stdout.trim()
}

// The rows of `select` (any SELECT) as JSON, the way PostgREST renders them (json_agg), run
// in one transaction under `claims` exactly as the gateway runs a request: SET LOCAL ROLE to the
// claims' role and request.jwt.claims set. Rolled back: a write here leaves nothing behind.
export function psqlAs(claims, select, vars = {}) {
  const role = claims?.role ?? 'anon'
  assert.ok(['anon', 'authenticated', 'service_role'].includes(role), `role ${role}`)
  const out = psql(
    `BEGIN;
\\o /dev/null
SET LOCAL ROLE ${role};
SELECT set_config('request.jwt.claims', :'awp_claims', true);
\\o
SELECT coalesce(json_agg(q), '[]'::json) FROM (${select}) q;
ROLLBACK;`,
    { ...vars, awp_claims: JSON.stringify(claims ?? { role: 'anon' }) },
  )
  return JSON.parse(out)
}

// A JSON value (a scalar function's result) under `claims`.
export function psqlScalarAs(claims, expression, vars = {}) {
  const out = psql(
    `BEGIN;
\\o /dev/null
SET LOCAL ROLE ${claims.role};
SELECT set_config('request.jwt.claims', :'awp_claims', true);
\\o
SELECT to_json(${expression});
ROLLBACK;`,
    { ...vars, awp_claims: JSON.stringify(claims) },
  )
  return JSON.parse(out)
}

// Rows in a stable order for comparing answers whose order the query does not fix.
export function byId(rows) {
  return [...rows].sort((a, b) => String(a.id).localeCompare(String(b.id)))
}

// The client's answer must be a success, with exactly what psql gives under the same claims.
export async function sameAsPsql(query, claims, select, { ordered = false, vars = {} } = {}) {
  const { data, error, status } = await query
  assert.equal(error, null, `error from /rest/v1: ${JSON.stringify(error)}`)
  assert.ok(status === 200 || status === 206, `status ${status}`)
  const expected = psqlAs(claims, select, vars)
  if (ordered) assert.deepStrictEqual(data, expected)
  else assert.deepStrictEqual(byId(data), byId(expected))
  return data
}

// Waits until `check` returns true (polling), or fails naming `what`.
export async function eventually(what, check, { timeoutMs = 60000, everyMs = 250 } = {}) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

// The embedder indexes the seeded knowledge (every tenant's) when it starts; searches and chunk
// reads wait for it.
export async function knowledgeIndexed() {
  await eventually('the embedder indexed the seeded knowledge items', () =>
    psql(`SELECT count(*) FROM public.knowledge_items
           WHERE embedding_status <> 'indexed' OR chunk_status <> 'indexed'`) === '0')
}
