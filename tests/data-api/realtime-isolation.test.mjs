// Realtime grouped by what the policies read (issue 40) and closed as an oracle (issue 37), through
// the unmodified client: many sessions of one tenant (each signed in for itself) share one
// visibility check and still see exactly their tenant's rows; a table whose policy reads `sub`
// keeps two users of one tenant apart (this test fails if sessions were grouped by tenant, or by
// anything coarser than the policy reads); a column whose SELECT is revoked is neither filterable
// (the join is refused, as /rest/v1 refuses the filter) nor delivered; and a DELETE of a
// REPLICA IDENTITY FULL row reaches only subscribers whose policies let them see the old row, so
// a filter on another tenant's value never fires.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { accessToken, env, http, ids, jwtClaims, psql, signedIn } from './lib/world.mjs'

// /api/health's figures are an operator's (the service-role key): anyone else gets only its state.
async function operatorHealth() {
  const key = env.serviceRoleKey
  return (await fetch(`${env.base}/api/health`, { headers: { apikey: key, Authorization: `Bearer ${key}` } })).json()
}

async function streaming() {
  for (let i = 0; i < 200; i++) {
    const body = await (await fetch(`${env.base}/api/health`)).json()
    if (body.realtime?.capture?.state === 'streaming') return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('the realtime capture never streamed')
}

// Subscribes; resolves {channel, events} on SUBSCRIBED, rejects with the server's reason.
function subscribe(supabase, name, bindings) {
  const events = []
  let channel = supabase.channel(name)
  for (const b of bindings) channel = channel.on('postgres_changes', b, (p) => events.push(p))
  return new Promise((resolve, reject) => {
    channel.subscribe((status, err) => {
      if (status === 'SUBSCRIBED') resolve({ channel, events })
      else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') {
        reject(new Error(`${status}: ${err?.message}`))
      }
    })
  })
}

async function until(pred, what, ms = 8000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (pred()) return
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`timed out waiting for ${what}`)
}
const quiet = (ms) => new Promise((r) => setTimeout(r, ms))
const clients = []
async function client(who) {
  const c = await signedIn(who)
  clients.push(c)
  return c
}
const subOf = async (c) => jwtClaims(await accessToken(c)).sub

before(async () => {
  // Tables as a hosted project's schema would have them: notes of one user each (auth.uid()),
  // and a tenant's rows with a column its users may not select, of REPLICA IDENTITY FULL.
  psql(`
CREATE TABLE public.rt_notes (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL, tenant_id uuid NOT NULL, body text);
ALTER TABLE public.rt_notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_notes ON public.rt_notes FOR SELECT TO authenticated USING (user_id = auth.uid());
GRANT SELECT ON public.rt_notes TO authenticated;
CREATE TABLE public.rt_vault (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id uuid NOT NULL, name text NOT NULL, secret text);
ALTER TABLE public.rt_vault REPLICA IDENTITY FULL;
ALTER TABLE public.rt_vault ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_vault ON public.rt_vault FOR SELECT TO authenticated
  USING (tenant_id = (SELECT public.current_tenant_id()));
GRANT SELECT (id, tenant_id, name) ON public.rt_vault TO authenticated;
NOTIFY pgrst, 'reload schema';`)
  await streaming()
  // The gateway's schema cache has them once /rest/v1 answers for them.
  const ada = await client('ada')
  for (let i = 0; i < 100; i++) {
    const { error } = await ada.from('rt_notes').select('id').limit(1)
    if (!error) return
    await quiet(100)
  }
  throw new Error('the gateway never saw rt_notes (NOTIFY pgrst, reload schema)')
})

after(async () => {
  for (const c of clients) await c.removeAllChannels()
  psql(`DROP TABLE IF EXISTS public.rt_notes, public.rt_vault; NOTIFY pgrst, 'reload schema';`)
})

test("many sessions of two tenants: each sees exactly its tenant's rows, checked once per tenant", async () => {
  // Two sessions of Ada (each its own sign-in), Dot, Cal: tenant A; Zed twice: tenant B.
  const sessions = [
    ['ada', ids.tenantA], ['ada', ids.tenantA], ['dot', ids.tenantA], ['cal', ids.tenantA],
    ['zed', ids.tenantB], ['zed', ids.tenantB],
  ]
  const subs = []
  for (const [who, tenant] of sessions) {
    const c = await client(who)
    subs.push({ tenant, sub: await subscribe(c, `feed-${subs.length}`, [{ event: 'INSERT', schema: 'public', table: 'tasks' }]) })
  }
  const checksBefore = (await operatorHealth()).realtime.visibility_checks
  const made = psql(`INSERT INTO public.tasks (tenant_id, title, status) VALUES
    ('${ids.tenantA}', 'rt-iso-a', 'todo'), ('${ids.tenantB}', 'rt-iso-b', 'todo') RETURNING id`).split('\n')
  try {
    for (const s of subs) await until(() => s.sub.events.length >= 1, `the ${s.tenant} row`)
    await quiet(300)
    for (const s of subs) {
      assert.deepEqual(s.sub.events.map((e) => e.new.tenant_id), [s.tenant], 'one row, its own tenant')
    }
    // One transaction, two tenants' groups: two statements, not one per session.
    const checks = (await operatorHealth()).realtime.visibility_checks
    assert.ok(checks - checksBefore <= 2, `visibility statements ${checks - checksBefore} for 6 sessions`)
  } finally {
    psql(`DELETE FROM public.tasks WHERE id IN (${made.map((id) => `'${id}'`).join(',')})`)
  }
})

