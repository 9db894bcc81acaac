// The admin API of /auth/v1 (auth-js's GoTrueAdminApi, `supabase.auth.admin`) with the
// service-role key, as the product's UI calls it when onboarding (its only admin call), then every
// other admin call a server makes; and the boundary: only the service role gets in, whatever else
// a caller holds (the anon key, a user's session of either tenant, a forged or role-swapped
// token). docs/data-api.md, "The admin API".
import { describe, test, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { createClient } from '@supabase/supabase-js'
import { accessToken, anonClient, config, env, http, ids, jwtClaims, psql, signedIn } from './lib/world.mjs'

const defaultTenant = '00000000-0000-0000-0000-000000000000'
const made = new Set() // users a test made, removed after the file

function sign(claims, secret) {
  const part = (o) => Buffer.from(JSON.stringify(o)).toString('base64url')
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(claims)}`
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`
}

// As apps/ui/src/lib/workspaces/create-user.ts:22-24 makes it: the url and the service-role key
// the user pasted, no session kept.
async function serviceClient(key = env.serviceRoleKey) {
  const { url } = await config()
  return createClient(url, key, { auth: { autoRefreshToken: false, persistSession: false } })
}

function freshEmail(tag) {
  return `${tag}-${randomBytes(4).toString('hex')}@onboarding.test`
}

async function signIn(email, password) {
  const supabase = await anonClient()
  const r = await supabase.auth.signInWithPassword({ email, password })
  return { supabase, ...r }
}

const userCount = () => Number(psql('SELECT count(*) FROM public.app_users'))

after(async () => {
  const admin = await serviceClient()
  for (const id of made) await admin.auth.admin.deleteUser(id)
})

describe("the product's onboarding: auth.admin.createUser with the service-role key", () => {
  const password = 'onboarding-password-1'

  test('creates a confirmed user who then signs in with that password (create-user.ts:26-30)', async () => {
    const admin = await serviceClient()
    const email = freshEmail('owner')
    // apps/ui/src/lib/workspaces/create-user.ts:26-30, verbatim.
    const { data, error } = await admin.auth.admin.createUser({
      email,
      password,
      email_confirm: true,
    })
    assert.equal(error, null, error?.message)
    made.add(data.user.id)
    assert.equal(data.user.email, email)
    assert.equal(data.user.aud, 'authenticated')
    assert.ok(data.user.email_confirmed_at, 'confirmed')
    assert.equal(data.user.app_metadata.provider, 'email')
    // A single-tenant install: the tenant the service role's own writes land in.
    assert.equal(data.user.app_metadata.tenant_id, defaultTenant)
    assert.equal(psql(`SELECT tenant_id FROM public.app_users WHERE id = :'id'`, { id: data.user.id }), defaultTenant)

    // The UI then signs the user in with the same password (apps/ui/src/app/login).
    const signed = await signIn(email, password)
    assert.equal(signed.error, null, signed.error?.message)
    assert.equal(signed.data.user.id, data.user.id)
    assert.equal(jwtClaims(signed.data.session.access_token).app_metadata.tenant_id, defaultTenant)

    // What the UI wrote with the service-role key (no tenant named) is the new user's.
    const slug = `onb-${randomBytes(3).toString('hex')}`
    const wrote = await admin.from('agents').insert({ name: 'First agent', slug }).select('id').single()
    assert.equal(wrote.error, null, wrote.error?.message)
    try {
      const seen = await signed.supabase.from('agents').select('slug').eq('slug', slug)
      assert.equal(seen.error, null)
      assert.deepEqual(seen.data, [{ slug }])
      // ...and nothing of tenant A's.
      const other = await signed.supabase.from('agents').select('id').eq('id', ids.ada)
      assert.deepEqual(other.data, [])
    } finally {
      await admin.from('agents').delete().eq('id', wrote.data.id)
    }
  })

  test('the same e-mail again is refused in words the UI recognises (create-user.ts:41)', async () => {
    const admin = await serviceClient()
    const email = freshEmail('twice')
    const first = await admin.auth.admin.createUser({ email, password, email_confirm: true })
    assert.equal(first.error, null)
    made.add(first.data.user.id)
    const before = userCount()
    const again = await admin.auth.admin.createUser({ email: email.toUpperCase(), password, email_confirm: true })
    assert.equal(again.data.user, null)
    assert.equal(again.error.status, 422)
    assert.equal(again.error.code, 'email_exists')
    assert.match(again.error.message, /already|exist|registered/i) // create-user.ts:41
    assert.equal(userCount(), before)
  })

  test('a short password is refused as weak, naming the password (create-user.ts:49)', async () => {
    const admin = await serviceClient()
    const email = freshEmail('weak')
    const { data, error } = await admin.auth.admin.createUser({ email, password: 'short', email_confirm: true })
    assert.equal(data.user, null)
    assert.equal(error.status, 422)
    assert.equal(error.code, 'weak_password')
    assert.deepEqual(error.reasons, ['length'])
    assert.match(error.message, /password/i) // create-user.ts:49
    assert.equal(psql(`SELECT count(*) FROM public.app_users WHERE email = :'e'`, { e: email }), '0')
  })

  test('a malformed e-mail or none is a 400, and nothing is made', async () => {
    const admin = await serviceClient()
    const before = userCount()
    for (const email of ['not-an-email', 'two@@example.test', '']) {
      const { error } = await admin.auth.admin.createUser({ email, password, email_confirm: true })
      assert.equal(error.status, 400, email)
      assert.equal(error.code, 'validation_failed', email)
    }
    const phone = await admin.auth.admin.createUser({ phone: '+15550001111', password })
    assert.equal(phone.error.status, 422)
    assert.equal(phone.error.code, 'phone_provider_disabled')
    assert.equal(userCount(), before)
  })
})

