/* For the Wine smoke test only: a bcryptprimitives.dll exporting ProcessPrng
 * over RtlGenRandom (advapi32's SystemFunction036). Rust's standard library
 * takes its random bytes from ProcessPrng, which Windows 10 and later have
 * and Wine 8 lacks; without it the addon does not load under Wine.
 * scripts/cross-toolchain.sh builds it with mingw-w64 into the Wine prefix.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
