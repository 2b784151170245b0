//! `[services]`: the services the Shell connector's `service.status` and `service.control`
//! may reach, and which manager holds them.

use serde::Deserialize;

/// `[services]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServicesConfig {
    /// On Linux, systemd's `"system"` manager (the default) or the user's own (`"user"`);
    /// elsewhere the platform has one.
    #[serde(default)]
    pub manager: Option<String>,
    /// The services that may be reached, by name (`nginx`, `nginx.service`: the same).
    #[serde(default)]
    pub allowed: Vec<String>,
}

/// systemd's suffix for a service, which names may leave off.
const SERVICE_SUFFIX: &str = ".service";

/// The longest service name: systemd's 255 bytes for a unit name, `.service` included.
const MAX_NAME: usize = 255 - SERVICE_SUFFIX.len();

/// `name` as a service name, if it is one at all: 1 to 247 letters, digits and `:_.@-`
/// (systemd's, the Service Control Manager's and launchd's common ground), not starting with
/// `-` or `.`; on Linux without systemd's `.service` suffix (elsewhere it is part of the name).
pub fn service_name(name: &str) -> Result<&str, String> {
    let bare = if cfg!(target_os = "linux") {
        name.strip_suffix(SERVICE_SUFFIX).unwrap_or(name)
    } else {
        name
    };
    let fine = !bare.is_empty()
        && bare.len() <= MAX_NAME
        && !bare.starts_with(['-', '.'])
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '.' | '@' | '-'));
    if fine {
        Ok(bare)
    } else {
        Err(format!(
            "`{}` is not a service name (letters, digits and `:_.@-`, at most {MAX_NAME})",
            name.escape_debug()
        ))
    }
}

impl ServicesConfig {
    /// Whether the config names the user's own systemd manager rather than the system's
    /// (Linux; the system's by default).
    pub fn user_manager(&self) -> bool {
        self.manager.as_deref() == Some("user")
    }

    /// The allowed entry `bare` (as [`service_name`] gives it) names, spelled as the config
    /// spells it, if any. Windows compares service names without regard to case, as its SCM
    /// does, so the config's spelling is the one Cedar sees whatever the call's.
    pub fn allowed_as<'a>(&'a self, bare: &str) -> Option<&'a str> {
        self.allowed.iter().find_map(|entry| {
            let e = service_name(entry).ok()?;
            let same = if cfg!(windows) {
                e.eq_ignore_ascii_case(bare)
            } else {
                e == bare
            };
            same.then_some(e)
        })
    }

    /// Whether `bare` is allowed.
    pub fn allows(&self, bare: &str) -> bool {
        self.allowed_as(bare).is_some()
    }

    /// What is wrong with the section, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(m) = &self.manager
            && m != "system"
            && m != "user"
        {
            out.push(format!(
                "[services] manager: `{m}` is not \"system\" or \"user\""
            ));
        }
        for entry in &self.allowed {
            if let Err(why) = service_name(entry) {
                out.push(format!("[services] allowed: {why}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_compared_without_the_service_suffix() {
        let c = ServicesConfig {
            manager: None,
            allowed: vec!["nginx".into(), "getty@tty1".into()],
        };
        assert!(c.allows(service_name("nginx").unwrap()));
        assert_eq!(
            c.allows(service_name("nginx.service").unwrap()),
            cfg!(target_os = "linux")
        );
        assert_eq!(
            c.allows(service_name("getty@tty1.service").unwrap()),
            cfg!(target_os = "linux")
        );
        assert!(!c.allows(service_name("sshd").unwrap()));
        assert!(!c.user_manager());
        assert!(c.problems().is_empty());
    }

    #[test]
    fn what_is_not_a_service_name_is_refused_and_named() {
        let long = "x".repeat(MAX_NAME + 1);
        for bad in ["", "a b", "../x", "-x", "x;y", "x/y", "nginx\n", &long] {
            assert!(service_name(bad).is_err(), "{bad:?}");
        }
        let c = ServicesConfig {
            manager: Some("root".into()),
            allowed: vec!["a b".into()],
        };
        let p = c.problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("manager") && p[1].contains("`a b`"), "{p:?}");
    }
}
