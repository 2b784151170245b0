//! Ending a session's whole process tree: the leader's process group and session, every
//! descendant, and on Linux every process carrying the session's tag in its environment, which
//! catches grandchildren that detached (`setsid`, double fork) and were re-parented to init.
//! A process that both detaches and clears its environment escapes on Linux; on other Unixes
//! only the process group and session are reached (no /proc); Windows uses a job object.

/// The environment variable that tags every process a session starts.
pub const TAG_VAR: &str = "GANTRY_SESSION_TAG";

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashSet;

    use rustix::process::{Pid, Signal};

    use crate::procfs::{self, Stat};

    fn has_tag(pid: i32, needle: &[u8]) -> bool {
        procfs::environ(pid).is_some_and(|env| env.iter().any(|kv| kv == needle))
    }

    /// Every process, or only those whose pid was allocated after `leader`'s when that is
    /// sound. Pids are handed out in increasing order until they wrap at pid_max, so the
    /// shortcut is taken only when the session (`age` old) is too young to have seen a whole
    /// cycle of pids, even at [`MOST_FORKS_A_SECOND`], and the last pid handed out is still
    /// above the leader's.
    fn all(leader: i32, age: std::time::Duration) -> Vec<Stat> {
        let (max, last) = procfs::pid_range();
        let young = max.is_some_and(|max| {
            age.as_secs_f64() * MOST_FORKS_A_SECOND < f64::from(max)
                && age < std::time::Duration::from_secs(60)
        });
        let floor = (young && last.is_some_and(|last| last >= leader)).then_some(leader);
        procfs::pids()
            .into_iter()
            .filter(|pid| floor.is_none_or(|f| *pid >= f))
            .filter_map(procfs::stat)
            .collect()
    }

    /// More pids than a machine hands out in a second (threads take pids too): with pid_max at
    /// 32,768 a session younger than 0.65 s, with the 64-bit default of 2^22 one younger than
    /// a minute, cannot have seen pids wrap. A command bent on wrapping them faster to hide a
    /// child outside its cgroup could also have cleared its tag and left its session: the
    /// sweep is a net for what detaches by accident, the cgroup is the boundary.
    const MOST_FORKS_A_SECOND: f64 = 50_000.0;

    /// The processes that belong to the session led by `leader` or carry `tag`. Only
    /// processes started at or after `since` can carry the tag, so older ones are not read;
    /// for a session `age` old, see [`all`].
    pub fn members(leader: i32, tag: &str, since: u64, age: std::time::Duration) -> Vec<i32> {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let needle = format!("{}={tag}", super::TAG_VAR).into_bytes();
        let procs = all(leader, age);
        // A pid still used as a session id is never handed out again, but once the session is
        // gone the leader's pid can be: then only the tag (and start times) identify ours.
        let reused = leader_reused(leader, since);
        let mut found: HashSet<i32> = HashSet::new();
        if !reused {
            found.insert(leader);
        }
        for p in &procs {
            if p.start < since {
                continue;
            }
            if (!reused && p.session == leader) || has_tag(p.pid, &needle) {
                found.insert(p.pid);
            }
        }
        // Descendants of anything found (a child may have started its own session).
        loop {
            let before = found.len();
            for p in &procs {
                if found.contains(&p.ppid) {
                    found.insert(p.pid);
                }
            }
            if found.len() == before {
                break;
            }
        }
        found.remove(&me);
        found.into_iter().filter(|p| *p > 1).collect()
    }

    /// Whether `leader`'s pid now names another process than the one started at `since`.
    pub fn leader_reused(leader: i32, since: u64) -> bool {
        since != 0 && procfs::stat(leader).is_some_and(|p| p.start != since)
    }

    pub fn kill(pid: i32) {
        signal(pid, Signal::KILL);
    }

    pub fn signal(pid: i32, signal: Signal) {
        if let Some(p) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(p, signal);
        }
    }

    pub fn kill_group(pid: i32) {
        signal_group(pid, Signal::KILL);
    }

    pub fn signal_group(pid: i32, signal: Signal) {
        if let Some(p) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process_group(p, signal);
        }
    }

    /// Whether any of `pids` is still running (not gone, not a zombie).
    pub fn any_running(pids: &[i32]) -> bool {
        pids.iter().any(|p| procfs::is_running(*p))
    }
}

