//! Running commands: the bridge from authorized commands to the terminal crate's PTY
//! sessions.

use std::path::{Path, PathBuf};
use std::time::Duration;

use terminal::{Outcome, Registry, Run, TerminalError};
use tool_api::{Authorized, ErrorCode, ToolError};

/// Variables that connect a process to the desktop session. `XDG_RUNTIME_DIR` is among them
/// because Wayland and D-Bus clients fall back to the sockets in it (`wayland-0`, `bus`).
/// Removing them reduces what a command reaches by default; it is not a sandbox (a command
/// can still name a display or a socket itself).
pub const DISPLAY_VARS: &[&str] = &[
    "XDG_RUNTIME_DIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "WAYLAND_SOCKET",
    "MIR_SOCKET",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "SWAYSOCK",
    "I3SOCK",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "DESKTOP_STARTUP_ID",
    // The accessibility bus reads and drives every application's controls; the session
    // manager and a terminal's remote control (kitty) reach the session too.
    "AT_SPI_BUS_ADDRESS",
    "SESSION_MANAGER",
    "DBUS_STARTER_ADDRESS",
    "KITTY_LISTEN_ON",
];

/// Checks a command's start directory: absolute and an existing directory. (Commands are not
/// confined to the approved roots, so no root check.)
pub fn workdir(given: &str) -> Result<PathBuf, ToolError> {
    let path = Path::new(given);
    if !path.is_absolute() {
        return Err(ToolError::invalid_input(format!(
            "workdir: `{given}` must be an absolute path"
        )));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(path.to_path_buf()),
        Ok(_) => Err(ToolError::invalid_input(format!(
            "workdir: `{given}` is not a directory"
        ))),
        Err(_) => Err(ToolError::invalid_input(format!(
            "workdir: `{given}` does not exist"
        ))),
    }
}

fn terminal_error(e: TerminalError) -> ToolError {
    match e {
        TerminalError::UnknownSession(id) => ToolError::new(
            ErrorCode::NotFound,
            format!(
                "session {id} is unknown or has finished; start the command again with exec_command"
            ),
        ),
        TerminalError::Spawn(e) => ToolError::os("could not start the shell", &e),
        TerminalError::Write(id, e) => {
            ToolError::os(format!("could not write to session {id}"), &e)
        }
    }
}

/// Starts an authorized run (its commands, start directory and environment, decided as one)
/// and collects output for up to `yield_for`.
pub async fn start(
    registry: &Registry,
    run: Authorized<Run>,
    yield_for: Duration,
    budget: usize,
) -> Result<Outcome, ToolError> {
    registry
        .exec(run.into_inner(), yield_for, budget)
        .await
        .map_err(terminal_error)
}

/// Writes to (or polls) an authorized session.
pub async fn write(
    registry: &Registry,
    owner: &str,
    session: &Authorized<u64>,
    chars: &str,
    yield_for: Duration,
    budget: usize,
) -> Result<Outcome, ToolError> {
    registry
        .write_stdin(owner, **session, chars, yield_for, budget)
        .await
        .map_err(terminal_error)
}

/// Ends an authorized session's process tree.
pub async fn kill(
    registry: &Registry,
    owner: &str,
    session: &Authorized<u64>,
    budget: usize,
) -> Result<Outcome, ToolError> {
    registry
        .kill(owner, **session, budget)
        .await
        .map_err(terminal_error)
}
