//! How a command gets its terminal: a real PTY (a pseudo console on Windows) or, on a
//! Windows whose pseudo console delivers nothing (Wine, and Windows before 10 1809, which has
//! none), plain pipes. Everything above this module is the same for both.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};

use crate::shell::Invocation;

/// What to start.
#[derive(Debug, Clone)]
pub struct Spawn {
    /// Shell and arguments.
    pub invocation: Invocation,
    /// Working directory.
    pub cwd: PathBuf,
    /// Variables to set (after the defaults).
    pub env: Vec<(String, String)>,
    /// Inherited variables to remove.
    pub env_remove: Vec<String>,
    /// Batch marker nonce, when the script is a batch.
    pub batch_nonce: Option<String>,
    /// Who starts it (see [`Session::owner`]); `None` for a shell started ahead of its
    /// command, which gets its owner with the command ([`Session::claim`]).
    pub owner: Option<String>,
    /// The cgroup the command runs in (it joins before anything of it runs), where gantry
    /// has a cgroup v2 tree.
    pub group: Option<Arc<crate::cgroup::Group>>,
    /// The program's first act is to join `group` itself (a warm shell's script does, before
    /// it reads anything of the user's), so it is not started through [`crate::cgroup::JOIN`]
    /// (one `sh` fewer to start).
    pub joins_itself: bool,
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Exit code (for a signal, 128 + its number where known, else 1).
    pub code: i32,
    /// Killed by a signal.
    pub signaled: bool,
}

/// A started command: its pid, the two ends of its terminal, and how to wait for its exit.
pub(crate) struct Started {
    pub pid: u32,
    pub reader: Box<dyn Read + Send>,
    pub writer: Box<dyn Write + Send>,
    /// What stays open for the life of the session: the PTY's master (nothing for pipes).
    pub keep: Option<Box<dyn MasterPty + Send>>,
    /// Blocks until the command exits.
    pub wait: Box<dyn FnOnce() -> Exit + Send>,
}

/// Set for every command: plain output and no pagers (a model cannot press `q`).
const PLAIN_OUTPUT: [(&str, &str); 8] = [
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("CLICOLOR", "0"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GH_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", ""),
];

/// The variables a command gets, in the order they are set (later ones win).
fn variables<'a>(spawn: &'a Spawn, tag: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
    PLAIN_OUTPUT
        .into_iter()
        .chain(spawn.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .chain(std::iter::once((crate::process_tree::TAG_VAR, tag)))
}

/// Starts `spawn` with a terminal of the kind this system delivers output through.
pub(crate) fn start(spawn: &Spawn, tag: &str) -> std::io::Result<Started> {
    #[cfg(windows)]
    if !pseudo_console_delivers() {
        return on_pipes(spawn, tag);
    }
    in_pty(spawn, tag)
}

fn in_pty(spawn: &Spawn, tag: &str) -> std::io::Result<Started> {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 200,
            pixel_width: 0,
            pixel_height: 0,
        })
        .map_err(other)?;
    let mut cmd = match spawn.group.as_ref().filter(|_| !spawn.joins_itself) {
        Some(group) => {
            let mut cmd = CommandBuilder::new(crate::cgroup::JOIN_SHELL);
            cmd.args(["-c", crate::cgroup::JOIN, "gantry-join"]);
            cmd.arg(group.procs());
            cmd.arg(&spawn.invocation.program);
            cmd
        }
        None => CommandBuilder::new(&spawn.invocation.program),
    };
    cmd.args(&spawn.invocation.args);
    cmd.cwd(&spawn.cwd);
    for key in &spawn.env_remove {
        cmd.env_remove(key);
    }
    for (k, v) in variables(spawn, tag) {
        cmd.env(k, v);
    }
    let mut child = pty.slave.spawn_command(cmd).map_err(other)?;
    drop(pty.slave);
    let pid = child.process_id().unwrap_or(0);
    let reader = pty.master.try_clone_reader().map_err(other)?;
    let writer = pty.master.take_writer().map_err(other)?;
    Ok(Started {
        pid,
        reader,
        writer,
        keep: Some(pty.master),
        wait: Box::new(move || {
            child.wait().map(|st| exit_of(&st)).unwrap_or(Exit {
                code: -1,
                signaled: false,
            })
        }),
    })
}

