// Containment: a cgroup v2 of the child's own (spawnSupervised's `cgroup`).

/** Resource usage of a contained child's cgroup; null where not known. */
export interface ResourceUsage {
  /** CPU time of every process that ran in the cgroup (`cpu.stat` usage_usec). */
  cpuUsec: number | null
  /** `memory.current`, where the memory controller is enabled for it. */
  memoryBytes: number | null
  /** `pids.current`, where the pids controller is enabled for it. */
  pids: number | null
}

/** What `cgroupSupport()` answers. */
export interface CgroupSupport {
  /** Whether `spawnSupervised(..., { cgroup: true })` can work here. */
  available: boolean
  /** The default parent cgroup's path (made on the first contained spawn). */
  parent: string | null
  /** Why not, when not available. */
  reason: string | null
}

/**
 * Can this process create child cgroups under the default parent (Linux
 * cgroup v2, delegated to this user or root, Linux >= 5.14)? Says why not.
 * No side effects.
 */
export declare function cgroupSupport(): CgroupSupport

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
