// jest for supabase-js's integration test (tests/conformance/supabase-js-integration.sh), on a
// copy of the package (AWP_CONFORMANCE_PKG): its jest.config.ts at v2.112.2 (ts-jest, its
// jest.setup.ts, clearMocks) for test/integration.test.ts alone, the published
// @supabase/supabase-js of that release in place of ../src/index and ../src/tracing, and the
// setup file that notes which tests reach the server. ts-jest only transpiles here: the package's
// tsconfig refers to the monorepo's other packages, which a copy of one package does not have
// (types are not what this run is about).
const path = require('node:path')

const pkg = process.env.AWP_CONFORMANCE_PKG
if (!pkg) throw new Error('AWP_CONFORMANCE_PKG is not set: run tests/conformance/supabase-js-integration.sh')

module.exports = {
  rootDir: pkg,
  testEnvironment: 'node',
  // The runners' packages, for the copy's imports and the mapped clients.
  modulePaths: [path.join(__dirname, 'node_modules')],
  transform: {
    '^.+\\.tsx?$': [
      require.resolve('ts-jest'),
      {
        tsconfig: { module: 'commonjs', target: 'es2022', esModuleInterop: true, isolatedModules: true },
        diagnostics: false,
      },
    ],
  },
  // By path: inside the copy, the bare names would resolve to the package itself (its own
  // package.json is @supabase/supabase-js, whose dist/ a checkout does not have).
  moduleNameMapper: {
    '^\\.\\./src/index$': require.resolve('@supabase/supabase-js'),
    '^\\.\\./src/tracing$': require.resolve('@supabase/supabase-js/tracing'),
  },
  testMatch: ['<rootDir>/test/integration.test.ts'],
  clearMocks: true,
  setupFilesAfterEnv: [path.join(pkg, 'jest.setup.ts'), path.join(__dirname, 'track-server.cjs')],
}
