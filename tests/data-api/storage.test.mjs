// Files through the real @supabase/supabase-js storage client (/storage/v1, docs/storage.md):
// the product's two flows (knowledge uploads in `assets`: upload, getPublicUrl, remove; gateway
// backups in `gateway-backups`, with the exact requests a gateway host sends), multi-megabyte
// round trips byte for byte (a Blob as a multipart form, a Buffer as a raw body), buckets,
// lists, move, copy, info, Range, public, signed and signed-upload URLs, two tenants, anon,
// and row-level security: a policy added or dropped takes effect on the next request, and no
// permissive policy lets one tenant reach another's files. At the end the store holds exactly
// the bytes the rows name.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { createClient } from '@supabase/supabase-js'
import { anonClient, config, env, eventually, ids, psql, signedIn } from './lib/world.mjs'

const serviceKey = process.env.AWP_DATA_API_SERVICE_ROLE_KEY
const storageDir = process.env.AWP_DATA_API_STORAGE_DIR

const sha = (bytes) => createHash('sha256').update(bytes).digest('hex')

async function serviceClient() {
  const { url } = await config()
  return createClient(url, serviceKey, { auth: { persistSession: false, autoRefreshToken: false } })
}

async function bytesOf(blob) {
  return Buffer.from(await blob.arrayBuffer())
}

/// Files under the store's objects folder (every version's bytes).
function storedFiles() {
  const root = join(storageDir, 'objects')
  let n = 0
  for (const sub of readdirSync(root)) n += readdirSync(join(root, sub)).length
  return n
}

