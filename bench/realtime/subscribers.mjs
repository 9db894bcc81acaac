// The realtime benchmark's clients (bench/realtime/run.sh runs it): N sockets of the unmodified
// @supabase/supabase-js, each with one channel subscribed to postgres_changes INSERT on tasks,
// filtered to one agent's tasks (MODE=agent) or not (MODE=tenant: every task of its tenant, as
// RLS lets it see). Socket i signs in as users[i % users.length] (ten users, or one per socket),
// of tenant A when i is even and B when odd, watches agent floor(i / 2) % 50 of its tenant, and
// connects to gateway floor(i / 2) % urls.length (each gateway serves both tenants). Latency of
// an event = its arrival here - the commit_timestamp the server put in it (one clock: same
// machine). Protocol with run.sh, through
// files in $DIR (P = RT_PART, this process's share): writes `subscribed-P` when every channel
// answered SUBSCRIBED and `subs-P.txt` (socket tenant agent), then times events from when
// `measure` appears (events before it are warm-up), stops when `done` appears, writes
// `pairs-P.txt` (socket task-id of every event that came: run.sh compares them with the tasks each
// socket should have seen), `lat-P.txt` (every measured latency, ms) and prints one JSON line of
// this share's figures (run.sh merges the shares).
import { createClient } from '@supabase/supabase-js'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const need = (k) => {
  const v = process.env[k]
  if (v === undefined || v === '') throw new Error(`${k} is not set (bench/realtime/run.sh sets it)`)
  return v
}
const urls = need('RT_URLS').split(',')
const anon = need('RT_ANON')
const dir = need('RT_DIR')
const n = Number(need('RT_N'))
const mode = process.env.RT_MODE || 'agent'
const users = JSON.parse(readFileSync(need('RT_USERS'), 'utf8')) // [{token, tenant, agents: [...]}]
const batch = Number(process.env.RT_BATCH || 50)
// This process's share of the sockets: those i with i % RT_PARTS == RT_PART (run.sh starts
// RT_PARTS processes, CLIENTS: a browser tab has a CPU of its own, and one node process that
// takes a change's 500 events one after another times its own queue, not the server's delivery).
const parts = Number(process.env.RT_PARTS || 1)
const part = Number(process.env.RT_PART || 0)

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const clients = []
const subs = []
const pairs = []
let measuring = false
let stopped = false
const lat = []
let received = 0

async function subscribe(i) {
  const u = users[i % users.length]
  const agent = u.agents[Math.floor(i / 2) % u.agents.length]
  subs[i] = `${i} ${u.tenant} ${agent}`
  // The user's token as the client's access token (a callback, as a UI's session is). A token
  // only set with realtime.setAuth(token) is replaced by the callback's (the anon key) after the
  // join, and the channel then acts as anon.
  const c = createClient(urls[Math.floor(i / 2) % urls.length], anon, {
    accessToken: async () => u.token,
    realtime: { params: { eventsPerSecond: -1 } },
  })
  // Fetched before the join: a join sent while the callback is still pending carries no token
  // (realtime-js updates the join payload only of channels not yet sent), and the channel then
  // acts as the apikey (anon) until the next refresh.
  await c.realtime.setAuth()
  clients.push(c)
  const binding = { event: 'INSERT', schema: 'public', table: 'tasks' }
  if (mode === 'agent') binding.filter = `assignee_agent_id=eq.${agent}`
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`socket ${i}: not subscribed in 60 s`)), 60000)
    c.channel(`bench-${i}`)
      .on('postgres_changes', binding, (p) => {
        if (stopped) return
        // Every event, warm-up's too: run.sh keeps those of its window's tasks.
        pairs.push(`${i} ${p.new.id}`)
        if (!measuring) return
        received++
        lat.push(Date.now() - Date.parse(p.commit_timestamp))
      })
      .subscribe((status, err) => {
        if (status === 'SUBSCRIBED') {
          clearTimeout(timer)
          resolve()
        } else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT' || status === 'CLOSED') {
          clearTimeout(timer)
          reject(new Error(`socket ${i}: ${status} ${err ? err.message : ''}`))
        }
      })
  })
}

const t0 = Date.now()
const mine = []
for (let i = part; i < n; i += parts) mine.push(i)
for (let i = 0; i < mine.length; i += batch) {
  await Promise.all(mine.slice(i, i + batch).map(subscribe))
}
const subscribeMs = Date.now() - t0
writeFileSync(join(dir, `subs-${part}.txt`), subs.filter((x) => x !== undefined).join('\n') + '\n')
writeFileSync(join(dir, `subscribed-${part}`), `${subscribeMs}\n`)
while (!existsSync(join(dir, 'measure'))) await sleep(20)
measuring = true
const mt0 = Date.now()
while (!existsSync(join(dir, 'done'))) await sleep(20)
// What was committed before `done` and is still on its way (run.sh's own wait for the slot to
// be confirmed past the last write comes first).
await sleep(Number(process.env.RT_DRAIN_MS || 2000))
stopped = true
const window = (Date.now() - Number(process.env.RT_DRAIN_MS || 2000) - mt0) / 1000
writeFileSync(join(dir, `pairs-${part}.txt`), pairs.join('\n') + (pairs.length ? '\n' : ''))
writeFileSync(join(dir, `lat-${part}.txt`), lat.join('\n') + (lat.length ? '\n' : ''))
lat.sort((a, b) => a - b)
const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor((lat.length * p) / 100))] : null)
console.log(JSON.stringify({
  sockets: mine.length, mode, subscribe_ms: subscribeMs, events: received, window_s: Number(window.toFixed(1)),
  events_per_s: Math.round(received / window), p50_ms: q(50), p90_ms: q(90), p99_ms: q(99),
  max_ms: lat.length ? lat[lat.length - 1] : null,
}))
for (const c of clients) c.realtime.disconnect()
process.exit(0)
