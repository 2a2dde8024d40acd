// One typed event emitter for every class of procward that emits events
// (SupervisedProcess, Supervisor): each class names its events once, in an
// event map, and gets `on`, `once`, `off`, `emit` and the rest typed by it.

import { EventEmitter } from 'node:events'

/** An event map: each event's name, and the arguments its listeners get. */
export type EventMap<E> = { [K in keyof E]: unknown[] }

/** The names of the events of the map `E`. */
export type EventName<E> = Extract<keyof E, string>

/** A listener of the event `K` of the map `E`. */
export type EventListener<E extends EventMap<E>, K extends keyof E> = (...args: E[K]) => void

/** The options of `events.once` / `events.on` that concern procward's emitters. */
export interface EventWaitOptions {
  signal?: AbortSignal | undefined
}

declare const eventMap: unique symbol

/**
 * An `EventEmitter` whose events are those of the map `E`: a name not in it,
 * or a listener that does not take its arguments, does not compile (whatever
 * the @types/node: its EventEmitter's own type map takes other names in some
 * releases, 26: with `any[]` arguments). A type only: at run time procward's
 * emitters are plain `EventEmitter` subclasses, not exported as this.
 *
 * The static `once` and `on` are Node's `events.once` / `events.on`,
 * inherited (`Supervisor.once === events.once`), typed by the emitter's map:
 * `const [child] = await Supervisor.once(sup, 'ready')`. Node's own
 * `import { once } from 'node:events'` stays `any[]`: @types/node declares
 * it as a static of its EventEmitter class, which no declaration can add an
 * overload to.
 */
export declare class TypedEventEmitter<E extends EventMap<E>> extends EventEmitter {
  /** The event map, for the types only (never set). */
  readonly [eventMap]?: E
  on<K extends EventName<E>>(event: K, listener: EventListener<E, K>): this
  once<K extends EventName<E>>(event: K, listener: EventListener<E, K>): this
  off<K extends EventName<E>>(event: K, listener: EventListener<E, K>): this
  addListener<K extends EventName<E>>(event: K, listener: EventListener<E, K>): this
  removeListener<K extends EventName<E>>(event: K, listener: EventListener<E, K>): this
  prependListener<K extends EventName<E>>(event: K, listener: EventListener<E, K>): this
  prependOnceListener<K extends EventName<E>>(event: K, listener: EventListener<E, K>): this
  emit<K extends EventName<E>>(event: K, ...args: E[K]): boolean
  listenerCount<K extends EventName<E>>(event: K, listener?: EventListener<E, K>): number

  /** `events.once`: the arguments of the next `eventName` event of a procward emitter, typed by its map. */
  static once<E extends EventMap<E>, K extends EventName<E>>(
    emitter: TypedEventEmitter<E>,
    eventName: K,
    options?: EventWaitOptions,
  ): Promise<E[K]>
  static once(emitter: NodeJS.EventEmitter, eventName: string | symbol, options?: EventWaitOptions): Promise<unknown[]>
  static once(emitter: EventTarget, eventName: string, options?: EventWaitOptions): Promise<unknown[]>
  /** `events.on`: every later `eventName` event of a procward emitter, as its typed arguments. */
  static on<E extends EventMap<E>, K extends EventName<E>>(
    emitter: TypedEventEmitter<E>,
    eventName: K,
    options?: EventWaitOptions,
  ): NodeJS.AsyncIterator<E[K]>
  static on(
    emitter: NodeJS.EventEmitter,
    eventName: string | symbol,
    options?: EventWaitOptions,
  ): NodeJS.AsyncIterator<unknown[]>
  static on(emitter: EventTarget, eventName: string, options?: EventWaitOptions): NodeJS.AsyncIterator<unknown[]>
}

// Only what is marked `export` is public (the symbol stays private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
