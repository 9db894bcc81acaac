// Realtime helpers of the suite: wait for the gateway's change capture to stream, subscribe a
// channel of the real client and collect its events, wait for a condition.
import { env } from './world.mjs'

// The capture reads the slot from the moment it streams: nothing committed before is sent.
export async function streaming() {
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${env.base}/api/health`)
    const body = await res.json()
    if (body.realtime?.capture?.state === 'streaming') return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('the realtime capture never streamed')
}

// Subscribes and resolves once the server answered SUBSCRIBED; events go to `events`.
export function subscribe(supabase, name, bindings) {
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

export async function until(pred, what, ms = 5000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (pred()) return
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`timed out waiting for ${what}`)
}

export const quiet = (ms) => new Promise((r) => setTimeout(r, ms))
