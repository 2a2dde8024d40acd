// isLockedError: tells the ELOCKED error of acquireLock() (and of a
// Supervisor's start(), which passes it on) from any other error. Checked by
// procward's error brand, not by `code` alone: an error some other library
// made with code 'ELOCKED' (proper-lockfile's, say) has no record of the
// holder. The brand is a registered symbol, so an error made by another copy
// of procward in this process counts too.

const { isProcwardError } = require('./errors')

/** True for procward's ELOCKED errors: `code`, `path`, `holder`, `holderRunning`. */
function isLockedError(err) {
  return isProcwardError(err) && err.code === 'ELOCKED'
}

module.exports = { isLockedError }