/// Turns portable-pty's status into an exit.
fn exit_of(status: &portable_pty::ExitStatus) -> Exit {
    match status.signal() {
        Some(sig) => {
            let number = match sig.trim_start_matches("SIG").to_ascii_uppercase().as_str() {
                "HUP" | "HANGUP" => 1,
                "INT" | "INTERRUPT" => 2,
                "KILL" | "KILLED" => 9,
                "TERM" | "TERMINATED" => 15,
                _ => 0,
            };
            Exit {
                code: if number > 0 { 128 + number } else { 1 },
                signaled: true,
            }
        }
        None => Exit {
            code: i32::try_from(status.exit_code()).unwrap_or(i32::MAX),
            signaled: false,
        },
    }
}

/// portable-pty reports `anyhow` errors; keep that crate out of our signatures.
fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Whether this Windows has a pseudo console that delivers a program's output. Wine 8 has
/// the functions, but what runs in its pseudo console writes to gantry's own standard handles
/// or nowhere (tests/wine/conpty_probe.c shows it), and Windows before 10 1809 lacks them.
#[cfg(windows)]
#[allow(unsafe_code)]
pub(crate) fn pseudo_console_delivers() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(|| {
        // SAFETY: both calls take NUL-terminated static strings and only read them; kernel32
        // is loaded in every Windows process, and the handle is only passed back to the loader.
        let present = unsafe {
            let kernel32 = GetModuleHandleA(c"kernel32.dll".as_ptr().cast());
            !kernel32.is_null()
                && GetProcAddress(kernel32, c"CreatePseudoConsole".as_ptr().cast()).is_some()
        };
        present && !crate::shell::under_wine()
    })
}

/// Starts `spawn` with its input on one pipe and its output and errors merged on another, the
/// way a console program's output reaches a terminal. Its tree is still ended by its job
/// object; a program that asks whether it has a console sees none.
#[cfg(windows)]
fn on_pipes(spawn: &Spawn, tag: &str) -> std::io::Result<Started> {
    use std::os::windows::process::CommandExt as _;
    /// The command gets a console of its own that is never shown, instead of gantry's.
    const CREATE_NO_WINDOW: u32 = 0x0800_0000;
    /// Win32's ERROR_INTERNAL_ERROR.
    const ERROR_INTERNAL_ERROR: i32 = 1359;
    let (reader, output) = std::io::pipe()?;
    let errors = output.try_clone()?;
    let mut cmd = std::process::Command::new(&spawn.invocation.program);
    cmd.args(&spawn.invocation.args)
        .current_dir(&spawn.cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(output)
        .stderr(errors)
        .creation_flags(CREATE_NO_WINDOW);
    for key in &spawn.env_remove {
        cmd.env_remove(key);
    }
    for (k, v) in variables(spawn, tag) {
        cmd.env(k, v);
    }
    let mut child = match cmd.spawn() {
        // Wine's process creation now and then answers ERROR_INTERNAL_ERROR and succeeds
        // when asked again at once; a real failure fails the second time too.
        Err(e) if e.raw_os_error() == Some(ERROR_INTERNAL_ERROR) => {
            std::thread::sleep(std::time::Duration::from_millis(50));
            cmd.spawn()?
        }
        spawned => spawned?,
    };
    // The command holds this side's copies of the output pipe: the reader sees its end only
    // once they are closed.
    drop(cmd);
    let writer = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("the command's input pipe was not made"))?;
    Ok(Started {
        pid: child.id(),
        reader: Box::new(reader),
        writer: Box::new(writer),
        keep: None,
        wait: Box::new(move || match child.wait() {
            Ok(status) => Exit {
                // Windows exit codes are u32; std gives them as i32, as ours are.
                code: status.code().unwrap_or(1),
                signaled: false,
            },
            Err(_) => Exit {
                code: -1,
                signaled: false,
            },
        }),
    })
}
