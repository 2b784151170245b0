//! The server process's own limits.

/// Raises the soft limit on open files to the hard limit (at most 65 536): each HTTP client
/// is a socket and each walk holds directory descriptors, and distributions still start
/// processes at 1024. Running out is still handled (a clean error, the server keeps
/// serving); this only makes it rarer. Returns the limit now in effect, when known.
pub fn raise_open_files() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        let want = limit.maximum.map_or(65_536, |m| m.min(65_536));
        if limit.current.is_some_and(|c| c < want) {
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(want),
                    maximum: limit.maximum,
                },
            );
        }
        getrlimit(Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Makes glibc's allocator give large buffers back to the system as soon as they are freed.
///
/// By default glibc raises its mmap threshold each time a large block is freed (up to
/// 32 MiB), so after the first big file every later one up to that size is carved from a
/// heap arena and stays resident after it is freed, one arena per busy thread: under 256
/// concurrent calls the peak measured twice the memory actually in use. A fixed threshold
/// keeps the process's peak close to the ceiling [`tool_api::memory`] enforces.
pub fn return_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only sets allocator parameters; it is called once at start-up, before
    // any other thread exists, with constants glibc documents.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}

/// Lets a closed stdout end the process quietly, as a shell tool does: `gantry audit | head`
/// stops when `head` has read enough instead of panicking on the broken pipe.
///
/// Only for the commands that print and exit. The server keeps SIGPIPE ignored (Rust's
/// default), so a client that hangs up on a socket or a pipe never kills it.
pub fn end_quietly_when_output_closes() {
    #[cfg(unix)]
    #[allow(unsafe_code)]
    // SAFETY: restores the default disposition of one signal at start-up, before any other
    // thread exists; no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
