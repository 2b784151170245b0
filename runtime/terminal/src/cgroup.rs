//! cgroup v2 containment (Linux): every session runs in a cgroup of its own, so ending it
//! reaches every process it started, however it detached (`setsid`, double fork, `env -i`),
//! with one write to `cgroup.kill`.
//!
//! The layout, below the cgroup the server itself runs in:
//! `gantry.<pid namespace>.<pid>.<start ticks>.<n>/` for this server instance, and `s<n>/`
//! below it for each session (a counter: session ids are secrets, cgroup paths are not). A
//! server that dies without ending its sessions (SIGKILL, a crash) leaves its instance
//! directory behind; the next instance started in the same cgroup and pid namespace finds it
//! (its pid and start time no longer name a live process) and ends everything in it.
//!
//! A command joins its cgroup before anything of it runs: it is started through a `/bin/sh`
//! that writes its own pid into the group's `cgroup.procs` and then `exec`s the command, so
//! no child can be forked outside the group. A process that moves itself to another cgroup
//! is out of reach: the server's user can write the server's own `cgroup.procs` (it must, to
//! move commands), so an unconfined command can; `confine = "roots"` denies it (Landlock
//! refuses writes below /sys/fs/cgroup). The session + tag sweep still runs after the
//! cgroup is killed, as a second net.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The instance directories' common prefix.
const INSTANCE_PREFIX: &str = "gantry.";

/// The shell text that puts itself into the cgroup named by `$1` and becomes the command that
/// follows; if the write fails the command does not run (exit 125).
pub(crate) const JOIN: &str = "{ echo $$ >\"$1\"; } 2>/dev/null || { echo \"gantry: the command could not join its cgroup ($1); it did not run\" >&2; exit 125; }; shift; exec \"$@\"";

/// The program that runs [`JOIN`].
pub(crate) const JOIN_SHELL: &str = "/bin/sh";

/// This server instance's cgroup directory.
#[derive(Debug)]
pub struct Tree {
    dir: PathBuf,
    next_group: std::sync::atomic::AtomicU64,
}

/// Most stale instance directories ended at one start, and how long that may take in all: a
/// command can create directories that look like instances.
const STALE_MAX: usize = 64;
const STALE_WAIT: Duration = Duration::from_secs(2);
/// How deep and how many directories below an instance are removed (a command can create
/// sub-groups of its own).
const REMOVE_MAX: usize = 4096;

/// The pid namespace this process lives in: pids and start times only mean something in it.
fn pid_namespace() -> Option<u64> {
    crate::procfs::own_pid_namespace()
}

/// One session's cgroup directory; removed when dropped (after ending what is left in it).
#[derive(Debug)]
pub struct Group {
    dir: PathBuf,
}

/// What [`Tree::create`] found.
#[derive(Debug)]
pub struct Created {
    /// The instance's tree.
    pub tree: Tree,
    /// Processes ended that instances which died had left behind.
    pub ended_stale: usize,
}

impl Tree {
    /// Creates this instance's directory below the cgroup the server runs in, after ending
    /// what dead instances left there, and checks that a process can really be moved into a
    /// session group. `Err` says, in words for the start-up log, why no cgroup can be used.
    pub fn create() -> Result<Created, String> {
        if !cfg!(target_os = "linux") {
            return Err("cgroups exist only on Linux".into());
        }
        let own = own_cgroup()?;
        let me = std::process::id();
        let ticks = crate::procfs::start_ticks(me);
        let ns = pid_namespace();
        let (Some(ns), true) = (ns, ticks != 0) else {
            return Err("this process's pid namespace or start time cannot be read".into());
        };
        let ended_stale = end_stale(&own, ns);
        // One process may hold several registries (tests do): each gets its own directory.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = own.join(format!(
            "{INSTANCE_PREFIX}{ns}.{me}.{ticks}.{}",
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        if let Err(e) = std::fs::create_dir(&dir) {
            return Err(format!(
                "no cgroup can be created below {} ({e}); root, or a delegated cgroup (a systemd service with Delegate=yes), allows it",
                own.display()
            ));
        }
        let tree = Tree {
            dir,
            next_group: std::sync::atomic::AtomicU64::new(1),
        };
        if !tree.dir.join("cgroup.kill").exists() {
            return Err(
                "this kernel's cgroup v2 has no cgroup.kill (Linux 5.14 or later has)".into(),
            );
        }
        tree.probe()?;
        Ok(Created { tree, ended_stale })
    }

