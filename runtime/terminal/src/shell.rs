//! Which shell runs a command and how: the user's login shell on Unix (`$SHELL`, else
//! `/bin/sh`), PowerShell on Windows (cmd.exe where there is none, as under Wine); and the
//! script that runs a batch in one shell with a
//! labelled section and an exit code per item.

use std::ffi::OsString;

/// A program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The shell binary.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// The shell a command runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shell {
    /// Path of the binary.
    pub path: OsString,
    /// How scripts are written for it.
    pub kind: ShellKind,
}

/// Shell families gantry writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellKind {
    /// sh, bash, zsh, dash, ksh: POSIX syntax, `-l` for a login shell.
    Posix,
    /// PowerShell.
    PowerShell,
    /// cmd.exe: Windows without PowerShell on its PATH.
    Cmd,
}

impl Shell {
    /// The host's shell: `$SHELL` when it is a POSIX shell (else `/bin/sh`); on Windows,
    /// PowerShell when it is on PATH, else `%ComSpec%` (cmd.exe).
    pub fn detect() -> Shell {
        if cfg!(windows) {
            let path = std::env::var_os("PATH").unwrap_or_default();
            // Wine ships a powershell.exe that is a stub: it runs nothing and exits 0.
            let candidates: &[&str] = if under_wine() {
                &[]
            } else {
                &["powershell.exe", "pwsh.exe"]
            };
            for name in candidates {
                if let Ok(found) = crate::programs::windows_executable(name, &path) {
                    return Shell {
                        path: found.into_os_string(),
                        kind: ShellKind::PowerShell,
                    };
                }
            }
            return Shell {
                path: std::env::var_os("ComSpec").unwrap_or_else(|| "cmd.exe".into()),
                kind: ShellKind::Cmd,
            };
        }
        let from_env = std::env::var_os("SHELL").filter(|s| {
            let name = std::path::Path::new(s)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("");
            matches!(
                name,
                "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "yash"
            ) && std::path::Path::new(s).is_file()
        });
        Shell {
            path: from_env.unwrap_or_else(|| "/bin/sh".into()),
            kind: ShellKind::Posix,
        }
    }

    /// How to run `script`.
    pub fn invocation(&self, script: &str) -> Invocation {
        let args = match self.kind {
            ShellKind::Posix => vec!["-lc".into(), script.into()],
            ShellKind::PowerShell => vec![
                "-NoLogo".into(),
                "-NoProfile".into(),
                "-Command".into(),
                script.into(),
            ],
            // /s: the quotes around the script are taken off and the rest run as written.
            ShellKind::Cmd => vec!["/d".into(), "/s".into(), "/c".into(), script.into()],
        };
        Invocation {
            program: self.path.clone(),
            args,
        }
    }
}

/// The lines that give a shell the call's variables (they win over the profile's) and take
/// away the removed ones.
pub(crate) fn env_lines(env: &[(String, String)], remove: &[String]) -> String {
    let mut s = String::new();
    for (k, v) in env.iter().filter(|(k, _)| is_name(k)) {
        s.push_str(&format!("export {k}={}\n", posix_quote(v)));
    }
    for k in remove.iter().filter(|k| is_name(k)) {
        s.push_str(&format!("unset {k}\n"));
    }
    s
}

pub(crate) fn is_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Marks the end of one batch item in the output; followed by `<index> <exit code>`.
pub fn marker(nonce: &str) -> String {
    format!("@@gantry-{nonce}@@")
}

/// Whether this Windows program runs under Wine (its ntdll says so).
#[cfg(windows)]
#[allow(unsafe_code)]
pub(crate) fn under_wine() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
    // SAFETY: both calls take NUL-terminated static strings and only read them; ntdll is
    // loaded in every Windows process, and the handle is only passed back to the loader.
    unsafe {
        let ntdll = GetModuleHandleA(c"ntdll.dll".as_ptr().cast());
        !ntdll.is_null() && GetProcAddress(ntdll, c"wine_get_version".as_ptr().cast()).is_some()
    }
}

#[cfg(not(windows))]
fn under_wine() -> bool {
    false
}

/// `s` in single quotes, safe as one word in any POSIX shell.
pub(crate) fn posix_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `argv` as one POSIX command line that runs it in place of the shell, every word quoted,
/// so no word is expanded or split however it is written (a program named by the user, a
/// prompt the model wrote).
pub fn command_line(argv: &[String]) -> String {
    let words: Vec<String> = argv.iter().map(|w| posix_quote(w)).collect();
    format!("exec {}", words.join(" "))
}

/// The longest command line a held program may have: Linux takes at most 128 KiB in one
/// argument, and a POSIX line travels as the shell's `-c` argument after the snapshot's few
/// lines; Windows takes 32,767 characters in all.
pub const MAX_COMMAND_LINE: usize = if cfg!(windows) { 30 * 1024 } else { 120 * 1024 };

/// How long the command line of `argv` is, at most (each word quoted, each quote escaped).
pub fn command_line_len(argv: &[String]) -> usize {
    5 + argv
        .iter()
        .map(|w| w.len() + 3 * w.matches(['\'', '"', '\\']).count() + 3)
        .sum::<usize>()
}

fn label(cmd: &str) -> String {
    let first = cmd.lines().next().unwrap_or("");
    if cmd.lines().nth(1).is_some() {
        format!("{first} …")
    } else {
        first.to_string()
    }
}

