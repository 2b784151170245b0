//! Finding the program a name starts: the one lookup on `PATH` gantry makes, whether for a
//! command of the Shell connector, a worker kind's CLI, or a program held on Windows.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Whether `path` names a program: an executable file on Unix; on Windows a file as `.exe`
/// or `.com` (a batch file would hand its arguments to cmd.exe to parse).
pub fn is_program(path: &Path) -> bool {
    #[cfg(unix)]
    {
        is_executable(path)
    }
    #[cfg(not(unix))]
    {
        ["exe", "com"]
            .iter()
            .any(|ext| path.with_extension(ext).is_file())
    }
}

/// Where `name` is found as a program gantry starts itself: an absolute path as given (when
/// it is a file); a bare name in the first absolute directory of `path` holding it as an
/// executable (on Windows as written when it ends in `.exe` or `.com`, else with each of
/// `PATHEXT`'s `.exe` and `.com` appended, in its order). A relative path with a directory, or a relative `PATH` entry, would depend on the
/// directory gantry happens to run in, and is never used.
pub fn find(name: &str, path: &OsStr) -> Option<PathBuf> {
    let given = Path::new(name);
    if given.is_absolute() {
        return given.is_file().then(|| given.to_path_buf());
    }
    if given.components().count() != 1 {
        return None;
    }
    let extensions: Vec<String> = if cfg!(windows) && has_program_extension(name) {
        // `hostname.exe` is looked for as written, as Windows does.
        vec![String::new()]
    } else if cfg!(windows) {
        std::env::var("PATHEXT")
            .unwrap_or_else(|_| ".EXE;.COM".into())
            .split(';')
            .map(str::to_ascii_lowercase)
            .filter(|e| e == ".exe" || e == ".com")
            .collect()
    } else {
        vec![String::new()]
    };
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .flat_map(|d| extensions.iter().map(move |e| d.join(format!("{name}{e}"))))
        .find(|p| is_executable(p))
}

/// Whether `name` ends in `.exe` or `.com`, in any case.
fn has_program_extension(name: &str) -> bool {
    Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("exe") || e.eq_ignore_ascii_case("com"))
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// `name` on gantry's own `PATH` (see [`find`]).
pub fn on_path(name: &str) -> Option<PathBuf> {
    find(name, &std::env::var_os("PATH").unwrap_or_default())
}

/// The executable `name` runs as on Windows, found the way CreateProcess would (as given
/// when it is a path, else in each directory of `path`), but only as an `.exe` or `.com`:
/// a batch file (`.cmd`, `.bat`, such as npm's shims) would hand its arguments to cmd.exe
/// to parse, so it is refused, naming it.
pub fn windows_executable(name: &str, path: &OsStr) -> Result<PathBuf, String> {
    let is_batch = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("cmd") || e.eq_ignore_ascii_case("bat"))
    };
    let runnable = |p: &Path| {
        p.is_file()
            && p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.eq_ignore_ascii_case("exe") || e.eq_ignore_ascii_case("com"))
    };
    let given = Path::new(name);
    if is_batch(given) {
        return Err(format!(
            "{name} is a batch file, which cmd.exe would parse; name the program it runs (an .exe, or node with its script)"
        ));
    }
    let dirs: Vec<PathBuf> = if given.components().count() > 1 || given.is_absolute() {
        vec![PathBuf::new()]
    } else {
        std::env::split_paths(path).collect()
    };
    let mut batch = None;
    for dir in dirs {
        let base = dir.join(given);
        for candidate in [
            base.clone(),
            base.with_extension("exe"),
            base.with_extension("com"),
        ] {
            if runnable(&candidate) {
                return Ok(candidate);
            }
        }
        for candidate in [base.with_extension("cmd"), base.with_extension("bat")] {
            if batch.is_none() && candidate.is_file() {
                batch = Some(candidate);
            }
        }
    }
    Err(match batch {
        Some(b) => format!(
            "{name} is found only as {}, a batch file, which cmd.exe would parse; name the program it runs (an .exe, or node with its script)",
            b.display()
        ),
        None => format!("{name} was not found as an .exe on PATH"),
    })
}

