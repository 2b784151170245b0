//! The one reader of Linux's `/proc`: a process's status line, environment, cgroup and open
//! sockets, the processes there are, and the few system-wide values gantry needs. Everything
//! that asks the kernel about processes through `/proc` asks here. Elsewhere each function
//! answers "unknown" (`None`, empty).

/// What `/proc/<pid>/stat` says of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its pid.
    pub pid: i32,
    /// Its state letter (`R`, `S`, `Z`...).
    pub state: char,
    /// Its parent's pid.
    pub ppid: i32,
    /// The session it is in (the pid of the session's leader).
    pub session: i32,
    /// When it started, in clock ticks since boot.
    pub start: u64,
}

impl Stat {
    /// Whether it has exited and waits to be reaped (it holds nothing then).
    pub fn is_zombie(&self) -> bool {
        self.state == 'Z'
    }
}

/// `stat`'s fields, from the text of `/proc/<pid>/stat`.
fn parse_stat(pid: i32, text: &str) -> Option<Stat> {
    // `pid (comm) state ppid pgrp session …`; comm may hold spaces and parentheses, so the
    // fields are read after the last `)`.
    let after = text.get(text.rfind(')')? + 2..)?;
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp: i32 = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    // Field 22, `starttime`.
    let start = fields.nth(15)?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        session,
        start,
    })
}

/// Process `pid`'s status, or `None` when it is gone (or `/proc` does not show it).
pub fn stat(pid: i32) -> Option<Stat> {
    let text = read_to_string(&format!("/proc/{pid}/stat"))?;
    parse_stat(pid, &text)
}

/// When `pid` started, in clock ticks since boot: only comparable with another such value
/// (0 when unknown, as everywhere but Linux).
pub fn start_ticks(pid: u32) -> u64 {
    i32::try_from(pid)
        .ok()
        .and_then(stat)
        .map_or(0, |p| p.start)
}

/// Whether `pid` is still running: present and not a zombie.
pub fn is_running(pid: i32) -> bool {
    stat(pid).is_some_and(|s| !s.is_zombie())
}

/// Whether `pid` exists in `/proc` at all (a zombie too).
pub fn exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Process `pid`'s environment as `NAME=value` entries, when it can be read.
pub fn environ(pid: i32) -> Option<Vec<Vec<u8>>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|kv| !kv.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
    )
}

/// Process `pid`'s arguments (`/proc/<pid>/cmdline`), when they can be read.
pub fn cmdline(pid: i32) -> Option<Vec<Vec<u8>>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(raw.split(|b| *b == 0).map(<[u8]>::to_vec).collect())
}

/// Process `pid`'s cgroup membership lines (`0::/path` on cgroup v2).
pub fn cgroup(pid: i32) -> std::io::Result<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
}

/// This process's cgroup membership lines.
pub fn own_cgroup() -> std::io::Result<String> {
    std::fs::read_to_string("/proc/self/cgroup")
}

/// This process's mount table (`/proc/self/mountinfo`).
pub fn own_mountinfo() -> std::io::Result<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
}

/// The inode of the pid namespace this process lives in: pids and start times only mean
/// something in it.
pub fn own_pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let s = link.to_str()?;
    s.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// What this process's descriptor `fd` is open on (a path, `pipe:[…]`, `socket:[…]`).
pub fn own_fd_target(fd: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()
}

/// Every pid `/proc` lists.
pub fn pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// The largest pid the kernel hands out, and the last one it handed out.
pub fn pid_range() -> (Option<i32>, Option<i32>) {
    let read = |path: &str| read_to_string(path).and_then(|t| t.trim().parse::<i32>().ok());
    (
        read("/proc/sys/kernel/pid_max"),
        read("/proc/sys/kernel/ns_last_pid"),
    )
}

/// The process holding socket `inode` open.
pub fn socket_holder(inode: u64) -> Option<i32> {
    let wanted = format!("socket:[{inode}]");
    pids().into_iter().find(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str())
            })
        })
    })
}

/// The IPv4 TCP socket table (`/proc/net/tcp`).
pub fn tcp4_table() -> Option<String> {
    read_to_string("/proc/net/tcp")
}

/// Seconds since boot.
pub fn uptime_seconds() -> Option<i64> {
    read_to_string("/proc/uptime")?
        .split('.')
        .next()?
        .trim()
        .parse()
        .ok()
}

fn read_to_string(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let line = "42 (a (b) c) S 7 42 40 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
        let s = parse_stat(42, line).unwrap();
        assert_eq!((s.state, s.ppid, s.session, s.start), ('S', 7, 40, 12345));
        assert!(parse_stat(1, "garbage").is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_running_and_started_after_boot() {
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(is_running(me));
        assert!(start_ticks(std::process::id()) > 0);
        assert!(pids().contains(&me));
    }
}