/// One script running `cmds` in order in one shell: before each item a `$ <command>` line,
/// after it a marker line carrying its exit code. A failing item does not stop the rest.
pub fn batch_script(kind: ShellKind, cmds: &[String], nonce: &str) -> String {
    let m = marker(nonce);
    let mut s = String::new();
    for (i, cmd) in cmds.iter().enumerate() {
        let n = i + 1;
        match kind {
            ShellKind::Posix => {
                s.push_str(&format!(
                    "printf '%s\\n' {}\n",
                    posix_quote(&format!("$ {}", label(cmd)))
                ));
                s.push_str(cmd);
                s.push_str(&format!("\nprintf '\\n{m} {n} %d\\n' \"$?\"\n"));
            }
            ShellKind::PowerShell => {
                let quoted = format!("$ {}", label(cmd)).replace('\'', "''");
                s.push_str(&format!(
                    "Write-Output '{quoted}'\n$global:LASTEXITCODE = 0\n"
                ));
                s.push_str(cmd);
                s.push_str(&format!("\n$code = if ($?) {{ $LASTEXITCODE }} else {{ if ($LASTEXITCODE) {{ $LASTEXITCODE }} else {{ 1 }} }}\nWrite-Output \"`n{m} {n} $code\"\n"));
            }
            ShellKind::Cmd => {
                // One line: cmd /c runs a single line, and expands %VAR% when it reads it.
                // `%^errorlevel%` is no variable then; `call` reads it again after the item
                // ran, when it is. The label starts with `$ `, so echo never reads it as
                // on/off; `echo.` is an empty line. `(call )` sets the exit code to 0 first, which
                // built-in commands such as `echo` leave as they found it.
                if !s.is_empty() {
                    s.push_str(" & ");
                }
                let shown =
                    format!("$ {}", label(cmd)).replace(['&', '|', '<', '>', '^', '%'], "_");
                s.push_str(&format!(
                    "echo {shown}& (call )& {cmd}& echo.& call echo {m} {n} %^errorlevel%"
                ));
            }
        }
    }
    s
}

/// If `line` is a batch marker, its item index and exit code.
pub fn parse_marker(line: &str, nonce: &str) -> Option<(usize, i32)> {
    let rest = line.trim_end().strip_prefix(&marker(nonce))?.trim();
    let (index, code) = rest.split_once(' ')?;
    Some((index.parse().ok()?, code.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn cmd_batches_are_one_line_with_a_marker_read_after_each_item() {
        let s = batch_script(
            ShellKind::Cmd,
            &["echo a".into(), "dir /b & ver".into()],
            "n1",
        );
        assert!(!s.contains('\n'), "{s}");
        assert_eq!(
            s,
            "echo $ echo a& (call )& echo a& echo.& call echo @@gantry-n1@@ 1 %^errorlevel% & echo $ dir /b _ ver& (call )& dir /b & ver& echo.& call echo @@gantry-n1@@ 2 %^errorlevel%"
        );
    }

    /// The script as the real cmd.exe runs it (Windows, or Wine in tests/run): each item's
    /// own exit code, read after it ran.
    #[cfg(windows)]
    #[test]
    fn cmd_runs_a_batch_and_reports_each_code() {
        let shell = Shell {
            path: std::env::var_os("ComSpec").unwrap_or_else(|| "cmd.exe".into()),
            kind: ShellKind::Cmd,
        };
        let script = batch_script(
            ShellKind::Cmd,
            &[
                "echo first".into(),
                "cmd /c exit 3".into(),
                "echo third".into(),
            ],
            "w1",
        );
        let inv = shell.invocation(&script);
        let out = std::process::Command::new(&inv.program)
            .args(&inv.args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let codes: Vec<(usize, i32)> = text.lines().filter_map(|l| parse_marker(l, "w1")).collect();
        assert_eq!(codes, [(1, 0), (2, 3), (3, 0)], "{text}");
        assert!(text.contains("first") && text.contains("third"), "{text}");
    }

    #[test]
    fn batch_scripts_label_items_and_report_codes() {
        let s = batch_script(ShellKind::Posix, &["echo 'a'".into(), "false".into()], "n1");
        assert_eq!(
            s,
            "printf '%s\\n' '$ echo '\\''a'\\'''\necho 'a'\nprintf '\\n@@gantry-n1@@ 1 %d\\n' \"$?\"\nprintf '%s\\n' '$ false'\nfalse\nprintf '\\n@@gantry-n1@@ 2 %d\\n' \"$?\"\n"
        );
        assert_eq!(parse_marker("@@gantry-n1@@ 2 1", "n1"), Some((2, 1)));
        assert_eq!(parse_marker("@@gantry-other@@ 2 1", "n1"), None);
        assert_eq!(parse_marker("text", "n1"), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_real_posix_shell_runs_the_batch() {
        let s = batch_script(
            ShellKind::Posix,
            &[
                "X=5".into(),
                "echo \"x=$X\"; false".into(),
                "cd /; pwd".into(),
            ],
            "t",
        );
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(&s)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text,
            "$ X=5\n\n@@gantry-t@@ 1 0\n$ echo \"x=$X\"; false\nx=5\n\n@@gantry-t@@ 2 1\n$ cd /; pwd\n/\n\n@@gantry-t@@ 3 0\n"
        );
    }
}
