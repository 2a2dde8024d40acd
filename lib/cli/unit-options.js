// `procward run`'s options as a unit file would say them: --cwd
// (WorkingDirectory=), --env (Environment=), --env-file (EnvironmentFile=),
// --user (User=, Group=), --umask (UMask=). Each is the daemon's alone
// (spawn options: procward's own cwd, environment, credentials and umask
// are never changed), and each is checked here, before anything starts: a
// missing directory, file, user or group is bad usage naming it.

const fs = require('node:fs')
const { UsageError } = require('./args.js')
const common = require('./common.js')
const { EnvFileError, readEnvFile } = require('./env-file.js')

/** The verb's SPEC entries for these options. */
const UNIT_SPEC = {
  cwd: 'value',
  env: 'values',
  'env-file': 'values',
  // systemd's own word, and one Node never reads: Node looks at every
  // argument that starts with --env-file, a script's too, before any of
  // ours runs (nodejs/node#54232; docs/cli.md).
  'environment-file': { alias: 'env-file' },
  user: 'value',
  umask: 'value',
}

// A service manager's variables that procward run takes for itself and
// never passes on (lib/supervisor/notify-out.js); an environment built here
// from process.env must leave them out too.
const MANAGER_VARS = ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID']

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

function usage(message) {
  return new UsageError('run', message)
}

/** What an fs error means, in a few words. */
function why(err) {
  switch (err?.code) {
    case 'ENOENT':
      return 'no such file or directory'
    case 'EACCES':
    case 'EPERM':
      return 'permission denied'
    case 'ENOTDIR':
      return 'not a directory (in its path)'
    case 'EISDIR':
      return 'is a directory'
    case 'ELOOP':
      return 'too many symbolic links'
    default:
      return err?.message ?? String(err)
  }
}

/** --cwd DIR: an existing directory. */
function checkCwd(dir) {
  if (dir === '') throw usage('--cwd must not be empty')
  let st
  try {
    st = fs.statSync(dir)
  } catch (err) {
    throw usage(`--cwd ${dir}: ${why(err)}`)
  }
  if (!st.isDirectory()) throw usage(`--cwd ${dir}: not a directory`)
  return dir
}

/** --env K=V → [K, V]. */
function envAssignment(text) {
  const eq = text.indexOf('=')
  if (eq === -1) throw usage(`--env ${text}: KEY=VALUE expected`)
  const key = text.slice(0, eq)
  if (!NAME.test(key)) {
    throw usage(
      `--env ${text}: ${JSON.stringify(key)} is not a variable name (letters, digits and _, not starting with a digit)`,
    )
  }
  if (text.includes('\0')) throw usage(`--env ${key}: the value must not contain NUL`)
  return [key, text.slice(eq + 1)]
}

/** --env-file FILE → its variables; `readFile` as readEnvFile's; `flag` the spelling given. */
function envFile(file, readFile, flag = '--env-file') {
  if (file === '') throw usage(`${flag} must not be empty`)
  try {
    return readEnvFile(file, readFile ? { readFile } : {})
  } catch (err) {
    if (err instanceof EnvFileError) {
      throw usage(`${flag} ${file}${err.line === null ? '' : `:${err.line}`}: ${err.message}`)
    }
    throw usage(`${flag} ${file}: ${why(err)}`)
  }
}

/** The entries of a colon-separated database (/etc/passwd, /etc/group), or [] where it cannot be read. */
function database(file, readFile) {
  let text
  try {
    text = String(readFile(file))
  } catch {
    return []
  }
  return text
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => l.split(':'))
}

/** The `getent` entry of `key` in `db` (NSS: LDAP, systemd-userdb...), or null. */
function getent(db, key) {
  try {
    const out = require('node:child_process').execFileSync('getent', [db, key], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5000,
    })
    const first = out.split('\n')[0]
    return first ? first.split(':') : null
  } catch {
    return null
  }
}

const ID = /^\d+$/
const MAX_ID = 2 ** 32 - 2

/** A passwd entry { name, uid, gid, home, shell } for a name or a uid, or null. */
function findUser(who, { readFile, lookup }) {
  const byId = ID.test(who)
  const match = (e) => (byId ? e[2] === String(Number(who)) : e[0] === who)
  const e = database('/etc/passwd', readFile).find((x) => x.length >= 7 && match(x)) ?? lookup('passwd', who)
  if (!e || e.length < 7 || !match(e)) return null
  return { name: e[0], uid: Number(e[2]), gid: Number(e[3]), home: e[5], shell: e[6] }
}

/** A group's gid, by name or number, or null. */
function findGroup(which, { readFile, lookup }) {
  if (ID.test(which)) return Number(which)
  const e = database('/etc/group', readFile).find((x) => x.length >= 3 && x[0] === which) ?? lookup('group', which)
  return e && e[0] === which && ID.test(e[2] ?? '') ? Number(e[2]) : null
}

