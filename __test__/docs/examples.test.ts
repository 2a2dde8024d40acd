// Every ```ts / ```js block in README.md and docs/*.md: type-checked together
// against the package's public types (the project's strict compiler options,
// `procward` resolved as a consumer resolves it: node_modules/procward ->
// this package), then run one by one in a fresh `node` against real
// processes. An example must exit 0 on its own (a child it forgot keeps the
// event loop alive and fails it), leave nothing in its temporary directory
// and no process behind.
//
// A block that cannot run as it stands is preceded by a marker, with the
// reason:  <!-- not-runnable: … -->  (type-checked, not run) or
//          <!-- fragment: … -->      (neither).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { afterAll, describe, expect, it } from 'vitest'
import { taggedProcesses, waitFor } from '../helpers'

const ROOT = resolve(__dirname, '../..')
const DOCS = [join(ROOT, 'README.md'), ...readdirSync(join(ROOT, 'docs')).map((f) => join(ROOT, 'docs', f))].filter(
  (f) => f.endsWith('.md'),
)
// Written by its own author; linked from the README before it lands here.
const PENDING_LINK_TARGETS = new Set([join(ROOT, 'docs/pg-lock.md')])
// The examples' long-running children sleep 60 s: one an example forgot to
// stop keeps node alive past this bound, and fails it.
const RUN_TIMEOUT_MS = 45_000

interface Block {
  /** `docs/lock.md:42` (the line of the opening fence). */
  where: string
  lang: 'ts' | 'js'
  code: string
  marker: { kind: 'not-runnable' | 'fragment'; reason: string } | null
  /** Base name of the generated file. */
  name: string
}

const CODE_LANGS: Record<string, 'ts' | 'js'> = { ts: 'ts', typescript: 'ts', js: 'js', javascript: 'js' }
const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w-]*)/
const MARKER = /^<!--\s*(not-runnable|fragment)\s*:\s*(.*?)\s*-->$/

/** Fenced blocks of a markdown file, with the fence's language and line. */
function fences(text: string): { lang: string; line: number; body: string; before: string }[] {
  const lines = text.split('\n')
  const out: { lang: string; line: number; body: string; before: string }[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] ?? '')
    if (!open) continue
    const fence = open[1] ?? '```'
    let j = i + 1
    while (j < lines.length && !(lines[j] ?? '').trimStart().startsWith(fence)) j++
    let k = i - 1
    while (k >= 0 && (lines[k] ?? '').trim() === '') k--
    out.push({
      lang: open[2] ?? '',
      line: i + 1,
      body: lines.slice(i + 1, j).join('\n'),
      before: (lines[k] ?? '').trim(),
    })
    i = j
  }
  return out
}

function blocksOf(file: string): Block[] {
  const rel = relative(ROOT, file)
  return fences(readFileSync(file, 'utf8')).flatMap((f) => {
    const lang = CODE_LANGS[f.lang]
    if (lang === undefined) return []
    const m = MARKER.exec(f.before)
    const marker = m ? { kind: m[1] as 'not-runnable' | 'fragment', reason: m[2] ?? '' } : null
    const name = `${rel.replace(/[^\w]+/g, '-')}-L${f.line}`
    return [{ where: `${rel}:${f.line}`, lang, code: `${f.body}\n`, marker, name }]
  })
}

const blocks = DOCS.flatMap(blocksOf)

// One directory for the lot: the examples, node_modules/procward -> this
// package, and a TMPDIR per example that must be empty when it is done.
const work = mkdtempSync(join(tmpdir(), 'procward-docs-'))
mkdirSync(join(work, 'node_modules'))
symlinkSync(ROOT, join(work, 'node_modules', 'procward'), 'dir')
const exDir = join(work, 'examples')
mkdirSync(exDir)
afterAll(() => rmSync(work, { recursive: true, force: true }))

