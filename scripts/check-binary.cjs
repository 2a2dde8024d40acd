// Checks a cross-built addon that this machine cannot load: the right file
// format, CPU and kind (a shared library), the C library it needs, and the
// one symbol Node looks up when it loads an addon. Reads ELF, 64-bit Mach-O
// and PE32+ headers directly, so it needs nothing but Node.
//
// Usage: node scripts/check-binary.cjs FILE KEY   (KEY: linux-arm64-musl, darwin-x64, win32-x64, ...)
// Prints one line describing the binary; exits 1 with the reason otherwise.

const { readFileSync } = require('node:fs')

const REGISTER = 'napi_register_module_v1'
// Oldest C library versions the binaries must load with.
const MAX_GLIBC = [2, 17]
const MACOS_MIN = { 'darwin-x64': [10, 15], 'darwin-arm64': [11, 0] }

function cstr(buf, off) {
  const end = buf.indexOf(0, off)
  return buf.toString('latin1', off, end < 0 ? buf.length : end)
}

function elf(buf) {
  if (buf[4] !== 2 || buf[5] !== 1) throw new Error('not a 64-bit little-endian ELF')
  const type = buf.readUInt16LE(16)
  const machine = { 62: 'x64', 183: 'arm64' }[buf.readUInt16LE(18)] ?? `machine ${buf.readUInt16LE(18)}`
  const shoff = Number(buf.readBigUInt64LE(40))
  const shentsize = buf.readUInt16LE(58)
  const shnum = buf.readUInt16LE(60)
  const sections = []
  for (let i = 0; i < shnum; i++) {
    const o = shoff + i * shentsize
    sections.push({
      type: buf.readUInt32LE(o + 4),
      offset: Number(buf.readBigUInt64LE(o + 24)),
      size: Number(buf.readBigUInt64LE(o + 32)),
      link: buf.readUInt32LE(o + 40),
      info: buf.readUInt32LE(o + 44),
      entsize: Number(buf.readBigUInt64LE(o + 56)),
    })
  }
  const needed = []
  const exports = new Set()
  const glibc = []
  // Version index (SHT_GNU_versym, one per dynamic symbol) → name, from
  // SHT_GNU_verneed; and the undefined dynamic symbols with their index.
  const versionNames = new Map()
  let versym = null
  const undefinedSyms = []
  for (const s of sections) {
    const strtab = sections[s.link]
    if (s.type === 6) {
      // SHT_DYNAMIC: DT_NEEDED entries name the libraries it loads.
      for (let o = s.offset; o < s.offset + s.size; o += 16) {
        const tag = buf.readBigInt64LE(o)
        if (tag === 0n) break
        if (tag === 1n) needed.push(cstr(buf, strtab.offset + Number(buf.readBigUInt64LE(o + 8))))
      }
    } else if (s.type === 11) {
      // SHT_DYNSYM: defined (st_shndx != 0) global symbols, and the
      // undefined ones (index i: its entry in SHT_GNU_versym).
      for (let o = s.offset, i = 0; o < s.offset + s.size; o += s.entsize, i++) {
        const bind = buf[o + 4] >> 4
        const name = cstr(buf, strtab.offset + buf.readUInt32LE(o))
        if (buf.readUInt16LE(o + 6) !== 0) {
          if (bind !== 0) exports.add(name)
        } else if (name !== '') {
          undefinedSyms.push({ name, index: i, weak: bind === 2 })
        }
      }
    } else if (s.type === 0x6fffffff) {
      // SHT_GNU_versym
      versym = s
    } else if (s.type === 0x6ffffffe) {
      // SHT_GNU_verneed: the symbol versions it needs (GLIBC_2.x).
      let o = s.offset
      for (let n = 0; n < s.info; n++) {
        let a = o + buf.readUInt32LE(o + 8)
        for (let k = 0; k < buf.readUInt16LE(o + 2); k++) {
          const name = cstr(buf, strtab.offset + buf.readUInt32LE(a + 8))
          versionNames.set(buf.readUInt16LE(a + 6), name)
          const m = /^GLIBC_(\d+)\.(\d+)/.exec(name)
          if (m) glibc.push([Number(m[1]), Number(m[2])])
          a += buf.readUInt32LE(a + 12)
        }
        o += buf.readUInt32LE(o + 12)
      }
    }
  }
  // Each undefined symbol with the version it asks for (null: none).
  const imports = undefinedSyms.map(({ name, index, weak }) => {
    const v = versym ? buf.readUInt16LE(versym.offset + index * 2) & 0x7fff : 1
    return { name, weak, version: versionNames.get(v) ?? null }
  })
  return { format: 'ELF', shared: type === 3, cpu: machine, needed, exports, glibc, imports }
}

