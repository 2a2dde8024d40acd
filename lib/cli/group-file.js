// A group's config file, as `procward up` and `procward status -f` read it:
// FILE, or the first of procward.config.mjs, .cjs and .json in the working
// directory; a module's default export (a .cjs file's module.exports), or
// JSON. Whatever keeps it from being read is bad usage, naming the file.

const fs = require('node:fs')
const path = require('node:path')
const { pathToFileURL } = require('node:url')
const { UsageError } = require('./args.js')
const common = require('./common.js')

/** The files looked for in the working directory, in this order. */
const DEFAULT_FILES = ['procward.config.mjs', 'procward.config.cjs', 'procward.config.json']

/** `-f FILE` is `--file FILE` (the one short option, as compose spells it). */
function expandShort(argv) {
  const out = []
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--') return [...out, ...argv.slice(i)]
    if (argv[i] === '-f') out.push('--file')
    else if (argv[i].startsWith('-f') && argv[i].length > 2 && !argv[i].startsWith('--')) {
      out.push(`--file=${argv[i].slice(2)}`)
    } else out.push(argv[i])
  }
  return out
}

/** The config file: FILE, or the first of DEFAULT_FILES in the working directory. */
function configFile(verb, given) {
  if (given !== undefined) return path.resolve(given)
  for (const name of DEFAULT_FILES) {
    const file = path.resolve(name)
    if (fs.existsSync(file)) return file
  }
  throw new UsageError(verb, `no ${DEFAULT_FILES.join(', ')} in ${process.cwd()}: name one with -f FILE`)
}

/** The config `file` holds (a .json's value, a module's default export); any failure is bad usage. */
async function loadConfig(verb, file) {
  const bad = (what) => new UsageError(verb, `${file}: ${what}`, { hint: false })
  let text
  if (file.endsWith('.json')) {
    try {
      text = fs.readFileSync(file, 'utf8')
    } catch (err) {
      throw bad(err.code === 'ENOENT' ? 'no such file' : common.describe(err))
    }
    try {
      return JSON.parse(text)
    } catch (err) {
      throw bad(`not JSON: ${err.message}`)
    }
  }
  if (!fs.existsSync(file)) throw bad('no such file')
  let mod
  try {
    mod = await import(pathToFileURL(file).href)
  } catch (err) {
    throw bad(`cannot be loaded: ${common.describe(err)}`)
  }
  // A CommonJS file's module.exports is its default export.
  const config = mod.default
  if (config === undefined) throw bad('exports no config (export default { daemons: { ... } })')
  return config
}

/**
 * Each daemon's state file, as the group gives it: its own `stateFile`, or
 * `<stateDir>/<name>.json`; null where it has neither. [[name, file]], in
 * the config's order; a config that is not one is bad usage.
 */
function stateFiles(verb, file, config) {
  const bad = (what) => new UsageError(verb, `${file}: ${what}`, { hint: false })
  const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v)
  if (!isObject(config) || !isObject(config.daemons)) throw bad('daemons must be an object')
  if (config.stateDir !== undefined && (typeof config.stateDir !== 'string' || config.stateDir === '')) {
    throw bad('stateDir must be a path')
  }
  return Object.entries(config.daemons).map(([name, d]) => {
    if (isObject(d) && typeof d.stateFile === 'string') return [name, path.resolve(d.stateFile)]
    return [name, config.stateDir === undefined ? null : path.resolve(config.stateDir, `${name}.json`)]
  })
}

module.exports = { DEFAULT_FILES, configFile, expandShort, loadConfig, stateFiles }