// A JavaScript block that uses require() and no import is CommonJS.
const isCommonJs = (b: Block) => b.lang === 'js' && /\brequire\(/.test(b.code) && !/^import\s/m.test(b.code)
const fileOf = (b: Block) => join(exDir, `${b.name}.${b.lang === 'ts' ? 'mts' : isCommonJs(b) ? 'cjs' : 'mjs'}`)
for (const b of blocks) writeFileSync(fileOf(b), b.code)

function hasCommand(cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
const HAS_PYTHON = hasCommand('python3')

describe('documentation examples', () => {
  it('finds the examples, every fence is closed, and every marker gives a reason', () => {
    expect(blocks.length).toBeGreaterThan(10)
    const unclosed = DOCS.filter((f) => stripFences(`${readFileSync(f, 'utf8')}\n`, true) === null)
    expect(unclosed, 'a fence left open swallows the rest of the page').toEqual([])
    for (const b of blocks) if (b.marker) expect(b.marker.reason, `${b.where}: a marker needs its reason`).not.toBe('')
  })

  it('type-check against the public types, with the strict options of the project', () => {
    const checked = blocks.filter((b) => b.marker?.kind !== 'fragment')
    const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile)
    const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT)
    const options: ts.CompilerOptions = {
      ...parsed.options,
      noEmit: true,
      allowJs: true,
      checkJs: true,
      typeRoots: [join(ROOT, 'node_modules', '@types')],
    }
    const program = ts.createProgram(checked.map(fileOf), options)
    const diagnostics = ts.getPreEmitDiagnostics(program)
    const whereOf = new Map(checked.map((b) => [fileOf(b), b.where]))
    const messages = diagnostics.map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, '\n')
      if (d.file === undefined || d.start === undefined) return `TS${d.code}: ${text}`
      const { line } = d.file.getLineAndCharacterOfPosition(d.start)
      const where = whereOf.get(d.file.fileName)
      // The line inside the markdown file: the fence's line + the line in the block.
      const at = where ? `${where.replace(/:(\d+)$/, (_, n) => `:${Number(n) + line + 1}`)}` : d.file.fileName
      return `${at}: TS${d.code}: ${text}`
    })
    expect(messages).toEqual([])
  }, 120_000) // the whole type checker over every block: a loaded machine takes more than 30 s

  for (const b of blocks) {
    const runnable = b.marker === null
    const needsPython = b.code.includes("'python3'")
    it.skipIf(!runnable || (needsPython && !HAS_PYTHON))(
      `runs: ${b.where}`,
      async () => {
        const js = b.lang === 'ts' ? transpile(b) : b.code
        const file = join(exDir, `${b.name}.run.${isCommonJs(b) ? 'cjs' : 'mjs'}`)
        writeFileSync(file, js)
        const tmp = join(work, `tmp-${b.name}`)
        mkdirSync(tmp)
        const tag = `procward-docs-${process.pid}-${b.name}`
        const run = runNode(file, { ...process.env, TMPDIR: tmp, PROCWARD_TEST_TAG: tag })
        // Judged when node exits, not when its pipes close: a process left
        // behind may hold them open.
        const { code, signal, timedOut } = await run.exited
        // Processes being killed may take a moment to go; anything tagged
        // that is still there after that was left behind.
        const left = await waitFor(() => taggedProcesses(tag).length === 0, 5000, 'tagged processes to go').then(
          () => [],
          () => taggedProcesses(tag),
        )
        for (const pid of left) {
          try {
            process.kill(pid, 'SIGKILL')
          } catch {
            // gone meanwhile
          }
        }
        const output = await run.output
        const files = readdirSync(tmp)
        rmSync(tmp, { recursive: true, force: true })
        expect(timedOut, `${b.where} did not end on its own within ${RUN_TIMEOUT_MS} ms:\n${output}`).toBe(false)
        expect({ code, signal }, `${b.where} failed:\n${output}`).toEqual({ code: 0, signal: null })
        expect(left, `${b.where} left processes behind`).toEqual([])
        expect(files, `${b.where} left files in its temporary directory`).toEqual([])
      },
      RUN_TIMEOUT_MS + 15_000,
    )
  }
})

describe('documentation links', () => {
  it('every relative link names an existing file, and every #anchor an existing heading', () => {
    const broken: string[] = []
    const link = /\]\(([^)\s]+)\)/g
    for (const file of DOCS) {
      const text = stripFences(readFileSync(file, 'utf8'))
      for (const m of text.matchAll(link)) {
        const target = m[1] ?? ''
        if (/^[a-z]+:/.test(target)) continue // http:, https:, mailto:
        const [path = '', anchor] = target.split('#')
        const dest = path === '' ? file : resolve(dirname(file), path)
        if (!dest.startsWith(ROOT) || relative(ROOT, dest).startsWith('..')) {
          broken.push(`${relative(ROOT, file)}: ${target} leaves the package`)
          continue
        }
        if (!existsSync(dest)) {
          if (!PENDING_LINK_TARGETS.has(dest)) broken.push(`${relative(ROOT, file)}: ${target} does not exist`)
          continue
        }
        if (anchor !== undefined && dest.endsWith('.md') && !anchorsOf(dest).has(anchor))
          broken.push(`${relative(ROOT, file)}: ${target}: no such heading`)
      }
    }
    expect(broken).toEqual([])
  })
})

/** TypeScript to ESM JavaScript for Node 20: types dropped, nothing else changed. */
function transpile(b: Block): string {
  const out = ts.transpileModule(b.code, {
    fileName: `${b.name}.mts`,
    reportDiagnostics: true,
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  })
  const errors = (out.diagnostics ?? []).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
  if (errors.length > 0) throw new Error(`${b.where}: ${errors.join('\n')}`)
  return out.outputText
}

/**
 * Runs `node file` in its own process group, SIGKILLed on timeout. `exited`
 * settles when node exits, `output` once its pipes have closed.
 */
function runNode(
  file: string,
  env: NodeJS.ProcessEnv,
): {
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; timedOut: boolean }>
  output: Promise<string>
} {
  const child: ChildProcess = spawn(process.execPath, [file], {
    cwd: dirname(file),
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout?.on('data', (d: Buffer) => {
    output += d.toString()
  })
  child.stderr?.on('data', (d: Buffer) => {
    output += d.toString()
  })
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
  }, RUN_TIMEOUT_MS)
  return {
    exited: new Promise((done) =>
      child.once('exit', (code, signal) => {
        clearTimeout(timer)
        done({ code, signal, timedOut })
      }),
    ),
    output: new Promise((done) => child.once('close', () => done(output))),
  }
}

/**
 * The text outside fenced blocks (their `#` lines are not headings, their
 * brackets not links); with `strict`, null when a fence is never closed.
 */
function stripFences(text: string, strict: true): string | null
function stripFences(text: string): string
function stripFences(text: string, strict = false): string | null {
  const lines = text.split('\n')
  const out: string[] = []
  let fence: string | null = null
  for (const line of lines) {
    const open = FENCE.exec(line)
    if (fence === null && open) fence = open[1] ?? '```'
    else if (fence !== null && line.trimStart().startsWith(fence)) fence = null
    else if (fence === null) out.push(line)
  }
  return strict && fence !== null ? null : out.join('\n')
}

/** GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces to '-', repeats numbered. */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const line of stripFences(readFileSync(file, 'utf8')).split('\n')) {
    const h = /^#{1,6}\s+(.*?)\s*#*$/.exec(line)
    if (!h) continue
    const slug = (h[1] ?? '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    out.add(n === 0 ? slug : `${slug}-${n}`)
  }
  return out
}
