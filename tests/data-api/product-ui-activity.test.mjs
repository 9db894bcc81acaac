// The original product's activity, notifications, budgets, plugins and shared knowledge on awp,
// every call as its code makes it (yourhq/yourhq at 86f99c2, apps/ui): the Activity page and the
// dashboard's stream (audit_log with the actor by its hint or without), the bell (its list, its
// unread count as a HEAD request, read, read all, dismiss) and its live refresh over realtime,
// an agent's budget (upsert, the usage page, the RPCs), the plugins settings, sync runs, and
// which agents a knowledge item is shared with. Tenant B sees and changes none of it; anon
// reads nothing of it.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { anonClient, claimsOf, ids, psql, sameAsPsql, serviceClient, signedIn } from './lib/world.mjs'
import { streaming, subscribe, until, quiet } from './lib/realtime.mjs'
import { logAudit, ok, ui } from './lib/product-ui.mjs'

const ACTOR = 'actor_agent:agents!audit_log_actor_agent_id_fkey(id, name, slug, avatar_url, meta)'
const auditSql = (where = 'true') => `
  SELECT l.*, (SELECT row_to_json(e) FROM (SELECT a.id, a.name, a.slug, a.avatar_url, a.meta FROM public.agents a
      WHERE a.tenant_id = l.tenant_id AND a.id = l.actor_agent_id) e) AS actor_agent
    FROM public.audit_log l WHERE ${where} ORDER BY l.created_at DESC, l.id LIMIT 50`