/// How process trees are ended without a cgroup, as one sentence for the start-up log: which
/// method is relied on and what escapes it. `why` says why there is no cgroup.
pub fn method_without_cgroup(why: &str) -> String {
    if cfg!(windows) {
        "process trees end with their job object".into()
    } else {
        format!(
            "process trees end by process session, descendants and an environment tag, not by cgroup ({why}): a setsid grandchild that clears the tag, or one left when the server is SIGKILLed, can outlive its session"
        )
    }
}

/// How long processes get to run their exit handlers (remove lock files, restore the
/// terminal) after SIGHUP and SIGTERM before SIGKILL. Killing at once left, for example, a
/// login shell's `pyenv rehash` lock behind, and every later shell then waited a minute on it.
pub const GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// Kills every process of the session led by `leader` (tagged `tag`, started at `since`),
/// repeating while new ones appear (a process may fork while we work). `age` is how long ago the
/// session started (a young one's processes are found among the newest pids). Returns how
/// many were signalled.
#[cfg(target_os = "linux")]
pub fn terminate(leader: u32, tag: &str, since: u64, age: std::time::Duration) -> usize {
    sweep(leader, tag, since, age, false)
}

/// [`terminate`]; with `done_if_none`, a first look that finds no process of the session
/// ends the sweep (the session's cgroup, already empty, stands for the second look).
#[cfg(target_os = "linux")]
fn sweep(
    leader: u32,
    tag: &str,
    since: u64,
    age: std::time::Duration,
    done_if_none: bool,
) -> usize {
    let Ok(leader) = i32::try_from(leader) else {
        return 0;
    };
    if !linux::leader_reused(leader, since) {
        // Politely first: a terminal hanging up, then a request to stop.
        let members = linux::members(leader, tag, since, age);
        // The leader is always among them (it has ended and been reaped here): nothing
        // else running means nothing to end, and nothing left that could start more.
        if done_if_none && !members.iter().any(|p| crate::procfs::is_running(*p)) {
            linux::kill_group(leader);
            return 0;
        }
        for signal in [rustix::process::Signal::HUP, rustix::process::Signal::TERM] {
            linux::signal_group(leader, signal);
            for p in &members {
                linux::signal_group(*p, signal);
            }
        }
        let until = std::time::Instant::now() + GRACE;
        while std::time::Instant::now() < until && linux::any_running(&members) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        linux::kill_group(leader);
    }
    let mut signalled = 0;
    for _ in 0..20 {
        let members = linux::members(leader, tag, since, age);
        // Zombies stay in /proc until reaped; they hold nothing, so stop once only they remain.
        let running: Vec<i32> = members
            .into_iter()
            .filter(|p| crate::procfs::is_running(*p))
            .collect();
        if running.is_empty() {
            break;
        }
        for p in &running {
            linux::kill_group(*p);
            linux::kill(*p);
        }
        signalled += running.len();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    signalled
}

/// Ends every process in a session's cgroup: politely first (SIGHUP, then SIGTERM, each to
/// the process and its group, then a grace), then `cgroup.kill` on the group and whatever
/// sub-groups a command made. The pids are read from the group just before they are
/// signalled (a pid could be reused only if its process ended in between). Then the sweep by
/// session and tag runs too: an unconfined command can move itself out of its cgroup.
/// Returns how many processes were found.
#[cfg(target_os = "linux")]
pub fn terminate_group(
    leader: u32,
    tag: &str,
    since: u64,
    age: std::time::Duration,
    group: &crate::cgroup::Group,
) -> usize {
    let mut found = 0;
    let populated = group.populated();
    if populated {
        let members = group.pids();
        found = members.len();
        for signal in [rustix::process::Signal::HUP, rustix::process::Signal::TERM] {
            for p in &members {
                linux::signal(*p, signal);
                linux::signal_group(*p, signal);
            }
        }
        let until = std::time::Instant::now() + GRACE;
        while std::time::Instant::now() < until && group.populated() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        group.kill(std::time::Duration::from_secs(2));
    }
    // A finished command's cgroup is empty: one look through /proc for what left it is
    // enough when it finds nothing (each look reads every process's stat).
    found + sweep(leader, tag, since, age, !populated)
}

/// Sessions have cgroups only on Linux.
#[cfg(not(target_os = "linux"))]
pub fn terminate_group(
    leader: u32,
    tag: &str,
    since: u64,
    age: std::time::Duration,
    _group: &crate::cgroup::Group,
) -> usize {
    terminate(leader, tag, since, age)
}

/// Kills the process group (= session) the leader started; no /proc here to find more.
#[cfg(all(unix, not(target_os = "linux")))]
pub fn terminate(leader: u32, _tag: &str, _since: u64, _age: std::time::Duration) -> usize {
    use rustix::process::{Pid, Signal};
    let Some(pid) = i32::try_from(leader).ok().and_then(Pid::from_raw) else {
        return 0;
    };
    let _ = rustix::process::kill_process_group(pid, Signal::HUP);
    let _ = rustix::process::kill_process_group(pid, Signal::TERM);
    std::thread::sleep(GRACE / 3);
    let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    1
}

#[cfg(windows)]
pub use windows::{JobObject, terminate};

#[cfg(windows)]
mod windows {
    //! Windows: the session's processes are in a job object created with KILL_ON_JOB_CLOSE;
    //! ending the job ends every process in it, detached or not.
    #![allow(unsafe_code)]

    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
        SetInformationJobObject, TerminateJobObject,
    };
    use windows_sys::Win32::System::Threading::{
        OpenProcess, PROCESS_SET_QUOTA, PROCESS_TERMINATE,
    };

    /// A job object owning a session's processes.
    #[derive(Debug)]
    pub struct JobObject(HANDLE);

    // SAFETY: a job handle may be used from any thread.
    unsafe impl Send for JobObject {}
    // SAFETY: the handle is only passed to thread-safe kernel calls.
    unsafe impl Sync for JobObject {}

    impl JobObject {
        /// Creates a job that kills its processes when closed and puts `pid` in it.
        pub fn for_process(pid: u32) -> std::io::Result<JobObject> {
            // SAFETY: plain Win32 calls with valid arguments; every handle is checked and closed.
            unsafe {
                let job = CreateJobObjectW(std::ptr::null(), std::ptr::null());
                if job.is_null() {
                    return Err(std::io::Error::last_os_error());
                }
                let job = JobObject(job);
                let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
                info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
                let ok = SetInformationJobObject(
                    job.0,
                    JobObjectExtendedLimitInformation,
                    (&raw const info).cast(),
                    std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                );
                if ok == 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let process = OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, 0, pid);
                if process.is_null() {
                    return Err(std::io::Error::last_os_error());
                }
                let assigned = AssignProcessToJobObject(job.0, process);
                CloseHandle(process);
                if assigned == 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(job)
            }
        }

        /// Ends every process in the job.
        pub fn terminate(&self) {
            // SAFETY: the handle is valid for the life of `self`.
            unsafe {
                TerminateJobObject(self.0, 1);
            }
        }
    }

    impl Drop for JobObject {
        fn drop(&mut self) {
            // SAFETY: closing our own handle once; KILL_ON_JOB_CLOSE ends what is left.
            unsafe {
                CloseHandle(self.0);
            }
        }
    }

    /// Without a job (it could not be created), the leader is all that can be reached.
    pub fn terminate(_leader: u32, _tag: &str, _since: u64, _age: std::time::Duration) -> usize {
        0
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Runs under Wine in CI: a job created for a process ends it when terminated.
        #[test]
        fn terminating_the_job_ends_its_process() {
            let mut child = std::process::Command::new("cmd")
                .args(["/c", "ping -n 60 127.0.0.1 > NUL"])
                .spawn()
                .unwrap();
            let job = JobObject::for_process(child.id()).unwrap();
            assert!(
                child.try_wait().map(|s| s.is_none()).unwrap_or(false),
                "still running"
            );
            job.terminate();
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(1));
        }
    }
}

