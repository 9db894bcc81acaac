// The conformance runners' report: from jest's JSON results and the tests that reached the server
// (track-server.cjs), prints total, passed, failed, and each failed test with its file, name and
// the first line of its failure; writes the same as JSON (the machine-readable summary).
// Usage: node summarize.mjs <jest results> <server hits> <summary out> <suite> <package root>
// Exit status: 0 when every test that ran passed, 1 otherwise.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { relative } from 'node:path'

const [resultsPath, hitsPath, outPath, suite, root] = process.argv.slice(2)
const results = JSON.parse(readFileSync(resultsPath, 'utf8'))
const key = (file, name) => `${relative(root, file)}\0${name}`
const server = new Set(
  existsSync(hitsPath)
    ? readFileSync(hitsPath, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .map((h) => key(h.testPath, h.name))
    : [],
)

const tests = []
const suiteErrors = []
for (const file of results.testResults) {
  if (file.status === 'failed' && file.assertionResults.length === 0) {
    // The file did not load or compile: none of its tests ran.
    suiteErrors.push({ file: relative(root, file.name), message: firstLine(file.message) })
  }
  for (const t of file.assertionResults) {
    tests.push({
      file: relative(root, file.name),
      name: t.fullName,
      status: t.status,
      server: server.has(key(file.name, t.fullName)),
      message: t.status === 'failed' ? firstLine(t.failureMessages.join('\n')) : undefined,
    })
  }
}

function firstLine(text) {
  // jest's messages start with ANSI colours and a blank line or two.
  const plain = String(text ?? '').replace(/\u001b\[[0-9;]*m/g, '')
  return plain.split('\n').map((l) => l.trim()).find((l) => l.length > 0) ?? ''
}

const ran = tests.filter((t) => t.status === 'passed' || t.status === 'failed')
const count = (list, status) => list.filter((t) => t.status === status).length
const serverTests = ran.filter((t) => t.server)
const summary = {
  suite,
  note: process.env.AWP_CONFORMANCE_NOTE || undefined,
  total: ran.length,
  passed: count(ran, 'passed'),
  failed: count(ran, 'failed'),
  skipped: tests.length - ran.length,
  server: { total: serverTests.length, passed: count(serverTests, 'passed'), failed: count(serverTests, 'failed') },
  files_that_did_not_run: suiteErrors,
  failures: ran.filter((t) => t.status === 'failed').map(({ file, name, server: s, message }) => ({ file, name, server: s, message })),
}
writeFileSync(outPath, `${JSON.stringify(summary, null, 2)}\n`)

const pct = (a, b) => (b ? `${((100 * a) / b).toFixed(1)} %` : 'n/a')
console.log(`\n${suite}: ${summary.total} tests ran, ${summary.passed} passed, ${summary.failed} failed` +
  (summary.skipped ? `, ${summary.skipped} not run (filtered or skipped)` : ''))
if (summary.note) console.log(`  NOTE: ${summary.note}`)
console.log(`  that reached the server: ${summary.server.total}, passed ${summary.server.passed} (${pct(summary.server.passed, summary.server.total)})`)
for (const e of suiteErrors) console.log(`  file did not run: ${e.file}: ${e.message}`)
if (summary.failures.length) console.log('failed:')
for (const f of summary.failures) {
  console.log(`  ${f.file} › ${f.name}${f.server ? '' : '   [no request reached the server]'}`)
  if (f.message) console.log(`      ${f.message.slice(0, 300)}`)
}
console.log(`summary: ${outPath}`)
process.exit(summary.failed || suiteErrors.length ? 1 : 0)
