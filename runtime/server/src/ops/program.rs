//! Running one program without a shell (the Shell connector's `shell.exec`): an absolute
//! program path and its argv, stdin closed, stdout and stderr each kept up to a cap (the rest
//! drained), through the confinement launcher when commands are confined, in a process group
//! of its own that is ended whole at the timeout, when the program exits (what it left
//! running goes with it) or when the call goes away. Running programs are listed for
//! `process.list` and `process.kill`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt as _;
use tool_api::{Authorized, ErrorCode, ToolError};

/// Programs running at once; past this a call is refused as busy.
const AT_ONCE: usize = 8;
/// After the program exits, how long what it left holding its output may keep writing.
const AFTER_EXIT: Duration = Duration::from_millis(250);

/// A program run, decided as one: what starts, where, and with which environment.
#[derive(Debug)]
pub struct ProgramRun {
    /// The program, resolved to an absolute path.
    pub program: PathBuf,
    /// The name the call gave it (what lists show).
    pub name: String,
    /// Its arguments, each one argument.
    pub args: Vec<String>,
    /// Where it starts.
    pub cwd: PathBuf,
    /// Variables added to its environment.
    pub env: BTreeMap<String, String>,
    /// Inherited variables to remove.
    pub env_remove: Vec<String>,
    /// It is ended, with its process group, past this.
    pub timeout: Duration,
    /// Bytes kept of stdout, and of stderr.
    pub max_output: usize,
    /// The confinement launcher to start it through (empty: none).
    pub launcher: Vec<OsString>,
    /// The cgroup it runs in, ended with its run (none where cgroups cannot be used: its
    /// process group still is).
    pub group: Option<Arc<terminal::cgroup::Group>>,
}

/// How a run ended.
#[derive(Debug)]
pub struct ProgramOutcome {
    /// Its exit code; none when a signal or the timeout ended it.
    pub exit_code: Option<i32>,
    /// Its standard output, up to the cap (lossy UTF-8).
    pub stdout: String,
    /// Its standard error, likewise.
    pub stderr: String,
    /// From start to end.
    pub duration: Duration,
    /// The timeout ended it.
    pub timed_out: bool,
    /// Output past the cap was dropped.
    pub truncated: bool,
}

/// The programs running now: pid → (name, args).
#[derive(Debug)]
pub struct Programs {
    running: Mutex<HashMap<u32, (String, Vec<String>)>>,
    slots: tokio::sync::Semaphore,
}

impl Default for Programs {
    fn default() -> Self {
        Programs {
            running: Mutex::default(),
            slots: tokio::sync::Semaphore::new(AT_ONCE),
        }
    }
}

impl Programs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, (String, Vec<String>)>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every running program: (pid, name, args).
    pub fn list(&self) -> Vec<(u32, String, Vec<String>)> {
        let mut all: Vec<_> = self
            .lock()
            .iter()
            .map(|(pid, (c, a))| (*pid, c.clone(), a.clone()))
            .collect();
        all.sort_by_key(|(pid, _, _)| *pid);
        all
    }

    /// Whether `pid` is a running program of gantry's.
    pub fn contains(&self, pid: u32) -> bool {
        self.lock().contains_key(&pid)
    }
}

/// Forgets a program and ends its group when its run ends, however it ends (a dropped call
/// included).
struct Running<'a> {
    programs: &'a Programs,
    pid: Option<u32>,
    /// Windows: the job object the program was put in, which ends what it started too.
    #[cfg(windows)]
    job: Option<terminal::process_tree::JobObject>,
}

impl Running<'_> {
    /// Ends the program and whatever it started: its process group on Unix, its job object
    /// on Windows.
    fn end_tree(&self) {
        #[cfg(unix)]
        if let Some(pgid) = self
            .pid
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        #[cfg(windows)]
        if let Some(job) = &self.job {
            job.terminate();
        }
    }

    /// Ends the tree and forgets the program (its run is over).
    fn finish(&mut self) {
        if let Some(pid) = self.pid.take() {
            self.end_tree();
            self.programs.lock().remove(&pid);
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Ends everything in `group`, waiting (off the runtime's threads) up to a second for it.
async fn end_cgroup(group: &Arc<terminal::cgroup::Group>) {
    let group = group.clone();
    let _ = tokio::task::spawn_blocking(move || group.kill(Duration::from_secs(1))).await;
}

/// What a pipe gave so far: at most the cap, and whether more came.
type Kept = Arc<Mutex<(Vec<u8>, bool)>>;

/// Reads `pipe` to its end into `kept`, at most `cap` bytes.
fn collect(
    pipe: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>,
    cap: usize,
) -> (Kept, tokio::task::JoinHandle<()>) {
    let kept: Kept = Arc::default();
    let into = kept.clone();
    let task = tokio::spawn(async move {
        let Some(mut pipe) = pipe else { return };
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut k = into
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let room = cap.saturating_sub(k.0.len());
                    k.0.extend_from_slice(&buf[..n.min(room)]);
                    k.1 |= n > room;
                }
            }
        }
    });
    (kept, task)
}