/// A running process gantry did not start, held by a pidfd: signals reach it and no process
/// that later takes its pid.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct Instance {
    /// Its pid when it was found.
    pub pid: u32,
    fd: std::os::fd::OwnedFd,
}

#[cfg(target_os = "linux")]
impl Instance {
    fn signal(&self, sig: rustix::process::Signal) {
        let _ = rustix::process::pidfd_send_signal(&self.fd, sig);
    }

    /// Whether it has ended (its pidfd reads as ready once it has).
    fn ended(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0)
    }
}

/// gantry's ancestors (whatever hosts it: the MCP client, a terminal, an editor) and
/// descendants (its commands and apps): never another application's instances.
#[cfg(target_os = "linux")]
fn family() -> std::collections::HashSet<u32> {
    let me = std::process::id();
    let parents: std::collections::HashMap<u32, u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let after = stat.get(stat.rfind(')')? + 2..)?;
            let ppid = after.split_whitespace().nth(1)?.parse::<u32>().ok()?;
            Some((pid, ppid))
        })
        .collect();
    // Up: whatever hosts gantry.
    let mut ancestors = std::collections::HashSet::new();
    let mut at = me;
    while let Some(&up) = parents.get(&at) {
        if up == 0 || !ancestors.insert(up) {
            break;
        }
        at = up;
    }
    // Down: repeated until nothing new joins (the map is one snapshot).
    let mut descendants = std::collections::HashSet::from([me]);
    loop {
        let before = descendants.len();
        for (pid, ppid) in &parents {
            if descendants.contains(ppid) {
                descendants.insert(*pid);
            }
        }
        if descendants.len() == before {
            break;
        }
    }
    descendants.extend(ancestors);
    descendants
}

