//! A shell started ahead of its command: in its PTY, the snapshot already sourced, blocked
//! reading its command from a private FIFO. A command then costs writing it there, not
//! starting a shell; the next one is started in the background.
//!
//! The command arrives with its own prelude (working directory, the call's variables and
//! removals), so one warm shell serves any call whose inherited environment (what was removed
//! from the server's, e.g. the desktop session) matches the one it was started with.

// Elsewhere the module only says no: its constants and fields are Unix's.
#![cfg_attr(not(unix), allow(dead_code))]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::session::Session;
use crate::shell::{Shell, posix_quote};
use crate::window::SpillConfig;

/// How long a command waits for a warm shell that is still starting or sourcing its snapshot.
pub(crate) const READY_WITHIN: Duration = Duration::from_millis(200);
/// How long an unused warm shell waits before ending itself.
const IDLE_LIMIT: Duration = Duration::from_secs(15 * 60);
/// A warm shell this old is not handed a command: it may end itself before running it.
pub(crate) const USABLE_FOR: Duration = Duration::from_secs(14 * 60);

/// Whether `shell` can be kept warm: bash, whose `read` takes a delimiter, a timeout and a
/// descriptor.
pub(crate) fn supported(shell: &Shell) -> bool {
    cfg!(unix)
        && Path::new(&shell.path)
            .file_name()
            .and_then(std::ffi::OsStr::to_str)
            == Some("bash")
}

/// Most shells kept ready at once: while commands come back to back, each takes a ready shell
/// while the next ones start, so none waits for a shell to start.
pub(crate) const POOL_MAX: usize = 3;
/// Two commands this close together make the pool grow to [`POOL_MAX`]...
const BACK_TO_BACK: Duration = Duration::from_secs(2);
/// ...for this long after the last such pair; then it shrinks back to one ready shell.
const BUSY_HOLD: Duration = Duration::from_secs(60);

/// The shells started ahead of commands, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    ready: std::collections::VecDeque<Warm>,
    last_command: Option<Instant>,
    busy_until: Option<Instant>,
}

impl Pool {
    /// A command came at `now`; returns whether commands are coming back to back.
    pub fn note_command(&mut self, now: Instant) -> bool {
        if self
            .last_command
            .is_some_and(|last| now.saturating_duration_since(last) < BACK_TO_BACK)
        {
            self.busy_until = Some(now + BUSY_HOLD);
        }
        self.last_command = Some(now);
        self.busy(now)
    }

    fn busy(&self, now: Instant) -> bool {
        self.busy_until.is_some_and(|until| now < until)
    }

    /// How many shells should be ready now.
    pub fn target(&self, now: Instant) -> usize {
        if self.busy(now) { POOL_MAX } else { 1 }
    }

    /// Whether fewer shells are ready than [`Pool::target`].
    pub fn short(&self, now: Instant) -> bool {
        self.ready.len() < self.target(now)
    }

    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// The oldest ready shell that `fits`, and the shells that no longer can be used (they
    /// are the caller's to end).
    pub fn take(&mut self, fits: impl Fn(&Warm) -> bool) -> (Option<Warm>, Vec<Warm>) {
        let mut stale = Vec::new();
        while let Some(w) = self.ready.pop_front() {
            if fits(&w) {
                return (Some(w), stale);
            }
            stale.push(w);
        }
        (None, stale)
    }

    /// Keeps `w` ready, unless the pool is full: then it is handed back to be ended.
    pub fn keep(&mut self, w: Warm) -> Option<Warm> {
        if self.ready.len() >= POOL_MAX {
            return Some(w);
        }
        self.ready.push_back(w);
        None
    }

    /// Puts back a shell just taken, at the front (it is the oldest).
    pub fn put_back(&mut self, w: Warm) -> Option<Warm> {
        if self.ready.len() >= POOL_MAX {
            return Some(w);
        }
        self.ready.push_front(w);
        None
    }

    /// The shells to end now: beyond one once commands stopped coming back to back (the
    /// oldest go), and any too old to be handed a command.
    pub fn surplus(&mut self, now: Instant) -> Vec<Warm> {
        let mut out = Vec::new();
        let (old, young): (Vec<Warm>, Vec<Warm>) = self
            .ready
            .drain(..)
            .partition(|w| w.session.age() >= USABLE_FOR || w.session.exited());
        out.extend(old);
        self.ready.extend(young);
        while self.ready.len() > self.target(now) {
            out.extend(self.ready.pop_front());
        }
        out
    }

