// The Supervisor and what reads and acts on its stateFile from outside:
// the public face of lib/supervisor/ (see supervisor.js for the map).

const { Supervisor } = require('./supervisor')
const { distrustSupervisorState, readSupervisorState } = require('./state-file')
const { killRecordedCgroup } = require('./takeover')

module.exports = { Supervisor, readSupervisorState, distrustSupervisorState, killRecordedCgroup }
