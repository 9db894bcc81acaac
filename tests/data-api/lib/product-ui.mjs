// Helpers of the product-ui suite (product-ui-*.test.mjs): the calls of the original product's
// UI (yourhq/yourhq at 86f99c2, apps/ui) made exactly as its code makes them, on the seeded
// tenants. `ui('hooks/use-tasks.ts:97')` names the line a test mirrors; cleanup() removes what
// a file made in awp's own tables, which the suite's other files count.
import assert from 'node:assert/strict'
import { psql } from './world.mjs'

// The UI's file and line, as the test's name ends: "(apps/ui/src/hooks/use-tasks.ts:97)".
export const ui = (...where) => `(${where.map((w) => `apps/ui/src/${w}`).join(', ')})`

// The answer of a call that must succeed: its data.
export function ok(result, what = 'the call') {
  assert.equal(result.error, null, `${what}: ${JSON.stringify(result.error)}`)
  return result.data
}

// lib/audit/log.ts:20 (logAudit): every write of the UI logs one row, fire and forget.
export function logAudit(supabase, entry) {
  return supabase.from('audit_log').insert({
    actor_type: entry.actor_agent_id ? 'agent' : 'human',
    actor_agent_id: entry.actor_agent_id ?? null,
    module: entry.module,
    entity_type: entry.entity_type,
    entity_id: entry.entity_id,
    action: entry.action,
    summary: entry.summary ?? null,
    changes: entry.changes ?? null,
  })
}

// The rows come in the order the UI asked for: `key` never increases (desc) or decreases. Rows of
// one transaction share a created_at, so answers are compared with psql as sets, and their order
// checked here.
export function assertOrdered(rows, key, { desc = true } = {}) {
  for (let i = 1; i < rows.length; i++) {
    const [a, b] = [rows[i - 1][key], rows[i][key]]
    assert.ok(desc ? a >= b : a <= b, `${key} ${desc ? 'descending' : 'ascending'} at row ${i}: ${a}, ${b}`)
  }
}

// Rows a file made in awp's own tables (tasks, contacts, ...), removed by cleanup().
const made = []
export function track(table, id) {
  made.push([table, id])
  return id
}
export function cleanup() {
  for (const [table, id] of made.reverse()) {
    psql(`DELETE FROM public.${table} WHERE id = :'id'`, { id })
  }
  made.length = 0
}
