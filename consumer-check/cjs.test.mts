import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { expect, it } from 'vitest'

it('loads through a real CommonJS require()', () => {
  const out = execFileSync(process.execPath, [join(import.meta.dirname, 'cjs-check.cjs')], { encoding: 'utf8' })
  expect(out.trim()).toBe('cjs ok')
})
