// The original product's UI from its first screen to the dashboard, and its settings pages, on
// awp: the workspace row read before sign-in, the onboarding's complete_setup with the
// service-role key (the default tenant, as the product's onboarding names it), the /setup
// page's complete_setup as a signed-in user, the dashboard's gate on `initialized`, the schema
// version banner, and the profile, general, budget, module, appearance, pipeline and field
// settings. Each test names the UI file and line it mirrors (yourhq/yourhq at 86f99c2); psql
// checks what was stored. Two tenants: B never sees or changes A's.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { anonClient, ids, psql, serviceClient, signedIn } from './lib/world.mjs'
import { cleanup, logAudit, ok, ui } from './lib/product-ui.mjs'

const DEFAULT_TENANT = '00000000-0000-0000-0000-000000000000'

// As lib/setup/run-complete-setup.ts builds them from its templates: stages, fields, streams.
const stagesJson = [
  { stage_key: 'identified', label: 'Identified', color: '#6b7280', sort_order: 0, is_terminal: false, is_default: true },
  { stage_key: 'contacted', label: 'Contacted', color: '#8b5cf6', sort_order: 1, is_terminal: false, is_default: false },
  { stage_key: 'won', label: 'Won', color: '#22c55e', sort_order: 2, is_terminal: true, is_default: false },
]
const fieldsJson = [
  { field_key: 'deal_value', field_type: 'number', label: 'Deal value ($)', field_group: 'sales', sort_order: 0, required: false, options: null, description: null },
  { field_key: 'source', field_type: 'select', label: 'Source', field_group: 'sales', sort_order: 1, required: false, options: ['Inbound', 'Referral'], description: null },
]
const streamsJson = [
  { name: 'Operations', description: 'Day-to-day ops and admin tasks.', type: 'functional', color: '#6b7280', icon: null, sort_order: 0 },
  { name: 'Content', description: 'Content creation and publishing.', type: 'functional', color: '#22c55e', icon: null, sort_order: 1 },
]