    /// Every ready shell (commands may no longer run, or the server stops).
    pub fn drain(&mut self) -> Vec<Warm> {
        self.ready.drain(..).collect()
    }
}

/// A started shell waiting for its command.
#[derive(Debug, Clone)]
pub(crate) struct Warm {
    pub session: Arc<Session>,
    pub fifo: PathBuf,
    /// Where its command is written before the FIFO says go.
    pub command: PathBuf,
    pub generation: u64,
    pub env_remove: Vec<String>,
}

impl Warm {
    /// Removes its FIFO and command file (the shell is being ended or handed nothing).
    pub fn remove_files(&self) {
        let _ = std::fs::remove_file(&self.fifo);
        let _ = std::fs::remove_file(&self.command);
    }
}

/// What a warm shell is started with.
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    pub shell: Shell,
    pub snapshot: PathBuf,
    pub generation: u64,
    pub env_remove: Vec<String>,
    pub dir: PathBuf,
}

/// Makes a FIFO only its owner may use at `path`.
#[cfg(all(unix, not(target_vendor = "apple")))]
fn make_fifo(path: &std::path::Path) -> std::io::Result<()> {
    use rustix::fs::{CWD, FileType, Mode, mknodat};
    Ok(mknodat(
        CWD,
        path,
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )?)
}

/// Makes a FIFO only its owner may use at `path` (macOS: no mknodat).
#[cfg(target_vendor = "apple")]
#[allow(unsafe_code)]
fn make_fifo(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a NUL in the FIFO's path"))?;
    // SAFETY: `c` is a NUL-terminated path that lives across the call; mkfifo reads it only.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Starts a warm shell with session id `id`.
#[cfg(unix)]
pub(crate) fn start(
    recipe: &Recipe,
    id: u64,
    spill: SpillConfig,
    group: Option<Arc<crate::cgroup::Group>>,
) -> std::io::Result<Warm> {
    use crate::console::Spawn;
    use crate::shell::Invocation;
    let fifo = recipe.dir.join(format!("warm-{id}.fifo"));
    let command = recipe.dir.join(format!("warm-{id}.cmd"));
    let _ = std::fs::remove_file(&fifo);
    let _ = std::fs::remove_file(&command);
    make_fifo(&fifo)?;
    // The FIFO is opened read-write, so the open never blocks and a writer's close is no
    // EOF. It carries one NUL byte, the go: the command itself is read from a file, because
    // bash reads a pipe a byte at a time (three system calls a byte) and a regular file in
    // blocks; once read, the shell empties the file by a builtin (what the command holds,
    // its variables' values too, stays on disk no longer; gantry removes the file when the
    // shell ends). An unused shell ends itself after IDLE_LIMIT, so one orphaned by a killed
    // server does not wait forever.
    let fifo_q = posix_quote(&fifo.to_string_lossy());
    let command_q = posix_quote(&command.to_string_lossy());
    // With a cgroup, the shell joins it first, by a builtin, before the snapshot or anything
    // else of the user's runs (what `cgroup::JOIN` does through an `sh` of its own).
    let join = match &group {
        Some(g) => format!(
            "{{ echo $$ > {procs}; }} 2>/dev/null || exit 125\n",
            procs = posix_quote(&g.procs().to_string_lossy())
        ),
        None => String::new(),
    };
    let script = format!(
        "{join}. {snap}\nexec 3<> {fifo_q} || exit 125\nIFS= read -r -d '' -t {idle} -u 3 __gantry_command || {{ rm -f {fifo_q}; exit 125; }}\nexec 3<&-\nIFS= read -r -d '' __gantry_command < {command_q} || exit 125\n: > {command_q}\neval \"$__gantry_command\"",
        snap = posix_quote(&recipe.snapshot.to_string_lossy()),
        idle = IDLE_LIMIT.as_secs(),
    );
    let mut args = crate::snapshot::plain_args(&recipe.shell);
    args.push(script.into());
    let spawn = Spawn {
        invocation: Invocation {
            program: recipe.shell.path.clone(),
            args,
        },
        cwd: PathBuf::from("/"),
        env: Vec::new(),
        // bash would source it before the script's first line, so before the join; the
        // snapshot sets it again for the command if the login environment has it.
        env_remove: recipe
            .env_remove
            .iter()
            .cloned()
            .chain(["BASH_ENV".to_string()])
            .collect(),
        batch_nonce: None,
        owner: None,
        group,
        joins_itself: true,
    };
    match Session::start(id, spawn, spill) {
        Ok(session) => Ok(Warm {
            session,
            fifo,
            command,
            generation: recipe.generation,
            env_remove: recipe.env_remove.clone(),
        }),
        Err(e) => {
            let _ = std::fs::remove_file(&fifo);
            Err(e)
        }
    }
}

#[cfg(not(unix))]
pub(crate) fn start(
    _recipe: &Recipe,
    _id: u64,
    _spill: SpillConfig,
    _group: Option<Arc<crate::cgroup::Group>>,
) -> std::io::Result<Warm> {
    Err(std::io::Error::other("no warm shells on this platform"))
}

/// The text a warm shell evaluates: the call's working directory, variables and removals,
/// then the script, ended by the NUL its `read` stops at. `None` when the script itself holds
/// a NUL (no shell could run it as written; the cold path refuses it).
pub(crate) fn command_text(
    cwd: &Path,
    env: &[(String, String)],
    remove: &[String],
    script: &str,
) -> Option<String> {
    if script.contains('\0') || env.iter().any(|(_, v)| v.contains('\0')) {
        return None;
    }
    let mut s = format!("cd -- {} || exit 1\n", posix_quote(&cwd.to_string_lossy()));
    s.push_str(&crate::shell::env_lines(env, remove));
    s.push_str(script);
    s.push('\0');
    Some(s)
}

/// Hands `text` to the warm shell `w`: written to its command file (private, removed when
/// the shell ends), then the go written to its FIFO, waiting a little for a shell still
/// getting ready; the FIFO is removed once written.
#[cfg(unix)]
pub(crate) fn send(w: &Warm, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    w.session.remove_on_exit(w.command.clone());
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&w.command)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
    // On failure the caller ends the shell and removes both files.
    written?;
    go(&w.fifo)
}

