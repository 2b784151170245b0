//! Applications gantry launched for the Shell connector's `app.launch`: each in a process
//! group (and, where it can be, a cgroup; a job object on Windows) of its own, tracked by a
//! random handle until `app.close` ends it — asked first, then with everything it started —
//! or gantry stops.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tool_api::{Authorized, ErrorCode, ToolError};

/// An application to start, decided as one.
#[derive(Debug)]
pub struct Launch {
    /// Its name under `[apps]`.
    pub name: String,
    /// The program, resolved to an absolute path.
    pub program: PathBuf,
    /// Its arguments, each one argument.
    pub args: Vec<String>,
    /// Where it starts.
    pub cwd: PathBuf,
    /// The cgroup it runs in (none where cgroups cannot be used: its process group still is).
    pub group: Option<Arc<terminal::cgroup::Group>>,
}

/// One application gantry launched.
#[derive(Debug)]
struct Launched {
    name: String,
    pid: u32,
    group: Option<Arc<terminal::cgroup::Group>>,
    #[cfg(windows)]
    job: Option<terminal::process_tree::JobObject>,
    /// Set once its process was reaped.
    ended: Arc<tokio::sync::Notify>,
    exited: Arc<std::sync::atomic::AtomicBool>,
}

impl Launched {
    /// Asks it to end (Unix: SIGTERM to its group).
    fn ask(&self) {
        #[cfg(unix)]
        if let Some(pgid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::TERM);
        }
    }

    /// Ends it and whatever it started: its group (and cgroup), or its job object.
    fn end(&self) {
        #[cfg(unix)]
        if let Some(pgid) = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        #[cfg(windows)]
        if let Some(job) = &self.job {
            job.terminate();
        }
        if let Some(group) = &self.group {
            group.kill(Duration::from_secs(1));
        }
    }
}

/// The applications gantry launched, by handle.
#[derive(Debug, Default)]
pub struct Apps {
    launched: Mutex<HashMap<String, Launched>>,
}

impl Apps {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Launched>> {
        self.launched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts `launch`: its handle and pid. At most `max` run at once.
    pub fn launch(
        &self,
        launch: Authorized<Launch>,
        max: usize,
    ) -> Result<(String, u32), ToolError> {
        let launch = launch.into_inner();
        if self.lock().len() >= max {
            return Err(ToolError::new(
                ErrorCode::Busy,
                format!(
                    "{max} applications gantry launched are running already; close one first (app.close)"
                ),
            ));
        }
        // [join its cgroup] program args: in its cgroup before anything of it runs.
        let argv: Vec<OsString> = launch
            .group
            .as_ref()
            .map(|g| g.join_prefix())
            .unwrap_or_default()
            .into_iter()
            .chain([launch.program.clone().into_os_string()])
            .collect();
        let Some((first, rest)) = argv.split_first() else {
            return Err(ToolError::invalid_input(
                "name: the application has no program",
            ));
        };
        let mut cmd = tokio::process::Command::new(first);
        cmd.args(rest)
            .args(&launch.args)
            .current_dir(&launch.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            ToolError::os(
                format!(
                    "name: could not start `{}` ({})",
                    launch.name,
                    launch.program.display()
                ),
                &e,
            )
        })?;
        let Some(pid) = child.id() else {
            return Err(ToolError::new(
                ErrorCode::OsError,
                format!("name: `{}` ended as it started", launch.name),
            ));
        };
        let handle = new_handle()?;
        let ended = Arc::new(tokio::sync::Notify::new());
        let exited = Arc::new(std::sync::atomic::AtomicBool::new(false));
        {
            let (ended, exited) = (ended.clone(), exited.clone());
            tokio::spawn(async move {
                let _ = child.wait().await;
                exited.store(true, std::sync::atomic::Ordering::SeqCst);
                ended.notify_waiters();
            });
        }
        self.lock().insert(
            handle.clone(),
            Launched {
                name: launch.name,
                pid,
                group: launch.group,
                #[cfg(windows)]
                job: terminal::process_tree::JobObject::for_process(pid).ok(),
                ended,
                exited,
            },
        );
        Ok((handle, pid))
    }

    /// The app name `handle` stands for, if gantry launched it.
    pub fn name_of(&self, handle: &str) -> Option<String> {
        self.lock().get(handle).map(|l| l.name.clone())
    }

    /// The handles of every application `name` gantry launched.
    pub fn handles_of(&self, name: &str) -> Vec<String> {
        let mut all: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, l)| l.name == name)
            .map(|(h, _)| h.clone())
            .collect();
        all.sort();
        all
    }

    /// Ends the application `handle`: asked first, then, after `grace`, ended with whatever
    /// it started. Whether gantry had it.
    pub async fn close(&self, handle: &str, grace: Duration) -> bool {
        let Some(app) = self.lock().remove(handle) else {
            return false;
        };
        tracing::info!(pid = app.pid, app = %app.name, "closing an application gantry launched");
        {
            let ended = app.ended.clone();
            let notified = ended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !app.exited.load(std::sync::atomic::Ordering::SeqCst) {
                app.ask();
                let _ = tokio::time::timeout(grace, notified).await;
            }
        }
        // What it started lives on after it: its group and cgroup end either way.
        let _ = tokio::task::spawn_blocking(move || app.end()).await;
        true
    }

    /// Ends every application gantry launched (server shutdown).
    pub fn shutdown(&self) {
        for (_, app) in self.lock().drain() {
            app.end();
        }
    }
}

/// A handle nobody can guess: 16 random hex digits.
fn new_handle() -> Result<String, ToolError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| ToolError::new(ErrorCode::Internal, format!("no randomness: {e}")))?;
    Ok(format!(
        "app-{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}
