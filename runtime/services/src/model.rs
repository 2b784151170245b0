//! What every backend answers, whatever its manager calls it.

use std::time::Duration;

/// Which manager holds the services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    /// The system's: systemd's system manager (Linux), launchd's `system` domain (macOS).
    System,
    /// The user's own: their systemd manager (Linux), launchd's `gui/UID` domain (macOS).
    User,
    /// Windows' Service Control Manager.
    Scm,
}

impl Manager {
    /// As the tool's output and the Cedar resource name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Manager::System => "system",
            Manager::User => "user",
            Manager::Scm => "scm",
        }
    }
}

/// Where a service stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// It runs (or, for a one-shot job, finished and stays active).
    Running,
    /// It does not run.
    Stopped,
    /// It is on its way up.
    Starting,
    /// It is on its way down.
    Stopping,
    /// It is rereading its configuration.
    Reloading,
    /// It stopped in failure.
    Failed,
}

/// What to do with a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start it.
    Start,
    /// Stop it.
    Stop,
    /// Stop it if it runs, then start it.
    Restart,
    /// Have it reread its configuration.
    Reload,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The manager finished it.
    Done,
    /// The manager gave up on it.
    Failed,
    /// Still under way when the wait ended.
    Pending,
}

/// One service as its manager sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceState {
    /// As the manager names it (`nginx.service`).
    pub name: String,
    /// The manager asked.
    pub manager: Manager,
    /// Where it stands.
    pub state: State,
    /// The manager's own words (`active (running)`).
    pub detail: String,
    /// Its description, when the manager has one.
    pub description: Option<String>,
    /// Its main process, while it runs.
    pub pid: Option<u32>,
    /// Whether it starts by itself, in the manager's words.
    pub starts: Option<String>,
    /// What decides what it runs, as the manager reports it: its unit file and drop-ins (or
    /// plist), the programs it starts, the files it reads its environment from, and the
    /// directories the manager looks for units in. Whoever can write one of these chooses
    /// what a start runs.
    pub sources: Vec<std::path::PathBuf>,
}

impl ServiceState {
    /// Its name without systemd's `.service` suffix.
    pub fn bare_name(&self) -> &str {
        self.name.strip_suffix(".service").unwrap_or(&self.name)
    }
}

/// Why the manager could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The manager knows no service by that name.
    #[error("the {manager} service manager knows no service `{name}`")]
    NotFound {
        /// The manager asked.
        manager: &'static str,
        /// The name asked for.
        name: String,
    },
    /// The manager refused the caller (privileges, polkit).
    #[error("the {manager} service manager refused: {why}")]
    Refused {
        /// The manager asked.
        manager: &'static str,
        /// Its words.
        why: String,
    },
    /// The action means nothing for this service or on this platform.
    #[error("{0}")]
    Unsupported(String),
    /// The manager could not be reached or answered nothing usable.
    #[error("the {manager} service manager: {why}")]
    Unavailable {
        /// The manager asked.
        manager: &'static str,
        /// What went wrong.
        why: String,
    },
    /// The manager took longer than `after` to answer.
    #[error("the {manager} service manager did not answer within {after:?}")]
    Timeout {
        /// The manager asked.
        manager: &'static str,
        /// How long it was given.
        after: Duration,
    },
}
