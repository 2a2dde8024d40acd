// A stand-in for the service manager's NOTIFY_SOCKET: a unix datagram
// socket made through procward's own binding (as systemd's would be: it
// takes every sender, and says who sent each message).
import { readFileSync, readlinkSync, realpathSync } from 'node:fs'
import { waitFor } from '../helpers'

export interface NativeMessage {
  pid: number
  uid: number
  gid: number
  text: string
  verdict: string
  trusted: boolean
  oversized: boolean
  hadFds: boolean
}

interface NativeReceiver {
  readonly address: string
  start(peers: unknown, onWake: () => void): void
  drain(): NativeMessage[]
  close(): void
}

interface NativeSender {
  send(text: string): boolean
  close(): void
}

export interface Native {
  NotifyReceiver: { bind(path?: string | null): NativeReceiver }
  NotifySender: { open(address: string): NativeSender }
  notifySupported(): boolean
}

export const native: Native = require('../../binding.js')

export class StandIn {
  readonly rx: NativeReceiver
  readonly messages: NativeMessage[] = []

  /** `read: false`: bound, never read (its queue fills). */
  constructor(path: string | null = null, read = true) {
    this.rx = native.NotifyReceiver.bind(path)
    if (read) this.rx.start(null, () => this.messages.push(...this.rx.drain()))
  }

  get address(): string {
    return this.rx.address
  }

  texts(): string[] {
    return this.messages.map((m) => m.text)
  }

  /** The messages that set KEY (to `value`, if given). */
  with(key: string, value?: string): NativeMessage[] {
    return this.messages.filter((m) =>
      m.text.split('\n').some((l) => (value === undefined ? l.startsWith(`${key}=`) : l === `${key}=${value}`)),
    )
  }

  async waitFor(key: string, value?: string, timeoutMs = 10_000): Promise<NativeMessage> {
    await waitFor(() => this.with(key, value).length > 0, timeoutMs, `${key}=${value ?? ''}`)
    return this.with(key, value)[0] as NativeMessage
  }

  close(): void {
    this.rx.close()
  }
}

/**
 * A process's environment, from /proc (the child's own view). Right after
 * a spawn the child may still be inside execve, where the kernel shows an
 * empty environ (the new image's is not laid out yet): waited out.
 */
export async function environOf(pid: number): Promise<Map<string, string>> {
  // Until its exec is through, a child shows our memory (a vfork-style
  // clone shares it: our environment) or none yet (empty). One read is
  // both judged and parsed: a child that execs again (sh -c 'exec ...')
  // shows an empty environ in between, which a second read could catch.
  const node = realpathSync(process.execPath)
  let text = ''
  const execed = () => {
    if (readlinkSync(`/proc/${pid}/exe`) === node) return false
    text = readFileSync(`/proc/${pid}/environ`, 'latin1')
    return text.length > 0
  }
  await waitFor(execed, 5000, `the environ of ${pid}`)
  const out = new Map<string, string>()
  for (const kv of text.split('\0')) {
    const eq = kv.indexOf('=')
    if (eq > 0) out.set(kv.slice(0, eq), kv.slice(eq + 1))
  }
  return out
}

/** Abstract unix sockets bound now (from /proc/net/unix), as '@name'. */
export function abstractSockets(): string[] {
  return readFileSync('/proc/net/unix', 'latin1')
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/)[7])
    .filter((p): p is string => p?.startsWith('@') === true)
}

/** The inode of the socket bound at abstract `address` ('@name'), from /proc/net/unix. */
export function socketInode(address: string): string | null {
  for (const l of readFileSync('/proc/net/unix', 'latin1').split('\n').slice(1)) {
    const f = l.trim().split(/\s+/)
    if (f[7] === address) return f[6] ?? null
  }
  return null
}
