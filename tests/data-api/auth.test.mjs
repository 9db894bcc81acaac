// Signing in through /auth/v1 with the client's own auth (auth-js): password sign-in, refresh and
// sign-out, as a UI does them, and what the server then accepts from each token.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { createClient } from '@supabase/supabase-js'
import { anonClient, config, http, ids, jwtClaims, password, users } from './lib/world.mjs'

// auth-js reports state changes through onAuthStateChange; a UI redraws on them.
function recordEvents(supabase) {
  const events = []
  supabase.auth.onAuthStateChange((event) => events.push(event))
  return events
}

// A client that presents a fixed access token (as a server component that was handed one).
async function clientWithToken(token) {
  const { url, anonKey } = await config()
  return createClient(url, anonKey, {
    auth: { persistSession: false, autoRefreshToken: false },
    global: { headers: { Authorization: `Bearer ${token}` } },
  })
}

describe('sign-in', () => {
  test('signInWithPassword gives a session whose claims row-level security reads', async () => {
    const supabase = await anonClient()
    const events = recordEvents(supabase)
    const before = Math.floor(Date.now() / 1000)
    const { data, error } = await supabase.auth.signInWithPassword({
      email: users.ada.email,
      password,
    })
    assert.equal(error, null)
    assert.equal(data.user.email, users.ada.email)
    assert.equal(data.session.token_type, 'bearer')
    assert.ok(data.session.refresh_token, 'a refresh token')
    assert.ok(data.session.expires_at > before, 'expires in the future')
    const claims = jwtClaims(data.session.access_token)
    assert.equal(claims.role, 'authenticated')
    assert.equal(claims.sub, data.user.id)
    assert.equal(claims.email, users.ada.email)
    assert.equal(claims.app_metadata.tenant_id, ids.tenantA)
    assert.ok(claims.session_id, 'the token names its session')
    assert.ok(events.includes('SIGNED_IN'), `events: ${events}`)

    // getUser asks the server, which knows the session.
    const { data: me, error: meError } = await supabase.auth.getUser()
    assert.equal(meError, null)
    assert.equal(me.user.id, data.user.id)

    // The session reads its own tenant's rows.
    const { data: agents, error: readError } = await supabase.from('agents').select('slug').order('slug')
    assert.equal(readError, null)
    assert.deepEqual(
      agents.map((a) => a.slug),
      ['abe', 'ada', 'bob', 'cy', 'dee'],
    )
  })

  test('a wrong password and an unknown e-mail are refused alike, with no session', async () => {
    const supabase = await anonClient()
    const wrong = await supabase.auth.signInWithPassword({ email: users.cal.email, password: 'not-her-password' })
    const unknown = await supabase.auth.signInWithPassword({ email: 'nobody-at-all@acme.test', password })
    for (const r of [wrong, unknown]) {
      assert.ok(r.error, 'refused')
      assert.equal(r.error.status, 400)
      assert.equal(r.error.code, 'invalid_credentials')
      assert.equal(r.data.session, null)
      assert.equal(r.data.user, null)
    }
    // Nothing tells the two apart (no account enumeration).
    assert.equal(wrong.error.message, unknown.error.message)
    const { data } = await supabase.auth.getSession()
    assert.equal(data.session, null)
  })
})