#[cfg(unix)]
fn go(fifo: &Path) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let until = Instant::now() + READY_WITHIN;
    let file = loop {
        // Non-blocking: with no reader (a shell that died, or is still starting) the open
        // fails instead of hanging.
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(fifo)
        {
            Ok(f) => break f,
            Err(e)
                if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error())
                    && Instant::now() < until =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => {
                let _ = std::fs::remove_file(fifo);
                return Err(e);
            }
        }
    };
    let _ = std::fs::remove_file(fifo);
    // The reader is there and reading up to the NUL: a blocking write cannot hang.
    rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty())?;
    (&file).write_all(b"\0")
}

#[cfg(not(unix))]
pub(crate) fn send(_w: &Warm, _text: &str) -> std::io::Result<()> {
    Err(std::io::Error::other("no warm shells on this platform"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_grows_for_commands_back_to_back_and_shrinks_a_while_after() {
        let mut pool = Pool::default();
        let t0 = Instant::now();
        assert!(!pool.note_command(t0), "a first command is no run");
        assert_eq!(pool.target(t0), 1);
        // Far apart: still one.
        let t1 = t0 + BACK_TO_BACK + Duration::from_millis(1);
        assert!(!pool.note_command(t1));
        assert_eq!(pool.target(t1), 1);
        // Close together: the pool grows, and stays grown through the hold.
        let t2 = t1 + Duration::from_millis(3);
        assert!(pool.note_command(t2));
        assert_eq!(pool.target(t2), POOL_MAX);
        assert!(pool.short(t2));
        assert_eq!(
            pool.target(t2 + BUSY_HOLD - Duration::from_millis(1)),
            POOL_MAX
        );
        // A quiet minute: back to one.
        assert_eq!(pool.target(t2 + BUSY_HOLD), 1);
        assert!(pool.surplus(t2 + BUSY_HOLD).is_empty());
    }
}