describe('storage', () => {
  let ada
  let zed
  let nob
  let anon
  let service
  const docs = `docs-${randomUUID().slice(0, 8)}`
  before(async () => {
    assert.ok(serviceKey, 'AWP_DATA_API_SERVICE_ROLE_KEY is set by run.sh')
    ada = await signedIn('ada')
    zed = await signedIn('zed')
    nob = await signedIn('nob')
    anon = await anonClient()
    service = await serviceClient()
    // A private bucket shared by every tenant, with no policy yet: nobody but the service role
    // reaches it until a policy says so.
    const { error } = await service.storage.createBucket(docs, { public: false })
    assert.equal(error, null)
  })
  after(() => {
    psql(`DROP POLICY IF EXISTS docs_all ON storage.objects; DROP POLICY IF EXISTS docs_own ON storage.objects`)
  })

  test('knowledge upload as the UI does it: a File into assets, its public URL, remove', async () => {
    const itemId = randomUUID()
    const path = `${ids.tenantA}/knowledge/${itemId}/Quarterly report.pdf`
    const pdf = Buffer.concat([Buffer.from('%PDF-1.7\n'), randomBytes(200_000)])
    const file = new File([pdf], 'Quarterly report.pdf', { type: 'application/pdf' })
    const up = await ada.storage.from('assets').upload(path, file)
    assert.equal(up.error, null, JSON.stringify(up.error))
    assert.equal(up.data.path, path)
    assert.equal(up.data.fullPath, `assets/${path}`)
    const row = psql(`SELECT tenant_id || ' ' || size || ' ' || mimetype FROM storage.objects WHERE name = :'n'`, { n: path })
    assert.equal(row, `${ids.tenantA} ${pdf.length} application/pdf`)
    // The public URL, fetched as a browser would: no key, no token.
    const { publicUrl } = ada.storage.from('assets').getPublicUrl(path).data
    const res = await fetch(publicUrl)
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'application/pdf')
    assert.match(res.headers.get('content-disposition'), /^inline; filename="Quarterly report.pdf"/)
    assert.equal(sha(Buffer.from(await res.arrayBuffer())), sha(pdf))
    // Twice is a conflict (no upsert), and another tenant cannot write into A's folder.
    const again = await ada.storage.from('assets').upload(path, file)
    assert.equal(again.error?.statusCode, '409')
    const intrude = await zed.storage.from('assets').upload(`${ids.tenantA}/knowledge/x/evil.pdf`, file)
    assert.equal(intrude.error?.statusCode, '403')
    // Zed's remove of A's file removes nothing; A's does.
    const zedRemove = await zed.storage.from('assets').remove([path])
    assert.deepEqual(zedRemove.data, [])
    assert.equal((await fetch(publicUrl)).status, 200)
    const removed = await ada.storage.from('assets').remove([path])
    assert.equal(removed.error, null)
    assert.equal(removed.data.length, 1)
    assert.equal(removed.data[0].name, path)
    assert.equal((await fetch(publicUrl)).status, 404)
  })

  test('multi-megabyte round trips are byte for byte, as a Blob (a form) and a Buffer (raw)', async () => {
    const blob = randomBytes(6 * 1024 * 1024 + 123)
    const raw = randomBytes(12 * 1024 * 1024 + 7)
    const blobPath = `${ids.tenantA}/big/blob.bin`
    const rawPath = `${ids.tenantA}/big/raw.bin`
    const a = await ada.storage.from('assets').upload(blobPath, new Blob([blob]), { upsert: true })
    assert.equal(a.error, null, JSON.stringify(a.error))
    const b = await ada.storage.from('assets').upload(rawPath, raw, { contentType: 'application/octet-stream', upsert: true })
    assert.equal(b.error, null, JSON.stringify(b.error))
    const back1 = await ada.storage.from('assets').download(blobPath)
    assert.equal(back1.error, null)
    assert.equal(sha(await bytesOf(back1.data)), sha(blob))
    const back2 = await ada.storage.from('assets').download(rawPath)
    assert.equal(sha(await bytesOf(back2.data)), sha(raw))
    // The ETag is the bytes' MD5, and info tells the size and type.
    const info = await ada.storage.from('assets').info(rawPath)
    assert.equal(info.error, null)
    assert.equal(info.data.size, raw.length)
    assert.equal(info.data.contentType, 'application/octet-stream')
    assert.equal(info.data.etag, `"${createHash('md5').update(raw).digest('hex')}"`)
    // A Range read gives exactly those bytes.
    const { publicUrl } = ada.storage.from('assets').getPublicUrl(rawPath).data
    const part = await fetch(publicUrl, { headers: { Range: 'bytes=1000000-1000099' } })
    assert.equal(part.status, 206)
    assert.equal(part.headers.get('content-range'), `bytes 1000000-1000099/${raw.length}`)
    assert.deepEqual(Buffer.from(await part.arrayBuffer()), raw.subarray(1000000, 1000100))
    await ada.storage.from('assets').remove([blobPath, rawPath])
  })

  test('update, upsert, exists, list (prefix, limit, offset, sort, search), move and copy', async () => {
    const base = `${ids.tenantA}/lists`
    const s = ada.storage.from('assets')
    for (const name of ['b.txt', 'a.txt', 'c.md', 'sub/x.txt', 'sub/y.txt', 'other/z.txt']) {
      const r = await s.upload(`${base}/${name}`, Buffer.from(`content of ${name}`), { upsert: true })
      assert.equal(r.error, null, JSON.stringify(r.error))
    }
    const listed = await s.list(base)
    assert.equal(listed.error, null)
    assert.deepEqual(listed.data.map((o) => o.name), ['other', 'sub', 'a.txt', 'b.txt', 'c.md'])
    assert.equal(listed.data[0].id, null) // a folder
    assert.equal(listed.data[2].metadata.size, 'content of a.txt'.length)
    const page = await s.list(base, { limit: 2, offset: 2, sortBy: { column: 'name', order: 'desc' } })
    assert.deepEqual(page.data.map((o) => o.name), ['c.md', 'b.txt'])
    const search = await s.list(base, { search: 'b' })
    assert.deepEqual(search.data.map((o) => o.name), ['b.txt'])
    const inSub = await s.list(`${base}/sub`)
    assert.deepEqual(inSub.data.map((o) => o.name), ['x.txt', 'y.txt'])
    // A search of LIKE's wildcards matches them literally.
    assert.deepEqual((await s.list(base, { search: '%' })).data, [])

    assert.equal((await s.update(`${base}/a.txt`, Buffer.from('new content'))).error, null)
    assert.equal(await (await s.download(`${base}/a.txt`)).data.text(), 'new content')
    assert.equal((await s.exists(`${base}/a.txt`)).data, true)
    assert.equal((await s.exists(`${base}/nope.txt`)).data, false)

    assert.equal((await s.move(`${base}/b.txt`, `${base}/moved/b.txt`)).error, null)
    assert.equal((await s.exists(`${base}/b.txt`)).data, false)
    assert.equal(await (await s.download(`${base}/moved/b.txt`)).data.text(), 'content of b.txt')
    const copied = await s.copy(`${base}/c.md`, `${base}/copy/c.md`)
    assert.equal(copied.error, null)
    assert.equal(copied.data.path, `assets/${base}/copy/c.md`)
    assert.equal(await (await s.download(`${base}/copy/c.md`)).data.text(), 'content of c.md')
    // The copy stands alone: removing the source leaves it.
    await s.remove([`${base}/c.md`])
    assert.equal(await (await s.download(`${base}/copy/c.md`)).data.text(), 'content of c.md')
    // Moving into another tenant's folder is refused.
    const away = await s.move(`${base}/a.txt`, `${ids.tenantB}/stolen.txt`)
    assert.equal(away.error?.statusCode, '403')
    const all = (await s.list(base, { limit: 1000 })).data
    assert.ok(all.length > 0)
  })

  test('buckets: create, get, list, update, limits and types, empty, delete', async () => {
    const id = `limits-${randomUUID().slice(0, 8)}`
    const made = await service.storage.createBucket(id, {
      public: false,
      fileSizeLimit: '1KB',
      allowedMimeTypes: ['image/*', 'text/plain'],
    })
    assert.equal(made.error, null, JSON.stringify(made.error))
    assert.deepEqual(made.data, { name: id })
    const got = await service.storage.getBucket(id)
    assert.equal(got.data.file_size_limit, 1000)
    assert.deepEqual(got.data.allowed_mime_types, ['image/*', 'text/plain'])
    assert.equal(got.data.public, false)
    const listed = await service.storage.listBuckets({ search: id })
    assert.deepEqual(listed.data.map((b) => b.id), [id])
    const dup = await service.storage.createBucket(id)
    assert.equal(dup.error?.statusCode, '409')
    const b = service.storage.from(id)
    const big = await b.upload('big.txt', Buffer.alloc(1001, 'x'), { contentType: 'text/plain' })
    assert.equal(big.error?.statusCode, '413')
    const html = await b.upload('page.html', Buffer.from('<html>'), { contentType: 'text/html' })
    assert.equal(html.error?.statusCode, '415')
    const formHtml = await b.upload('page2.html', new Blob(['<html>'], { type: 'text/html' }))
    assert.equal(formHtml.error?.statusCode, '415')
    assert.equal((await b.upload('ok.txt', Buffer.from('fine'), { contentType: 'text/plain' })).error, null)
    const upd = await service.storage.updateBucket(id, { public: true, fileSizeLimit: 2000, allowedMimeTypes: null })
    assert.equal(upd.error, null)
    assert.equal((await service.storage.getBucket(id)).data.public, true)
    assert.equal((await b.upload('page.html', Buffer.from('<html>'), { contentType: 'text/html' })).error, null)
    // Users manage no bucket (no policy lets them), and see the shared ones.
    assert.equal((await ada.storage.createBucket(`mine-${randomUUID().slice(0, 6)}`)).error?.statusCode, '403')
    assert.equal((await ada.storage.deleteBucket(id)).error?.statusCode, '404')
    const adaSees = (await ada.storage.listBuckets()).data.map((x) => x.id)
    assert.ok(adaSees.includes('assets') && adaSees.includes(id))
    assert.equal((await anon.storage.listBuckets()).data.length, 0)
    const notEmpty = await service.storage.deleteBucket(id)
    assert.equal(notEmpty.error?.statusCode, '409')
    assert.equal((await service.storage.emptyBucket(id)).error, null)
    assert.equal((await service.storage.deleteBucket(id)).error, null)
    assert.equal((await service.storage.getBucket(id)).error?.statusCode, '404')
  })

  test('a policy added or dropped takes effect on the next request; the tenant wall holds', async () => {
    const s = (c) => c.storage.from(docs)
    const path = `${ids.tenantA}/plan.txt`
    // No policy: refused.
    assert.equal((await s(ada).upload(path, Buffer.from('plan'))).error?.statusCode, '403')
    // A careless policy letting every signed-in user do anything in the bucket...
    psql(`CREATE POLICY docs_all ON storage.objects FOR ALL TO authenticated USING (bucket_id = :'b') WITH CHECK (bucket_id = :'b')`, { b: docs })
    assert.equal((await s(ada).upload(path, Buffer.from('plan'))).error, null)
    assert.equal(await (await s(ada).download(path)).data.text(), 'plan')
    // ...still never lets another tenant's user list, read, overwrite, move or delete it.
    assert.deepEqual((await s(zed).list(ids.tenantA)).data, [])
    assert.equal((await s(zed).download(path)).error?.statusCode, '404')
    assert.equal((await s(zed).info(path)).error?.statusCode, '404')
    assert.equal((await s(zed).upload(path, Buffer.from('mine now'), { upsert: true })).error?.statusCode, '403')
    assert.deepEqual((await s(zed).remove([path])).data, [])
    assert.equal((await s(zed).move(path, 'taken.txt')).error?.statusCode, '404')
    assert.equal((await s(zed).createSignedUrl(path, 60)).error?.statusCode, '404')
    // Nor a user of no tenant, nor anon.
    assert.equal((await s(nob).upload('x.txt', Buffer.from('x'))).error?.statusCode, '403')
    assert.equal((await s(anon).download(path)).error?.statusCode, '404')
    assert.equal(await (await s(ada).download(path)).data.text(), 'plan')
    // Dropped: A reads nothing at once.
    psql(`DROP POLICY docs_all ON storage.objects`)
    assert.equal((await s(ada).download(path)).error?.statusCode, '404')
    psql(`CREATE POLICY docs_own ON storage.objects FOR ALL TO authenticated USING (bucket_id = :'b' AND owner_id = auth.uid()::text) WITH CHECK (bucket_id = :'b')`, { b: docs })
    assert.equal(await (await s(ada).download(path)).data.text(), 'plan')
  })

  test('signed URLs: bound to the object, expiring; signed uploads bound to the path', async () => {
    const s = ada.storage.from(docs)
    const path = `${ids.tenantA}/signed/photo.png`
    const png = Buffer.concat([Buffer.from('\x89PNG\r\n\x1a\n', 'binary'), randomBytes(5000)])
    assert.equal((await s.upload(path, png, { contentType: 'image/png' })).error, null)
    const signed = await s.createSignedUrl(path, 60)
    assert.equal(signed.error, null)
    const res = await fetch(signed.data.signedUrl) // no token of the user's
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'image/png')
    assert.ok(res.headers.get('expires'))
    assert.equal(sha(Buffer.from(await res.arrayBuffer())), sha(png))
    const token = new URL(signed.data.signedUrl).searchParams.get('token')
    const { url } = await config()
    const other = await fetch(`${url}/storage/v1/object/sign/${docs}/${ids.tenantA}/signed/other.png?token=${token}`)
    assert.equal(other.status, 400)
    const tampered = await fetch(signed.data.signedUrl.replace(/token=(.)/, (_, c) => `token=${c === 'a' ? 'b' : 'a'}`))
    assert.equal(tampered.status, 400)
    const many = await s.createSignedUrls([path, `${ids.tenantA}/signed/missing.png`], 60)
    assert.equal(many.data[0].error, null)
    assert.ok(many.data[0].signedUrl)
    assert.equal(many.data[1].signedUrl, null)
    const short = await s.createSignedUrl(path, 1)
    await new Promise((r) => setTimeout(r, 2100))
    const expired = await fetch(short.data.signedUrl)
    assert.equal(expired.status, 400)
    assert.match((await expired.json()).message, /expired/)

    const upPath = `${ids.tenantA}/signed/upload.txt`
    const ticket = await s.createSignedUploadUrl(upPath)
    assert.equal(ticket.error, null, JSON.stringify(ticket.error))
    const done = await anon.storage.from(docs).uploadToSignedUrl(upPath, ticket.data.token, Buffer.from('via a signed URL'))
    assert.equal(done.error, null, JSON.stringify(done.error))
    assert.equal(psql(`SELECT tenant_id FROM storage.objects WHERE bucket_id = :'b' AND name = :'n'`, { b: docs, n: upPath }), ids.tenantA)
    assert.equal(await (await s.download(upPath)).data.text(), 'via a signed URL')
    const elsewhere = await anon.storage.from(docs).uploadToSignedUrl(`${ids.tenantA}/signed/else.txt`, ticket.data.token, Buffer.from('x'))
    assert.equal(elsewhere.error?.statusCode, '400')
    // Zed may not even ask for a signed upload into A's object.
    assert.equal((await zed.storage.from('assets').createSignedUploadUrl(`${ids.tenantA}/x.txt`)).error?.statusCode, '403')
  })

  test('anon reads public buckets only, and writes nothing', async () => {
    const path = `${ids.tenantA}/anon/visible.txt`
    assert.equal((await ada.storage.from('assets').upload(path, Buffer.from('public'))).error, null)
    assert.equal(await (await anon.storage.from('assets').download(path)).data.text(), 'public')
    assert.deepEqual((await anon.storage.from('assets').list(`${ids.tenantA}/anon`)).data, [])
    // anon sees no bucket at all (the anon wall of storage.buckets): 404, nothing written.
    assert.equal((await anon.storage.from('assets').upload(`${ids.tenantA}/anon/x.txt`, Buffer.from('x'))).error?.statusCode, '404')
    assert.equal((await anon.storage.from('gateway-backups').download('default/state.tar.gz')).error?.statusCode, '404')
    // Active content uploaded by a user is a sandboxed download, whatever type it claims.
    const evil = `${ids.tenantA}/anon/evil.png`
    await ada.storage.from('assets').upload(evil, Buffer.from('<html><script>alert(1)</script>'), { contentType: 'image/png' })
    const res = await fetch(ada.storage.from('assets').getPublicUrl(evil).data.publicUrl)
    assert.match(res.headers.get('content-disposition'), /^attachment/)
    assert.equal(res.headers.get('content-security-policy').includes('sandbox'), true)
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff')
    await ada.storage.from('assets').remove([path, evil])
  })

  test('gateway backups: the requests a gateway host sends, and the UI removing one', async () => {
    const { url } = await config()
    const h = { apikey: serviceKey, Authorization: `Bearer ${serviceKey}` }
    const gw = `gw-${randomUUID().slice(0, 6)}`
    const tarballs = []
    for (const ts of ['20260101T000000Z', '20260102T000000Z', '20260103T000000Z']) {
      const body = randomBytes(300_000)
      tarballs.push({ ts, body })
      // PUT with x-upsert and the gzip type, a raw body (gateway_backup.py's create_backup).
      const put = await fetch(`${url}/storage/v1/object/gateway-backups/${gw}/state-${ts}.tar.gz`, {
        method: 'PUT',
        headers: { ...h, 'Content-Type': 'application/gzip', 'x-upsert': 'true' },
        body,
      })
      assert.equal(put.status, 200, await put.text())
    }
    // List newest first (_list_backups).
    const list = await fetch(`${url}/storage/v1/object/list/gateway-backups`, {
      method: 'POST',
      headers: { ...h, 'Content-Type': 'application/json' },
      body: JSON.stringify({ prefix: `${gw}/`, limit: 100, sortBy: { column: 'name', order: 'desc' } }),
    })
    assert.equal(list.status, 200)
    const names = (await list.json()).map((i) => i.name)
    assert.deepEqual(names, tarballs.map((t) => `state-${t.ts}.tar.gz`).reverse())
    // Download (restore_backup) byte for byte.
    const got = await fetch(`${url}/storage/v1/object/gateway-backups/${gw}/state-${tarballs[1].ts}.tar.gz`, { headers: h })
    assert.equal(got.status, 200)
    assert.equal(sha(Buffer.from(await got.arrayBuffer())), sha(tarballs[1].body))
    // Prune (_prune_old_backups): DELETE with prefixes.
    const del = await fetch(`${url}/storage/v1/object/gateway-backups`, {
      method: 'DELETE',
      headers: { ...h, 'Content-Type': 'application/json' },
      body: JSON.stringify({ prefixes: [`${gw}/state-${tarballs[0].ts}.tar.gz`] }),
    })
    assert.equal(del.status, 200)
    assert.equal((await del.json()).length, 1)
    // The UI's deleteBackupAction: the service client's remove() of a name that may not exist.
    const ui = await service.storage.from('gateway-backups').remove([`${gw}/state.tar.gz`])
    assert.equal(ui.error, null)
    assert.deepEqual(ui.data, [])
    // Users reach no backup: a host's state holds its secrets.
    assert.deepEqual((await ada.storage.from('gateway-backups').list(gw)).data, [])
    assert.equal((await ada.storage.from('gateway-backups').download(`${gw}/state-${tarballs[1].ts}.tar.gz`)).error?.statusCode, '404')
    assert.equal((await ada.storage.from('gateway-backups').upload(`${gw}/evil.tar.gz`, Buffer.from('x'), { contentType: 'application/gzip' })).error?.statusCode, '403')
    await service.storage.from('gateway-backups').remove(tarballs.map((t) => `${gw}/state-${t.ts}.tar.gz`))
  })

  test('the store holds exactly the bytes the rows name once deletions are reaped', async () => {
    if (!storageDir) return
    await eventually('every deleted version removed', () => {
      const rows = Number(psql(`SELECT count(*) FROM storage.objects`))
      const queued = Number(psql(`SELECT count(*) FROM storage.deleted_versions`))
      return queued === 0 && storedFiles() === rows
    }, { timeoutMs: 30000 })
    // Nothing is left staged either.
    for (const holder of readdirSync(join(storageDir, 'staging'))) {
      assert.deepEqual(readdirSync(join(storageDir, 'staging', holder)), [], `staging/${holder}`)
    }
    assert.ok(statSync(join(storageDir, '.awp-store')).isFile())
  })
})