describe('refresh', () => {
  test('refreshSession rotates the refresh token, fires TOKEN_REFRESHED, and the new session reads', async () => {
    const supabase = await anonClient()
    const { data: first } = await supabase.auth.signInWithPassword({ email: users.ada.email, password })
    const events = recordEvents(supabase)
    const { data, error } = await supabase.auth.refreshSession()
    assert.equal(error, null)
    assert.notEqual(data.session.refresh_token, first.session.refresh_token, 'rotated on use')
    assert.equal(data.user.id, first.user.id)
    assert.equal(jwtClaims(data.session.access_token).session_id, jwtClaims(first.session.access_token).session_id)
    assert.ok(events.includes('TOKEN_REFRESHED'), `events: ${events}`)

    const { data: agents, error: readError } = await supabase.from('agents').select('id').eq('id', ids.ada)
    assert.equal(readError, null)
    assert.equal(agents.length, 1)
  })

  test('the refresh grant over HTTP answers a session as GoTrue does', async () => {
    const supabase = await anonClient()
    const { data: first } = await supabase.auth.signInWithPassword({ email: users.ada.email, password })
    const { anonKey } = await config()
    const r = await http('/auth/v1/token?grant_type=refresh_token', {
      method: 'POST',
      apikey: anonKey,
      body: { refresh_token: first.session.refresh_token },
    })
    assert.equal(r.status, 200, r.text)
    assert.equal(r.json.token_type, 'bearer')
    assert.ok(r.json.access_token && r.json.refresh_token && r.json.expires_in > 0)
    assert.equal(r.json.user.email, users.ada.email)
  })
})

describe('sign-out', () => {
  let token
  let refreshToken
  let events

  before(async () => {
    const supabase = await anonClient()
    const { data, error } = await supabase.auth.signInWithPassword({ email: users.bea.email, password })
    assert.equal(error, null)
    token = data.session.access_token
    refreshToken = data.session.refresh_token
    // The token works before sign-out, so a refusal after it means something.
    const { error: readError } = await (await clientWithToken(token)).from('agents').select('id').limit(1)
    assert.equal(readError, null)
    events = recordEvents(supabase)
    const { error: outError } = await supabase.auth.signOut()
    assert.equal(outError, null)
    const { data: after } = await supabase.auth.getSession()
    assert.equal(after.session, null, 'the client forgot the session')
  })

  test('signOut fires SIGNED_OUT', () => {
    assert.ok(events.includes('SIGNED_OUT'), `events: ${events}`)
  })

  test('the signed-out access token is refused by /rest/v1 (401, no rows)', async () => {
    const { data, error, status } = await (await clientWithToken(token)).from('agents').select('id')
    assert.equal(status, 401)
    assert.ok(error)
    assert.equal(data, null)
    const raw = await http('/rest/v1/tasks?select=id', { token, apikey: (await config()).anonKey })
    assert.equal(raw.status, 401)
    assert.match(raw.headers.get('www-authenticate') ?? '', /^Bearer/)
  })

  test('the signed-out access token is refused by /auth/v1/user', async () => {
    const supabase = await anonClient()
    const { data, error } = await supabase.auth.getUser(token)
    assert.ok(error, 'refused')
    assert.equal(data.user, null)
  })

  test('the signed-out session cannot be refreshed', async () => {
    const r = await http('/auth/v1/token?grant_type=refresh_token', {
      method: 'POST',
      apikey: (await config()).anonKey,
      body: { refresh_token: refreshToken },
    })
    assert.equal(r.status, 400, r.text)
    assert.equal(r.json.access_token, undefined)
  })

  test('signing in again gives a new session that works', async () => {
    const supabase = await anonClient()
    const { data, error } = await supabase.auth.signInWithPassword({ email: users.bea.email, password })
    assert.equal(error, null)
    assert.notEqual(jwtClaims(data.session.access_token).session_id, jwtClaims(token).session_id)
    const { error: readError } = await supabase.from('agents').select('id').limit(1)
    assert.equal(readError, null)
  })
})

test('sign-up is off unless the operator turns it on, and /auth/v1/settings says so', async () => {
  const r = await http('/auth/v1/settings', { apikey: (await config()).anonKey })
  assert.equal(r.status, 200)
  assert.equal(r.json.external.email, true)
  assert.equal(r.json.disable_signup, true)
  const supabase = await anonClient()
  const { data, error } = await supabase.auth.signUp({ email: 'walk-in@acme.test', password })
  assert.ok(error, 'refused')
  assert.equal(error.code, 'signup_disabled')
  assert.equal(data.session, null)
  const made = await http('/auth/v1/token?grant_type=password', {
    method: 'POST',
    apikey: (await config()).anonKey,
    body: { email: 'walk-in@acme.test', password },
  })
  assert.equal(made.status, 400, 'no user was made')
})
