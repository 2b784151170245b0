//! The host keys gantry trusts: scanned from a machine, shown to the user by fingerprint,
//! and written to gantry's own known-hosts file only when the user confirms them.

use std::path::Path;
use std::time::Duration;

use crate::ssh::{Machine, known_hosts};

/// One key a machine showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostKey {
    /// Its known-hosts line (`pattern type base64`).
    pub line: String,
    /// Its fingerprint as `ssh-keygen -l` prints it (`256 SHA256:... (ED25519)`).
    pub fingerprint: String,
}

/// Why a key could not be scanned or pinned.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// A helper program failed or was missing.
    #[error("{program}: {why}")]
    Program {
        /// `ssh`, `ssh-keyscan` or `ssh-keygen`.
        program: &'static str,
        /// What went wrong.
        why: String,
    },
    /// The machine showed no key.
    #[error("host `{0}` showed no SSH host key: is sshd running there, on that port (--ssh-port)?")]
    NoKey(String),
    /// The known-hosts file could not be written.
    #[error("{path}: {why}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        why: std::io::Error,
    },
}

fn program(program: &'static str, args: &[&str], input: Option<&[u8]>) -> Result<String, PinError> {
    use std::io::Write as _;
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| PinError::Program {
            program,
            why: e.to_string(),
        })?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        let _ = stdin.write_all(bytes);
    }
    let out = child.wait_with_output().map_err(|e| PinError::Program {
        program,
        why: e.to_string(),
    })?;
    if !out.status.success() && out.stdout.is_empty() {
        return Err(PinError::Program {
            program,
            why: String::from_utf8_lossy(&out.stderr)
                .trim()
                .chars()
                .take(300)
                .collect(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The name and port ssh really connects to for `machine` (after the user's ssh config:
/// `HostName`, `Port`), as `ssh -G` resolves them.
fn resolved(machine: &Machine<'_>) -> Result<(String, u16), PinError> {
    let mut args: Vec<String> = vec!["-G".into()];
    if let Some(port) = machine.config.port {
        args.extend(["-p".into(), port.to_string()]);
    }
    args.extend(["--".into(), machine.config.ssh.clone()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = program("ssh", &args, None)?;
    let field = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
            .map(str::to_string)
    };
    let host = field("hostname").unwrap_or_else(|| machine.config.host().to_string());
    let port = field("port").and_then(|p| p.parse().ok()).unwrap_or(22);
    Ok((host, port))
}

/// How a machine is written in a known-hosts file: `host`, or `[host]:port` off port 22.
pub fn pattern(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

/// The keys `machine` shows now, each with its fingerprint (asked over the network with
/// `ssh-keyscan`, trusted for nothing until the user confirms one).
pub fn scan(machine: &Machine<'_>) -> Result<Vec<HostKey>, PinError> {
    let (host, port) = resolved(machine)?;
    let timeout = Duration::from_secs(5).as_secs().to_string();
    let port_s = port.to_string();
    let listed = program(
        "ssh-keyscan",
        &["-T", &timeout, "-p", &port_s, "--", &host],
        None,
    )
    .map_err(|e| match e {
        PinError::Program { why, .. } if why.is_empty() => {
            PinError::NoKey(format!("{} ({host} port {port})", machine.name))
        }
        other => other,
    })?;
    let mut keys = Vec::new();
    for line in listed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let fingerprint = program("ssh-keygen", &["-l", "-f", "-"], Some(line.as_bytes()))?;
        keys.push(HostKey {
            line: line.trim().to_string(),
            fingerprint: fingerprint.trim().to_string(),
        });
    }
    if keys.is_empty() {
        return Err(PinError::NoKey(machine.name.to_string()));
    }
    Ok(keys)
}

/// Whether a known-hosts line names `pattern` among its hosts.
fn names(line: &str, pattern: &str) -> bool {
    line.split_whitespace()
        .next()
        .is_some_and(|hosts| hosts.split(',').any(|h| h == pattern))
}

/// The pinned lines of `machine`.
pub fn pinned(machine: &Machine<'_>) -> Result<Vec<String>, PinError> {
    let (host, port) = resolved(machine)?;
    let pattern = pattern(&host, port);
    let text = std::fs::read_to_string(known_hosts(machine.state_dir)).unwrap_or_default();
    Ok(text
        .lines()
        .filter(|l| names(l, &pattern))
        .map(str::to_string)
        .collect())
}

fn rewrite(state_dir: &Path, pattern: &str, add: &[HostKey]) -> Result<(), PinError> {
    let path = known_hosts(state_dir);
    let file_error = |why| PinError::File {
        path: path.display().to_string(),
        why,
    };
    state_dir::ensure(state_dir).map_err(file_error)?;
    let old = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(file_error(e)),
    };
    let mut text: String = old
        .lines()
        .filter(|l| !names(l, pattern))
        .map(|l| format!("{l}\n"))
        .collect();
    for key in add {
        text.push_str(&key.line);
        text.push('\n');
    }
    state_dir::write_private(&path, text.as_bytes()).map_err(file_error)
}

/// Pins `keys` (from [`scan`], confirmed by the user) as `machine`'s only keys.
pub fn pin(machine: &Machine<'_>, keys: &[HostKey]) -> Result<(), PinError> {
    let (host, port) = resolved(machine)?;
    let pattern = pattern(&host, port);
    // Only lines for this machine, whatever the scan printed.
    let keys: Vec<HostKey> = keys
        .iter()
        .filter(|k| names(&k.line, &pattern))
        .cloned()
        .collect();
    if keys.is_empty() {
        return Err(PinError::NoKey(machine.name.to_string()));
    }
    rewrite(machine.state_dir, &pattern, &keys)
}

/// Forgets `machine`'s keys.
pub fn unpin(machine: &Machine<'_>) -> Result<(), PinError> {
    let (host, port) = resolved(machine)?;
    rewrite(machine.state_dir, &pattern(&host, port), &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_matched_by_their_exact_host() {
        assert_eq!(pattern("box", 22), "box");
        assert_eq!(pattern("127.0.0.1", 2222), "[127.0.0.1]:2222");
        assert!(names(
            "[127.0.0.1]:2222 ssh-ed25519 AAAA",
            "[127.0.0.1]:2222"
        ));
        assert!(!names(
            "[127.0.0.1]:22222 ssh-ed25519 AAAA",
            "[127.0.0.1]:2222"
        ));
        assert!(names("a,box ssh-ed25519 AAAA", "box"));
    }
}