describe('activity and notifications', () => {
  let ada
  let zed
  let claims
  const clients = []
  before(async () => {
    ada = await signedIn('ada')
    zed = await signedIn('zed')
    claims = await claimsOf(ada)
    // Something to show: a human's and an agent's entries in each tenant.
    ok(await logAudit(ada, { module: 'crm', entity_type: 'contact', entity_id: ids.contactA1, action: 'updated', summary: 'Edited Ann' }))
    ok(await logAudit(ada, { module: 'knowledge', entity_type: 'knowledge_item', entity_id: ids.knowledgeDeploy, action: 'uploaded', actor_agent_id: ids.ada }))
    ok(await logAudit(zed, { module: 'tasks', entity_type: 'task', entity_id: ids.taskB1, action: 'moved', summary: 'Bolt only' }))
  })
  after(async () => {
    for (const c of clients) await c.removeAllChannels()
  })

  test(`the Activity page: newest first, 50 a page, the agent by its hint ${ui('hooks/use-audit-log.ts:35', 'hooks/use-audit-log.ts:98')}`, async () => {
    const page = await sameAsPsql(
      ada.from('audit_log').select(`*, ${ACTOR}`).order('created_at', { ascending: false }).range(0, 49),
      claims,
      auditSql(),
      { ordered: false },
    )
    const byAgent = page.find((e) => e.action === 'uploaded')
    assert.equal(byAgent.actor_type, 'agent')
    assert.deepEqual(byAgent.actor_agent, { id: ids.ada, name: 'Ada', slug: 'ada', avatar_url: 'https://example.test/ada.png', meta: { team: 'core', level: 3 } })
    assert.ok(page.every((e) => e.tenant_id === ids.tenantA), "none of Bolt's entries")
    const one = ok(await ada.from('audit_log').select(`*, ${ACTOR}`).eq('id', byAgent.id).single())
    assert.equal(one.id, byAgent.id)
    const theirs = await zed.from('audit_log').select(`*, ${ACTOR}`).eq('id', byAgent.id).single()
    assert.equal(theirs.status, 406)
  })

  test(`the dashboard's activity stream and its knowledge counts ${ui('app/dashboard/actions/activity.ts:18', 'app/dashboard/actions.ts:525', 'app/dashboard/actions/briefing.ts:83')}`, async () => {
    const stream = ok(await ada.from('audit_log').select('*, actor_agent:agents(id, name, slug, avatar_url, meta)').order('created_at', { ascending: false }).range(0, 19))
    assert.ok(stream.length >= 2)
    const latest = ok(await ada.from('audit_log').select('*, actor_agent:agents(id, name, slug, avatar_url)').order('created_at', { ascending: false }).limit(5))
    assert.ok(latest.length >= 2)
    const since = new Date(Date.now() - 86400000).toISOString()
    const { count, error } = await ada
      .from('audit_log')
      .select('*', { count: 'exact', head: true })
      .eq('module', 'knowledge')
      .eq('actor_type', 'agent')
      .in('action', ['created', 'updated'])
      .gte('created_at', since)
    assert.equal(error, null)
    assert.equal(count, Number(psql(`SELECT count(*) FROM public.audit_log WHERE tenant_id = :'t' AND module = 'knowledge' AND actor_type = 'agent' AND action IN ('created', 'updated') AND created_at >= now() - interval '1 day'`, { t: ids.tenantA })))
  })

  test(`the audit log is append-only and anon reads none of it ${ui('lib/audit/log.ts:20')}`, async () => {
    const upd = await ada.from('audit_log').update({ summary: 'rewritten' }).eq('module', 'crm')
    assert.equal(upd.status, 403)
    const del = await ada.from('audit_log').delete().eq('module', 'crm')
    assert.equal(del.status, 403)
    const anon = await (await anonClient()).from('audit_log').select('*')
    assert.equal(anon.status, 200)
    assert.deepEqual(anon.data, [])
    const forged = await zed.from('audit_log').insert({ tenant_id: ids.tenantA, module: 'crm', entity_type: 'contact', entity_id: ids.contactA1, action: 'deleted' })
    assert.equal(forged.status, 403)
  })

  test(`the bell: a task event notifies live, the list, the unread count, read, read all, dismiss ${ui('hooks/use-notifications.ts:36', 'hooks/use-realtime-sync.ts:68', 'hooks/use-notifications.ts:18', 'hooks/use-notifications.ts:128', 'hooks/use-notifications.ts:56', 'hooks/use-notifications.ts:78', 'hooks/use-notifications.ts:92')}`, async () => {
    await streaming()
    const live = await signedIn('ada')
    const other = await signedIn('zed')
    clients.push(live, other)
    const mine = await subscribe(live, `realtime:notifications:*:all:${Date.now()}`, [{ event: '*', schema: 'public', table: 'notifications' }])
    const theirs = await subscribe(other, `realtime:notifications:*:all:${Date.now()}b`, [{ event: '*', schema: 'public', table: 'notifications' }])
    // A task of Ada's moves to blocked: the bell rings for tenant A only.
    ok(await ada.from('tasks').update({ status: 'blocked' }).eq('id', ids.taskA2))
    await until(() => mine.events.some((e) => e.eventType === 'INSERT' && e.new.type === 'task_blocked'), 'the notification INSERT', 30000)
    const inserted = mine.events.find((e) => e.new.type === 'task_blocked')
    // useRealtimeSync refetches the row by id.
    const row = ok(await live.from('notifications').select('*').eq('id', inserted.new.id).single())
    assert.equal(row.entity_id, ids.taskA2)
    assert.equal(row.title, 'Ada is blocked')
    await quiet(300)
    assert.equal(theirs.events.length, 0, 'tenant B hears nothing of A')
    ok(await ada.from('tasks').update({ status: 'in_progress' }).eq('id', ids.taskA2))

    const list = ok(await ada.from('notifications').select('*').is('dismissed_at', null).order('created_at', { ascending: false }).limit(100))
    assert.ok(list.some((n) => n.id === row.id))
    const unread = async (c) => (await c.from('notifications').select('*', { count: 'exact', head: true }).is('read_at', null).is('dismissed_at', null)).count
    const before = await unread(ada)
    assert.equal(before, Number(psql(`SELECT count(*) FROM public.notifications WHERE tenant_id = :'t' AND read_at IS NULL AND dismissed_at IS NULL`, { t: ids.tenantA })))
    ok(await ada.from('notifications').update({ read_at: new Date().toISOString() }).eq('id', row.id))
    assert.equal(await unread(ada), before - 1)
    ok(await ada.from('notifications').update({ read_at: new Date().toISOString() }).is('read_at', null))
    assert.equal(await unread(ada), 0)
    ok(await ada.from('notifications').update({ dismissed_at: new Date().toISOString() }).eq('id', row.id))
    assert.ok(!ok(await ada.from('notifications').select('*').is('dismissed_at', null).order('created_at', { ascending: false }).limit(100)).some((n) => n.id === row.id))
    // B's "read all" reaches none of A's; its count is its own.
    psql(`UPDATE public.notifications SET read_at = NULL WHERE id = :'id'`, { id: row.id })
    ok(await zed.from('notifications').update({ read_at: new Date().toISOString() }).is('read_at', null))
    assert.equal(psql(`SELECT read_at IS NULL FROM public.notifications WHERE id = :'id'`, { id: row.id }), 't')
  })
})

