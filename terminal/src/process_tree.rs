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

    struct Proc {
        pid: i32,
        ppid: i32,
        session: i32,
    }

    fn stat(pid: i32) -> Option<Proc> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid pgrp session …`; comm may hold spaces and parentheses.
        let after = &text[text.rfind(')')? + 2..];
        let mut fields = after.split_whitespace();
        let _state = fields.next()?;
        let ppid = fields.next()?.parse().ok()?;
        let _pgrp: i32 = fields.next()?.parse().ok()?;
        let session = fields.next()?.parse().ok()?;
        Some(Proc { pid, ppid, session })
    }

    fn has_tag(pid: i32, needle: &[u8]) -> bool {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle))
    }

    fn all() -> Vec<Proc> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter_map(stat)
            .collect()
    }

    /// The processes that belong to the session led by `leader` or carry `tag`.
    pub fn members(leader: i32, tag: &str) -> Vec<i32> {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let needle = format!("{}={tag}", super::TAG_VAR).into_bytes();
        let procs = all();
        let mut found: HashSet<i32> = HashSet::new();
        found.insert(leader);
        for p in &procs {
            if p.session == leader || has_tag(p.pid, &needle) {
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

    pub fn kill(pid: i32) {
        if let Some(p) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(p, Signal::KILL);
        }
    }

    pub fn kill_group(pid: i32) {
        if let Some(p) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process_group(p, Signal::KILL);
        }
    }
}

/// Kills every process of the session led by `leader` (tagged `tag`), repeating while new
/// ones appear (a process may fork while we work). Returns how many were signalled.
#[cfg(target_os = "linux")]
pub fn terminate(leader: u32, tag: &str) -> usize {
    let Ok(leader) = i32::try_from(leader) else {
        return 0;
    };
    linux::kill_group(leader);
    let mut signalled = 0;
    for _ in 0..20 {
        let members = linux::members(leader, tag);
        let alive: Vec<i32> = members
            .into_iter()
            .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
            .collect();
        // Zombies stay in /proc until reaped; they hold nothing, so stop once only they remain.
        let running: Vec<i32> = alive
            .into_iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .is_ok_and(|s| s.rfind(')').and_then(|i| s.get(i + 2..i + 3)) != Some("Z"))
            })
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

/// Kills the process group (= session) the leader started; no /proc here to find more.
#[cfg(all(unix, not(target_os = "linux")))]
pub fn terminate(leader: u32, _tag: &str) -> usize {
    use rustix::process::{Pid, Signal};
    let Some(pid) = i32::try_from(leader).ok().and_then(Pid::from_raw) else {
        return 0;
    };
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
    pub fn terminate(_leader: u32, _tag: &str) -> usize {
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
                .unwrap_or_else(|e| panic!("{e}"));
            let job = JobObject::for_process(child.id()).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                child.try_wait().map(|s| s.is_none()).unwrap_or(false),
                "still running"
            );
            job.terminate();
            let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(status.code(), Some(1));
        }
    }
}