/**
 * --user USER[:GROUP] → { uid, gid, user }: names from /etc/passwd and
 * /etc/group (then getent, for users of other databases), numbers as they
 * are. Without GROUP, the user's primary group (as User= alone gives).
 */
function resolveUser(spec, io = {}) {
  const ctx = { readFile: io.readFile ?? fs.readFileSync, lookup: io.lookup ?? getent }
  const colon = spec.indexOf(':')
  const who = colon === -1 ? spec : spec.slice(0, colon)
  const group = colon === -1 ? null : spec.slice(colon + 1)
  if (who === '') throw usage(`--user ${spec}: a user is needed (USER[:GROUP])`)
  if (group === '') throw usage(`--user ${spec}: the group after ':' is empty (USER[:GROUP])`)
  for (const [what, v] of [
    ['user', who],
    ['group', group],
  ]) {
    if (v !== null && ID.test(v) && Number(v) > MAX_ID) throw usage(`--user ${spec}: ${what} id ${v} is out of range`)
  }
  const user = findUser(who, ctx)
  if (user === null && !ID.test(who)) throw usage(`--user ${spec}: no user ${who} (not in /etc/passwd)`)
  let gid
  if (group !== null) {
    gid = findGroup(group, ctx)
    if (gid === null) throw usage(`--user ${spec}: no group ${group} (not in /etc/group)`)
  } else if (user !== null) gid = user.gid
  else {
    throw usage(
      `--user ${spec}: uid ${who} has no /etc/passwd entry, so no primary group: give one (--user ${who}:GROUP)`,
    )
  }
  return { uid: user?.uid ?? Number(who), gid, user }
}

/**
 * Whether this process may switch to `uid`/`gid`: root, the ids it has,
 * or CAP_SETUID / CAP_SETGID in its effective set (where the kernel tells:
 * Linux). `io.capEff`: that set, as a bigint (read from the kernel if not given).
 */
function maySwitch(uid, gid, io = {}) {
  const euid = io.euid ?? process.geteuid?.()
  const egid = io.egid ?? process.getegid?.()
  if (euid === undefined || euid === 0) return true
  const caps = io.capEff ?? common.os().ownStatus()?.capEff ?? 0n
  const CAP_SETGID = 1n << 6n
  const CAP_SETUID = 1n << 7n
  return (uid === euid || (caps & CAP_SETUID) !== 0n) && (gid === egid || (caps & CAP_SETGID) !== 0n)
}

/** --umask 0NNN: octal, as UMask= is written. */
function umaskOf(text) {
  if (!/^[0-7]{1,4}$/.test(text) || Number.parseInt(text, 8) > 0o777) {
    throw usage(`--umask must be an octal mode mask in 0000..0777 (such as 0022), got ${JSON.stringify(text)}`)
  }
  return Number.parseInt(text, 8)
}

/**
 * The spawn options these flags give (only those given), checked:
 * `{ cwd?, env?, uid?, gid?, umask? }`. The environment, when any of
 * --env, --env-file or --user is given: procward's own (less the service
 * manager's variables), then --user's USER, LOGNAME, HOME and SHELL (as
 * User= sets them), then each --env-file in order, then each --env in
 * order, a later value winning.
 */
function unitSpawnOptions(opts, io = {}) {
  const spawn = {}
  if (opts.cwd !== undefined) spawn.cwd = checkCwd(opts.cwd)
  const vars = (opts.env ?? []).map(envAssignment)
  const flags = opts['env-file:flags'] ?? []
  const files = (opts['env-file'] ?? []).map((f, i) => envFile(f, io.readFile, flags[i]))
  if (opts.user !== undefined) {
    const { uid, gid, user } = resolveUser(opts.user, io)
    if (!maySwitch(uid, gid, io)) {
      const euid = io.euid ?? process.geteuid()
      throw usage(
        `--user ${opts.user}: procward runs as uid ${euid} and may not switch to uid ${uid} gid ${gid} ` +
          '(setuid: operation not permitted): run it as root, or with CAP_SETUID and CAP_SETGID',
      )
    }
    spawn.uid = uid
    spawn.gid = gid
    if (user !== null) spawn.userEnv = { USER: user.name, LOGNAME: user.name, HOME: user.home, SHELL: user.shell }
  }
  if (opts.umask !== undefined) spawn.umask = umaskOf(opts.umask)
  const userEnv = spawn.userEnv
  delete spawn.userEnv
  if (vars.length > 0 || files.length > 0 || userEnv !== undefined) {
    // A null prototype: `__proto__` is a variable like any other (assigned
    // onto a plain object, it would call the prototype's setter and vanish).
    const env = Object.assign(Object.create(null), io.env ?? process.env)
    for (const k of MANAGER_VARS) delete env[k]
    Object.assign(env, userEnv, ...files, Object.fromEntries(vars))
    spawn.env = env
  }
  return spawn
}

module.exports = { UNIT_SPEC, unitSpawnOptions, resolveUser, maySwitch, umaskOf }