/// Whether the command `given`, which starts `resolved`, is the one an allow-list entry
/// `allowed` names. On Unix the names are compared as written. On Windows they are compared
/// the way Windows finds programs: without regard to case, and a bare name covers the
/// program `PATHEXT` completes it to (`ping` allows `PING.EXE`); an entry with its extension
/// (`ping.exe`) allows the bare name only when that is what it resolved to, never a `.com`
/// found first.
pub fn allow_list_names(allowed: &str, given: &str, resolved: &Path) -> bool {
    if cfg!(windows) {
        windows_names_match(allowed, given, resolved)
    } else {
        allowed == given
    }
}

/// The Windows rule of [`allow_list_names`], testable on every platform.
fn windows_names_match(allowed: &str, given: &str, resolved: &Path) -> bool {
    /// `name` without a trailing `.exe` or `.com`, and that extension.
    fn split(name: &str) -> (&str, Option<&str>) {
        match name.rsplit_once('.') {
            Some((stem, ext))
                if !stem.is_empty()
                    && (ext.eq_ignore_ascii_case("exe") || ext.eq_ignore_ascii_case("com")) =>
            {
                (stem, Some(ext))
            }
            _ => (name, None),
        }
    }
    if allowed.eq_ignore_ascii_case(given) {
        return true;
    }
    let ((allowed_stem, allowed_ext), (given_stem, given_ext)) = (split(allowed), split(given));
    if !allowed_stem.eq_ignore_ascii_case(given_stem) {
        return false;
    }
    match (allowed_ext, given_ext) {
        // `ping` allows `ping.exe` and `ping.com`.
        (None, Some(_)) => true,
        // `ping.exe` allows `ping` when `ping` started ping.exe.
        (Some(ext), None) => resolved
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case(ext)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Windows names a program without regard to case and with PATHEXT's extension optional;
    /// an entry with an extension never allows a different program found first.
    #[test]
    fn allow_list_names_follow_windows_rules_there() {
        let exe = Path::new(r"C:\Windows\System32\PING.EXE");
        let com = Path::new(r"C:\tools\ping.com");
        assert!(windows_names_match("ping", "PING", exe));
        assert!(windows_names_match("ping", "ping.exe", exe));
        assert!(windows_names_match("ping", "Ping.COM", com));
        assert!(windows_names_match("ping.exe", "ping", exe));
        assert!(windows_names_match("PING.exe", "ping.EXE", exe));
        assert!(!windows_names_match("ping.exe", "ping", com));
        assert!(!windows_names_match("ping.exe", "ping.com", com));
        assert!(!windows_names_match("ping", "ping.bat", exe));
        assert!(!windows_names_match("ping", "pingx", exe));
        assert!(!windows_names_match(".exe", "", exe));
    }

    /// A bare name is found as an `.exe` on the path; a batch shim is refused by name,
    /// whether it is named or only found.
    #[test]
    fn a_windows_program_is_an_exe_and_never_a_batch_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("codex.cmd"), "").unwrap();
        std::fs::write(b.join("claude.exe"), "").unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(
            windows_executable("claude", &path).unwrap(),
            b.join("claude.exe")
        );
        let shim = windows_executable("codex", &path).unwrap_err();
        assert!(shim.contains("a batch file"), "{shim}");
        assert!(windows_executable("x.bat", &path).is_err());
        assert!(
            windows_executable("nothing", &path)
                .unwrap_err()
                .contains("not found")
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_bare_name_is_found_in_an_absolute_path_entry_only_as_an_executable_and_a_path_as_given() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (plain, exec) = (dir.path().join("plain"), dir.path().join("exec"));
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::create_dir_all(&exec).unwrap();
        std::fs::write(plain.join("tool"), "").unwrap();
        std::fs::write(exec.join("tool"), "").unwrap();
        std::fs::set_permissions(exec.join("tool"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let path = std::env::join_paths([&plain, &exec, Path::new("relative")]).unwrap();
        assert_eq!(find("tool", &path), Some(exec.join("tool")));
        assert_eq!(find("missing", &path), None);
        let given = exec.join("tool");
        assert_eq!(find(given.to_str().unwrap(), &path), Some(given));
        assert_eq!(find("exec/tool", &path), None);
        assert!(is_program(&exec.join("tool")) && !is_program(&plain.join("tool")));
    }
}
