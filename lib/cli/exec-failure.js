// A command that could not be run, as the shell reports it: 127 when it was
// not found, 126 when it was found and exec refused it (env(1), timeout(1),
// nohup(1) and shells agree), with the words a shell would print.

/** The error of a spawn that failed (node:child_process's shape: syscall 'spawn <command>'), on `err` or a cause. */
function findSpawnError(err) {
  for (let e = err, depth = 0; e != null && depth < 8; e = e.cause, depth++) {
    if (typeof e === 'object' && typeof e.syscall === 'string' && /^spawn( |$)/.test(e.syscall)) return e
  }
  return null
}

const EXEC_REFUSED = new Set([
  'EACCES',
  'ENOEXEC',
  'ENOTDIR',
  'EISDIR',
  'ELOOP',
  'ENAMETOOLONG',
  'ETXTBSY',
  'EPERM',
  'E2BIG',
])

/** What a spawn error means, in words. */
const SPAWN_WORDS = {
  ENOENT: 'command not found',
  EACCES: 'permission denied',
  EISDIR: 'is a directory',
  ENOEXEC: 'not an executable format',
  ENOTDIR: 'not a directory (in its path)',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'name too long',
  ETXTBSY: 'text file busy',
}

/**
 * 127 / 126 for a spawn that failed at exec, null for any other error
 * (EMFILE, EAGAIN: a spawn that failed before exec is our own failure, not
 * the command's).
 */
function spawnFailureStatus(err) {
  const e = findSpawnError(err)
  if (e === null) return null
  if (e.code === 'ENOENT') return 127
  return EXEC_REFUSED.has(e.code) ? 126 : null
}

module.exports = { findSpawnError, spawnFailureStatus, SPAWN_WORDS }