// Library ordinal meaning "look the symbol up in every loaded image".
const FLAT_LOOKUP = -2

function uleb(buf, p) {
  let r = 0
  let shift = 0
  let b
  do {
    b = buf[p.o++]
    r += (b & 0x7f) * 2 ** shift
    shift += 7
  } while (b & 0x80)
  return r
}

// The bind opcode streams of LC_DYLD_INFO (<mach-o/loader.h>): symbol name →
// library ordinal it is bound to (negative: special, -2 flat lookup).
function bindOpcodes(buf, cmd) {
  const out = new Map()
  for (const at of [16, 24, 32]) {
    const start = buf.readUInt32LE(cmd + at)
    const end = start + buf.readUInt32LE(cmd + at + 4)
    const p = { o: start }
    let ordinal = 0
    let symbol = ''
    while (p.o < end) {
      const op = buf[p.o] & 0xf0
      const imm = buf[p.o++] & 0x0f
      if (op === 0x10) ordinal = imm
      else if (op === 0x20) ordinal = uleb(buf, p)
      else if (op === 0x30) ordinal = imm === 0 ? 0 : imm - 16
      else if (op === 0x40) {
        const nul = buf.indexOf(0, p.o)
        symbol = buf.toString('latin1', p.o, nul).slice(1)
        p.o = nul + 1
      } else if (op === 0x60 || op === 0x70 || op === 0x80 || op === 0xa0) uleb(buf, p)
      else if (op === 0xc0) {
        uleb(buf, p)
        uleb(buf, p)
      }
      if (op >= 0x90 && op <= 0xc0) out.set(symbol, ordinal)
    }
  }
  return out
}

// The imports table of LC_DYLD_CHAINED_FIXUPS (<mach-o/fixup-chains.h>),
// import format 1: lib_ordinal:8, weak:1, name_offset:23.
function chainedImports(buf, off) {
  const out = new Map()
  const importsOff = off + buf.readUInt32LE(off + 8)
  const symbolsOff = off + buf.readUInt32LE(off + 12)
  const count = buf.readUInt32LE(off + 16)
  if (buf.readUInt32LE(off + 20) !== 1) throw new Error('unknown chained import format')
  for (let i = 0; i < count; i++) {
    const v = buf.readUInt32LE(importsOff + i * 4)
    const ordinal = v & 0xff
    out.set(cstr(buf, symbolsOff + (v >>> 9)).slice(1), ordinal > 0xf0 ? ordinal - 256 : ordinal)
  }
  return out
}

function macho(buf) {
  const cpu = { 16777223: 'x64', 16777228: 'arm64' }[buf.readUInt32LE(4)] ?? `cputype ${buf.readUInt32LE(4)}`
  const filetype = buf.readUInt32LE(12)
  const ncmds = buf.readUInt32LE(16)
  const needed = []
  const exports = new Set()
  // napi_* functions are Node's own: dyld must look them up at load time
  // (`-undefined dynamic_lookup`), never in a library a Node install lacks.
  let imports = new Map()
  let signed = false
  let minos = null
  let o = 32
  for (let i = 0; i < ncmds; i++) {
    const cmd = buf.readUInt32LE(o)
    const size = buf.readUInt32LE(o + 4)
    if (cmd === 0xc) needed.push(cstr(buf, o + buf.readUInt32LE(o + 8))) // LC_LOAD_DYLIB
    if (cmd === 0x1d) signed = true // LC_CODE_SIGNATURE
    if (cmd === 0x80000022 || cmd === 0x22) imports = bindOpcodes(buf, o) // LC_DYLD_INFO(_ONLY)
    if (cmd === 0x80000034) imports = chainedImports(buf, buf.readUInt32LE(o + 8)) // LC_DYLD_CHAINED_FIXUPS
    if (cmd === 0x32) {
      // LC_BUILD_VERSION: minos is xxxx.yy.zz in nibbles
      const v = buf.readUInt32LE(o + 12)
      minos = [v >>> 16, (v >> 8) & 0xff]
    }
    if (cmd === 0x2) {
      // LC_SYMTAB: external symbols defined in a section (N_EXT | N_SECT).
      const symoff = buf.readUInt32LE(o + 8)
      const nsyms = buf.readUInt32LE(o + 12)
      const stroff = buf.readUInt32LE(o + 16)
      for (let k = 0; k < nsyms; k++) {
        const e = symoff + k * 16
        const type = buf[e + 4]
        if ((type & 0x01) !== 0 && (type & 0x0e) === 0x0e) exports.add(cstr(buf, stroff + buf.readUInt32LE(e)).slice(1))
      }
    }
    o += size
  }
  const napiImports = [...imports].filter(([name]) => name.startsWith('napi_'))
  return { format: 'Mach-O', shared: filetype === 6, cpu, needed, exports, signed, minos, napiImports }
}

