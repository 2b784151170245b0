//! The user's login environment, captured once and replayed: a login shell is run once (its
//! profile may take 100 ms and more: version managers, completions), what it set up is written
//! to a private script (exports, and for bash and zsh functions and aliases; bash's `shopt`
//! options too), and each command runs in a plain shell that sources it.
//!
//! PATH is the profile's PATH, then every entry of the server's own PATH that the profile
//! dropped (Debian's /etc/profile resets PATH, which would lose `~/.cargo/bin` that the
//! client gave the server). The snapshot is taken again when a profile file changes or after
//! [`TTL`]; when it cannot be taken (the profile fails, or runs past [`CAPTURE_TIMEOUT`]),
//! commands run in a login shell as before and the reply says why.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::shell::{Invocation, Shell, ShellKind, env_lines, posix_quote};

/// How long a login shell may take to set itself up before gantry gives up on it.
pub const CAPTURE_TIMEOUT: Duration = Duration::from_secs(10);
/// A snapshot older than this is taken again (a profile can depend on more than its files).
pub const TTL: Duration = Duration::from_secs(15 * 60);
/// After a failed capture, how long commands use a login shell before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// Variables the snapshot never sets: the shell's own bookkeeping, and those gantry sets for
/// every command (a profile's `PAGER=less` must not bring pagers back).
const NOT_REPLAYED: &[&str] = &[
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "TERM",
    "NO_COLOR",
    "CLICOLOR",
    "PAGER",
    "GIT_PAGER",
    "GH_PAGER",
    "MANPAGER",
    "SYSTEMD_PAGER",
    "COLUMNS",
    "LINES",
    // Read-only in bash: setting them again prints an error before every command.
    "SHELLOPTS",
    "BASHOPTS",
    "BASHPID",
    "EUID",
    "UID",
    "PPID",
];

/// Numbers captures, so a shell that sourced an older snapshot is known as stale.
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Which shell family a snapshot is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Bash,
    Zsh,
    Sh,
}

fn family(shell: &Shell) -> Family {
    match Path::new(&shell.path).file_name().and_then(OsStr::to_str) {
        Some("bash") => Family::Bash,
        Some("zsh") => Family::Zsh,
        _ => Family::Sh,
    }
}

/// How a command's shell gets the user's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// Source this snapshot in a plain shell; the generation tells one capture from the next.
    Snapshot(PathBuf, u64),
    /// Run a login shell; the reason the snapshot is not used.
    Login(String),
    /// Run a plain shell without the profile, which hangs; the reason.
    Plain(String),
}

#[derive(Debug)]
struct Taken {
    file: PathBuf,
    generation: u64,
    at: Instant,
    stamps: Vec<Option<SystemTime>>,
}

#[derive(Debug)]
enum State {
    None,
    Taken(Taken),
    Failed {
        at: Instant,
        why: String,
        hangs: bool,
    },
}

/// The snapshot of one shell's login environment, kept in a private directory.
#[derive(Debug)]
pub struct Snapshots {
    shell: Shell,
    dir: PathBuf,
    server_path: Option<OsString>,
    profiles: Vec<PathBuf>,
    home: Option<PathBuf>,
    state: Mutex<State>,
}

/// Profile files whose change means the snapshot is stale.
fn profile_files(home: Option<&Path>) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "/etc/profile",
        "/etc/profile.d",
        "/etc/bash.bashrc",
        "/etc/bashrc",
        "/etc/zsh/zshenv",
        "/etc/zsh/zprofile",
        "/etc/zshenv",
        "/etc/zprofile",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Some(h) = home {
        for f in [
            ".profile",
            ".bash_profile",
            ".bash_login",
            ".bashrc",
            ".zshenv",
            ".zprofile",
            ".zshrc",
            ".zlogin",
        ] {
            files.push(h.join(f));
        }
    }
    files
}

fn stamps(files: &[PathBuf]) -> Vec<Option<SystemTime>> {
    files
        .iter()
        .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .collect()
}

