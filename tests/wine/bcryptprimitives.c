/* Wine 8 lacks bcryptprimitives.dll, whose ProcessPrng every Rust binary imports for its
   random numbers. This stand-in forwards it to RtlGenRandom (advapi32's SystemFunction036),
   so Windows test binaries can run under Wine. Built by tests/run into a private prefix. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    return SystemFunction036(data, (ULONG)len);
}