describe('budgets, plugins, sync runs, shared knowledge', () => {
  let ada
  let zed
  before(async () => {
    ada = await signedIn('ada')
    zed = await signedIn('zed')
  })
  after(() => {
    psql(`DELETE FROM public.agent_usage WHERE run_id = 'product-ui-suite'`)
  })

  test(`an agent's budget set from its page, then its usage page and the RPCs ${ui('app/dashboard/agents/usage-actions.ts:36', 'app/dashboard/agents/usage-actions.ts:60', 'app/dashboard/agents/usage-actions.ts:65', 'app/dashboard/agents/usage-actions.ts:129', 'app/dashboard/agents/usage-actions.ts:138')}`, async () => {
    const data = ok(
      await ada.from('agent_budgets').upsert({ agent_id: ids.bob, monthly_limit_usd: 2, soft_threshold_pct: 50, hard_cutoff: true }, { onConflict: 'agent_id' }).select('*').single(),
    )
    assert.equal(data.tenant_id, ids.tenantA)
    assert.equal(data.monthly_limit_usd, 2)
    // The product's gateway writes usage with the service role; the budget follows at once.
    const service = await serviceClient()
    ok(await service.from('agent_usage').insert({ tenant_id: ids.tenantA, agent_id: ids.bob, model: 'anthropic/claude-haiku', input_tokens: 1000, output_tokens: 500, cost_usd: 1.25, run_id: 'product-ui-suite', occurred_at: new Date().toISOString() }))
    const budget = ok(await ada.from('agent_budgets').select('*').eq('agent_id', ids.bob).maybeSingle())
    assert.equal(budget.status, 'warned')
    assert.equal(psql(`SELECT count(*) FROM public.notifications WHERE type = 'budget.warned' AND entity_id = :'a'`, { a: ids.bob }), '1')
    const daily = ok(await ada.rpc('get_agent_daily_usage', { p_agent_id: ids.bob }))
    const today = daily.find((d) => Number(d.spend_usd) > 0)
    assert.ok(today && today.tokens >= 1500, `a day with Bob's spend: ${JSON.stringify(today)}`)
    const recomputed = ok(await ada.rpc('recompute_agent_budget', { p_agent_id: ids.bob }))
    assert.equal(recomputed.agent_id, ids.bob)
    assert.equal(recomputed.status, 'warned')
    const fleet = ok(await ada.from('agent_budgets').select('*'))
    assert.ok(fleet.every((b) => b.tenant_id === ids.tenantA))
    // B: not A's agent's budget, nor its recompute.
    const upsert = await zed.from('agent_budgets').upsert({ agent_id: ids.bob, monthly_limit_usd: 999 }, { onConflict: 'agent_id' }).select('*').single()
    assert.ok(upsert.status === 403 || upsert.status === 409, `status ${upsert.status}`)
    assert.equal(psql(`SELECT monthly_limit_usd FROM public.agent_budgets WHERE agent_id = :'a'`, { a: ids.bob }), '2.00')
    const rc = await zed.rpc('recompute_agent_budget', { p_agent_id: ids.bob })
    assert.equal(rc.status, 400)
    assert.match(rc.error.message, /not found/)
    psql(`DELETE FROM public.notifications WHERE entity_id = :'a'`, { a: ids.bob })
  })

  test(`plugins: added with the service role, listed without their secret, toggled, their events ${ui('app/dashboard/settings/plugins/actions.ts:77', 'app/dashboard/settings/plugins/actions.ts:30', 'app/dashboard/settings/plugins/actions.ts:136', 'app/dashboard/settings/plugins/actions.ts:184')}`, async () => {
    const PLUGIN_COLUMNS = 'id, created_at, updated_at, plugin_id, name, description, version, source, is_enabled, hooks, entry_module, webhook_url, config, config_schema, capabilities, installed_by, meta'
    const EVENT_COLUMNS = 'id, created_at, plugin_id, hook, entity_type, entity_id, status, duration_ms, error_message'
    const service = await serviceClient()
    const made = ok(
      await service
        .from('hq_plugins')
        .insert({ tenant_id: ids.tenantA, plugin_id: 'slack-relay', name: 'Slack relay', description: null, source: 'webhook', hooks: ['task.created'], webhook_url: 'https://hooks.example.test/x', webhook_secret: 'shh', installed_by: null })
        .select(PLUGIN_COLUMNS)
        .single(),
    )
    const again = await service.from('hq_plugins').insert({ tenant_id: ids.tenantA, plugin_id: 'slack-relay', name: 'Again', source: 'webhook' })
    assert.equal(again.error.code, '23505')
    const list = ok(await ada.from('hq_plugins').select(PLUGIN_COLUMNS).order('created_at', { ascending: true }))
    assert.deepEqual(list.map((p) => p.plugin_id), ['slack-relay'])
    const secret = await ada.from('hq_plugins').select('webhook_secret')
    assert.equal(secret.error.code, '42501')
    ok(await ada.from('hq_plugins').update({ is_enabled: false }).eq('id', made.id))
    psql(`INSERT INTO public.hq_plugin_events (tenant_id, plugin_id, hook, status, duration_ms) VALUES (:'t', 'slack-relay', 'task.created', 'success', 12)`, { t: ids.tenantA })
    const events = ok(await ada.from('hq_plugin_events').select(EVENT_COLUMNS).eq('plugin_id', 'slack-relay').order('created_at', { ascending: false }).limit(20))
    assert.deepEqual(events.map((e) => [e.hook, e.status]), [['task.created', 'success']])
    assert.deepEqual(ok(await zed.from('hq_plugins').select(PLUGIN_COLUMNS)), [])
    assert.deepEqual(ok(await zed.from('hq_plugin_events').select(EVENT_COLUMNS)), [])
  })

  test(`sync runs of the tenant's sources ${ui('hooks/use-source-connections.ts:46')}`, async () => {
    const conn = psql(`INSERT INTO public.source_connections (tenant_id, provider) VALUES (:'t', 'notion') RETURNING id`, { t: ids.tenantA })
    psql(`INSERT INTO public.source_sync_runs (tenant_id, connection_id, status, items_synced) VALUES (:'t', :'c', 'done', 7)`, { t: ids.tenantA, c: conn })
    const runs = ok(await ada.from('source_sync_runs').select('*').order('created_at', { ascending: false }).limit(50))
    assert.deepEqual(runs.map((r) => [r.connection_id, r.status, r.items_synced]), [[conn, 'done', 7]])
    assert.deepEqual(ok(await zed.from('source_sync_runs').select('*')), [])
    psql(`DELETE FROM public.source_connections WHERE id = :'c'`, { c: conn })
  })

  test(`a knowledge item shared with agents, and an agent's shared items ${ui('components/knowledge/knowledge-detail-editor.tsx:201', 'components/knowledge/knowledge-detail-editor.tsx:91', 'app/dashboard/agents/[slug]/page.tsx:47', 'components/knowledge/knowledge-detail-editor.tsx:194')}`, async () => {
    ok(await ada.from('knowledge_item_agents').insert({ knowledge_item_id: ids.knowledgeDeploy, agent_id: ids.bob }))
    assert.deepEqual(ok(await ada.from('knowledge_item_agents').select('agent_id').eq('knowledge_item_id', ids.knowledgeDeploy)), [{ agent_id: ids.bob }])
    const shared = ok(await ada.from('knowledge_item_agents').select('knowledge_item_id, knowledge_items:knowledge_item_id(id, title, kind, scope, archived_at)').eq('agent_id', ids.bob))
    assert.deepEqual(shared.map((s) => s.knowledge_items.id), [ids.knowledgeDeploy])
    // B can share nothing of A's with its agents, nor A's with A's.
    const cross = await zed.from('knowledge_item_agents').insert({ knowledge_item_id: ids.knowledgeDeploy, agent_id: ids.zed })
    assert.equal(cross.status, 409)
    ok(await ada.from('knowledge_item_agents').delete().eq('knowledge_item_id', ids.knowledgeDeploy).eq('agent_id', ids.bob))
  })
})
