//! `[hosts.NAME]`: the user's other machines, reached over SSH by the Hosts connector, as the
//! config writes them, and what each may be called and say.

use serde::Deserialize;

/// One `[hosts.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// `user@host` (or `host`), as `ssh` is given it.
    pub ssh: String,
    /// The SSH port (default: whatever `ssh` uses, 22 unless the user's ssh config says).
    pub port: Option<u16>,
    /// The private key to log in with (default: the user's ssh agent and keys).
    pub identity_file: Option<String>,
    /// The command that runs gantry there, as its login shell reads it (default `gantry`).
    pub gantry: Option<String>,
}

/// The command run on a machine when none is configured.
pub const DEFAULT_GANTRY: &str = "gantry";

impl MachineConfig {
    /// The host part of `ssh` (after the last `@`).
    pub fn host(&self) -> &str {
        self.ssh.rsplit_once('@').map_or(&self.ssh, |(_, h)| h)
    }

    /// The command that runs gantry there.
    pub fn gantry(&self) -> &str {
        self.gantry.as_deref().unwrap_or(DEFAULT_GANTRY)
    }

    /// Why this entry cannot be used, if it cannot. `ssh` and `identity_file` become
    /// arguments of `ssh`: neither may start with `-` (it would be read as an option) or hold
    /// whitespace or control characters.
    pub fn problem(&self) -> Option<String> {
        let plain = |s: &str| {
            !s.is_empty()
                && !s.starts_with('-')
                && !s.chars().any(|c| c.is_whitespace() || c.is_control())
        };
        if !plain(&self.ssh) || self.host().is_empty() || self.ssh.len() > 255 {
            return Some(format!(
                "ssh `{}` is not `user@host` (no spaces, not starting with `-`)",
                self.ssh.chars().take(80).collect::<String>()
            ));
        }
        if let Some(f) = &self.identity_file
            && !plain(f)
        {
            return Some(
                "identity_file is not a plain path (no spaces, not starting with `-`)".into(),
            );
        }
        if self.port == Some(0) {
            return Some("port 0 is not a port".into());
        }
        let command = self.gantry();
        if command.trim().is_empty() || command.chars().any(char::is_control) {
            return Some("gantry is not a one-line command".into());
        }
        None
    }
}

/// Whether `name` may name a machine: 1 to 32 letters, digits, `-` or `_`, starting with a
/// letter or digit.
pub fn name_ok(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(ssh: &str) -> MachineConfig {
        MachineConfig {
            ssh: ssh.into(),
            port: None,
            identity_file: None,
            gantry: None,
        }
    }

    #[test]
    fn an_option_or_a_space_is_never_a_destination() {
        assert!(machine("me@box").problem().is_none());
        assert_eq!(machine("me@box").host(), "box");
        assert!(machine("-oProxyCommand=sh").problem().is_some());
        assert!(machine("me@box -v").problem().is_some());
        assert!(machine("me@").problem().is_some());
        let mut m = machine("me@box");
        m.identity_file = Some("-F/tmp/x".into());
        assert!(m.problem().is_some());
        m.identity_file = None;
        m.gantry = Some("gantry\nrm -rf ~".into());
        assert!(m.problem().is_some());
    }

    #[test]
    fn names_are_short_and_plain() {
        assert!(name_ok("build-box_2"));
        assert!(!name_ok("-x"));
        assert!(!name_ok("a b"));
        assert!(!name_ok(""));
        assert!(!name_ok(&"a".repeat(33)));
    }
}
