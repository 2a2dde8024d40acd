/**
 * procward: own child processes correctly.
 *
 * A zombie is never mistaken for a live process, and a reused pid is told
 * apart by `identity`.
 *
 * Every optional field accepts `undefined` (also under
 * `exactOptionalPropertyTypes`), which means the same as leaving it out.
 *
 * Events are typed by an event map (`SupervisorEvents`,
 * `SupervisedProcessEvents`): a name not in it, or a listener that does not
 * take its arguments, does not compile.
 *
 * The declarations live by concept under `types/`, as the code does under
 * `lib/`; this entry re-exports them (and `index.d.mts` re-exports this).
 */

export * from './types/cgroup.js'
export * from './types/errors.js'
export * from './types/exec.js'
export * from './types/group.js'
export * from './types/liveness.js'
export * from './types/lock.js'
export type { Signal } from './types/signal.js'
export * from './types/spawn.js'
export * from './types/stop.js'
export * from './types/supervisor.js'
export * from './types/supervisor-state.js'
export * from './types/wait.js'
