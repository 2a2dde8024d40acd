import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.ts'],
    // Native addon: one process per file (vitest's advice), and files one at
    // a time because suites count processes, zombies and fds.
    pool: 'forks',
    fileParallelism: false,
    // Bounds, not speed targets: CI runs cross builds and emulated runs
    // beside the suite, and a test that starts dozens of Node processes
    // may need more than 30 s on a loaded machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
})
