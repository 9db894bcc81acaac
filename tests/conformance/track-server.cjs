// A jest setup file of the conformance runners: notes each test that sends a request to the
// server under test (AWP_CONFORMANCE_SERVER, comma-separated URL prefixes) into
// AWP_CONFORMANCE_HITS, one JSON line per test, so the summary can tell the tests of the server
// from the tests of the client alone (mocked fetch, types, URL building). It wraps the global
// fetch the clients call and changes nothing they see.
const fs = require('node:fs')

const hits = process.env.AWP_CONFORMANCE_HITS
const prefixes = (process.env.AWP_CONFORMANCE_SERVER ?? '').split(',').filter(Boolean)
const seen = new Set()
const original = globalThis.fetch

function urlOf(input) {
  if (typeof input === 'string') return input
  if (input instanceof URL) return input.href
  return input?.url
}

if (hits && prefixes.length && original) {
  globalThis.fetch = function fetch(input, init) {
    const url = urlOf(input)
    if (url && prefixes.some((p) => url.startsWith(p))) {
      const { currentTestName, testPath } = expect.getState()
      const key = `${testPath}\0${currentTestName}`
      if (currentTestName && !seen.has(key)) {
        seen.add(key)
        fs.appendFileSync(hits, `${JSON.stringify({ testPath, name: currentTestName })}\n`)
      }
    }
    return original.call(this, input, init)
  }
}