    /// The instance directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new, empty group for a session.
    pub fn group(&self) -> std::io::Result<Group> {
        let n = self
            .next_group
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.dir.join(format!("s{n}"));
        std::fs::create_dir(&dir)?;
        Ok(Group { dir })
    }

    /// Starts a process through [`JOIN`] into a fresh group and sees it arrive there: writing
    /// `cgroup.procs` needs more than creating a directory (write access to the common
    /// ancestor's `cgroup.procs` too).
    fn probe(&self) -> Result<(), String> {
        let group = self
            .group()
            .map_err(|e| format!("no session cgroup can be created: {e}"))?;
        let out = std::process::Command::new(JOIN_SHELL)
            .args(["-c", JOIN, "gantry-join"])
            .arg(group.procs())
            .args([JOIN_SHELL, "-c", "cat /proc/self/cgroup"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("{JOIN_SHELL} could not be started: {e}"))?;
        let seen = String::from_utf8_lossy(&out.stdout);
        let name = group
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let joined = out.status.success()
            && seen.lines().filter_map(|l| l.strip_prefix("0::")).any(|p| {
                name.as_deref()
                    .is_some_and(|n| p.ends_with(&format!("/{n}")))
            });
        if joined {
            Ok(())
        } else {
            Err(format!(
                "a process cannot be moved into a cgroup below {} (no write access to the server's own cgroup.procs)",
                self.dir.display()
            ))
        }
    }

    /// Ends every process of every session of this instance and removes its directories.
    /// Called at shutdown; safe to call more than once.
    pub fn end(&self) {
        end_instance(&self.dir);
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        end_instance(&self.dir);
    }
}

impl Group {
    /// What to start a program through so that it joins this group before anything of it
    /// runs: the program and its arguments follow. For programs gantry starts outside a
    /// command session (`shell.exec`, upstream MCP servers), so whatever they detach
    /// (`setsid`) still ends with the group.
    pub fn join_prefix(&self) -> Vec<std::ffi::OsString> {
        vec![
            JOIN_SHELL.into(),
            "-c".into(),
            JOIN.into(),
            "gantry-join".into(),
            self.procs().into_os_string(),
        ]
    }

    /// The file a process joins the group through.
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// The processes in the group now.
    pub fn pids(&self) -> Vec<i32> {
        pids_of(&self.dir)
    }

    /// Whether any process is in the group.
    pub fn populated(&self) -> bool {
        populated(&self.dir)
    }

