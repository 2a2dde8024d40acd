// The restart policy's arithmetic, as pure functions of the policy and what
// happened (no clock read here: the caller passes `now`, a monotonic time).

/**
 * The delay before restart `attempt` (1 for the first since the count
 * started again): `initialMs`, then min(maxMs, stepMs · factor^(attempt−2)).
 */
function backoffDelay(policy, attempt) {
  if (attempt <= 1) return policy.initialMs
  // stepMs 0 times a factor grown to Infinity would be NaN.
  const grown = policy.stepMs === 0 ? 0 : policy.stepMs * policy.factor ** (attempt - 2)
  return Math.min(policy.maxMs, grown)
}

/**
 * The restart times still inside the crash window at `now`, and whether
 * one more restart would exceed `maxRestarts` within `windowMs`.
 */
function crashWindow(times, now, policy) {
  const recent = times.filter((t) => now - t < policy.windowMs)
  return { recent, exceeded: recent.length >= policy.maxRestarts }
}

/**
 * The attempt count after a child's exit: back to 0 first when that child
 * had stayed ready `resetAfterMs` (readyAt: when it became ready, or null).
 */
function nextAttempt(policy, attempt, readyAt, now) {
  const base = readyAt !== null && now - readyAt >= policy.resetAfterMs ? 0 : attempt
  return base + 1
}

module.exports = { backoffDelay, crashWindow, nextAttempt }
