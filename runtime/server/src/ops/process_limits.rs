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
