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

/// `name` without systemd's `.service` suffix, if it is a service name at all: 1 to 256
/// letters, digits and `:_.@-` (systemd's and the Service Control Manager's common ground),
/// not starting with `-` or `.`.
pub fn service_name(name: &str) -> Result<&str, String> {
    let bare = name.strip_suffix(SERVICE_SUFFIX).unwrap_or(name);
    let fine = !bare.is_empty()
        && name.len() <= 256
        && !bare.starts_with(['-', '.'])
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '.' | '@' | '-'));
    if fine {
        Ok(bare)
    } else {
        Err(format!(
            "`{}` is not a service name (letters, digits and `:_.@-`, at most 256)",
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

    /// Whether `name` (already bare, as [`service_name`] gives it) is allowed. Windows
    /// compares service names without regard to case, as its SCM does.
    pub fn allows(&self, bare: &str) -> bool {
        self.allowed.iter().any(|entry| {
            service_name(entry).is_ok_and(|e| {
                if cfg!(windows) {
                    e.eq_ignore_ascii_case(bare)
                } else {
                    e == bare
                }
            })
        })
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
            allowed: vec!["nginx.service".into(), "getty@tty1".into()],
        };
        assert!(c.allows(service_name("nginx").unwrap()));
        assert!(c.allows(service_name("nginx.service").unwrap()));
        assert!(c.allows(service_name("getty@tty1.service").unwrap()));
        assert!(!c.allows(service_name("sshd").unwrap()));
        assert!(!c.user_manager());
        assert!(c.problems().is_empty());
    }

    #[test]
    fn what_is_not_a_service_name_is_refused_and_named() {
        for bad in ["", ".service", "a b", "../x", "-x", "x;y", "x/y", "nginx\n"] {
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