impl Snapshots {
    /// Snapshots of `shell` kept in `dir` (created private), of the profile under `home`
    /// (default: `$HOME`). Nothing is captured until the first [`Snapshots::prepare`].
    pub fn new(shell: Shell, dir: PathBuf, home: Option<PathBuf>) -> Snapshots {
        let home = home.or_else(|| std::env::var_os("HOME").map(PathBuf::from));
        Snapshots {
            shell,
            dir,
            server_path: std::env::var_os("PATH"),
            profiles: profile_files(home.as_deref()),
            home,
            state: Mutex::new(State::None),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The snapshot to use now, taken (again) when there is none, a profile file changed, or
    /// it is older than [`TTL`]. Blocks while a capture runs (at most [`CAPTURE_TIMEOUT`]).
    pub fn prepare(&self) -> Prepared {
        if cfg!(windows) {
            return Prepared::Login("Windows shells run without a profile".into());
        }
        let mut state = self.state();
        let now = stamps(&self.profiles);
        match &*state {
            State::Taken(t) if t.stamps == now && t.at.elapsed() < TTL && t.file.is_file() => {
                return Prepared::Snapshot(t.file.clone(), t.generation);
            }
            State::Failed { at, why, hangs } if at.elapsed() < RETRY_AFTER => {
                return failed(why, *hangs);
            }
            _ => {}
        }
        match self.capture() {
            Ok(file) => {
                let generation = GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                *state = State::Taken(Taken {
                    file: file.clone(),
                    generation,
                    at: Instant::now(),
                    stamps: now,
                });
                Prepared::Snapshot(file, generation)
            }
            Err((why, hangs)) => {
                tracing::warn!(%why, "the login environment could not be captured");
                *state = State::Failed {
                    at: Instant::now(),
                    why: why.clone(),
                    hangs,
                };
                failed(&why, hangs)
            }
        }
    }

    /// Runs the login shell once and writes the snapshot script.
    fn capture(&self) -> Result<PathBuf, (String, bool)> {
        let failed = |why: String| (why, false);
        private_dir(&self.dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", self.dir.display())))?;
        let fam = family(&self.shell);
        let env_file = self.dir.join("capture.env");
        let more_file = self.dir.join("capture.more");
        let _ = std::fs::remove_file(&env_file);
        let _ = std::fs::remove_file(&more_file);
        // The script runs after the profile; what it prints goes to files, so whatever the
        // profile prints is ignored.
        let more = match fam {
            Family::Bash => "{ declare -f; alias -p; shopt -p; } > \"$2\" 2>/dev/null",
            Family::Zsh => "{ functions; alias -L; } > \"$2\" 2>/dev/null",
            Family::Sh => ": > \"$2\"",
        };
        let script = format!("env -0 > \"$1\" && {more}");
        let mut cmd = std::process::Command::new(&self.shell.path);
        cmd.arg("-lc")
            .arg(&script)
            .arg("gantry-capture")
            .arg(&env_file)
            .arg(&more_file)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if let Some(h) = &self.home {
            cmd.env("HOME", h);
        }
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().map_err(|e| {
            failed(format!(
                "cannot start {}: {e}",
                Path::new(&self.shell.path).display()
            ))
        })?;
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= CAPTURE_TIMEOUT => {
                    kill_group(&mut child);
                    return Err((
                        format!(
                            "the login profile of {} did not finish within {} s",
                            Path::new(&self.shell.path).display(),
                            CAPTURE_TIMEOUT.as_secs()
                        ),
                        true,
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(failed(format!("cannot wait for the login shell: {e}"))),
            }
        };
        if !status.success() {
            return Err(failed(format!(
                "the login shell ended with {status} while setting up"
            )));
        }
        let env = std::fs::read(&env_file)
            .map_err(|e| failed(format!("no environment captured: {e}")))?;
        let more = std::fs::read_to_string(&more_file).unwrap_or_default();
        let _ = std::fs::remove_file(&env_file);
        let _ = std::fs::remove_file(&more_file);
        let text = render(fam, &env, &more, self.server_path.as_deref());
        let file = self.dir.join("snapshot.sh");
        let tmp = self.dir.join("snapshot.sh.tmp");
        write_private(&tmp, text.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, &file))
            .map_err(|e| failed(format!("cannot write the snapshot: {e}")))?;
        Ok(file)
    }
}

/// What to run after a failed capture: a login shell, unless the profile hangs, which a
/// login shell would hang on too.
fn failed(why: &str, hangs: bool) -> Prepared {
    if hangs {
        Prepared::Plain(format!("{why}; ran without the profile"))
    } else {
        Prepared::Login(format!("{why}; ran in a login shell"))
    }
}

#[cfg(unix)]
fn kill_group(child: &mut std::process::Child) {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.wait();
}

#[cfg(not(unix))]
fn kill_group(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    std::io::Write::write_all(&mut opts.open(path)?, bytes)
}

/// PATH: the profile's entries, then the server's that the profile dropped, in their order.
pub fn merge_path(profile: &str, server: Option<&OsStr>) -> String {
    let mut out: Vec<&str> = profile.split(':').filter(|e| !e.is_empty()).collect();
    let server = server.and_then(OsStr::to_str).unwrap_or("");
    let mut added = Vec::new();
    for e in server.split(':').filter(|e| !e.is_empty()) {
        if !out.contains(&e) && !added.contains(&e) {
            added.push(e);
        }
    }
    out.extend(added);
    out.join(":")
}

/// The snapshot script from `env -0` output and the family's function/alias dump.
fn render(fam: Family, env: &[u8], more: &str, server_path: Option<&OsStr>) -> String {
    let mut out = String::from("# gantry: the login environment, replayed for each command\n");
    let mut saw_path = false;
    for entry in env.split(|b| *b == 0) {
        let Ok(entry) = std::str::from_utf8(entry) else {
            continue;
        };
        let Some((name, value)) = entry.split_once('=') else {
            continue;
        };
        if !crate::shell::is_name(name)
            || NOT_REPLAYED.contains(&name)
            || name.starts_with("GANTRY_")
            || name.starts_with("BASH_FUNC_")
        {
            continue;
        }
        let value = if name == "PATH" {
            saw_path = true;
            merge_path(value, server_path)
        } else {
            value.to_string()
        };
        out.push_str(&format!("export {name}={}\n", posix_quote(&value)));
    }
    if !saw_path && let Some(p) = server_path.and_then(OsStr::to_str) {
        out.push_str(&format!("export PATH={}\n", posix_quote(p)));
    }
    match fam {
        Family::Bash => {
            for line in more.lines() {
                // Read-only options cannot be set again; saying so would print an error.
                if line.starts_with("shopt ")
                    && (line.ends_with(" login_shell") || line.ends_with(" restricted_shell"))
                {
                    continue;
                }
                out.push_str(line);
                out.push('\n');
            }
            // Aliases work in a non-interactive bash only with this.
            out.push_str("shopt -s expand_aliases\n");
        }
        Family::Zsh => {
            out.push_str(more);
            out.push('\n');
        }
        Family::Sh => {}
    }
    out
}

/// Commands in a shell prepared by a snapshot (or not).
impl Shell {
    /// How to run `script` with the user's environment as `prepared` says: sourcing the
    /// snapshot in a plain shell, then the call's own variables (they win over the profile's)
    /// and removals, then the script; or a login shell as [`Shell::invocation`] does.
    pub fn prepared_invocation(
        &self,
        script: &str,
        prepared: &Prepared,
        env: &[(String, String)],
        remove: &[String],
    ) -> Invocation {
        if self.kind != ShellKind::Posix {
            return self.invocation(script);
        }
        let mut s = match prepared {
            Prepared::Snapshot(file, _) => {
                format!(". {}\n", posix_quote(&file.to_string_lossy()))
            }
            Prepared::Plain(_) | Prepared::Login(_) => String::new(),
        };
        // Under confinement the launcher names the one temp directory commands may write;
        // a profile's TMPDIR must not take it away.
        s.push_str(
            "[ -n \"${GANTRY_CONFINED_TMPDIR-}\" ] && export TMPDIR=\"$GANTRY_CONFINED_TMPDIR\"\n",
        );
        s.push_str(&env_lines(env, remove));
        s.push_str(script);
        let args = match prepared {
            // A login shell reads its profile before the script, so the call's variables,
            // set in the script, still win.
            Prepared::Login(_) => vec!["-lc".into(), s.into()],
            _ => {
                let mut args = plain_args(self);
                args.push(s.into());
                args
            }
        };
        Invocation {
            program: self.path.clone(),
            args,
        }
    }
}

/// The plain (non-login) way to start `shell` so it reads no profile.
pub fn plain_args(shell: &Shell) -> Vec<OsString> {
    match family(shell) {
        Family::Bash => vec!["--noprofile".into(), "--norc".into(), "-c".into()],
        Family::Zsh => vec!["-f".into(), "-c".into()],
        Family::Sh => vec!["-c".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_keeps_the_profiles_order_and_adds_what_it_dropped() {
        assert_eq!(
            merge_path(
                "/usr/local/bin:/usr/bin:/bin",
                Some(OsStr::new(
                    "/root/.cargo/bin:/usr/bin:/opt/x/bin:/root/.cargo/bin"
                ))
            ),
            "/usr/local/bin:/usr/bin:/bin:/root/.cargo/bin:/opt/x/bin"
        );
        assert_eq!(merge_path("/a", None), "/a");
    }

    #[test]
    fn rendering_quotes_values_and_leaves_out_what_gantry_sets() {
        let env = b"A=it's\0PAGER=less\0PWD=/x\0BASH_FUNC_f%%=() {}\0PATH=/p\0MULTI=a\nb\0";
        let text = render(
            Family::Bash,
            env,
            "shopt -u login_shell\nshopt -s extglob\n",
            Some(OsStr::new("/s")),
        );
        assert!(text.contains("export A='it'\\''s'\n"), "{text}");
        assert!(text.contains("export PATH='/p:/s'\n"), "{text}");
        assert!(text.contains("export MULTI='a\nb'\n"), "{text}");
        assert!(
            !text.contains("PAGER") && !text.contains("PWD") && !text.contains("BASH_FUNC"),
            "{text}"
        );
        assert!(
            !text.contains("login_shell") && text.contains("shopt -s extglob\n"),
            "{text}"
        );
        assert!(text.ends_with("shopt -s expand_aliases\n"), "{text}");
    }
}