// PE32+ (Windows): COFF header, optional header's data directories, and the
// export and import tables, found through the section table.
function pe(buf) {
  const at = buf.readUInt32LE(0x3c)
  if (buf.readUInt32BE(at) !== 0x50450000) throw new Error('MZ without a PE header')
  const cpu = { 34404: 'x64', 43620: 'arm64' }[buf.readUInt16LE(at + 4)] ?? `machine ${buf.readUInt16LE(at + 4)}`
  const nsections = buf.readUInt16LE(at + 6)
  const optSize = buf.readUInt16LE(at + 20)
  const dll = (buf.readUInt16LE(at + 22) & 0x2000) !== 0
  const opt = at + 24
  if (buf.readUInt16LE(opt) !== 0x20b) throw new Error('not PE32+')
  const sections = []
  for (let i = 0; i < nsections; i++) {
    const s = opt + optSize + i * 40
    sections.push({ va: buf.readUInt32LE(s + 12), size: buf.readUInt32LE(s + 16), raw: buf.readUInt32LE(s + 20) })
  }
  const off = (rva) => {
    const s = sections.find((x) => rva >= x.va && rva < x.va + x.size)
    if (!s) throw new Error(`RVA ${rva} in no section`)
    return rva - s.va + s.raw
  }
  const exports = new Set()
  const exportRva = buf.readUInt32LE(opt + 112)
  if (exportRva !== 0) {
    const e = off(exportRva)
    const names = off(buf.readUInt32LE(e + 32))
    for (let i = 0; i < buf.readUInt32LE(e + 24); i++) exports.add(cstr(buf, off(buf.readUInt32LE(names + i * 4))))
  }
  const needed = []
  const importRva = buf.readUInt32LE(opt + 120)
  if (importRva !== 0) {
    for (let d = off(importRva); buf.readUInt32LE(d + 12) !== 0; d += 20)
      needed.push(cstr(buf, off(buf.readUInt32LE(d + 12))))
  }
  return { format: 'PE', shared: dll, cpu, needed, exports }
}

