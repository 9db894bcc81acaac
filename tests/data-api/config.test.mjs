// GET /api/config advertises the data API of the gateway's own database: the client library is
// configured from it alone (issue 32 item 3).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { config, env, jwtClaims, http } from './lib/world.mjs'

test('GET /api/config gives the url and anon key a UI creates the client with', async () => {
  const { url, anonKey } = await config()
  assert.equal(url, env.base, 'url is the gateway itself: /rest/v1 and /auth/v1 are served there')
  const claims = jwtClaims(anonKey)
  assert.equal(claims.role, 'anon')
  // The same key, every time: a UI built yesterday keeps working.
  const again = await http('/api/config')
  assert.equal(again.json.workspace.anonKey, anonKey)
})
