// The original product's task board on awp, every call as its code makes it (yourhq/yourhq at
// 86f99c2, apps/ui): the board's select with its three embeds (streams, the assignee by its
// hint, task_series) and filters, the per-task counts it fetches beside it (links, labels,
// blockers, comments, subtasks), quick create, status change, archive, restore and delete with
// their audit rows, recurring tasks and the spawn RPC, labels, comments with mentions,
// deliverables and their review, relations. The board's answer equals psql's under the same
// claims; tenant B sees and changes none of it.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { claimsOf, ids, psql, sameAsPsql, serviceClient, signedIn } from './lib/world.mjs'
import { assertOrdered, cleanup, logAudit, ok, track, ui } from './lib/product-ui.mjs'

const BOARD_SELECT =
  '*, stream:streams(id, name, color, icon), assignee_agent:agents!tasks_assignee_agent_id_fkey(id, name, slug, avatar_url, meta), series:task_series(id, cadence_type, interval_n, days_of_week, day_of_month, time_of_day, timezone)'

// The board's select as psql writes it: each embed the correlated subquery it means.
const boardSql = (where) => `
  SELECT t.*,
    (SELECT row_to_json(e) FROM (SELECT s.id, s.name, s.color, s.icon FROM public.streams s
      WHERE s.tenant_id = t.tenant_id AND s.id = t.stream_id) e) AS stream,
    (SELECT row_to_json(e) FROM (SELECT a.id, a.name, a.slug, a.avatar_url, a.meta FROM public.agents a
      WHERE a.tenant_id = t.tenant_id AND a.id = t.assignee_agent_id) e) AS assignee_agent,
    (SELECT row_to_json(e) FROM (SELECT r.id, r.cadence_type, r.interval_n, r.days_of_week, r.day_of_month,
       r.time_of_day, r.timezone FROM public.task_series r
      WHERE r.tenant_id = t.tenant_id AND r.id = t.series_id) e) AS series
  FROM public.tasks t WHERE ${where} ORDER BY t.created_at DESC`

