//! `gantry hosts install`: this very binary copied to a machine of the same kind, checked by
//! its SHA-256 there before it takes the place of what was at that path.

use std::path::Path;
use std::time::Duration;

use crate::digest::sha256_hex;
use crate::ssh::Machine;

/// Why the copy was not made.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// Reading this binary, or running ssh, failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The machine is another OS or architecture.
    #[error(
        "host `{name}` is {there}, this gantry is built for {here}: install a gantry built for it there instead"
    )]
    OtherKind {
        /// The machine's name.
        name: String,
        /// What `uname -sm` said there.
        there: String,
        /// What this binary is for.
        here: String,
    },
    /// A step there failed.
    #[error("host `{name}`: {what}")]
    There {
        /// The machine's name.
        name: String,
        /// What failed, with what it said.
        what: String,
    },
}

/// `uname -sm` of the machine this binary runs on, as a machine of the same kind says it.
fn this_kind() -> String {
    let os = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        other => other,
    };
    let arch = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("macos", "aarch64") => "arm64",
        (_, arch) => arch,
    };
    format!("{os} {arch}")
}

/// A path as one word of a POSIX shell, `~/` left to the shell to expand.
fn shell_word(path: &str) -> String {
    let (home, rest) = match path.strip_prefix("~/") {
        Some(rest) => ("~/", rest),
        None => ("", path),
    };
    format!("{home}'{}'", rest.replace('\'', r"'\''"))
}

/// Copies the binary at `binary` to `to` on `machine` (a path its shell reads; `~/` is its
/// home), after checking the machine is of the same kind; the copy is checked by SHA-256
/// there before it replaces `to`. Returns the digest.
pub fn install(machine: &Machine<'_>, binary: &Path, to: &str) -> Result<String, InstallError> {
    let timeout = Duration::from_secs(120);
    let there = |what: String| InstallError::There {
        name: machine.name.to_string(),
        what,
    };
    let said = |out: &std::process::Output| {
        let ssh_said = std::fs::read_to_string(machine.ssh_log()).unwrap_or_default();
        let (_, sentence) = crate::ssh::explain(
            machine.name,
            &ssh_said,
            &String::from_utf8_lossy(&out.stderr),
        );
        // `There` names the machine itself.
        let own = format!("host `{}`: ", machine.name);
        sentence
            .strip_prefix(&own)
            .map_or_else(|| sentence.clone(), str::to_string)
    };
    let kind = machine.run("uname -sm", None, timeout)?;
    if !kind.status.success() {
        return Err(there(said(&kind)));
    }
    let kind = String::from_utf8_lossy(&kind.stdout).trim().to_string();
    if kind != this_kind() {
        return Err(InstallError::OtherKind {
            name: machine.name.to_string(),
            there: kind,
            here: this_kind(),
        });
    }
    let bytes = std::fs::read(binary)?;
    let digest = sha256_hex(&bytes);
    let target = shell_word(to);
    let part = shell_word(&format!("{to}.part"));
    let copy = format!(
        "set -e; mkdir -p \"$(dirname {target})\"; cat > {part}; chmod 755 {part}; \
         (sha256sum {part} 2>/dev/null || shasum -a 256 {part}) | cut -d' ' -f1"
    );
    let out = machine.run(&copy, Some(&bytes), timeout)?;
    if !out.status.success() {
        return Err(there(format!("the copy failed: {}", said(&out))));
    }
    let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if theirs != digest {
        let _ = machine.run(&format!("rm -f {part}"), None, timeout);
        return Err(there(format!(
            "the copy there has SHA-256 {theirs}, not {digest}: nothing was replaced"
        )));
    }
    let out = machine.run(&format!("mv -f {part} {target}"), None, timeout)?;
    if !out.status.success() {
        return Err(there(format!("could not put it in place: {}", said(&out))));
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_one_shell_word() {
        assert_eq!(shell_word("~/.local/bin/gantry"), "~/'.local/bin/gantry'");
        assert_eq!(shell_word("/opt/it's"), r"'/opt/it'\''s'");
    }
}
