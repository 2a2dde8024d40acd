// node-postgres (`pg`) is an optional peer dependency of procward: loaded
// here, once, with one clear error when it is missing.

const { brand } = require('../errors')

const pg = loadPg()

function loadPg() {
  try {
    return require('pg')
  } catch (err) {
    if (err?.code === 'MODULE_NOT_FOUND' && /['"]pg['"]/.test(String(err.message).split('\n')[0])) {
      const e = new Error(
        "procward/pg needs the package 'pg' (node-postgres), an optional peer dependency of procward: install it beside procward (npm install pg)",
        { cause: err },
      )
      e.code = 'ERR_PROCWARD_PG_MISSING'
      throw brand(e)
    }
    throw err
  }
}

module.exports = { pg }
