// The original product's contacts, organizations, campaigns, interactions and outreach
// templates on awp, every call as its code makes it (yourhq/yourhq at 86f99c2, apps/ui): the
// contact list with its campaign embed and filters, the contact form with the product's
// columns and its organization, a campaign's contact count, the timeline and the follow-ups,
// the universal search, the import's duplicate check. Lists equal psql's under the same claims;
// tenant B sees and changes none of it, and cannot point a row of its own at one of A's.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { claimsOf, ids, psql, sameAsPsql, signedIn } from './lib/world.mjs'
import { assertOrdered, cleanup, logAudit, ok, track, ui } from './lib/product-ui.mjs'

const CONTACT_SELECT = '*, campaign:campaigns(id, name)'
const contactsSql = (where) => `
  SELECT c.*, (SELECT row_to_json(e) FROM (SELECT k.id, k.name FROM public.campaigns k
      WHERE k.tenant_id = c.tenant_id AND k.id = c.campaign_id) e) AS campaign
    FROM public.contacts c WHERE ${where} ORDER BY c.created_at DESC`

describe('contacts and organizations', () => {
  let ada
  let zed
  let claims
  let campaign
  let contact
  let org
  before(async () => {
    ada = await signedIn('ada')
    zed = await signedIn('zed')
    claims = await claimsOf(ada)
  })
  after(cleanup)

  test(`a campaign, listed with its contacts' count ${ui('components/crm/campaigns-tab.tsx:277', 'components/crm/campaigns-tab.tsx:41', 'hooks/use-contacts.ts:153')}`, async () => {
    campaign = ok(await ada.from('campaigns').insert({ name: 'Spring outreach', description: null, channel: 'email', is_active: true }).select('id').single()).id
    const list = ok(await ada.from('campaigns').select('*, contacts(count)').order('created_at', { ascending: false }))
    assert.deepEqual(list.find((c) => c.id === campaign).contacts, [{ count: 0 }])
    assert.deepEqual(ok(await ada.from('campaigns').select('*').eq('is_active', true).order('name')).map((c) => c.id), [campaign])
  })

  test(`the contact form creates a contact with the product's fields and its organization ${ui('components/organizations/org-form.tsx:192', 'components/crm/contact-form.tsx:269', 'components/crm/contact-form.tsx:284', 'lib/audit/log.ts:20')}`, async () => {
    org = ok(await ada.from('organizations').insert({ name: 'Lovelace Labs', type: 'company', website: 'https://lovelace.test', industry: 'Robotics', tags: [] }).select('id').single()).id
    const data = {
      name: 'Grace Hopper',
      email: 'grace@navy.test',
      phone: null,
      company: 'Lovelace Labs',
      title: 'Rear Admiral',
      location: 'Arlington',
      linkedin_url: 'https://linkedin.test/grace',
      twitter_url: null,
      website_url: null,
      how_we_met: 'A conference',
      notes: null,
      status: 'identified',
      priority: 'high',
      relationship_strength: 'warm',
      source: 'Referral',
      campaign_id: campaign,
      tags: ['vip'],
      extended: { deal_value: 5000 },
      status_changed_at: new Date().toISOString(),
    }
    contact = track('contacts', ok(await ada.from('contacts').insert(data).select('id').single()).id)
    ok(await logAudit(ada, { module: 'crm', entity_type: 'contact', entity_id: contact, action: 'created', summary: "Created contact 'Grace Hopper'" }))
    ok(await ada.from('contact_organizations').insert({ contact_id: contact, org_id: org, is_current: true }))
    assert.equal(psql(`SELECT tenant_id || ' ' || full_name || ' ' || (extended ->> 'deal_value') FROM public.contacts WHERE id = :'id'`, { id: contact }), `${ids.tenantA} Grace Hopper 5000`)
    const counted = ok(await ada.from('campaigns').select('*, contacts(count)').eq('id', campaign))
    assert.deepEqual(counted[0].contacts, [{ count: 1 }])
  })

  test(`the contact list with its campaign, its filters and archived view ${ui('hooks/use-contacts.ts:127', 'hooks/use-contacts.ts:134', 'hooks/use-contacts.ts:138', 'hooks/use-contacts.ts:141', 'hooks/use-contacts.ts:132', 'app/dashboard/crm/contacts/[id]/page.tsx:15')}`, async () => {
    const base = () => ada.from('contacts').select(CONTACT_SELECT).order('created_at', { ascending: false })
    const data = await sameAsPsql(base().is('archived_at', null), claims, contactsSql('c.archived_at IS NULL'))
    assertOrdered(data, 'created_at')
    assert.deepEqual(data.find((c) => c.id === contact).campaign, { id: campaign, name: 'Spring outreach' })
    await sameAsPsql(base().is('archived_at', null).eq('status', 'identified'), claims, contactsSql(`c.archived_at IS NULL AND c.status = 'identified'`))
    await sameAsPsql(base().is('archived_at', null).eq('priority', 'high'), claims, contactsSql(`c.archived_at IS NULL AND c.priority = 'high'`))
    await sameAsPsql(base().not('archived_at', 'is', null), claims, contactsSql('c.archived_at IS NOT NULL'))
    const one = ok(await ada.from('contacts').select(CONTACT_SELECT).eq('id', contact).single())
    assert.equal(one.campaign.name, 'Spring outreach')
    // B sees none of A's contacts, and its single read of one is not there (406).
    const theirs = await zed.from('contacts').select(CONTACT_SELECT).eq('id', contact).single()
    assert.equal(theirs.status, 406)
  })

  test(`a contact's stage, custom fields, archive and restore ${ui('hooks/use-contacts.ts:248', 'components/crm/contact-detail-view.tsx:380', 'hooks/use-contacts.ts:201', 'hooks/use-contacts.ts:218')}`, async () => {
    ok(await ada.from('contacts').update({ status: 'contacted', status_changed_at: new Date().toISOString() }).eq('id', contact))
    ok(await ada.from('contacts').update({ extended: { deal_value: 7500, source: 'Inbound' } }).eq('id', contact))
    ok(await ada.from('contacts').update({ archived_at: new Date().toISOString() }).eq('id', contact))
    ok(await ada.from('contacts').update({ archived_at: null }).eq('id', contact))
    assert.equal(psql(`SELECT status || ' ' || (extended ->> 'deal_value') || ' ' || (archived_at IS NULL) FROM public.contacts WHERE id = :'id'`, { id: contact }), 'contacted 7500 true')
    // B's bulk stage change reaches none of A's.
    assert.deepEqual(ok(await zed.from('contacts').update({ status: 'lost' }).in('id', [contact]).select()), [])
  })

  test(`the contact's organizations, and an organization's people ${ui('hooks/use-contact-organizations.ts:21', 'components/crm/contact-form.tsx:140', 'components/organizations/org-detail.tsx:54', 'hooks/use-organizations.ts:67')}`, async () => {
    const links = ok(await ada.from('contact_organizations').select('*, organization:organizations(*)').eq('contact_id', contact).order('is_current', { ascending: false }).order('created_at', { ascending: false }))
    assert.deepEqual(links.map((l) => [l.organization.name, l.is_current]), [['Lovelace Labs', true]])
    const current = ok(await ada.from('contact_organizations').select('*, organization:organizations(*)').eq('contact_id', contact).eq('is_current', true).limit(1).maybeSingle())
    assert.equal(current.org_id, org)
    const people = ok(await ada.from('contact_organizations').select('*, contact:contacts(*)').eq('org_id', org).order('is_current', { ascending: false }))
    assert.deepEqual(people.map((p) => p.contact.name), ['Grace Hopper'])
    assert.ok(ok(await ada.from('organizations').select('*').order('created_at', { ascending: false })).some((o) => o.id === org))
    // B cannot tie its contact to A's organization.
    const cross = await zed.from('contact_organizations').insert({ contact_id: ids.contactB1, org_id: org, is_current: true })
    assert.equal(cross.status, 409)
    assert.deepEqual(ok(await zed.from('organizations').select('*')), [])
  })

  test(`interactions: logged from the form, the timeline, the follow-ups due ${ui('components/crm/interaction-form.tsx:151', 'components/crm/interaction-form.tsx:160', 'components/crm/interactions-timeline.tsx:67', 'hooks/use-contacts.ts:116', 'app/dashboard/actions.ts:230')}`, async () => {
    const occurredAt = '2026-04-01T10:00:00.000Z'
    const tpl = ok(await ada.from('templates').insert({ name: 'Intro', channel: 'email', stage: 'identified', subject: 'Hi', body: 'Hello {name}', is_active: true }).select('id').single()).id
    const inserted = ok(
      await ada
        .from('interactions')
        .insert({
          type: 'email', direction: 'outbound', channel: 'email', subject: 'Intro', summary: null, body: 'Hello Grace',
          occurred_at: occurredAt, next_action: 'Follow up', next_action_date: '2026-04-03T09:00:00.000Z', contact_id: contact, template_id: tpl,
        })
        .select('id')
        .single(),
    )
    ok(await ada.from('contacts').update({ last_contact_date: occurredAt }).eq('id', contact))
    assert.equal(psql(`SELECT use_count FROM public.templates WHERE id = :'id'`, { id: tpl }), '1')
    const timeline = ok(await ada.from('interactions').select('*').order('occurred_at', { ascending: false }).eq('contact_id', contact))
    assert.deepEqual(timeline.map((i) => i.id), [inserted.id])
    const due = ok(await ada.from('interactions').select('contact_id').not('next_action_date', 'is', null).lte('next_action_date', new Date().toISOString()))
    assert.ok(due.some((d) => d.contact_id === contact))
    const followUps = ok(
      await ada
        .from('interactions')
        .select('id, contact_id, next_action, next_action_date, contact:contacts(name)')
        .not('next_action_date', 'is', null)
        .lte('next_action_date', new Date().toISOString())
        .order('next_action_date', { ascending: true })
        .limit(5),
    )
    assert.deepEqual(followUps.find((f) => f.id === inserted.id).contact, { name: 'Grace Hopper' })
    assert.deepEqual(ok(await zed.from('interactions').select('*')), [])
    // B cannot log an interaction on A's contact.
    const cross = await zed.from('interactions').insert({ type: 'call', occurred_at: occurredAt, contact_id: contact })
    assert.equal(cross.status, 409)
  })

  test(`the universal search finds contacts by full_name, email or company ${ui('hooks/use-universal-search.ts:194')}`, async () => {
    const pattern = '%hopper%'
    const data = ok(
      await ada
        .from('contacts')
        .select('id, full_name, email, company')
        .or(`full_name.ilike.${pattern},email.ilike.${pattern},company.ilike.${pattern}`)
        .is('archived_at', null)
        .order('updated_at', { ascending: false })
        .limit(5),
    )
    assert.deepEqual(data.map((c) => c.full_name), ['Grace Hopper'])
    assert.deepEqual(ok(await zed.from('contacts').select('id').or(`full_name.ilike.${pattern},email.ilike.${pattern}`)), [])
  })

  test(`the import's duplicate check and the outreach templates and drafts ${ui('lib/import/execute.ts:32', 'components/crm/templates-tab.tsx:41', 'components/crm/draft-sets-section.tsx:85')}`, async () => {
    const dupes = ok(await ada.from('contacts').select('email').in('email', ['grace@navy.test', 'nobody@x.test']))
    assert.deepEqual(dupes, [{ email: 'grace@navy.test' }])
    const templates = ok(await ada.from('templates').select('*').order('created_at', { ascending: false }))
    assert.ok(templates.some((t) => t.name === 'Intro'))
    psql(`INSERT INTO public.draft_sets (tenant_id, contact_id, channel, stage, variants) VALUES (:'t', :'c', 'email', 'identified', '[{"body":"Hi"}]')`, { t: ids.tenantA, c: contact })
    const drafts = ok(await ada.from('draft_sets').select('*').eq('contact_id', contact).order('version', { ascending: false }))
    assert.deepEqual(drafts.map((d) => d.variants), [[{ body: 'Hi' }]])
    assert.deepEqual(ok(await zed.from('draft_sets').select('*')), [])
  })
})
