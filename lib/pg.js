// acquirePgLock, tryPgLock, readPgLock: a lock for more than one host, held
// as a PostgreSQL session advisory lock on a connection of its own. The
// server is the judge: it drops the lock when the holder's session ends
// (release, exit, SIGKILL — the kernel closes the socket, zombie or not) or,
// for a vanished host, when TCP keepalives and tcp_user_timeout, set for the
// session from hostLossMs, give up on it. The holder probes its session
// often enough to abort `lock.signal` before the server can have let go.
//
// node-postgres (`pg`) is an optional peer dependency (lib/pg/driver.js).
// One file per concept under lib/pg/: errors, options, the session, the
// fence table, the lock. Its CLI form, `procward lock --postgres`, is the
// CLI's (lib/cli/lock.js).

const { acquirePgLock, tryPgLock, readPgLock, PgLock } = require('./pg/lock')
const { checkText, KEY_MAX_BYTES, PURPOSE_MAX } = require('./pg/options')
const { advisoryKey, timing } = require('./pg/session')

/** advisoryKey for users: the key checked as the lock functions check it. */
function publicAdvisoryKey(key) {
  return advisoryKey(checkText(key, 'key', KEY_MAX_BYTES))
}

module.exports = {
  acquirePgLock,
  tryPgLock,
  readPgLock,
  PgLock,
  advisoryKey: publicAdvisoryKey,
  timing,
  PURPOSE_MAX,
}
