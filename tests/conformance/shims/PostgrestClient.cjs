// Stands for the checkout's ../src/PostgrestClient (its default export) in postgrest-js's tests:
// the published package's client, the one every other test runs.
const { PostgrestClient } = require('@supabase/postgrest-js')

module.exports = { __esModule: true, default: PostgrestClient, PostgrestClient }
