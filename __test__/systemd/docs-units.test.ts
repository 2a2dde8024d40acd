// The systemd units the docs show (every ```ini block with a [Service] in
// README.md and docs/*.md), run as written in a real systemd (see
// container.ts): procward installed the way they say (/srv/app, `npm install
// procward`), a daemon at /usr/local/bin/api. It starts, serves, is the
// unit's main process, reports its status, and stops leaving nothing.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  CHECKOUT,
  dropUnits,
  INIT,
  inside,
  installUnit,
  markSkippedWithoutSystemd,
  removeInside,
  sh,
  show,
  systemctl,
  unitProcesses,
  writeInside,
} from './container'

// (units.test.ts says why on stderr, once per run.)
markSkippedWithoutSystemd('the documented units in a real systemd')

const ROOT = join(__dirname, '..', '..')
const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => join('docs', f))].filter((f) =>
  f.endsWith('.md'),
)

/**
 * Every ```ini block with a [Service] section, with where it is; not one
 * marked `<!-- not-runnable: why -->` (a unit for a program of the
 * reader's, proved by a test of its own).
 */
function documentedUnits(): { where: string; text: string }[] {
  const out: { where: string; text: string }[] = []
  for (const page of PAGES) {
    const text = readFileSync(join(ROOT, page), 'utf8')
    for (const m of text.matchAll(/^```ini\n([\s\S]*?)^```$/gm)) {
      const unit = m[1] ?? ''
      if (!/^\[Service\]$/m.test(unit)) continue
      const before = text.slice(0, m.index).trimEnd().split('\n').at(-1) ?? ''
      if (/^<!--\s*not-runnable:\s*\S.*-->$/.test(before)) continue
      const line = text.slice(0, m.index).split('\n').length
      out.push({ where: `${page}:${line}`, text: unit })
    }
  }
  return out
}

const UNITS = documentedUnits()

// The daemon the units name: an HTTP server on --port (default 8080).
const API = `#!/usr/bin/node
const i = process.argv.indexOf('--port')
const port = i > 0 ? Number(process.argv[i + 1]) : 8080
require('node:http')
  .createServer((req, res) => res.end(String(process.pid)))
  .listen(port, '127.0.0.1', () => console.log('api listening on ' + port))
`

describe.skipIf(INIT === 0)('the systemd units the docs show, as written', { timeout: 90_000 }, () => {
  beforeAll(async () => {
    // /usr is the host's, read-only: /usr/local/bin gets a tmpfs of its own,
    // in the container's mount namespace only (unmounted in afterAll).
    await sh('mount -t tmpfs -o mode=755 procward-test /usr/local/bin')
    writeInside('/usr/local/bin/api', API, 0o755)
    // `npm install procward` in /srv/app, as far as the unit can tell.
    await sh(
      `mkdir -p /srv/app/node_modules/.bin && ln -sfn ${CHECKOUT} /srv/app/node_modules/procward &&
       ln -sfn ../procward/bin/procward.js /srv/app/node_modules/.bin/procward`,
    )
  })
  afterAll(async () => {
    await sh('umount /usr/local/bin')
    removeInside('/srv/app')
  })
  afterEach(dropUnits)

  it('the docs show units', () => {
    expect(UNITS.map((u) => u.where.split(':')[0])).toEqual(['README.md', 'docs/service-manager.md'])
  })

  it.each(UNITS)('$where', async ({ text }) => {
    await installUnit('api.service', text)
    const r = await inside(['systemctl', 'start', 'api.service'])
    expect(r.stdout + r.stderr).toBe('')
    expect(r.code).toBe(0)
    const s = await show('api.service', 'ActiveState', 'MainPID', 'StatusText', 'NRestarts')
    expect(s.ActiveState).toBe('active')
    // procward itself is the main process (not npm, not a shell), and its
    // daemon serves on the documented port.
    expect(await sh(`tr '\\0' ' ' </proc/${s.MainPID}/cmdline`)).toMatch(
      /^node \/srv\/app\/node_modules\/\.bin\/procward run /,
    )
    const daemon = (await unitProcesses('api.service')).find((p) =>
      p.cmd.startsWith('/usr/bin/node /usr/local/bin/api'),
    )
    expect(daemon).toBeDefined()
    expect(s.StatusText).toBe(`api running, pid ${daemon?.pid}`)
    const served = await sh(
      `/usr/bin/node -e "require('http').get('http://127.0.0.1:8080', (r) => r.pipe(process.stdout))"`,
    )
    expect(served).toBe(String(daemon?.pid))
    // procward status, from the record the unit names.
    const status = await inside(['/srv/app/node_modules/.bin/procward', 'status', '/run/api/state.json'])
    expect(status.code).toBe(0)
    if (/^WatchdogSec=/m.test(text)) {
      expect((await show('api.service', 'WatchdogUSec')).WatchdogUSec).not.toBe('0')
    }

    await systemctl('stop', 'api.service')
    expect(await unitProcesses('api.service')).toEqual([])
    expect(await show('api.service', 'ActiveState', 'Result', 'NRestarts')).toEqual({
      ActiveState: 'inactive',
      Result: 'success',
      NRestarts: s.NRestarts,
    })
    // The record outlives the stop (RuntimeDirectoryPreserve=yes): status
    // says what systemd says, and the next start finds it (its takeover).
    const after = await inside(['/srv/app/node_modules/.bin/procward', 'status', '/run/api/state.json'])
    expect(after.stdout).toMatch(/Active: inactive \(dead\)/)
    expect(after.code).toBe(3)
  })
})