    /// SIGKILLs every process in the group and waits (up to `wait`) until none is left.
    /// Returns whether the group is empty.
    pub fn kill(&self, wait: Duration) -> bool {
        kill_and_wait(&self.dir, wait)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if populated(&self.dir) {
            kill_and_wait(&self.dir, Duration::from_secs(1));
        }
        remove_tree(&self.dir);
    }
}

/// `dir` and every group below it, parents before children (at most [`REMOVE_MAX`]: a
/// command can make sub-groups of its own).
fn groups_in(dir: &Path) -> Vec<PathBuf> {
    let mut found = vec![dir.to_path_buf()];
    let mut next = 0;
    while next < found.len() && found.len() < REMOVE_MAX {
        if let Ok(entries) = std::fs::read_dir(&found[next]) {
            let children: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            found.extend(children);
        }
        next += 1;
    }
    found.truncate(REMOVE_MAX);
    found
}

/// Removes `dir` and every group below it, deepest first.
fn remove_tree(dir: &Path) {
    for d in groups_in(dir).iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
}

fn pids_of(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .is_ok_and(|t| t.lines().any(|l| l.trim() == "populated 1"))
}

fn kill_and_wait(dir: &Path, wait: Duration) -> bool {
    if !populated(dir) {
        return true;
    }
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    let until = Instant::now() + wait;
    loop {
        if !populated(dir) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// How many processes are in `dir` and the groups below it.
fn count_procs(dir: &Path) -> usize {
    groups_in(dir).iter().map(|d| pids_of(d).len()).sum()
}

/// Ends everything below an instance directory and removes it: one `cgroup.kill` on the
/// instance reaches every group below it. Returns how many processes were in it.
fn end_instance(dir: &Path) -> usize {
    let found = count_procs(dir);
    kill_and_wait(dir, STALE_WAIT);
    remove_tree(dir);
    found
}

/// Ends the instances below `own`, from pid namespace `ns`, whose server is gone: the pid
/// and start time in the name no longer name a live process. Every stale one is killed
/// first and waited for once, so a start never waits more than [`STALE_WAIT`] whatever a
/// command left (at most [`STALE_MAX`] of them are looked at).
fn end_stale(own: &Path, ns: u64) -> usize {
    let Ok(entries) = std::fs::read_dir(own) else {
        return 0;
    };
    let mut stale = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(INSTANCE_PREFIX)) else {
            continue;
        };
        let mut parts = rest.split('.');
        let (Some(Ok(their_ns)), Some(Ok(pid)), Some(Ok(ticks))) = (
            parts.next().map(str::parse::<u64>),
            parts.next().map(str::parse::<u32>),
            parts.next().map(str::parse::<u64>),
        ) else {
            continue;
        };
        // Another pid namespace's pids mean nothing here: its instances are its own to end.
        if their_ns != ns {
            continue;
        }
        if crate::procfs::start_ticks(pid) != ticks {
            stale.push(e.path());
            if stale.len() == STALE_MAX {
                break;
            }
        }
    }
    let mut ended = 0;
    for dir in &stale {
        ended += count_procs(dir);
        if populated(dir) {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        }
    }
    let until = Instant::now() + STALE_WAIT;
    while Instant::now() < until && stale.iter().any(|d| populated(d)) {
        std::thread::sleep(Duration::from_millis(5));
    }
    for dir in &stale {
        remove_tree(dir);
    }
    ended
}

/// The directory of the cgroup v2 group this process is in, on a mounted cgroup2 hierarchy.
fn own_cgroup() -> Result<PathBuf, String> {
    let membership = crate::procfs::own_cgroup()
        .map_err(|e| format!("/proc/self/cgroup cannot be read: {e}"))?;
    let Some(path) = membership.lines().find_map(|l| l.strip_prefix("0::")) else {
        return Err("this process is in no cgroup v2 hierarchy".into());
    };
    let mounts = crate::procfs::own_mountinfo()
        .map_err(|e| format!("/proc/self/mountinfo cannot be read: {e}"))?;
    for line in mounts.lines() {
        let Some((fields, rest)) = line.split_once(" - ") else {
            continue;
        };
        if rest.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let fields: Vec<&str> = fields.split_whitespace().collect();
        let (Some(root), Some(point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        // The mount shows the hierarchy from `root` down; our group must lie below it.
        let root = unescape(root);
        let Some(below) = path
            .strip_prefix(root.trim_end_matches('/'))
            .filter(|b| b.is_empty() || b.starts_with('/'))
        else {
            continue;
        };
        let dir = PathBuf::from(unescape(point)).join(below.trim_start_matches('/'));
        if dir.join("cgroup.procs").is_file() {
            return Ok(dir);
        }
    }
    if mounts.lines().any(|l| l.contains(" - cgroup2 ")) {
        Err(format!(
            "this process's cgroup ({path}) is not below any mounted cgroup2 hierarchy"
        ))
    } else {
        Err("no cgroup v2 hierarchy is mounted (only cgroup v1)".into())
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape(r"/sys/fs/my\040cgroup"), "/sys/fs/my cgroup");
        assert_eq!(unescape(r"/a\134b"), r"/a\b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape(r"/end\04"), r"/end\04");
    }
}