test('a policy that reads sub keeps two users of one tenant apart (never grouped by tenant)', async () => {
  const ada = await client('ada')
  const dot = await client('dot')
  const adaSub = await subOf(ada)
  const dotSub = await subOf(dot)
  const a = await subscribe(ada, 'notes-ada', [{ event: '*', schema: 'public', table: 'rt_notes' }])
  const d = await subscribe(dot, 'notes-dot', [{ event: '*', schema: 'public', table: 'rt_notes' }])
  // One transaction with both users' notes: a grouping coarser than the policy (by tenant) would
  // decide both with one user's claims and give the other a note that is not theirs.
  psql(`INSERT INTO public.rt_notes (user_id, tenant_id, body) VALUES
    ('${adaSub}', '${ids.tenantA}', 'for ada'), ('${dotSub}', '${ids.tenantA}', 'for dot')`)
  psql(`UPDATE public.rt_notes SET body = body || '!'`)
  await until(() => a.events.length >= 2 && d.events.length >= 2, 'both users\' notes')
  await quiet(300)
  assert.deepEqual(a.events.map((e) => `${e.eventType} ${e.new.body}`), ['INSERT for ada', 'UPDATE for ada!'])
  assert.deepEqual(d.events.map((e) => `${e.eventType} ${e.new.body}`), ['INSERT for dot', 'UPDATE for dot!'])
  // As /rest/v1 answers each of them.
  assert.deepEqual((await ada.from('rt_notes').select('body')).data.map((r) => r.body), ['for ada!'])
  assert.deepEqual((await dot.from('rt_notes').select('body')).data.map((r) => r.body), ['for dot!'])
})

test('a column whose SELECT is revoked is neither filterable nor delivered', async () => {
  const ada = await client('ada')
  // /rest/v1 refuses to filter on it...
  const rest = await http('/rest/v1/rt_vault?select=id&secret=eq.x', { token: await accessToken(ada) })
  assert.equal(rest.status, 403, rest.text)
  // ...and so does the channel: the join is refused with the reason.
  await assert.rejects(
    subscribe(ada, 'vault-guess', [{ event: '*', schema: 'public', table: 'rt_vault', filter: 'secret=eq.hunter2' }]),
    /permission denied for column secret/,
  )
  const all = await subscribe(ada, 'vault', [{ event: 'INSERT', schema: 'public', table: 'rt_vault' }])
  psql(`INSERT INTO public.rt_vault (tenant_id, name, secret) VALUES ('${ids.tenantA}', 'k1', 'hunter2')`)
  await until(() => all.events.length >= 1, 'the vault row')
  const row = all.events[0].new
  assert.equal(row.name, 'k1')
  assert.equal('secret' in row, false, 'the revoked column is not in the event')
})

test("a DELETE of a REPLICA IDENTITY FULL row reaches only those who could see it: another tenant's value never fires", async () => {
  const ada = await client('ada')
  const zed = await client('zed')
  psql(`INSERT INTO public.rt_vault (tenant_id, name) VALUES ('${ids.tenantA}', 'gone-a'), ('${ids.tenantB}', 'gone-b')`)
  // Zed guesses A's tenant and A's row name; Ada watches her own tenant.
  const guessTenant = await subscribe(zed, 'guess-tenant', [{ event: 'DELETE', schema: 'public', table: 'rt_vault', filter: `tenant_id=eq.${ids.tenantA}` }])
  const guessName = await subscribe(zed, 'guess-name', [{ event: 'DELETE', schema: 'public', table: 'rt_vault', filter: 'name=eq.gone-a' }])
  const zedAll = await subscribe(zed, 'zed-deletes', [{ event: 'DELETE', schema: 'public', table: 'rt_vault' }])
  const adaOwn = await subscribe(ada, 'ada-deletes', [{ event: 'DELETE', schema: 'public', table: 'rt_vault', filter: `tenant_id=eq.${ids.tenantA}` }])
  psql(`DELETE FROM public.rt_vault WHERE name IN ('gone-a', 'gone-b')`)
  await until(() => adaOwn.events.length >= 1 && zedAll.events.length >= 1, 'the deletes')
  await quiet(400)
  assert.equal(adaOwn.events.length, 1)
  assert.equal(Object.keys(adaOwn.events[0].old).join(), 'id', 'the key only')
  assert.equal(zedAll.events.length, 1, "Zed's own row only")
  assert.equal(guessTenant.events.length, 0, "a filter on A's tenant never fires for B")
  assert.equal(guessName.events.length, 0, "a filter on A's row name never fires for B")
})
