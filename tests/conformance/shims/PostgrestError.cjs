// Stands for the checkout's ../src/PostgrestError (its default export) in postgrest-js's tests:
// the published package's class, so the class a test checks a rejection against (instanceof,
// toThrow) is the one the client under test throws.
const { PostgrestError } = require('@supabase/postgrest-js')

module.exports = { __esModule: true, default: PostgrestError, PostgrestError }
