import { describe, expect, it } from 'vitest'
import { PROCWARD, trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()

describe("handleSignals and the application's own once-listener", () => {
  it("an app's process.once('SIGTERM') listener still wins: no re-raise, its shutdown completes", async () => {
    const app = [
      `const { Supervisor } = require(${JSON.stringify(PROCWARD)})`,
      "const sup = new Supervisor({ command: 'sleep', args: ['1000'], handleSignals: true })",
      "process.once('SIGTERM', () => {",
      "  console.log('shutdown begins')",
      // The application's own cleanup takes a few turns of the loop.
      "  setTimeout(() => { console.log('shutdown done'); process.exit(0) }, 300)",
      '})',
      "sup.start().then(() => console.log('started ' + sup.status().pid))",
    ].join('\n')
    const proc = others.spawn(process.execPath, ['-e', app], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    proc.stdout?.on('data', (d) => (out += d))
    const end = new Promise<{ code: number | null; signal: string | null }>((r) =>
      proc.once('exit', (code, signal) => r({ code, signal })),
    )
    await waitFor(() => out.includes('started'), 10_000, 'the supervisor to start')
    others.track(Number(/started (\d+)/.exec(out)?.[1]))
    proc.kill('SIGTERM')
    expect(await end).toEqual({ code: 0, signal: null })
    expect(out).toContain('shutdown done')
  })
})
