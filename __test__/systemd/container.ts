// The real systemd these tests run units in: PID 1 of a container booted by
// scripts/systemd-container.sh (systemd-nspawn over the host's own `/`),
// named by PROCWARD_TEST_SYSTEMD (its init's pid, as this host sees it).
// The checkout is at /opt/procward inside; units run
// `/opt/procward/bin/procward.js run …` with the host's node (under /usr).
//
// Everything is done inside, through nsenter: pids, cgroups and the journal
// are the container's. Without the variable (not root, no systemd-nspawn,
// or a vitest run outside the test command's systemd phase) the tests skip,
// saying so on one line.
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { it } from 'vitest'

const raw = process.env.PROCWARD_TEST_SYSTEMD ?? ''
/** The container's init, as this host sees it; 0 when there is none. */
export const INIT = /^\d+$/.test(raw) && existsSync(`/proc/${raw}/root/run/systemd/system`) ? Number(raw) : 0
export const SYSTEMD_SKIP_REASON =
  raw === ''
    ? 'PROCWARD_TEST_SYSTEMD is not set, so there is no systemd to run units in: run `bash scripts/systemd-container.sh with pnpm exec vitest run __test__/systemd` as root (or scripts/test.sh)'
    : `PROCWARD_TEST_SYSTEMD=${raw} is not a running systemd container`

/**
 * Without a systemd to run units in: one skipped test in the calling file,
 * `WHAT: skipped, REASON`, so its report says why (with `warn`, stderr too:
 * one file says it, once a run).
 */
export function markSkippedWithoutSystemd(what: string, warn = false): void {
  if (INIT !== 0) return
  if (warn) console.warn(`systemd tests skipped: ${SYSTEMD_SKIP_REASON}`)
  it.skip(`${what}: skipped, ${SYSTEMD_SKIP_REASON}`, () => {})
}

/** Where the checkout is inside. */
export const CHECKOUT = '/opt/procward'
export const PROCWARD_RUN = `${CHECKOUT}/bin/procward.js run`
export const FIX = `${CHECKOUT}/__test__/systemd/fixtures`

export interface Result {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs argv inside the container (all its namespaces); never rejects. */
export function inside(argv: string[], input?: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn('nsenter', ['-t', String(INIT), '-a', ...argv], {
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      stdout += d
    })
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      stderr += d
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
    if (child.stdin !== null) {
      child.stdin.on('error', () => {}) // (it exited without reading: its status says why)
      child.stdin.end(input)
    }
  })
}

/** A shell script inside; rejects (with its output) on a non-zero exit. */
export async function sh(script: string): Promise<string> {
  const r = await inside(['sh', '-c', script])
  if (r.code !== 0) throw new Error(`inside: ${script}: exit ${r.code}\n${r.stdout}${r.stderr}`)
  return r.stdout
}

/** systemctl inside; rejects on a non-zero exit. */
export async function systemctl(...args: string[]): Promise<string> {
  const r = await inside(['systemctl', '--no-pager', ...args])
  if (r.code !== 0) throw new Error(`systemctl ${args.join(' ')}: exit ${r.code}\n${r.stdout}${r.stderr}`)
  return r.stdout
}

/** Writes a file inside the container (through its root, as the host sees it). */
export function writeInside(path: string, text: string, mode = 0o644): void {
  const host = `/proc/${INIT}/root${path}`
  mkdirSync(dirname(host), { recursive: true })
  writeFileSync(host, text, { mode })
}

export function removeInside(path: string): void {
  rmSync(`/proc/${INIT}/root${path}`, { recursive: true, force: true })
}

export function existsInside(path: string): boolean {
  return existsSync(`/proc/${INIT}/root${path}`)
}

/** Properties of a unit (`systemctl show -p …`). */
export async function show(unit: string, ...props: string[]): Promise<Record<string, string>> {
  const out = await systemctl('show', unit, ...props.flatMap((p) => ['-p', p]))
  const r: Record<string, string> = {}
  for (const line of out.split('\n')) {
    const eq = line.indexOf('=')
    if (eq > 0) r[line.slice(0, eq)] = line.slice(eq + 1)
  }
  return r
}

/** The units installed here, so that `dropUnits` removes every one. */
const installed = new Set<string>()

/** Installs a unit (/etc/systemd/system/NAME) and reloads. */
export async function installUnit(name: string, text: string): Promise<void> {
  writeInside(`/etc/systemd/system/${name}`, text)
  installed.add(name)
  await systemctl('daemon-reload')
}

/**
 * Installs a Type=notify unit whose ExecStart is `procward run RUN`, with
 * `lines` (unit lines, e.g. `WatchdogSec=2s`) after it.
 */
export function installNotifyUnit(name: string, run: string, ...lines: string[]): Promise<void> {
  return installUnit(name, ['[Service]', 'Type=notify', `ExecStart=${PROCWARD_RUN} ${run}`, ...lines, ''].join('\n'))
}