describe('onboarding to the dashboard', () => {
  let ada
  let zed
  before(async () => {
    ada = await signedIn('ada')
    zed = await signedIn('zed')
  })
  after(cleanup)

  test(`before sign-in the workspace row reads as nothing, not a privilege error ${ui('components/onboarding/wizard/actions.ts:492')}`, async () => {
    const supabase = await anonClient()
    const res = await supabase
      .from('workspace')
      .select('slug, owner_name, owner_preferred_name, owner_timezone')
      .limit(1)
      .maybeSingle()
    assert.equal(res.error, null)
    assert.equal(res.status, 200)
    assert.equal(res.data, null)
  })

  test(`a tenant not set up yet reads initialized = false, so the dashboard sends it to setup ${ui('app/dashboard/layout.tsx:28')}`, async () => {
    const data = ok(await zed.from('workspace').select('initialized').limit(1).maybeSingle())
    assert.deepEqual(data, { initialized: false })
  })

  test(`onboarding's complete_setup with the service-role key sets up the default tenant ${ui('lib/setup/run-complete-setup.ts:87', 'lib/setup/run-complete-setup.ts:103')}`, async () => {
    const supabase = await serviceClient()
    const { error } = await supabase.rpc('complete_setup', {
      p_name: 'Acme HQ',
      p_slug: 'acme-hq',
      p_description: '',
      p_owner_name: 'Ada Lovelace',
      p_preferred_name: 'Ada',
      p_timezone: 'Europe/Berlin',
      p_stages: stagesJson,
      p_fields: fieldsJson,
      p_streams: streamsJson,
      p_tenant_id: DEFAULT_TENANT,
    })
    assert.equal(error, null)
    const modules = { crm: false }
    ok(await supabase.from('workspace').update({ settings: { modules } }).eq('tenant_id', DEFAULT_TENANT))
    assert.equal(
      psql(`SELECT concat_ws('|', name, slug, coalesce(description, '-'), owner_name, owner_preferred_name,
                             owner_timezone, initialized, settings::text)
              FROM public.workspace WHERE tenant_id = :'t'`, { t: DEFAULT_TENANT }),
      'Acme HQ|acme-hq|-|Ada Lovelace|Ada|Europe/Berlin|t|{"modules": {"crm": false}}',
    )
    assert.equal(psql(`SELECT string_agg(stage_key, ',' ORDER BY sort_order) FROM public.pipeline_stages WHERE tenant_id = :'t'`, { t: DEFAULT_TENANT }), 'identified,contacted,won')
    assert.equal(psql(`SELECT string_agg(name, ',' ORDER BY sort_order) FROM public.streams WHERE tenant_id = :'t'`, { t: DEFAULT_TENANT }), 'Operations,Content')
  })

  test(`the onboarding preset installs the content-calendar collection from its template ${ui('lib/setup/run-complete-setup.ts:112', 'lib/setup/run-complete-setup.ts:128', 'lib/setup/run-complete-setup.ts:136', 'lib/setup/run-complete-setup.ts:150', 'lib/setup/run-complete-setup.ts:166')}`, async () => {
    const supabase = await serviceClient()
    const slug = 'content-calendar'
    const { data: tpl } = await supabase.from('collection_templates').select('definition').eq('slug', slug).maybeSingle()
    assert.ok(tpl?.definition?.fields?.length > 0, 'the template has fields')
    const def = tpl.definition
    const { data: existing } = await supabase
      .from('collection_definitions')
      .select('id')
      .eq('slug', slug)
      .eq('tenant_id', DEFAULT_TENANT)
      .maybeSingle()
    assert.equal(existing, null)
    const created = ok(
      await supabase
        .from('collection_definitions')
        .insert({
          name: def.name ?? slug,
          slug,
          description: def.description ?? null,
          icon: def.icon ?? null,
          color: def.color ?? '#6b7280',
          tenant_id: DEFAULT_TENANT,
        })
        .select('id')
        .single(),
    )
    ok(
      await supabase.from('collection_fields').insert(
        def.fields.map((f, i) => ({
          collection_id: created.id,
          field_key: f.field_key,
          field_type: f.field_type,
          label: f.label,
          sort_order: f.sort_order ?? i,
          required: f.required ?? false,
          options: f.options ?? null,
          is_title_field: f.is_title_field ?? false,
          tenant_id: DEFAULT_TENANT,
        })),
      ),
    )
    ok(
      await supabase.from('collection_views').insert(
        def.views.map((v, i) => ({
          collection_id: created.id,
          name: v.name,
          view_type: v.view_type,
          config: v.config ?? {},
          is_default: v.is_default ?? i === 0,
          sort_order: v.sort_order ?? i,
          tenant_id: DEFAULT_TENANT,
        })),
      ),
    )
    assert.equal(psql(`SELECT count(*) FROM public.collection_fields WHERE collection_id = :'c'`, { c: created.id }), String(def.fields.length))
    assert.equal(psql(`SELECT string_agg(view_type, ',' ORDER BY sort_order) FROM public.collection_views WHERE collection_id = :'c'`, { c: created.id }), 'table,kanban,calendar')
  })

  test(`the /setup page's complete_setup as a signed-in user sets up that user's tenant only ${ui('app/setup/actions.ts:90', 'app/setup/actions.ts:106', 'lib/audit/log.ts:20')}`, async () => {
    const { error } = await ada.rpc('complete_setup', {
      p_name: 'Acme',
      p_slug: 'acme',
      p_description: 'Robots for hire',
      p_owner_name: 'Ada Lovelace',
      p_preferred_name: 'Ada',
      p_timezone: 'Europe/London',
      p_stages: stagesJson,
      p_fields: fieldsJson,
      p_streams: streamsJson,
    })
    assert.equal(error, null)
    const workspace = ok(await ada.from('workspace').select('id').limit(1).maybeSingle())
    ok(await logAudit(ada, { module: 'settings', entity_type: 'workspace', entity_id: workspace.id, action: 'created', summary: 'Completed workspace setup' }))
    assert.equal(psql(`SELECT tenant_id FROM public.workspace WHERE id = :'id'`, { id: workspace.id }), ids.tenantA)
    assert.equal(psql(`SELECT count(*) FROM public.audit_log WHERE entity_id = :'id' AND tenant_id = :'t'`, { id: workspace.id, t: ids.tenantA }), '1')
    // The other tenant: still not set up, none of A's stages.
    assert.deepEqual(ok(await zed.from('workspace').select('initialized').limit(1).maybeSingle()), { initialized: false })
    assert.deepEqual(ok(await zed.from('pipeline_stages').select('*').eq('entity_type', 'contact')), [])
  })

  test(`the dashboard lets a set-up tenant in and reads its settings ${ui('app/dashboard/layout.tsx:28', 'app/dashboard/layout.tsx:42', 'components/theme-applier.tsx:21')}`, async () => {
    assert.deepEqual(ok(await ada.from('workspace').select('initialized').limit(1).maybeSingle()), { initialized: true })
    const settings = ok(await ada.from('workspace').select('settings').limit(1).maybeSingle())
    assert.deepEqual(settings, { settings: {} })
  })

  test(`complete_setup for another tenant from a user is refused and changes nothing ${ui('lib/setup/run-complete-setup.ts:87')}`, async () => {
    const res = await zed.rpc('complete_setup', {
      p_name: 'Taken over',
      p_slug: 'x',
      p_description: '',
      p_owner_name: '',
      p_preferred_name: '',
      p_timezone: '',
      p_stages: [],
      p_fields: [],
      p_streams: [],
      p_tenant_id: ids.tenantA,
    })
    assert.equal(res.status, 403)
    assert.equal(res.error.code, '42501')
    assert.equal(psql(`SELECT name FROM public.workspace WHERE tenant_id = :'t'`, { t: ids.tenantA }), 'Acme')
    assert.equal(psql(`SELECT count(*) FROM public.pipeline_stages WHERE tenant_id = :'t'`, { t: ids.tenantA }), '3')
    // Bad input: a clear 400, nothing written.
    const bad = await zed.rpc('complete_setup', {
      p_name: 'Bolt', p_slug: 'bolt', p_description: '', p_owner_name: '', p_preferred_name: '', p_timezone: '',
      p_stages: { stage_key: 'not-a-list' }, p_fields: [], p_streams: [],
    })
    assert.equal(bad.status, 400)
    assert.match(bad.error.message, /p_stages must be an array of objects/)
    assert.deepEqual(ok(await zed.from('workspace').select('initialized').limit(1).maybeSingle()), { initialized: false })
    // anon may not call it.
    const anon = await (await anonClient()).rpc('complete_setup', {
      p_name: 'x', p_slug: 'x', p_description: '', p_owner_name: '', p_preferred_name: '', p_timezone: '', p_stages: [], p_fields: [], p_streams: [],
    })
    assert.equal(anon.status, 401)
  })

  test(`the schema version banner stays away: the product schema's version is the one the UI expects ${ui('app/dashboard/actions.ts:639')}`, async () => {
    const data = ok(await ada.from('_schema_version').select('version').order('version', { ascending: false }).limit(1).maybeSingle())
    assert.ok(data.version >= 25, `version ${data.version} >= EXPECTED_SCHEMA_VERSION 25`)
  })
})