fn take(kept: &Kept) -> (String, bool) {
    let k = kept
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    (String::from_utf8_lossy(&k.0).into_owned(), k.1)
}

/// Runs an authorized program to its end or its timeout.
pub async fn run(
    programs: &Programs,
    run: Authorized<ProgramRun>,
) -> Result<ProgramOutcome, ToolError> {
    let run = run.into_inner();
    let _slot = programs.slots.try_acquire().map_err(|_| {
        ToolError::new(
            ErrorCode::Busy,
            format!("{AT_ONCE} programs are running already; retry when one ends"),
        )
    })?;
    // [join its cgroup] [confinement launcher] program args: it is in its cgroup before
    // anything of it runs, so what it detaches ends with the run too.
    let argv: Vec<OsString> = run
        .group
        .as_ref()
        .map(|g| g.join_prefix())
        .unwrap_or_default()
        .into_iter()
        .chain(run.launcher.iter().cloned())
        .chain([run.program.clone().into_os_string()])
        .collect();
    let Some((first, rest)) = argv.split_first() else {
        return Err(ToolError::invalid_input("command: name a program"));
    };
    let mut cmd = tokio::process::Command::new(first);
    cmd.args(rest)
        .args(&run.args)
        .current_dir(&run.cwd)
        .envs(&run.env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for v in &run.env_remove {
        cmd.env_remove(v);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| ToolError::os(format!("could not start `{}`", run.name), &e))?;
    let mut running = Running {
        programs,
        pid: child.id(),
        #[cfg(windows)]
        job: child
            .id()
            .and_then(|pid| terminal::process_tree::JobObject::for_process(pid).ok()),
    };
    if let Some(pid) = running.pid {
        programs
            .lock()
            .insert(pid, (run.name.clone(), run.args.clone()));
    }
    let (out, out_task) = collect(child.stdout.take(), run.max_output);
    let (err, err_task) = collect(child.stderr.take(), run.max_output);
    let (exit_code, timed_out) = match tokio::time::timeout(run.timeout, child.wait()).await {
        Ok(status) => (status.ok().and_then(|s| s.code()), false),
        Err(_) => (None, true),
    };
    // What it left behind may hold its output open: a moment to finish writing, then the
    // group ends and the pipes close.
    let readers = async {
        let _ = out_task.await;
        let _ = err_task.await;
    };
    tokio::pin!(readers);
    if timed_out
        || tokio::time::timeout(AFTER_EXIT, &mut readers)
            .await
            .is_err()
    {
        running.end_tree();
        if let Some(group) = &run.group {
            end_cgroup(group).await;
        }
        let _ = child.kill().await;
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut readers).await;
    }
    running.finish();
    if let Some(group) = &run.group {
        // What it detached from its process group (`setsid`) is still in its cgroup.
        end_cgroup(group).await;
    }
    let (stdout, more_out) = take(&out);
    let (stderr, more_err) = take(&err);
    Ok(ProgramOutcome {
        exit_code,
        stdout,
        stderr,
        duration: started.elapsed(),
        timed_out,
        truncated: more_out || more_err,
    })
}

/// `name` as the program it starts, canonical (links followed): an absolute path as given,
/// or the first match on gantry's own PATH (its absolute entries only; the call cannot
/// change it). A relative path with a directory is refused: it would depend on where
/// gantry runs.
pub fn resolve(name: &str) -> Option<PathBuf> {
    terminal::programs::on_path(name).and_then(|p| confine::path_policy::canonical_program(&p))
}

/// Sends `signal` to process `pid` (Unix): a program of gantry's gets it as a group.
pub fn signal(pid: u32, signal: &str, group: bool) -> Result<(), ToolError> {
    #[cfg(unix)]
    {
        use rustix::process::{Pid, Signal};
        let sig = match signal {
            "kill" => Signal::KILL,
            "int" => Signal::INT,
            "hup" => Signal::HUP,
            _ => Signal::TERM,
        };
        let target = i32::try_from(pid)
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| ToolError::invalid_input(format!("pid: {pid} is not a process id")))?;
        let sent = if group {
            rustix::process::kill_process_group(target, sig)
        } else {
            rustix::process::kill_process(target, sig)
        };
        sent.map_err(|e| ToolError::os(format!("could not signal {pid}"), &std::io::Error::from(e)))
    }
    #[cfg(not(unix))]
    {
        let _ = (pid, signal, group);
        Err(ToolError::new(
            ErrorCode::OsError,
            "signals are not sent on this platform",
        ))
    }
}