describe('task board', () => {
  let ada
  let zed
  let claims
  let stream
  let series
  let created
  before(async () => {
    ada = await signedIn('ada')
    zed = await signedIn('zed')
    claims = await claimsOf(ada)
  })
  after(() => {
    psql(`DELETE FROM public.tasks WHERE series_id IS NOT NULL AND tenant_id = :'t'`, { t: ids.tenantA })
    cleanup()
  })

  test(`a stream, then a task in it from quick create, with its audit row ${ui('hooks/use-streams.ts:66', 'hooks/use-tasks.ts:445', 'lib/audit/log.ts:20')}`, async () => {
    stream = ok(await ada.from('streams').insert({ name: 'Launch', type: 'functional', sort_order: 9 }).select('id').single()).id
    const data = ok(
      await ada
        .from('tasks')
        .insert({ title: 'Ship the beta', status: 'todo', priority: 'medium', stream_id: stream })
        .select('id')
        .single(),
    )
    created = track('tasks', data.id)
    ok(await logAudit(ada, { module: 'tasks', entity_type: 'task', entity_id: created, action: 'created', summary: "Created task 'Ship the beta'" }))
    assert.equal(psql(`SELECT tenant_id || ' ' || stream_id FROM public.tasks WHERE id = :'id'`, { id: created }), `${ids.tenantA} ${stream}`)
  })

  test(`a recurring task from the task form, spawned at once by the RPC ${ui('components/tasks/task-form.tsx:370', 'hooks/use-task-series.ts:59', 'hooks/use-task-series.ts:83', 'hooks/use-task-series.ts:93')}`, async () => {
    const row = ok(
      await ada
        .from('task_series')
        .insert({
          title: 'Weekly report',
          description: null,
          priority: 'high',
          stream_id: stream,
          assignee_type: 'agent',
          assignee_agent_id: ids.ada,
          tags: [],
          linked_entity_type: null,
          linked_entity_id: null,
          meta: {},
          cadence_type: 'weekly',
          interval_n: 1,
          days_of_week: [1, 3],
          day_of_month: null,
          time_of_day: '09:00:00',
          timezone: 'Europe/Berlin',
          is_paused: false,
          starts_on: new Date().toISOString().slice(0, 10),
          ends_on: null,
          ends_after_count: null,
          missed_policy: 'auto_skip',
          model_override: null,
          thinking_override: null,
        })
        .select('*')
        .single(),
    )
    series = row.id
    assert.equal(row.tenant_id, ids.tenantA)
    assert.ok(row.next_occurrence_at && new Date(row.next_occurrence_at) > new Date(), 'the next occurrence is ahead')
    const weekday = psql(`SELECT extract(isodow FROM next_occurrence_at AT TIME ZONE 'Europe/Berlin') FROM public.task_series WHERE id = :'id'`, { id: series })
    assert.ok(['1', '3'].includes(weekday), `a Monday or Wednesday, got ISO day ${weekday}`)
    // Nothing is due yet: the kick spawns nothing; made due, the next call spawns one task.
    const kick = await ada.rpc('spawn_due_task_instances')
    assert.equal(kick.error, null)
    assert.equal(psql(`SELECT count(*) FROM public.tasks WHERE series_id = :'s'`, { s: series }), '0')
    psql(`UPDATE public.task_series SET next_occurrence_at = now() - interval '5 minutes' WHERE id = :'s'`, { s: series })
    assert.equal(ok(await ada.rpc('spawn_due_task_instances')), 1)
    assert.equal(psql(`SELECT title || ' ' || assignee_agent_id FROM public.tasks WHERE series_id = :'s'`, { s: series }), `Weekly report ${ids.ada}`)
    // B's call spawns nothing of A's.
    psql(`UPDATE public.task_series SET next_occurrence_at = now() - interval '1 minute' WHERE id = :'s'`, { s: series })
    assert.equal(ok(await zed.rpc('spawn_due_task_instances')), 0)
    psql(`UPDATE public.task_series SET next_occurrence_at = now() + interval '1 day' WHERE id = :'s'`, { s: series })
  })

  test(`the board: top-level tasks with stream, assignee and series, newest first ${ui('hooks/use-tasks.ts:102', 'hooks/use-tasks.ts:110')}`, async () => {
    const data = await sameAsPsql(
      ada.from('tasks').select(BOARD_SELECT).is('parent_id', null).order('created_at', { ascending: false }).is('archived_at', null),
      claims,
      boardSql('t.parent_id IS NULL AND t.archived_at IS NULL'),
    )
    assertOrdered(data, 'created_at')
    const mine = data.find((t) => t.id === created)
    assert.deepEqual(mine.stream, { id: stream, name: 'Launch', color: '#6b7280', icon: null })
    const spawned = data.find((t) => t.series_id === series)
    assert.equal(spawned.series.cadence_type, 'weekly')
    assert.deepEqual(spawned.series.days_of_week, [1, 3])
    assert.equal(spawned.assignee_agent.slug, 'ada')
    assert.ok(data.every((t) => t.tenant_id === ids.tenantA))
  })

  test(`the board's filters: stream, status, priority, assignee, unassigned, archived ${ui('hooks/use-tasks.ts:114', 'hooks/use-tasks.ts:117', 'hooks/use-tasks.ts:120', 'hooks/use-tasks.ts:127', 'hooks/use-tasks.ts:125', 'hooks/use-tasks.ts:108')}`, async () => {
    const base = () => ada.from('tasks').select(BOARD_SELECT).is('parent_id', null).order('created_at', { ascending: false })
    const cases = [
      [base().is('archived_at', null).eq('stream_id', stream), `t.parent_id IS NULL AND t.archived_at IS NULL AND t.stream_id = '${stream}'`],
      [base().is('archived_at', null).eq('status', 'in_progress'), `t.parent_id IS NULL AND t.archived_at IS NULL AND t.status = 'in_progress'`],
      [base().is('archived_at', null).eq('priority', 'urgent'), `t.parent_id IS NULL AND t.archived_at IS NULL AND t.priority = 'urgent'`],
      [base().is('archived_at', null).eq('assignee_agent_id', ids.bob), `t.parent_id IS NULL AND t.archived_at IS NULL AND t.assignee_agent_id = '${ids.bob}'`],
      [base().is('archived_at', null).is('assignee_type', null), `t.parent_id IS NULL AND t.archived_at IS NULL AND t.assignee_type IS NULL`],
      [base().not('archived_at', 'is', null), `t.parent_id IS NULL AND t.archived_at IS NOT NULL`],
    ]
    for (const [query, where] of cases) assertOrdered(await sameAsPsql(query, claims, boardSql(where)), 'created_at')
  })

  test(`labels: made, put on a task, read back with the board's counts ${ui('hooks/use-labels.ts:41', 'hooks/use-labels.ts:96', 'hooks/use-tasks.ts:140', 'hooks/use-tasks.ts:145', 'hooks/use-tasks.ts:149', 'hooks/use-tasks.ts:154', 'hooks/use-tasks.ts:159', 'hooks/use-tasks.ts:255', 'hooks/use-task-relations.ts:32', 'hooks/use-task-relations.ts:112')}`, async () => {
    const label = ok(await ada.from('labels').insert({ name: 'frontend', color: '#3366ff', description: null }).select('*').single())
    ok(await ada.from('task_labels').insert({ task_id: created, label_id: label.id }))
    const sub = track('tasks', ok(await ada.from('tasks').insert({ title: 'Sub-step', parent_id: created }).select('id').single()).id)
    ok(await ada.from('tasks').update({ status: 'done' }).eq('id', sub))
    ok(await ada.from('task_relations').insert({ source_task_id: created, target_task_id: ids.taskA3, relation_type: 'blocked_by', created_by_type: 'human' }))
    ok(await ada.from('comments').insert({ entity_type: 'task', entity_id: created, parent_id: null, actor_type: 'human', actor_agent_id: null, body: 'On it', mentions: [] }).select('id').single())
    ok(await ada.from('entity_links').insert({ owner_type: 'task', owner_id: created, target_type: 'url', url: 'https://example.test/spec', label: 'Spec' }))
    const taskIds = [created, ids.taskA1]
    const [links, labels, blockers, comments, subtasks] = await Promise.all([
      ada.from('entity_links').select('owner_id, is_deliverable').eq('owner_type', 'task').in('owner_id', taskIds),
      ada.from('task_labels').select('task_id, labels(*)').in('task_id', taskIds),
      ada.from('task_relations').select('source_task_id').eq('relation_type', 'blocked_by').in('source_task_id', taskIds),
      ada.from('comments').select('entity_id').eq('entity_type', 'task').in('entity_id', taskIds),
      ada.from('tasks').select('parent_id, status').in('parent_id', taskIds).is('archived_at', null),
    ])
    assert.deepEqual(ok(links), [{ owner_id: created, is_deliverable: false }])
    assert.deepEqual(ok(labels).map((r) => [r.task_id, r.labels.name, r.labels.color]), [[created, 'frontend', '#3366ff']])
    assert.deepEqual(ok(blockers), [{ source_task_id: created }])
    assert.deepEqual(ok(comments), [{ entity_id: created }])
    assert.deepEqual(ok(subtasks), [{ parent_id: created, status: 'done' }])
    // One task's labels, as the realtime refresh reads them.
    assert.deepEqual(ok(await ada.from('task_labels').select('labels(*)').eq('task_id', created)).map((r) => r.labels.id), [label.id])
    // Relations through the RPC: the blocker, with its title and status.
    const rel = ok(await ada.rpc('get_task_relations', { p_task_id: created }))
    assert.ok(rel.some((r) => r.related_task_id === ids.taskA3 && r.related_title === 'Wait for the vendor' && r.direction === 'outgoing'))
    // B: A's label cannot go on B's task, nor B's on A's.
    const cross = await zed.from('task_labels').insert({ task_id: ids.taskB1, label_id: label.id })
    assert.equal(cross.status, 409)
    assert.deepEqual(ok(await zed.from('labels').select('*')), [])
  })

  test(`status change, archive, restore and delete, each logged ${ui('hooks/use-tasks.ts:379', 'hooks/use-tasks.ts:400', 'hooks/use-tasks.ts:421', 'hooks/use-tasks.ts:471')}`, async () => {
    ok(await ada.from('tasks').update({ status: 'in_progress' }).eq('id', created))
    ok(await logAudit(ada, { module: 'tasks', entity_type: 'task', entity_id: created, action: 'status_changed', summary: 'moved', changes: { status: { old: 'todo', new: 'in_progress' } } }))
    ok(await ada.from('tasks').update({ archived_at: new Date().toISOString() }).eq('id', created))
    ok(await logAudit(ada, { module: 'tasks', entity_type: 'task', entity_id: created, action: 'archived' }))
    ok(await ada.from('tasks').update({ archived_at: null }).eq('id', created))
    ok(await logAudit(ada, { module: 'tasks', entity_type: 'task', entity_id: created, action: 'restored' }))
    assert.equal(
      psql(`SELECT string_agg(action::text, ',' ORDER BY created_at) FROM public.audit_log WHERE entity_id = :'id'`, { id: created }),
      'created,status_changed,archived,restored',
    )
    // B can neither move nor delete it.
    assert.deepEqual(ok(await zed.from('tasks').update({ status: 'cancelled' }).eq('id', created).select()), [])
    assert.deepEqual(ok(await zed.from('tasks').delete().eq('id', created).select()), [])
    assert.equal(psql(`SELECT status FROM public.tasks WHERE id = :'id'`, { id: created }), 'in_progress')
  })

  test(`comments with mentions wake the agent; read back with the author by its hint ${ui('hooks/use-comments.ts:101', 'hooks/use-comments.ts:25', 'hooks/use-comments.ts:145')}`, async () => {
    const c = ok(
      await ada
        .from('comments')
        .insert({ entity_type: 'task', entity_id: created, parent_id: null, actor_type: 'human', actor_agent_id: null, body: '@bob can you review?', mentions: ['bob'] })
        .select('id')
        .single(),
    )
    assert.equal(psql(`SELECT count(*) FROM public.agent_inbox_items WHERE agent_id = :'a' AND event_type = 'task_comment_mention' AND task_id = :'t'`, { a: ids.bob, t: created }), '1')
    ok(await ada.from('comments').update({ meta: { attachments: [{ entity_type: 'url', url: 'https://example.test' }] } }).eq('id', c.id))
    const thread = ok(
      await ada
        .from('comments')
        .select('*, actor_agent:agents!comments_actor_agent_id_fkey(id, name, slug, avatar_url, meta)')
        .eq('entity_type', 'task')
        .eq('entity_id', created)
        .order('created_at', { ascending: true }),
    )
    assert.deepEqual(thread.map((x) => x.body), ['On it', '@bob can you review?'])
    assert.equal(thread[1].meta.attachments.length, 1)
    assert.equal(thread[1].actor_agent, null)
    psql(`DELETE FROM public.agent_inbox_items WHERE task_id = :'t'`, { t: created })
  })

  test(`a deliverable submitted by an agent is reviewed from the task; approving the last one completes it ${ui('hooks/use-deliverables.ts:20', 'hooks/use-deliverables.ts:90')}`, async () => {
    const service = await serviceClient()
    ok(
      await service.from('entity_links').insert({
        tenant_id: ids.tenantA, owner_type: 'task', owner_id: created, target_type: 'url', url: 'https://example.test/beta.zip',
        label: 'Beta build', is_deliverable: true, review_status: 'in_review', submitted_by_agent_id: ids.ada,
      }),
    )
    const rows = ok(
      await ada
        .from('entity_links')
        .select('*, submitted_by_agent:agents!entity_links_submitted_by_agent_id_fkey(id, name, slug, meta)')
        .eq('owner_type', 'task')
        .eq('owner_id', created)
        .eq('is_deliverable', true)
        .neq('review_status', 'approved')
        .order('created_at', { ascending: true }),
    )
    assert.equal(rows.length, 1)
    assert.deepEqual(rows[0].submitted_by_agent, { id: ids.ada, name: 'Ada', slug: 'ada', meta: { team: 'core', level: 3 } })
    assert.equal(psql(`SELECT count(*) FROM public.notifications WHERE type = 'deliverable_submitted' AND entity_id = :'t'`, { t: created }), '1')
    ok(await ada.from('entity_links').update({ review_status: 'revision_requested', review_note: 'Needs notes', reviewed_at: new Date().toISOString() }).eq('id', rows[0].id))
    assert.equal(psql(`SELECT count(*) FROM public.agent_inbox_items WHERE agent_id = :'a' AND event_type = 'deliverable_review' AND task_id = :'t'`, { a: ids.ada, t: created }), '1')
    ok(await ada.from('entity_links').update({ review_status: 'approved', reviewed_at: new Date().toISOString() }).eq('id', rows[0].id))
    assert.equal(psql(`SELECT status FROM public.tasks WHERE id = :'id'`, { id: created }), 'done')
    psql(`DELETE FROM public.agent_inbox_items WHERE task_id = :'t'`, { t: created })
  })

  test(`recurring tasks listed with stream and assignee, paused and resumed, deleted ${ui('hooks/use-task-series.ts:30', 'hooks/use-agent-task-series.ts:57', 'hooks/use-agent-task-series.ts:76', 'hooks/use-task-series.ts:134')}`, async () => {
    const list = ok(
      await ada.from('task_series').select('*, stream:streams(id, name, color, icon), assignee_agent:agents(id, name, slug, avatar_url)').order('created_at', { ascending: false }),
    )
    const s = list.find((x) => x.id === series)
    assert.equal(s.stream.name, 'Launch')
    assert.equal(s.assignee_agent.slug, 'ada')
    ok(await ada.from('task_series').update({ is_paused: true }).eq('id', series))
    assert.equal(psql(`SELECT next_occurrence_at IS NULL FROM public.task_series WHERE id = :'id'`, { id: series }), 't')
    ok(await ada.from('task_series').update({ is_paused: false }).eq('id', series))
    assert.equal(psql(`SELECT next_occurrence_at > now() FROM public.task_series WHERE id = :'id'`, { id: series }), 't')
    assert.deepEqual(ok(await zed.from('task_series').select('*')), [])
    ok(await ada.from('task_series').delete().eq('id', series))
    // Its tasks stay, no longer of a series.
    assert.equal(psql(`SELECT count(*) FROM public.tasks WHERE tenant_id = :'t' AND title = 'Weekly report' AND series_id IS NULL`, { t: ids.tenantA }), '1')
    psql(`DELETE FROM public.tasks WHERE tenant_id = :'t' AND title = 'Weekly report'`, { t: ids.tenantA })
  })
})
