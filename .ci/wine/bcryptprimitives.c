/* Wine 8 (Debian 12) lacks bcryptprimitives.dll, which Rust's standard
 * library imports for ProcessPrng. This stand-in, built with MinGW and put
 * in the Wine prefix's system32 for CI only, forwards to RtlGenRandom. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
