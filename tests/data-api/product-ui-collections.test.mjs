// The original product's collections (user-defined tables) on awp, every call as its code makes
// it (yourhq/yourhq at 86f99c2, apps/ui): the list with each collection's record count, a blank
// collection with its seeded title field and table view, a template installed under a free
// slug, fields and views edited, records added, edited, archived, restored and deleted, and the
// universal search over record values with the collection by its hint. Tenant B sees and
// changes none of it, and cannot put a record into one of A's collections.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import { claimsOf, ids, psql, sameAsPsql, signedIn } from './lib/world.mjs'
import { assertOrdered, ok, ui } from './lib/product-ui.mjs'

describe('collections', () => {
  let ada
  let zed
  let claims
  let blank
  let installed
  let record
  before(async () => {
    ada = await signedIn('ada')
    zed = await signedIn('zed')
    claims = await claimsOf(ada)
  })

  test(`a blank collection, seeded with a title field and a table view ${ui('hooks/use-collections.ts:103', 'hooks/use-collections.ts:120', 'hooks/use-collections.ts:130')}`, async () => {
    const data = ok(
      await ada
        .from('collection_definitions')
        .insert({ name: 'Reading list', slug: 'reading-list', description: null, icon: null, color: '#6b7280' })
        .select()
        .single(),
    )
    blank = data.id
    assert.equal(data.tenant_id, ids.tenantA)
    ok(await ada.from('collection_fields').insert({ collection_id: data.id, field_key: 'name', field_type: 'text', label: 'Name', sort_order: 0, required: false, is_title_field: true }))
    ok(await ada.from('collection_views').insert({ collection_id: data.id, name: 'All Records', view_type: 'table', config: {}, is_default: true, sort_order: 0 }))
    // The same slug again in this tenant: 409; another tenant may use it.
    const dup = await ada.from('collection_definitions').insert({ name: 'Again', slug: 'reading-list' }).select().single()
    assert.equal(dup.status, 409)
    const theirs = ok(await zed.from('collection_definitions').insert({ name: 'Theirs', slug: 'reading-list' }).select().single())
    assert.equal(theirs.tenant_id, ids.tenantB)
  })

  test(`a template installed under a free slug, with its fields and views ${ui('hooks/use-collections.ts:76', 'hooks/use-collections.ts:159', 'hooks/use-collections.ts:170', 'hooks/use-collections.ts:183', 'hooks/use-collections.ts:212', 'hooks/use-collections.ts:224')}`, async () => {
    const templates = ok(await ada.from('collection_templates').select('*').order('sort_order', { ascending: true }))
    const template = templates.find((t) => t.slug === 'job-search')
    assert.ok(template, 'the job-search template is offered')
    // The slug is taken (a first install), so the UI counts up: job-search-2.
    psql(`INSERT INTO public.collection_definitions (tenant_id, name, slug) VALUES (:'t', 'Jobs', 'job-search')`, { t: ids.tenantA })
    const { data: existing } = await ada.from('collection_definitions').select('id').eq('slug', template.slug).maybeSingle()
    assert.ok(existing)
    let finalSlug = template.slug
    for (let counter = 2; ; counter++) {
      const candidate = `${template.slug}-${counter}`
      const { data: check } = await ada.from('collection_definitions').select('id').eq('slug', candidate).maybeSingle()
      if (!check) {
        finalSlug = candidate
        break
      }
    }
    const data = ok(
      await ada
        .from('collection_definitions')
        .insert({ name: template.name, slug: finalSlug, description: template.description || null, icon: template.icon || null })
        .select()
        .single(),
    )
    installed = data.id
    const def = template.definition
    ok(
      await ada.from('collection_fields').insert(
        def.fields.map((f, i) => ({
          collection_id: data.id, field_key: f.field_key, field_type: f.field_type, label: f.label,
          sort_order: f.sort_order ?? i, required: f.required ?? false, options: f.options ?? null,
          default_value: f.default_value ?? null, is_title_field: f.is_title_field ?? false,
        })),
      ),
    )
    ok(
      await ada.from('collection_views').insert(
        def.views.map((v, i) => ({ collection_id: data.id, name: v.name, view_type: v.view_type, config: v.config ?? {}, is_default: v.is_default ?? i === 0, sort_order: i })),
      ),
    )
    assert.equal(data.slug, 'job-search-2')
  })

  test(`the list with record counts, the sidebar, one collection by slug ${ui('hooks/use-collections.ts:50', 'hooks/use-sidebar-collections.ts:58', 'app/dashboard/collections/[slug]/page.tsx:49')}`, async () => {
    const list = await sameAsPsql(
      ada.from('collection_definitions').select('*, collection_records(count)').order('sort_order', { ascending: true }).order('created_at', { ascending: false }),
      claims,
      `SELECT d.*, json_build_array(json_build_object('count',
          (SELECT count(*) FROM public.collection_records r WHERE r.tenant_id = d.tenant_id AND r.collection_id = d.id))) AS collection_records
         FROM public.collection_definitions d`,
    )
    assertOrdered(list, 'sort_order', { desc: false })
    assert.ok(list.some((c) => c.id === installed))
    const sidebar = ok(await ada.from('collection_definitions').select('id, name, slug, icon, color').is('archived_at', null).order('sort_order', { ascending: true }).order('created_at', { ascending: false }))
    assert.ok(sidebar.some((c) => c.slug === 'reading-list'))
    const one = ok(await ada.from('collection_definitions').select('*').eq('slug', 'reading-list').single())
    assert.equal(one.id, blank)
  })

  test(`fields and views: listed, added, edited, reordered, made default ${ui('hooks/use-collection-records.ts:67', 'hooks/use-collection-records.ts:93', 'hooks/use-collection-records.ts:293', 'hooks/use-collection-records.ts:320', 'hooks/use-collection-records.ts:364', 'hooks/use-collection-records.ts:378', 'hooks/use-collection-records.ts:405', 'hooks/use-collection-records.ts:411')}`, async () => {
    const fields = ok(await ada.from('collection_fields').select('*').eq('collection_id', installed).order('sort_order', { ascending: true }))
    assert.equal(fields[0].field_key, 'company')
    const added = ok(
      await ada.from('collection_fields').insert({ collection_id: installed, field_key: 'salary', field_type: 'number', label: 'Salary', sort_order: 99, required: false, options: null, is_title_field: false }).select().single(),
    )
    ok(await ada.from('collection_fields').update({ label: 'Salary (EUR)' }).eq('id', added.id))
    ok(await ada.from('collection_fields').update({ sort_order: 0 }).eq('id', added.id))
    // A type the UI does not have: a clear 400.
    const bad = await ada.from('collection_fields').insert({ collection_id: installed, field_key: 'x', field_type: 'spreadsheet', label: 'X' })
    assert.equal(bad.status, 400)
    const views = ok(await ada.from('collection_views').select('*').eq('collection_id', installed).order('sort_order', { ascending: true }))
    const board = ok(await ada.from('collection_views').insert({ collection_id: installed, name: 'Board', view_type: 'kanban', config: { group_by_field: 'stage' }, is_default: views.length === 0, sort_order: 10 }).select().single())
    ok(await ada.from('collection_views').update({ is_default: false }).eq('collection_id', installed).neq('id', board.id))
    ok(await ada.from('collection_views').update({ is_default: true }).eq('id', board.id))
    assert.equal(psql(`SELECT string_agg(name, ',') FROM public.collection_views WHERE collection_id = :'c' AND is_default`, { c: installed }), 'Board')
    // B: none of A's fields, and no field of its own on A's collection.
    assert.deepEqual(ok(await zed.from('collection_fields').select('*').eq('collection_id', installed)), [])
    const cross = await zed.from('collection_fields').insert({ collection_id: installed, field_key: 'evil', field_type: 'text', label: 'Evil' })
    assert.equal(cross.status, 409)
  })

  test(`records: added with defaults, edited, archived, restored, deleted ${ui('hooks/use-collection-records.ts:76', 'hooks/use-collection-records.ts:139', 'hooks/use-collection-records.ts:169', 'hooks/use-collection-records.ts:217', 'hooks/use-collection-records.ts:239', 'hooks/use-collection-records.ts:262', 'hooks/use-collection-records.ts:463')}`, async () => {
    const data = ok(await ada.from('collection_records').insert({ collection_id: installed, values: { stage: 'interested', company: 'Initech', role: 'Engineer' } }).select().single())
    record = data.id
    ok(await ada.from('collection_records').update({ values: { ...data.values, stage: 'applied' } }).eq('id', record))
    const many = ok(await ada.from('collection_records').insert([{ collection_id: installed, values: { company: 'Hooli' } }, { collection_id: installed, values: { company: 'Pied Piper' } }]).select('id'))
    assert.equal(many.length, 2)
    const rows = ok(await ada.from('collection_records').select('*').eq('collection_id', installed).order('sort_order', { ascending: true }).order('created_at', { ascending: false }))
    assert.equal(rows.length, 3)
    ok(await ada.from('collection_records').update({ archived_at: new Date().toISOString() }).eq('id', many[0].id))
    ok(await ada.from('collection_records').update({ archived_at: null }).eq('id', many[0].id))
    ok(await ada.from('collection_records').delete().eq('id', many[1].id))
    assert.equal(psql(`SELECT count(*) FROM public.collection_records WHERE collection_id = :'c'`, { c: installed }), '2')
    assert.equal(psql(`SELECT "values" ->> 'stage' FROM public.collection_records WHERE id = :'id'`, { id: record }), 'applied')
    // B cannot add a record to A's collection, nor read or delete A's.
    const cross = await zed.from('collection_records').insert({ collection_id: installed, values: { company: 'Evil' } })
    assert.equal(cross.status, 409)
    assert.deepEqual(ok(await zed.from('collection_records').delete().eq('collection_id', installed).select()), [])
  })

  test(`the universal search over record values, with each record's collection by its hint ${ui('hooks/use-universal-search.ts:162')}`, async () => {
    const data = ok(
      await ada
        .from('collection_records')
        .select('id, collection_id, values, collection:collection_definitions!collection_records_collection_id_fkey(name, slug, icon, color)')
        .is('archived_at', null)
        .textSearch('values', 'Initech', { type: 'plain' })
        .order('updated_at', { ascending: false })
        .limit(5),
    )
    assert.deepEqual(data.map((r) => [r.id, r.collection.slug]), [[record, 'job-search-2']])
    assert.deepEqual(ok(await zed.from('collection_records').select('id').textSearch('values', 'Initech', { type: 'plain' })), [])
  })

  test(`a collection archived, restored, renamed and deleted with its rows ${ui('hooks/use-collections.ts:245', 'hooks/use-collections.ts:268', 'hooks/use-collections.ts:294', 'hooks/use-collections.ts:317')}`, async () => {
    ok(await ada.from('collection_definitions').update({ archived_at: new Date().toISOString() }).eq('id', blank))
    ok(await ada.from('collection_definitions').update({ archived_at: null }).eq('id', blank))
    ok(await ada.from('collection_definitions').update({ name: 'Books', icon: '📚' }).eq('id', blank))
    assert.deepEqual(ok(await zed.from('collection_definitions').delete().eq('id', blank).select()), [])
    ok(await ada.from('collection_definitions').delete().eq('id', blank))
    assert.equal(psql(`SELECT count(*) FROM public.collection_fields WHERE collection_id = :'c'`, { c: blank }), '0')
  })
})