/**
 * Every pid in a unit's cgroup tree (the container's pids), with its
 * command line: what a stop must leave empty.
 */
export async function unitProcesses(unit: string): Promise<{ pid: number; cmd: string }[]> {
  const out = await sh(
    `d=/sys/fs/cgroup/system.slice/${unit}; [ -d "$d" ] || exit 0
     for p in $(find "$d" -name cgroup.procs -exec cat {} +); do
       printf '%s %s\\n' "$p" "$(tr '\\0' ' ' </proc/$p/cmdline 2>/dev/null)"
     done`,
  )
  return out
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const sp = l.indexOf(' ')
      return { pid: Number(l.slice(0, sp)), cmd: l.slice(sp + 1).trim() }
    })
}

/** Whether a pid (the container's) is alive and not a zombie. */
export async function aliveInside(pid: number): Promise<boolean> {
  const r = await inside(['sh', '-c', `s=$(sed 's/.*) //' /proc/${pid}/stat 2>/dev/null | cut -c1); echo "$s"`])
  const s = r.stdout.trim()
  return s !== '' && s !== 'Z' && s !== 'X'
}

/**
 * A point in the journal's time (the container's clock, µs):
 * `journal(unit, mark)` reads what came after it. (Not a journal cursor:
 * an --after-cursor read was seen to miss an entry written after it.)
 */
export async function cursor(): Promise<string> {
  const r = await inside(['date', '+%s%6N'])
  const t = r.stdout.trim()
  if (!/^\d+$/.test(t)) throw new Error(`no time from the container: ${r.stdout}${r.stderr}`)
  return t
}

/** One journal entry: its message, and why journald ended it if not at a newline (_LINE_BREAK). */
export interface Entry {
  message: string
  lineBreak: string | null
}

/** The entries that match journalctl's `matches`, after `mark`, oldest first. */
export async function entries(matches: string[], mark?: string): Promise<Entry[]> {
  const args = ['journalctl', '-q', '--no-pager', '-o', 'json', '--output-fields=MESSAGE,_LINE_BREAK', ...matches]
  if (mark !== undefined) args.push(`--since=@${Math.floor(Number(mark) / 1e6) - 1}`)
  const r = await inside(args)
  const out: Entry[] = []
  // By cursor, once each: a read while journald rotates its file may show
  // an entry twice.
  const seen = new Set<string>()
  for (const line of r.stdout.split('\n')) {
    if (line === '') continue
    const e = JSON.parse(line) as {
      __CURSOR: string
      __REALTIME_TIMESTAMP: string
      MESSAGE?: string | number[] | null
      _LINE_BREAK?: string
    }
    if (mark !== undefined && Number(e.__REALTIME_TIMESTAMP) <= Number(mark)) continue
    if (seen.has(e.__CURSOR)) continue
    seen.add(e.__CURSOR)
    const m = e.MESSAGE
    const message = typeof m === 'string' ? m : Array.isArray(m) ? Buffer.from(m).toString('utf8') : null
    if (message !== null) out.push({ message, lineBreak: e._LINE_BREAK ?? null })
  }
  return out
}

/** The messages of the entries that match journalctl's `matches`, after `mark`, oldest first. */
export async function messages(matches: string[], mark?: string): Promise<string[]> {
  return (await entries(matches, mark)).map((e) => e.message)
}

/** The messages of a unit (its processes' and systemd's about it) after `mark`, oldest first. */
export function journal(unit: string, mark?: string): Promise<string[]> {
  return messages(['-u', unit], mark)
}

/** Polls an async condition until true, or throws after `timeoutMs`. */
export async function until(cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/**
 * Stops every unit this file installed, checks that each left nothing in
 * its cgroup, and removes them. For afterEach.
 */
export async function dropUnits(): Promise<void> {
  const left: string[] = []
  for (const name of installed) {
    await inside(['systemctl', 'stop', name])
    const procs = await unitProcesses(name)
    if (procs.length > 0) {
      left.push(`${name}: ${procs.map((p) => `${p.pid} ${p.cmd}`).join(', ')}`)
      await inside(['systemctl', 'kill', '--signal=SIGKILL', name])
    }
    await inside(['systemctl', 'reset-failed', name])
    removeInside(`/etc/systemd/system/${name}`)
  }
  installed.clear()
  await systemctl('daemon-reload')
  if (left.length > 0) throw new Error(`processes left in stopped units: ${left.join('; ')}`)
}

/** PID 1's log level: `debug` puts every notify message it gets in the journal. */
export async function logLevel(level: 'debug' | 'info'): Promise<void> {
  await inside(['systemctl', 'log-level', level])
}

/** Every sd_notify message systemd logged for `unit` (at log level debug) after `after`. */
export async function notifications(unit: string, after: string): Promise<string[]> {
  const out: string[] = []
  for (const line of await journal(unit, after)) {
    const m = /Got notification message from PID \d+ \((.*)\)$/.exec(line)
    if (m?.[1] !== undefined) out.push(m[1])
  }
  return out
}
