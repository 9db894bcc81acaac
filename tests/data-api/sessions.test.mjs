// One session model for both ways in (issue 37; docs/security.md, "Sessions"): a session of the
// spec's POST /api/auth/login is a session like auth-js's own, so what auth-js does to the user's
// sessions — signOut({ scope: 'global' }), updateUser({ password }) — ends it too: its /rest/v1
// reads are refused and its realtime channel is closed, through the unmodified client.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { createClient } from '@supabase/supabase-js'
import { anonClient, config, http, jwtClaims, password, users } from './lib/world.mjs'

const clients = []
after(async () => {
  for (const c of clients) await c.removeAllChannels()
})

// POST /api/auth/login as a browser does it: the session's token is the cookie's.
async function apiLogin(who) {
  const r = await http('/api/auth/login', {
    method: 'POST',
    body: { email: users[who].email, password },
  })
  assert.equal(r.status, 200, r.text)
  const cookie = r.headers.getSetCookie().find((c) => c.startsWith('awp-auth-token='))
  assert.ok(cookie, 'a session cookie')
  return cookie.slice('awp-auth-token='.length, cookie.indexOf(';'))
}

// A client that acts with a token it was handed (a server component given the /api session).
async function clientWithToken(token) {
  const { url, anonKey } = await config()
  const c = createClient(url, anonKey, { accessToken: async () => token })
  clients.push(c)
  return c
}

// A channel on agents; its statuses as the client reports them.
function watch(client, name) {
  const statuses = []
  const channel = client
    .channel(name)
    .on('postgres_changes', { event: '*', schema: 'public', table: 'agents' }, () => {})
  const subscribed = new Promise((resolve, reject) => {
    channel.subscribe((status, err) => {
      statuses.push(status)
      if (status === 'SUBSCRIBED') resolve()
      else if (statuses.length === 1) reject(new Error(`${status}: ${err?.message}`))
    })
  })
  return { statuses, subscribed }
}

async function until(pred, what, ms = 10000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await pred()) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const ended = (statuses) => statuses.some((s) => s === 'CHANNEL_ERROR' || s === 'CLOSED')

test("an /api session ends with the user's global sign-out through auth-js: reads refused, channel closed", async () => {
  const token = await apiLogin('eve')
  assert.ok(jwtClaims(token).session_id, 'an /api token names its session')
  const api = await clientWithToken(token)
  const before = await api.from('agents').select('id').limit(1)
  assert.equal(before.error, null)
  const channel = watch(api, 'eve-agents')
  await channel.subscribed

  const supabase = await anonClient()
  const { error } = await supabase.auth.signInWithPassword({ email: users.eve.email, password })
  assert.equal(error, null)
  const out = await supabase.auth.signOut({ scope: 'global' })
  assert.equal(out.error, null)

  const after = await api.from('agents').select('id').limit(1)
  assert.equal(after.status, 401)
  assert.equal(after.data, null)
  await until(() => ended(channel.statuses), 'the channel closed')
  // /auth/v1 knows it is gone too (finding 1 of issue 37: it used to answer 200).
  const user = await http('/auth/v1/user', { token, apikey: (await config()).anonKey })
  assert.equal(user.status, 403, user.text)
  const me = await http('/api/auth/session', { token })
  assert.equal(me.status, 401, me.text)
})

test("updateUser({ password }) ends the user's other sessions, the /api one included, and keeps its own", async () => {
  const token = await apiLogin('fay')
  const api = await clientWithToken(token)
  const channel = watch(api, 'fay-agents')
  await channel.subscribed

  const supabase = await anonClient()
  const { error } = await supabase.auth.signInWithPassword({ email: users.fay.email, password })
  assert.equal(error, null)
  const changed = await supabase.auth.updateUser({ password: `${password}-changed` })
  assert.equal(changed.error, null, changed.error?.message)

  const after = await api.from('agents').select('id').limit(1)
  assert.equal(after.status, 401)
  await until(() => ended(channel.statuses), 'the channel closed')
  // The session that changed it goes on.
  const mine = await supabase.from('agents').select('id').limit(1)
  assert.equal(mine.error, null)
  const { data: me, error: meError } = await supabase.auth.getUser()
  assert.equal(meError, null)
  assert.equal(me.user.email, users.fay.email)
  // The old password is gone, the new one signs in.
  const old = await (await anonClient()).auth.signInWithPassword({ email: users.fay.email, password })
  assert.equal(old.error?.code, 'invalid_credentials')
  const fresh = await (await anonClient()).auth.signInWithPassword({
    email: users.fay.email,
    password: `${password}-changed`,
  })
  assert.equal(fresh.error, null)
})
