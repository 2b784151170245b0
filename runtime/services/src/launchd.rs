//! launchd through `launchctl` (run as a program with its arguments, never a shell): `print`
//! reads a job, `kickstart` starts (`-k`: restarts) it, `kill SIGTERM` stops it. The
//! system's jobs live in the `system` domain, the user's in `gui/UID`.
//!
//! A stop is SIGTERM to the job: one launchd keeps alive (`KeepAlive`) is started again by
//! launchd, as `launchctl kill` always does. Compiled for macOS and unit-tested for parsing
//! here; no Mac runs the tests.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::model::{Action, Manager, Outcome, ServiceError, ServiceState, State};

const LAUNCHCTL: &str = "/bin/launchctl";
/// launchctl's exit code for a job it does not know.
const NO_SUCH_SERVICE: i32 = 113;

fn who(manager: Manager) -> &'static str {
    manager.as_str()
}

fn target(manager: Manager, label: &str) -> String {
    match manager {
        Manager::User => format!("gui/{}/{label}", rustix::process::getuid().as_raw()),
        _ => format!("system/{label}"),
    }
}

fn launchctl(manager: Manager, label: &str, args: &[&str]) -> Result<String, ServiceError> {
    let out =
        Command::new(LAUNCHCTL)
            .args(args)
            .output()
            .map_err(|e| ServiceError::Unavailable {
                manager: who(manager),
                why: format!("{LAUNCHCTL}: {e}"),
            })?;
    match out.status.code() {
        Some(0) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Some(NO_SUCH_SERVICE) => Err(ServiceError::NotFound {
            manager: who(manager),
            name: label.to_string(),
        }),
        Some(1) if String::from_utf8_lossy(&out.stderr).contains("ermission") => {
            Err(ServiceError::Refused {
                manager: who(manager),
                why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
        _ => Err(ServiceError::Unavailable {
            manager: who(manager),
            why: format!(
                "launchctl {}: {}",
                args.first().copied().unwrap_or_default(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }),
    }
}

/// The job's state as `launchctl print` writes it: its top-level `key = value` lines.
fn parse(manager: Manager, label: &str, printed: &str) -> ServiceState {
    let field = |key: &str| {
        printed.lines().find_map(|line| {
            // Top-level fields are indented by one tab; nested blocks by more.
            let rest = line.strip_prefix('\t')?;
            if rest.starts_with('\t') {
                return None;
            }
            let (k, v) = rest.split_once(" = ")?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let words = field("state").unwrap_or_else(|| "unknown".into());
    let pid = field("pid").and_then(|p| p.parse::<u32>().ok());
    let last_exit = field("last exit code");
    let state = match words.as_str() {
        "running" => State::Running,
        "spawn scheduled" | "xpcproxy" => State::Starting,
        _ if last_exit
            .as_deref()
            .is_some_and(|c| c != "0" && c != "(never exited)") =>
        {
            State::Failed
        }
        _ => State::Stopped,
    };
    let detail = match &last_exit {
        Some(code) if state != State::Running => format!("{words} (last exit code {code})"),
        _ => words,
    };
    ServiceState {
        name: label.to_string(),
        manager,
        state,
        detail,
        description: None,
        pid,
        starts: None,
        // Its plist and its program: whoever writes them chooses what a start runs.
        sources: ["path", "program"]
            .into_iter()
            .filter_map(field)
            .map(std::path::PathBuf::from)
            .collect(),
    }
}

fn read(manager: Manager, label: &str) -> Result<ServiceState, ServiceError> {
    let printed = launchctl(manager, label, &["print", &target(manager, label)])?;
    Ok(parse(manager, label, &printed))
}

fn control_now(
    manager: Manager,
    label: &str,
    action: Action,
    wait: Duration,
) -> Result<(Outcome, ServiceState), ServiceError> {
    // An unknown label needs no look first: launchctl's 113 is "not found".
    let job = target(manager, label);
    match action {
        Action::Start => launchctl(manager, label, &["kickstart", &job])?,
        Action::Restart => launchctl(manager, label, &["kickstart", "-k", &job])?,
        Action::Stop => launchctl(manager, label, &["kill", "SIGTERM", &job])?,
        Action::Reload => {
            return Err(ServiceError::Unsupported(format!(
                "action: launchd jobs have no reload; restart `{label}` instead"
            )));
        }
    };
    let wanted = if action == Action::Stop {
        State::Stopped
    } else {
        State::Running
    };
    let until = Instant::now() + wait;
    loop {
        let state = read(manager, label)?;
        // A job that stopped is stopped, whatever its last run's exit code said.
        let reached =
            state.state == wanted || (wanted == State::Stopped && state.state == State::Failed);
        if reached || state.state == State::Failed {
            let outcome = if reached {
                Outcome::Done
            } else {
                Outcome::Failed
            };
            return Ok((outcome, state));
        }
        if Instant::now() >= until {
            return Ok((Outcome::Pending, state));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How long launchctl may take past the call's own wait.
const GRACE: Duration = Duration::from_secs(20);

/// The state of job `label` in `manager`'s launchd domain.
pub async fn status(manager: Manager, label: &str) -> Result<ServiceState, ServiceError> {
    let label = label.to_string();
    crate::worker::blocking(who(manager), GRACE, move || read(manager, &label)).await
}

/// Does `action` to job `label`, waiting up to `settle` for it to get there.
pub async fn control(
    manager: Manager,
    label: &str,
    action: Action,
    settle: Duration,
) -> Result<(Outcome, ServiceState), ServiceError> {
    let label = label.to_string();
    crate::worker::blocking(who(manager), settle + GRACE, move || {
        control_now(manager, &label, action, settle)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_output_is_read_at_its_top_level() {
        let printed = "system/org.nginx = {\n\tactive count = 1\n\tpath = /Library/LaunchDaemons/org.nginx.plist\n\tstate = running\n\tpid = 4242\n\tendpoints = {\n\t\tstate = whatever\n\t}\n}\n";
        let s = parse(Manager::System, "org.nginx", printed);
        assert_eq!(s.state, State::Running);
        assert_eq!(s.pid, Some(4242));
        let stopped = "x = {\n\tstate = not running\n\tlast exit code = 78: EX_CONFIG\n}\n";
        assert_eq!(parse(Manager::System, "x", stopped).state, State::Failed);
    }
}
