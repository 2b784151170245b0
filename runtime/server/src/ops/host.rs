//! Facts about the host for the Shell connector's `system.info`.

/// What `system.info` reports of the machine.
#[derive(Debug)]
pub struct HostFacts {
    /// The host's name.
    pub hostname: String,
    /// The kernel or OS release.
    pub release: String,
    /// Seconds since boot, where the platform says.
    pub uptime_s: Option<i64>,
}

/// The process that started gantry (Unix; none elsewhere).
pub fn parent_pid() -> Option<u32> {
    #[cfg(unix)]
    {
        rustix::process::getppid().map(|p| p.as_raw_nonzero().get().unsigned_abs())
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The host's name, release and uptime.
pub fn facts() -> HostFacts {
    #[cfg(unix)]
    {
        let u = rustix::system::uname();
        let uptime_s = terminal::procfs::uptime_seconds();
        HostFacts {
            hostname: u.nodename().to_string_lossy().into_owned(),
            release: u.release().to_string_lossy().into_owned(),
            uptime_s,
        }
    }
    #[cfg(not(unix))]
    {
        HostFacts {
            hostname: std::env::var("COMPUTERNAME").unwrap_or_default(),
            release: std::env::consts::OS.to_string(),
            uptime_s: None,
        }
    }
}