function check(file, key) {
  const buf = readFileSync(file)
  const [os, arch, libc] = key.split('-')
  const isElf = buf.readUInt32BE(0) === 0x7f454c46
  const isMacho = buf.readUInt32LE(0) === 0xfeedfacf
  const isPe = buf.readUInt16BE(0) === 0x4d5a
  if (!isElf && !isMacho && !isPe) throw new Error('neither ELF, 64-bit Mach-O nor PE')
  const b = isElf ? elf(buf) : isMacho ? macho(buf) : pe(buf)
  const want = os === 'darwin' ? 'Mach-O' : os === 'win32' ? 'PE' : 'ELF'
  if (b.format !== want) throw new Error(`${b.format}, want ${want}`)
  if (!b.shared) throw new Error('not a shared library')
  if (b.cpu !== arch) throw new Error(`built for ${b.cpu}, want ${arch}`)
  if (!b.exports.has(REGISTER)) throw new Error(`does not export ${REGISTER}: Node could not load it`)
  const notes = [`${b.format} ${b.cpu} shared library`, `exports ${REGISTER}`]
  if (libc === 'gnu') {
    if (!b.needed.includes('libc.so.6')) throw new Error(`needs ${b.needed.join(', ')}: no glibc`)
    const newer = (v) => v[0] > MAX_GLIBC[0] || (v[0] === MAX_GLIBC[0] && v[1] > MAX_GLIBC[1])
    const tooNew = b.imports.filter(({ version }) => {
      const m = /^GLIBC_(\d+)\.(\d+)/.exec(version ?? '')
      return m && newer([Number(m[1]), Number(m[2])])
    })
    if (tooNew.length > 0) {
      const shown = tooNew.slice(0, 6).map(({ name, version }) => `${name}@${version}`)
      const list = shown.join(', ') + (tooNew.length > 6 ? ` and ${tooNew.length - 6} more` : '')
      throw new Error(`needs ${list}: newer than GLIBC_${MAX_GLIBC.join('.')}`)
    }
    // Linked against glibc 2.17's symbols (zig's x86_64/aarch64-linux-gnu.2.17),
    // every glibc function the binary calls gets a version; one without is
    // one glibc 2.17 does not have (getrandom is 2.25), and the binary,
    // bound at load time (BIND_NOW), would not load there. Node-API's
    // functions are Node's, unversioned; a weak one may be absent (std
    // looks before it calls).
    const unversioned = b.imports.filter(
      ({ name, weak, version }) => version === null && !weak && !/^(napi|node_api)_/.test(name),
    )
    if (unversioned.length > 0) {
      throw new Error(
        `imports ${unversioned.map(({ name }) => name).join(', ')} without a symbol version: ` +
          `not in glibc ${MAX_GLIBC.join('.')} (or in no library it loads); the loader would refuse the binary there`,
      )
    }
    const newest = b.glibc.reduce((a, v) => (v[0] > a[0] || (v[0] === a[0] && v[1] > a[1]) ? v : a), [0, 0])
    if (newer(newest)) throw new Error(`needs GLIBC_${newest.join('.')}, newer than ${MAX_GLIBC.join('.')}`)
    notes.push(`glibc >= ${newest.join('.')}`)
  } else if (libc === 'musl') {
    if (b.needed.includes('libc.so.6') || b.glibc.length > 0) throw new Error('links glibc, want musl')
    if (!b.needed.some((n) => /^libc(\.musl-[^.]+)?\.so/.test(n))) {
      throw new Error(`needs ${b.needed.join(', ') || 'nothing'}: no musl libc`)
    }
    notes.push(`musl (${b.needed.join(', ')})`)
  } else if (os === 'darwin') {
    if (!b.needed.some((n) => n.startsWith('/usr/lib/libSystem'))) throw new Error('does not link libSystem')
    // Apple silicon refuses to map unsigned code: the linker must have
    // signed it (ad hoc), and nothing may have changed it since.
    if (arch === 'arm64' && !b.signed) throw new Error('no code signature: macOS on arm64 would refuse to load it')
    const min = MACOS_MIN[key]
    if (!b.minos) throw new Error('no LC_BUILD_VERSION')
    if (b.minos[0] > min[0] || (b.minos[0] === min[0] && b.minos[1] > min[1])) {
      throw new Error(`needs macOS ${b.minos.join('.')}, newer than ${min.join('.')}`)
    }
    if (b.napiImports.length === 0) throw new Error('imports no napi_* function: not a napi addon?')
    const bound = b.napiImports.find(([, ordinal]) => ordinal !== FLAT_LOOKUP)
    if (bound) throw new Error(`${bound[0]} is bound to library #${bound[1]}, not looked up at load time`)
    notes.push(
      `${b.napiImports.length} napi_* imports looked up at load time`,
      `macOS >= ${b.minos.join('.')}`,
      b.signed ? 'signed' : 'unsigned',
    )
  } else if (os === 'win32') {
    // Node-API is looked up in the running node.exe at load time (napi-sys
    // on Windows); an import of node.exe or libnode.dll would tie the
    // binary to one executable's name.
    const node = b.needed.find((n) => /^(node\.exe|libnode\.dll)$/i.test(n))
    if (node) throw new Error(`imports ${node}: Node-API must be resolved at load time`)
    notes.push(`imports ${b.needed.join(', ')}`)
  }
  return notes.join(', ')
}

const [file, key] = process.argv.slice(2)
try {
  console.log(`${key}: ${check(file, key)}`)
} catch (err) {
  console.error(`${key}: ${file}: ${err.message}`)
  process.exit(1)
}
