// A signal, by name or number, as Node's own APIs take one.

export type Signal = NodeJS.Signals | number

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
