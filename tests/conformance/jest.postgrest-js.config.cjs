// jest for postgrest-js's own tests (tests/conformance/postgrest-js.sh), on a copy of the package
// (AWP_CONFORMANCE_PKG): the settings of its jest.config.ts at v2.112.2 (ts-jest with its
// tsconfig.test.json, one worker, its alphabetical test sequencer, 30 s a test), the published
// @supabase/postgrest-js of that release in place of ../src/index (and of the two classes some
// tests import from ../src directly), and a setup file that notes which tests reach the server.
// test/v12 is left out: it needs a PostgREST 12 on port 3012.
const path = require('node:path')

const pkg = process.env.AWP_CONFORMANCE_PKG
if (!pkg) throw new Error('AWP_CONFORMANCE_PKG is not set: run tests/conformance/postgrest-js.sh')

module.exports = {
  rootDir: pkg,
  testEnvironment: 'node',
  // The runners' packages, for the copy's imports and the mapped clients.
  modulePaths: [path.join(__dirname, 'node_modules')],
  transform: {
    '^.+\\.tsx?$': [require.resolve('ts-jest'), { tsconfig: path.join(pkg, 'tsconfig.test.json') }],
  },
  // By path: inside the copy, the bare name would resolve to the package itself (its own
  // package.json is @supabase/postgrest-js, whose dist/ a checkout does not have).
  // ../src/PostgrestError and ../src/PostgrestClient (default imports of a few tests) map to the
  // same package's classes (shims/): a rejection's class must be the client's own.
  moduleNameMapper: {
    '^\\.\\./src/index$': require.resolve('@supabase/postgrest-js'),
    '^\\.\\./src/PostgrestError$': path.join(__dirname, 'shims/PostgrestError.cjs'),
    '^\\.\\./src/PostgrestClient$': path.join(__dirname, 'shims/PostgrestClient.cjs'),
  },
  maxWorkers: 1,
  testSequencer: path.join(pkg, 'test/testSequencer.js'),
  prettierPath: require.resolve('prettier'),
  testTimeout: 30000,
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/v12/'],
  setupFilesAfterEnv: [path.join(__dirname, 'track-server.cjs')],
}
