// Argument parsing for every verb: node:util parseArgs reads the tokens,
// and the judgement is ours. An option takes its value as `--opt V` and
// `--opt=V` alike; a value that could be read two ways (`--name --json`,
// `--wait 100`) is refused, never guessed.

const { parseArgs } = require('node:util')

/**
 * Bad usage: one line on stderr, a hint, exit 2. `hint: false` for a
 * problem the line says all of (a config file's), where `--help` would
 * not help.
 */
class UsageError extends Error {
  constructor(verb, message, { hint = true } = {}) {
    super(message)
    this.verb = verb
    this.hint = hint
  }
}

/**
 * `spec`: option name → 'value' (takes one), 'values' (takes one, and may
 * be repeated: an array of them in order), 'flag' (takes none),
 * 'optional' (a value only as `--opt=V`), or `{ alias: NAME }` (another
 * spelling of the 'values' option NAME: its values go into NAME's array,
 * in order with NAME's own, and `opts[`${NAME}:flags`]` says which
 * spelling gave each, for the messages). `command`: how many positionals
 * come before the COMMAND, or null when the verb takes no command. Without
 * `--`, the command starts at that positional: its own options (`node
 * server.js --port 8080`) are its own, never ours.
 */
function parse(verb, argv, spec, { command = null } = {}) {
  const options = { help: { type: 'boolean', short: 'h' } }
  for (const [name, kind] of Object.entries(spec)) {
    options[name] = { type: kind === 'value' || kind === 'values' || typeof kind === 'object' ? 'string' : 'boolean' }
  }
  // strict: false so that every token comes back, unknown ones included,
  // for the messages below (and so that the command's own arguments, which
  // are parsed too, can never make parseArgs throw).
  const { tokens } = parseArgs({ args: argv, options, strict: false, allowPositionals: true, tokens: true })
  const opts = {}
  const positional = []
  let rest = null
  for (let i = 0; i < tokens.length && rest === null; i++) {
    const t = tokens[i]
    if (t.kind === 'option-terminator') {
      // Without a command (status F, stop F), `--` ends our options only.
      if (command === null) positional.push(...argv.slice(t.index + 1))
      else rest = argv.slice(t.index + 1)
      break
    }
    if (t.kind === 'positional') {
      if (command !== null && positional.length === command) rest = argv.slice(t.index)
      else positional.push(t.value)
      continue
    }
    const raw = t.rawName
    if (t.name === 'help') {
      if (t.value !== undefined) throw new UsageError(verb, `${raw} takes no value`)
      opts.help = true
      continue
    }
    const given = Object.hasOwn(spec, t.name) && raw.startsWith('--') ? spec[t.name] : undefined
    if (given === undefined) throw new UsageError(verb, `unknown option ${raw}`)
    const name = typeof given === 'object' ? given.alias : t.name
    const kind = typeof given === 'object' ? 'values' : given
    // `--grace 5 --grace 6`: which one was meant is not ours to guess.
    if (Object.hasOwn(opts, t.name) && kind !== 'values') throw new UsageError(verb, `${raw} is given more than once`)
    if (kind === 'flag') {
      if (t.inlineValue) throw new UsageError(verb, `${raw} takes no value`)
      opts[t.name] = true
    } else if (kind === 'optional') {
      if (t.inlineValue) {
        opts[t.name] = t.value
        continue
      }
      const next = tokens[i + 1]
      if (next?.kind === 'positional' && /^\d+$/.test(next.value)) {
        throw new UsageError(
          verb,
          `${raw} ${next.value} is ambiguous: write ${raw}=${next.value} for a value, or put ${next.value} after --`,
        )
      }
      opts[t.name] = true
    } else {
      if (t.value === undefined) throw new UsageError(verb, `${raw} needs a value`)
      if (!t.inlineValue && t.value.startsWith('-') && t.value !== '-') {
        // `--name --json`: a forgotten value, or a value that starts with a dash?
        throw new UsageError(verb, `${raw} needs a value (one that starts with '-' is written ${raw}=${t.value})`)
      }
      if (kind === 'values') {
        opts[name] = [...(opts[name] ?? []), t.value]
        opts[`${name}:flags`] = [...(opts[`${name}:flags`] ?? []), raw]
      } else opts[t.name] = t.value
    }
  }
  return { opts, positional, rest }
}

/** COMMAND and its arguments, from what parse() left after them. */
function commandOf(verb, rest) {
  if (rest === null || rest.length === 0) throw new UsageError(verb, 'a COMMAND is needed (after --)')
  if (rest[0] === '') throw new UsageError(verb, 'COMMAND must not be empty')
  return rest
}

/**
 * The whole number `--name` gives, from its text (digits only: no sign,
 * fraction or exponent). Its range is judged by whoever takes it: the
 * library, for a flag that is one of its options.
 */
function wholeNumber(verb, value, name) {
  if (typeof value !== 'string' || !/^\d+$/.test(value)) {
    throw new UsageError(verb, `--${name} must be a whole number, got ${JSON.stringify(value)}`)
  }
  return Number(value)
}

/** A whole number of `name` in min..max, from its text (a flag whose range is the CLI's own). */
function integer(verb, value, name, min, max) {
  const n = wholeNumber(verb, value, name)
  if (n < min || n > max) throw new UsageError(verb, `--${name} must be in ${min}..${max}, got ${value}`)
  return n
}

/** Durations: as setTimeout takes them. */
const MAX_MS = 2 ** 31 - 1

module.exports = { UsageError, parse, commandOf, wholeNumber, integer, MAX_MS }