/// Whether process `pid` runs the file `program` (the same file, by device and inode) as the
/// same user as gantry, in gantry's own pid and mount namespaces, with arguments beginning
/// with `fixed`.
#[cfg(target_os = "linux")]
fn runs(pid: u32, program: (u64, u64), fixed: &[String]) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let proc = format!("/proc/{pid}");
    let same_ns = |ns: &str| {
        let ino = |p: String| std::fs::metadata(p).map(|m| m.ino()).ok();
        ino(format!("{proc}/ns/{ns}"))
            .is_some_and(|i| Some(i) == ino(format!("/proc/self/ns/{ns}")))
    };
    std::fs::metadata(&proc).is_ok_and(|m| m.uid() == rustix::process::geteuid().as_raw())
        && std::fs::metadata(format!("{proc}/exe")).is_ok_and(|m| (m.dev(), m.ino()) == program)
        && same_ns("pid")
        && same_ns("mnt")
        && std::fs::read(format!("{proc}/cmdline")).is_ok_and(|cmdline| {
            let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            fixed
                .iter()
                .enumerate()
                .all(|(i, a)| argv.get(i + 1).is_some_and(|given| *given == a.as_bytes()))
        })
}

/// The running processes of `program` whose arguments begin with `fixed` (what a declared
/// command line holds before the call's own), each held by a pidfd: instances of an
/// application gantry did not launch. Never gantry, what hosts it or what it started, pid 1,
/// another user's process or one in another container. Linux: `/proc` and pidfds.
#[cfg(target_os = "linux")]
pub fn instances(program: &std::path::Path, fixed: &[String]) -> Vec<Instance> {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(target) = std::fs::metadata(program).map(|m| (m.dev(), m.ino())) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let family = family();
    let mut out: Vec<Instance> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid > 1 && !family.contains(pid) && runs(*pid, target, fixed))
        .filter_map(|pid| {
            let raw = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
            let fd = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty()).ok()?;
            // Checked again now the pidfd holds it: the pid may have gone to another process
            // between the look and the open.
            runs(pid, target, fixed).then_some(Instance { pid, fd })
        })
        .collect();
    out.sort_unstable_by_key(|i| i.pid);
    out
}

/// Ends `instances`, each alone (never its group: what shares it is not its for sure):
/// SIGTERM, then SIGKILL to those left after `grace`, through their pidfds. Returns the pids of
/// those that ended.
#[cfg(target_os = "linux")]
pub async fn end_each(instances: &[Instance], grace: std::time::Duration) -> Vec<u32> {
    use rustix::process::Signal;
    for i in instances {
        i.signal(Signal::TERM);
    }
    let until = tokio::time::Instant::now() + grace;
    while instances.iter().any(|i| !i.ended()) && tokio::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for i in instances.iter().filter(|i| !i.ended()) {
        i.signal(Signal::KILL);
    }
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
    while instances.iter().any(|i| !i.ended()) && tokio::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    instances
        .iter()
        .filter(|i| i.ended())
        .map(|i| i.pid)
        .collect()
}

#[cfg(all(test, target_os = "linux"))]
mod instance_tests {
    use super::*;

    #[test]
    fn gantry_what_hosts_it_and_what_it_started_are_never_instances() {
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let family = family();
        assert!(family.contains(&std::process::id()));
        let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get().unsigned_abs());
        assert!(parent.is_some_and(|p| family.contains(&p)));
        assert!(family.contains(&child.id()), "a child of this process");
        // Our own sleep is ours: never found as another's instance.
        let found = instances(std::path::Path::new("/bin/sleep"), &["30".to_string()]);
        assert!(found.iter().all(|i| i.pid != child.id()), "{found:?}");
        let _ = child.kill();
        let _ = child.wait();
    }
}