describe('only the service role reaches the admin API', () => {
  const attempt = (client, email) =>
    client.auth.admin.createUser({ email, password: 'attacker-password-1', email_confirm: true })

  test('the anon key: 403 not_admin', async () => {
    const { anonKey } = await config()
    const before = userCount()
    const { data, error } = await attempt(await serviceClient(anonKey), freshEmail('anon'))
    assert.equal(data.user, null)
    assert.equal(error.status, 403)
    assert.equal(error.code, 'not_admin')
    const list = await (await serviceClient(anonKey)).auth.admin.listUsers()
    assert.equal(list.error.status, 403)
    assert.deepEqual(list.data.users, [])
    assert.equal(userCount(), before)
  })

  test("a user's session, of either tenant or of none: 403 not_admin", async () => {
    const before = userCount()
    for (const who of ['ada', 'zed', 'nob']) {
      const token = await accessToken(await signedIn(who))
      const client = await serviceClient(token)
      const made = await attempt(client, freshEmail(`as-${who}`))
      assert.equal(made.error?.status, 403, who)
      assert.equal(made.error.code, 'not_admin', who)
      const del = await client.auth.admin.deleteUser(jwtClaims(token).sub)
      assert.equal(del.error.status, 403, who)
      const get = await client.auth.admin.getUserById(jwtClaims(token).sub)
      assert.equal(get.error.status, 403, who)
    }
    assert.equal(userCount(), before)
  })

  test('a forged, role-swapped, alg-none or expired token: 403 bad_jwt', async () => {
    const token = await accessToken(await signedIn('ada'))
    const [h, p, s] = token.split('.')
    const claims = jwtClaims(token)
    const swapped = `${h}.${Buffer.from(JSON.stringify({ ...claims, role: 'service_role' })).toString('base64url')}.${s}`
    const forged = sign({ role: 'service_role', iss: 'awp', exp: Math.floor(Date.now() / 1000) + 600 }, 'not-the-secret')
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from('{"role":"service_role"}').toString('base64url')}.`
    const expired = sign({ role: 'service_role', exp: Math.floor(Date.now() / 1000) - 3600 }, env.jwtSecret)
    const before = userCount()
    for (const [what, bad] of Object.entries({ swapped, forged, none, expired })) {
      const { error } = await attempt(await serviceClient(bad), freshEmail(what))
      assert.equal(error.status, 403, what)
      assert.equal(error.code, 'bad_jwt', what)
    }
    assert.equal(userCount(), before)
    // A token of the instance's secret whose role is service_role is the service role.
    const real = sign({ role: 'service_role', iss: 'awp', exp: Math.floor(Date.now() / 1000) + 600 }, env.jwtSecret)
    const listed = await (await serviceClient(real)).auth.admin.listUsers({ page: 1, perPage: 1 })
    assert.equal(listed.error, null)
    assert.equal(listed.data.users.length, 1)
  })

  test('no bearer token (the service-role key as apikey alone, or nothing): 401 no_authorization', async () => {
    for (const apikey of [env.serviceRoleKey, undefined]) {
      const r = await http('/auth/v1/admin/users', {
        method: 'POST',
        apikey,
        headers: { 'X-Supabase-Api-Version': '2024-01-01' },
        body: { email: freshEmail('nobearer'), password: 'attacker-password-1' },
      })
      assert.equal(r.status, 401, r.text)
      assert.equal(r.json.code, 'no_authorization')
    }
    // Older clients get the older body: {code: <status>, error_code, msg}.
    const old = await http('/auth/v1/admin/users', { token: (await config()).anonKey })
    assert.equal(old.status, 403)
    assert.deepEqual(Object.keys(old.json).sort(), ['code', 'error_code', 'msg'])
    assert.equal(old.json.error_code, 'not_admin')
  })

  test('the unsupported parts refuse a non-admin first, then say they are off', async () => {
    const { anonKey } = await config()
    const anonLink = await (await serviceClient(anonKey)).auth.admin.generateLink({ type: 'magiclink', email: 'x@y.test' })
    assert.equal(anonLink.error.code, 'not_admin')
    const admin = await serviceClient()
    const link = await admin.auth.admin.generateLink({ type: 'magiclink', email: 'x@y.test' })
    assert.equal(link.error.status, 404)
    assert.equal(link.error.code, 'feature_disabled')
    const invite = await admin.auth.admin.inviteUserByEmail(freshEmail('invite'))
    assert.equal(invite.error.status, 404)
    assert.equal(invite.error.code, 'feature_disabled')
    const clients = await admin.auth.admin.oauth.listClients()
    assert.equal(clients.error.code, 'feature_disabled')
  })
})

describe('the other admin calls (GoTrueAdminApi)', () => {
  const password = 'admin-suite-password-1'

  async function newUser(attributes = {}) {
    const admin = await serviceClient()
    const email = freshEmail('user')
    const { data, error } = await admin.auth.admin.createUser({ email, password, email_confirm: true, ...attributes })
    assert.equal(error, null, error?.message)
    made.add(data.user.id)
    return { admin, email, user: data.user }
  }

  test('listUsers pages as GoTrue: users newest first, total, next and last page', async () => {
    const { admin } = await newUser()
    const total = userCount()
    assert.ok(total >= 3 && total <= 18, `auth-js reads one digit of a page number; total ${total}`)
    const first = await admin.auth.admin.listUsers({ page: 1, perPage: 2 })
    assert.equal(first.error, null)
    assert.equal(first.data.users.length, 2)
    assert.equal(first.data.total, total)
    assert.equal(first.data.nextPage, 2)
    assert.equal(first.data.lastPage, Math.ceil(total / 2))
    assert.equal(first.data.aud, 'authenticated')
    const all = psql('SELECT id FROM public.app_users ORDER BY created_at DESC, id DESC').split('\n')
    assert.deepEqual(first.data.users.map((u) => u.id), all.slice(0, 2))
    const last = await admin.auth.admin.listUsers({ page: Math.ceil(total / 2), perPage: 2 })
    assert.equal(last.data.nextPage, null)
    assert.deepEqual(last.data.users.map((u) => u.id), all.slice(2 * (Math.ceil(total / 2) - 1)))
    const everyone = await admin.auth.admin.listUsers()
    assert.deepEqual(everyone.data.users.map((u) => u.id), all)
    for (const q of ['page=0', 'per_page=abc', 'per_page=100000', 'page=-1']) {
      const r = await http(`/auth/v1/admin/users?${q}`, { token: env.serviceRoleKey })
      assert.equal(r.status, 400, q)
    }
  })

  test('getUserById reads a user; an unknown id is 404 user_not_found', async () => {
    const { admin, user } = await newUser({ user_metadata: { name: 'Ada' } })
    const got = await admin.auth.admin.getUserById(user.id)
    assert.equal(got.error, null)
    assert.equal(got.data.user.id, user.id)
    assert.deepEqual(got.data.user.user_metadata, { name: 'Ada' })
    const none = await admin.auth.admin.getUserById('c0000000-0000-4000-8000-000000000999')
    assert.equal(none.error.status, 404)
    assert.equal(none.error.code, 'user_not_found')
    const bad = await http('/auth/v1/admin/users/not-a-uuid', { token: env.serviceRoleKey })
    assert.equal(bad.status, 404)
  })

  test('updateUserById: metadata merged, a new password signs out every session', async () => {
    const { admin, email, user } = await newUser({ user_metadata: { a: 1, b: 2 } })
    const session = await signIn(email, password)
    assert.equal(session.error, null)
    const token = session.data.session.access_token
    const meta = await admin.auth.admin.updateUserById(user.id, { user_metadata: { b: null, c: 3 } })
    assert.equal(meta.error, null)
    assert.deepEqual(meta.data.user.user_metadata, { a: 1, c: 3 })
    // Metadata alone ends nothing.
    assert.equal((await session.supabase.auth.getUser()).error, null)

    const changed = await admin.auth.admin.updateUserById(user.id, { password: 'a-new-password-2' })
    assert.equal(changed.error, null)
    const stale = await http('/rest/v1/agents?select=id', { token, apikey: (await config()).anonKey })
    assert.equal(stale.status, 401, 'the old session is dead on /rest/v1')
    const me = await http('/auth/v1/user', { token })
    assert.equal(me.status, 403)
    assert.equal((await signIn(email, password)).error.code, 'invalid_credentials')
    assert.equal((await signIn(email, 'a-new-password-2')).error, null)
    const weak = await admin.auth.admin.updateUserById(user.id, { password: 'x' })
    assert.equal(weak.error.code, 'weak_password')
  })

  test('ban_duration refuses sign-in and ends sessions until "none" lifts it', async () => {
    const { admin, email, user } = await newUser()
    const session = await signIn(email, password)
    const token = session.data.session.access_token
    const banned = await admin.auth.admin.updateUserById(user.id, { ban_duration: '24h' })
    assert.equal(banned.error, null)
    const until = Date.parse(banned.data.user.banned_until)
    assert.ok(until > Date.now() + 23 * 3600e3 && until < Date.now() + 25 * 3600e3, banned.data.user.banned_until)
    assert.equal((await signIn(email, password)).error.code, 'user_banned')
    assert.equal((await http('/auth/v1/user', { token })).status, 403)
    const refresh = await session.supabase.auth.refreshSession()
    assert.ok(refresh.error, 'the refresh token is dead too')
    const bad = await admin.auth.admin.updateUserById(user.id, { ban_duration: 'forever' })
    assert.equal(bad.error.status, 400)
    const lifted = await admin.auth.admin.updateUserById(user.id, { ban_duration: 'none' })
    assert.equal(lifted.error, null)
    assert.equal(lifted.data.user.banned_until, undefined)
    assert.equal((await signIn(email, password)).error, null)
  })

  test('app_metadata.tenant_id places a user, moves it (signing it out), or is refused', async () => {
    const { admin, email, user } = await newUser({ app_metadata: { tenant_id: ids.tenantB } })
    assert.equal(user.app_metadata.tenant_id, ids.tenantB)
    const inB = await signIn(email, password)
    const bAgents = await inB.supabase.from('agents').select('id, tenant_id')
    assert.ok(bAgents.data.some((a) => a.id === ids.zed))
    assert.ok(bAgents.data.every((a) => a.tenant_id === ids.tenantB), 'tenant B only')

    const moved = await admin.auth.admin.updateUserById(user.id, { app_metadata: { tenant_id: ids.tenantA } })
    assert.equal(moved.error, null)
    assert.equal(moved.data.user.app_metadata.tenant_id, ids.tenantA)
    const stale = await http('/rest/v1/agents?select=id', {
      token: inB.data.session.access_token,
      apikey: (await config()).anonKey,
    })
    assert.equal(stale.status, 401, "the tenant B session is dead: its token carried B's tenant")
    const inA = await signIn(email, password)
    const aAgents = await inA.supabase.from('agents').select('id, tenant_id')
    assert.ok(aAgents.data.some((a) => a.id === ids.ada))
    assert.ok(aAgents.data.every((a) => a.tenant_id === ids.tenantA), 'tenant A only')

    const noTenant = await admin.auth.admin.updateUserById(user.id, { app_metadata: { tenant_id: null } })
    assert.equal(noTenant.data.user.app_metadata.tenant_id, undefined)
    const nowhere = await admin.auth.admin.updateUserById(user.id, {
      app_metadata: { tenant_id: 'c0000000-0000-4000-8000-00000000000c' },
    })
    assert.equal(nowhere.error.status, 422)
    const other = await admin.auth.admin.updateUserById(user.id, { app_metadata: { plan: 'pro' } })
    assert.equal(other.error.status, 422)
    assert.match(other.error.message, /app_metadata\.plan/)
    const role = await admin.auth.admin.updateUserById(user.id, { role: 'service_role' })
    assert.equal(role.error.status, 422)
    assert.equal(psql(`SELECT tenant_id IS NULL FROM public.app_users WHERE id = :'id'`, { id: user.id }), 't')
  })

  test('deleteUser removes the user and kills its sessions at once', async () => {
    const { admin, email, user } = await newUser()
    const session = await signIn(email, password)
    const token = session.data.session.access_token
    const { anonKey } = await config()
    assert.equal((await http('/rest/v1/agents?select=id', { token, apikey: anonKey })).status, 200)
    const soft = await admin.auth.admin.deleteUser(user.id, true)
    assert.equal(soft.error.status, 422, 'soft deletion is not served')
    const gone = await admin.auth.admin.deleteUser(user.id)
    assert.equal(gone.error, null)
    made.delete(user.id)
    assert.equal((await http('/rest/v1/agents?select=id', { token, apikey: anonKey })).status, 401)
    assert.equal((await http('/auth/v1/user', { token })).status, 403)
    assert.equal((await signIn(email, password)).error.code, 'invalid_credentials')
    assert.equal((await admin.auth.admin.getUserById(user.id)).error.code, 'user_not_found')
    assert.equal((await admin.auth.admin.deleteUser(user.id)).error.status, 404)
    // Its sessions stay in the database, signed out, so a gateway started later refuses them too.
    assert.equal(
      psql(`SELECT count(*) FILTER (WHERE revoked_at IS NULL) || '/' || count(*) FROM public.app_sessions WHERE user_id = :'id'`, { id: user.id }),
      '0/1',
    )
  })

  test('mfa.listFactors answers no factors; a factor cannot be deleted', async () => {
    const { admin, user } = await newUser()
    const f = await admin.auth.admin.mfa.listFactors({ userId: user.id })
    assert.equal(f.error, null)
    assert.deepEqual(f.data.factors, [])
    const d = await admin.auth.admin.mfa.deleteFactor({ userId: user.id, id: 'c0000000-0000-4000-8000-000000000001' })
    assert.equal(d.error.code, 'mfa_factor_not_found')
  })
})
