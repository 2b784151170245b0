//! Running one program without a shell (the Shell connector's `shell.exec`): its argv as
//! given, stdin closed, stdout and stderr each kept up to a cap (the rest drained and
//! counted), in a process group of its own that is ended whole at the timeout or when the
//! call goes away. Running programs are listed for `process.list` and `process.kill`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt as _;
use tool_api::{Authorized, ToolError};

/// A program run, decided as one: what starts, where, and with which environment.
#[derive(Debug)]
pub struct ProgramRun {
    /// The program as given: a name looked up on PATH, or a path.
    pub command: String,
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

/// The programs running now: pid → (program, args).
#[derive(Debug, Default)]
pub struct Programs(Mutex<HashMap<u32, (String, Vec<String>)>>);

impl Programs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, (String, Vec<String>)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every running program: (pid, program, args).
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

/// Forgets a program when its run ends, however it ends.
struct Running<'a> {
    programs: &'a Programs,
    pid: Option<u32>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            kill_group(pid);
            self.programs.lock().remove(&pid);
        }
    }
}

/// Ends `pid`'s process group (Unix), whatever it still runs.
fn kill_group(pid: u32) {
    #[cfg(unix)]
    if let Some(pgid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// Reads `pipe` to its end, keeping at most `cap` bytes; the second value says more came.
async fn capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>, cap: usize) -> (Vec<u8>, bool) {
    let Some(mut pipe) = pipe else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut more = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                more |= n > room;
            }
        }
    }
    (kept, more)
}

/// Runs an authorized program to its end or its timeout.
pub async fn run(
    programs: &Programs,
    run: Authorized<ProgramRun>,
) -> Result<ProgramOutcome, ToolError> {
    let run = run.into_inner();
    let mut cmd = tokio::process::Command::new(&run.command);
    cmd.args(&run.args)
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
    let mut child = cmd.spawn().map_err(|e| {
        let what = if e.kind() == std::io::ErrorKind::NotFound {
            format!("`{}` was not found", run.command)
        } else {
            format!("could not start `{}`", run.command)
        };
        ToolError::os(what, &e)
    })?;
    let mut running = Running {
        programs,
        pid: child.id(),
    };
    if let Some(pid) = running.pid {
        programs
            .lock()
            .insert(pid, (run.command.clone(), run.args.clone()));
    }
    let out = capped(child.stdout.take(), run.max_output);
    let err = capped(child.stderr.take(), run.max_output);
    let work = async {
        let ((stdout, more_out), (stderr, more_err), status) = tokio::join!(out, err, child.wait());
        (stdout, stderr, more_out || more_err, status)
    };
    let (timed_out, finished) = match tokio::time::timeout(run.timeout, work).await {
        Ok(done) => (false, Some(done)),
        Err(_) => (true, None),
    };
    let (stdout, stderr, truncated, exit_code) = match finished {
        Some((stdout, stderr, truncated, status)) => (
            stdout,
            stderr,
            truncated,
            status.ok().and_then(|s| s.code()),
        ),
        None => {
            // The whole group, so what the program started ends with it.
            if let Some(pid) = running.pid {
                kill_group(pid);
            }
            let _ = child.kill().await;
            (Vec::new(), Vec::new(), false, None)
        }
    };
    // Ended and reaped: nothing of the group is left to signal.
    if !timed_out && let Some(pid) = running.pid.take() {
        kill_group(pid);
        programs.lock().remove(&pid);
    }
    Ok(ProgramOutcome {
        exit_code,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        duration: started.elapsed(),
        timed_out,
        truncated,
    })
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
        let pid = i32::try_from(pid)
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| ToolError::invalid_input(format!("pid: {pid} is not a process id")))?;
        let sent = if group {
            rustix::process::kill_process_group(pid, sig)
        } else {
            rustix::process::kill_process(pid, sig)
        };
        sent.map_err(|e| {
            ToolError::os(
                format!("could not signal {pid:?}"),
                &std::io::Error::from(e),
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = (pid, signal, group);
        Err(ToolError::new(
            tool_api::ErrorCode::OsError,
            "signals are not sent on this platform; end a session with process.kill of its pid",
        ))
    }
}
