import { defineConfig } from 'vitest/config';

// One project per area so `vitest run --project e2e` (or unit) can be run alone.
export default defineConfig({
  test: {
    // PGlite's cold start takes seconds; real servers and subprocesses take more.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['services/*/src/**/*.test.ts', 'gateway/src/**/*.test.ts', 'bench/**/*.test.ts'] },
      },
      {
        extends: true,
        test: { name: 'integration', include: ['test/integration/**/*.test.ts'] },
      },
      {
        extends: true,
        test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], fileParallelism: false },
      },
    ],
  },
});
