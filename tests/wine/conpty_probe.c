/* Does this Windows (or Wine) deliver a program's output through a pseudo console?
 * Starts `cmd.exe /c echo <word>` in a pseudo console as portable-pty does (standard handles
 * set to INVALID_HANDLE_VALUE) and reads the console's output pipe. Prints what arrived and
 * exits 0 if the word did, 1 if not, 2 if there is no pseudo console at all. tests/run runs
 * it under Wine: gantry runs commands on pipes where it exits 1 (runtime/terminal console.rs). */
#include <windows.h>
#include <stdio.h>
#include <string.h>

typedef void *HPCON_;
typedef HRESULT(WINAPI *CreatePc)(COORD, HANDLE, HANDLE, DWORD, HPCON_ *);
typedef void(WINAPI *ClosePc)(HPCON_);
#define ATTRIBUTE_PSEUDOCONSOLE 0x00020016

int main(void) {
    HMODULE k = GetModuleHandleA("kernel32.dll");
    CreatePc create = (CreatePc)GetProcAddress(k, "CreatePseudoConsole");
    ClosePc close = (ClosePc)GetProcAddress(k, "ClosePseudoConsole");
    if (!create || !close) {
        puts("no pseudo console");
        return 2;
    }
    HANDLE in_r, in_w, out_r, out_w;
    CreatePipe(&in_r, &in_w, NULL, 0);
    CreatePipe(&out_r, &out_w, NULL, 0);
    COORD size = {80, 25};
    HPCON_ pc;
    if (create(size, in_r, out_w, 0, &pc) != S_OK) {
        puts("CreatePseudoConsole failed");
        return 2;
    }
    STARTUPINFOEXW si;
    ZeroMemory(&si, sizeof si);
    si.StartupInfo.cb = sizeof si;
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = si.StartupInfo.hStdOutput = si.StartupInfo.hStdError = INVALID_HANDLE_VALUE;
    SIZE_T n = 0;
    InitializeProcThreadAttributeList(NULL, 1, 0, &n);
    si.lpAttributeList = HeapAlloc(GetProcessHeap(), 0, n);
    InitializeProcThreadAttributeList(si.lpAttributeList, 1, 0, &n);
    UpdateProcThreadAttribute(si.lpAttributeList, 0, ATTRIBUTE_PSEUDOCONSOLE, pc, sizeof pc, NULL, NULL);
    PROCESS_INFORMATION pi;
    WCHAR cmd[] = L"cmd.exe /c echo through-the-pseudo-console";
    if (!CreateProcessW(NULL, cmd, NULL, NULL, FALSE, EXTENDED_STARTUPINFO_PRESENT, NULL, NULL,
                        &si.StartupInfo, &pi)) {
        puts("CreateProcess failed");
        return 2;
    }
    CloseHandle(in_r);
    CloseHandle(out_w);
    WaitForSingleObject(pi.hProcess, 10000);
    close(pc);
    char got[8192] = {0};
    DWORD total = 0, read = 0;
    while (total < sizeof got - 1 && ReadFile(out_r, got + total, sizeof got - 1 - total, &read, NULL) && read)
        total += read;
    int delivered = strstr(got, "through-the-pseudo-console") != NULL;
    printf("pseudo console delivered %lu bytes; the word %s\n", (unsigned long)total,
           delivered ? "arrived" : "did not arrive");
    return delivered ? 0 : 1;
}