describe('settings pages', () => {
  let ada
  let zed
  let workspaceId
  before(async () => {
    ada = await signedIn('ada')
    zed = await signedIn('zed')
    workspaceId = psql(`SELECT id FROM public.workspace WHERE tenant_id = :'t'`, { t: ids.tenantA })
  })

  test(`profile: read and save the owner's names and time zone ${ui('app/dashboard/settings/profile/page.tsx:49', 'app/dashboard/settings/profile/page.tsx:94', 'lib/workspace/timezone.ts:15')}`, async () => {
    const data = ok(await ada.from('workspace').select('id, owner_name, owner_preferred_name, owner_timezone').limit(1).maybeSingle())
    assert.equal(data.id, workspaceId)
    ok(await ada.from('workspace').update({ owner_name: 'Ada King', owner_preferred_name: null, owner_timezone: 'America/New_York' }).eq('id', data.id))
    assert.deepEqual(ok(await ada.from('workspace').select('owner_timezone').limit(1).maybeSingle()), { owner_timezone: 'America/New_York' })
    // A zone that is not one: a clear 400, not stored.
    const bad = await ada.from('workspace').update({ owner_timezone: 'Mars/Olympus Mons' }).eq('id', data.id)
    assert.equal(bad.status, 400)
    assert.match(bad.error.message, /unknown time zone/)
    assert.equal(psql(`SELECT owner_timezone FROM public.workspace WHERE id = :'id'`, { id: workspaceId }), 'America/New_York')
  })

  test(`general: the workspace's name, slug and description ${ui('app/dashboard/settings/general/page.tsx:35', 'app/dashboard/settings/general/page.tsx:63', 'lib/workspace/branch.ts:12')}`, async () => {
    const ws = ok(await ada.from('workspace').select('*').limit(1).maybeSingle())
    assert.equal(ws.name, 'Acme')
    ok(await ada.from('workspace').update({ name: 'Acme Robotics', slug: 'acme-robotics', description: null }).eq('id', ws.id))
    assert.deepEqual(ok(await ada.from('workspace').select('slug').limit(1).maybeSingle()), { slug: 'acme-robotics' })
    // B updating A's row by its id changes nothing.
    const res = await zed.from('workspace').update({ name: 'Hijacked' }).eq('id', ws.id).select()
    assert.deepEqual(res.data, [])
    assert.equal(psql(`SELECT name FROM public.workspace WHERE id = :'id'`, { id: ws.id }), 'Acme Robotics')
  })

  test(`budgets: the workspace's default agent budget ${ui('app/dashboard/settings/budgets/page.tsx:24', 'app/dashboard/settings/budgets/page.tsx:52')}`, async () => {
    const d = ok(await ada.from('workspace').select('*').limit(1).maybeSingle())
    assert.equal(d.default_agent_budget_usd, null)
    assert.equal(d.default_soft_threshold_pct, 80)
    assert.equal(d.default_hard_cutoff, true)
    ok(await ada.from('workspace').update({ default_agent_budget_usd: 25.5, default_soft_threshold_pct: 75, default_hard_cutoff: false }).eq('id', d.id))
    const after = ok(await ada.from('workspace').select('*').limit(1).maybeSingle())
    assert.equal(after.default_agent_budget_usd, 25.5)
    assert.equal(after.default_soft_threshold_pct, 75)
    assert.equal(after.default_hard_cutoff, false)
  })

  test(`modules and appearance keep their keys in workspace.settings ${ui('app/dashboard/settings/modules/page.tsx:38', 'app/dashboard/settings/modules/page.tsx:59', 'app/dashboard/settings/modules/page.tsx:67', 'app/dashboard/settings/appearance/page.tsx:231', 'app/dashboard/settings/appearance/page.tsx:238')}`, async () => {
    const first = ok(await ada.from('workspace').select('id, settings').limit(1).maybeSingle())
    const mods = first.settings?.modules ?? { crm: true }
    const { data: ws } = await ada.from('workspace').select('settings').eq('id', first.id).maybeSingle()
    ok(await ada.from('workspace').update({ settings: { ...(ws?.settings ?? {}), modules: { ...mods, crm: false } } }).eq('id', first.id))
    const { data: ws2 } = await ada.from('workspace').select('settings').eq('id', first.id).maybeSingle()
    const theme = { brandColor: '#ff5500', mode: 'dark', surfaceWarmth: 2, overrides: {} }
    ok(await ada.from('workspace').update({ settings: { ...ws2.settings, theme } }).eq('id', first.id))
    assert.deepEqual(ok(await ada.from('workspace').select('settings').limit(1).maybeSingle()).settings, { modules: { crm: false }, theme })
  })

  test(`pipeline stages: list, add, rename, make default, delete ${ui('app/dashboard/settings/pipeline/page.tsx:207', 'app/dashboard/settings/pipeline/page.tsx:271', 'app/dashboard/settings/pipeline/page.tsx:223', 'app/dashboard/settings/pipeline/page.tsx:242', 'app/dashboard/settings/pipeline/page.tsx:246', 'app/dashboard/settings/pipeline/page.tsx:251', 'hooks/use-pipeline-stages.ts:21')}`, async () => {
    const stages = ok(await ada.from('pipeline_stages').select('*').eq('entity_type', 'contact').order('sort_order', { ascending: true }))
    assert.deepEqual(stages.map((s) => s.stage_key), ['identified', 'contacted', 'won'])
    const added = ok(
      await ada
        .from('pipeline_stages')
        .insert({ entity_type: 'contact', stage_key: 'nurture', label: 'Nurture', color: '#aaaaaa', sort_order: 3, is_terminal: false, is_default: stages.length === 0 })
        .select()
        .single(),
    )
    assert.equal(added.tenant_id, ids.tenantA)
    ok(await ada.from('pipeline_stages').update({ label: 'Nurturing' }).eq('id', added.id))
    ok(await ada.from('pipeline_stages').update({ is_default: false }).eq('entity_type', 'contact').eq('is_default', true))
    ok(await ada.from('pipeline_stages').update({ is_default: true }).eq('id', added.id))
    // Two defaults at once: refused (one default stage per entity type).
    const two = await ada.from('pipeline_stages').update({ is_default: true }).eq('stage_key', 'won')
    assert.equal(two.status, 409)
    ok(await ada.from('pipeline_stages').delete().eq('id', added.id))
    assert.equal(psql(`SELECT count(*) FROM public.pipeline_stages WHERE id = :'id'`, { id: added.id }), '0')
    // B sees none of A's stages and deletes none.
    assert.deepEqual(ok(await zed.from('pipeline_stages').delete().eq('entity_type', 'contact').select()), [])
    assert.equal(psql(`SELECT count(*) FROM public.pipeline_stages WHERE tenant_id = :'t'`, { t: ids.tenantA }), '3')
  })

  test(`custom fields: list, add, change options, reorder, delete ${ui('hooks/use-field-definitions.ts:31', 'hooks/use-field-definitions.ts:63', 'components/shared/select-field-picker.tsx:49', 'app/dashboard/settings/fields/page.tsx:431', 'app/dashboard/settings/fields/page.tsx:361')}`, async () => {
    const fields = ok(await ada.from('field_definitions').select('*').eq('entity_type', 'contact').order('sort_order', { ascending: true }))
    assert.deepEqual(fields.map((f) => f.field_key), ['deal_value', 'source'])
    const f = ok(
      await ada
        .from('field_definitions')
        .insert({ entity_type: 'contact', field_key: 'tier', field_type: 'select', label: 'Tier', field_group: null, sort_order: 2, required: false, options: ['Gold'] })
        .select()
        .single(),
    )
    ok(await ada.from('field_definitions').update({ options: ['Gold', 'Silver'] }).eq('id', f.id))
    ok(await ada.from('field_definitions').update({ sort_order: 30 }).eq('id', f.id))
    assert.equal(psql(`SELECT options::text || ' ' || sort_order FROM public.field_definitions WHERE id = :'id'`, { id: f.id }), '["Gold", "Silver"] 30')
    // The same key twice: 409.
    const dup = await ada.from('field_definitions').insert({ entity_type: 'contact', field_key: 'tier', field_type: 'text', label: 'Again' })
    assert.equal(dup.status, 409)
    ok(await ada.from('field_definitions').delete().eq('id', f.id))
  })
})
