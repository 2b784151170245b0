//! The live permission state: what the user chose, what this platform allows, read-only mode;
//! and from it the Cedar snapshot and the tools each connector publishes.

use std::collections::BTreeMap;

use generated::Permission;
use tool_api::{ConnectorSpec, Platform, ToolSpec};

/// Permission choices plus the facts that mask them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionState {
    platform: Platform,
    read_only: bool,
    stored: BTreeMap<&'static str, bool>,
    /// Whether a desktop can be driven here (a display gantry connected to).
    desktop: bool,
    /// Whether the config's `[services] allowed` names any service.
    services: bool,
}

/// Whether permission `name` only serves the service tools (so it means nothing while the
/// config allows no service, and they are not listed).
pub fn service_bound(name: &str) -> bool {
    name == Permission::Services.name() || name == Permission::ServiceControl.name()
}

/// Whether permission `name` only serves tools that reach the desktop session (so it means
/// nothing where no desktop can be reached): the desktop connector's, and every tool that
/// needs the `host_display` master switch.
pub fn desktop_bound(name: &str) -> bool {
    let needs = |t: &ToolSpec, name: &str| {
        t.requires.contains(&name) || t.operations.iter().any(|o| o.requires == name)
    };
    let reaches_the_session = |t: &ToolSpec| {
        t.connector == generated::desktop::NAME || needs(t, Permission::HostDisplay.name())
    };
    let mut users = generated::TOOLS
        .iter()
        .filter(|t| needs(t, name))
        .peekable();
    users.peek().is_some() && users.all(reaches_the_session)
}

impl PermissionState {
    /// State for `platform` from stored choices (missing ones count as off).
    pub fn new(platform: Platform, read_only: bool, stored: BTreeMap<&'static str, bool>) -> Self {
        Self {
            platform,
            read_only,
            stored,
            desktop: true,
            services: true,
        }
    }

    /// The same, where `services` says whether the config allows any service: without one
    /// the service tools are not listed and their permissions are masked (choices kept).
    pub fn with_services(mut self, services: bool) -> Self {
        self.services = services;
        self
    }

    /// The same, where `desktop` says whether a desktop can be reached: without one the
    /// desktop connector is not served and its permissions are masked (choices kept).
    pub fn with_desktop(mut self, desktop: bool) -> Self {
        self.desktop = desktop;
        self
    }

    /// What both `self` and `other` allow: a permission on in both, read-only if either is.
    /// (While a widening change settles, calls are decided in this.)
    pub fn meet(&self, other: &PermissionState) -> PermissionState {
        let stored = self
            .stored
            .iter()
            .map(|(name, on)| {
                (
                    *name,
                    *on && other.stored.get(name).copied().unwrap_or(false),
                )
            })
            .collect();
        PermissionState {
            platform: self.platform,
            read_only: self.read_only || other.read_only,
            stored,
            desktop: self.desktop && other.desktop,
            services: self.services && other.services,
        }
    }

    /// On as stored and possible on this platform (read-only mode not applied).
    fn available(&self, name: &str) -> bool {
        let supported = Permission::from_name(name)
            .is_some_and(|p| p.spec().platforms.contains(&self.platform));
        supported
            && (self.desktop || !desktop_bound(name))
            && (self.services || !service_bound(name))
            && self.stored.get(name).copied().unwrap_or(false)
    }

    /// In effect: available and not masked by read-only mode.
    pub fn effective(&self, name: &str) -> bool {
        let mutates = Permission::from_name(name).is_some_and(|p| p.spec().mutates);
        self.available(name) && !(self.read_only && mutates)
    }

    /// What the user chose for `name` (before platform, desktop and read-only masks).
    pub fn chosen(&self, name: &str) -> bool {
        self.stored.get(name).copied().unwrap_or(false)
    }

    /// Why `name` is not in effect although chosen, when it is not.
    pub fn masked_by(&self, name: &str) -> Option<&'static str> {
        let Some(p) = Permission::from_name(name) else {
            return Some("unknown permission");
        };
        if !p.spec().platforms.contains(&self.platform) {
            Some("not available on this platform")
        } else if !self.desktop && desktop_bound(name) {
            Some("no desktop was reached when gantry started")
        } else if !self.services && service_bound(name) {
            Some("the config's [services] allowed names no service")
        } else if self.read_only && p.spec().mutates && self.chosen(name) {
            Some("read-only mode")
        } else {
            None
        }
    }

    /// Whether read-only mode is on.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The Cedar context of a call: the permissions in effect (read-only mode masks the
    /// mutating ones here too, so a policy set without the read-only rule still cannot use
    /// them), and read-only mode as its own fact so the rule that applies it can say so.
    pub fn snapshot(&self) -> authz::Snapshot {
        authz::Snapshot {
            platform: self.platform.name(),
            read_only: self.read_only,
            permissions: generated::PERMISSIONS
                .iter()
                .map(|p| (p.name, self.effective(p.name)))
                .collect(),
        }
    }

    /// Whether `connector` runs on this platform at all.
    pub fn serves(&self, connector: &ConnectorSpec) -> bool {
        connector.platforms.contains(&self.platform)
            && (self.desktop || connector.name != generated::desktop::NAME)
    }

    /// The tools `connector` lists right now, in declaration order.
    pub fn published<'a>(
        &'a self,
        connector: &'a str,
    ) -> impl Iterator<Item = &'static ToolSpec> + 'a {
        generated::TOOLS.iter().filter(move |t| {
            t.connector == connector
                && t.platforms.contains(&self.platform)
                && t.published(|p| self.effective(p))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use generated::core::actions::*;
    use generated::desktop;

    const CORE: &str = generated::core::NAME;
    const DESKTOP: &str = generated::desktop::NAME;

    fn all_on() -> BTreeMap<&'static str, bool> {
        generated::PERMISSIONS
            .iter()
            .map(|p| (p.name, true))
            .collect()
    }

    fn names(state: &PermissionState, connector: &str) -> Vec<&'static str> {
        state.published(connector).map(|t| t.name).collect()
    }

    fn tools(actions: &[tool_api::ActionId]) -> Vec<&'static str> {
        actions.iter().map(|a| a.as_str()).collect()
    }

    #[test]
    fn the_meet_allows_only_what_both_allow() {
        let mut exec_only = BTreeMap::new();
        exec_only.insert("exec", true);
        exec_only.insert("read", false);
        let a = PermissionState::new(Platform::Linux, false, exec_only);
        let b = PermissionState::new(Platform::Linux, true, all_on());
        let m = a.meet(&b);
        assert!(!m.effective("read"));
        assert!(!m.effective("exec"), "read-only in one side masks exec");
        assert!(m.read_only());
        let m = b.meet(&PermissionState::new(Platform::Linux, false, all_on()));
        assert!(m.effective("read"));
        assert!(!m.effective("exec"));
    }

    #[test]
    fn find_replaces_the_shell_only_when_exec_is_off() {
        let mut stored = all_on();
        let on = PermissionState::new(Platform::Linux, false, stored.clone());
        assert_eq!(
            names(&on, CORE),
            tools(&[
                READ,
                VIEW_IMAGE,
                APPLY_PATCH,
                EXEC_COMMAND,
                WRITE_STDIN,
                SESSION,
                AGENTS
            ])
        );
        stored.insert(Permission::Exec.name(), false);
        let off = PermissionState::new(Platform::Linux, false, stored);
        assert_eq!(
            names(&off, CORE),
            tools(&[READ, VIEW_IMAGE, FIND, APPLY_PATCH, SESSION, AGENTS])
        );
    }

    #[test]
    fn read_only_masks_mutating_permissions_in_the_listing_and_the_facts() {
        let state = PermissionState::new(Platform::Linux, true, all_on());
        assert!(state.effective(Permission::Read.name()));
        assert!(!state.effective(Permission::Exec.name()));
        assert!(!state.effective(Permission::WriteEdit.name()));
        // exec off by read-only: find becomes the search path; apply_patch has no write left.
        assert_eq!(
            names(&state, CORE),
            tools(&[READ, VIEW_IMAGE, FIND, SESSION])
        );
        let snap = state.snapshot();
        assert!(snap.read_only);
        assert!(snap.permissions.contains(&(Permission::Exec.name(), false)));
        assert!(snap.permissions.contains(&(Permission::Read.name(), true)));
    }

    #[test]
    fn service_permissions_are_masked_while_no_service_is_allowed() {
        let none = PermissionState::new(Platform::Linux, false, all_on()).with_services(false);
        for p in [Permission::Services, Permission::ServiceControl] {
            assert!(!none.effective(p.name()), "{}", p.name());
            assert!(none.chosen(p.name()));
            assert!(
                none.masked_by(p.name())
                    .is_some_and(|w| w.contains("[services]"))
            );
        }
        assert!(none.effective(Permission::Exec.name()));
        let some = PermissionState::new(Platform::Linux, false, all_on()).with_services(true);
        assert!(some.effective(Permission::ServiceControl.name()));
    }

    #[test]
    fn desktop_permissions_are_masked_without_a_desktop_but_kept() {
        let macos = PermissionState::new(Platform::Macos, false, all_on());
        assert!(!macos.effective(Permission::Screen.name()));
        let headless = PermissionState::new(Platform::Linux, false, all_on()).with_desktop(false);
        for p in [
            Permission::HostDisplay,
            Permission::Screen,
            Permission::Control,
            Permission::ClipboardRead,
            Permission::ClipboardWrite,
        ] {
            assert!(!headless.effective(p.name()), "{}", p.name());
        }
        assert!(headless.effective(Permission::Exec.name()));
        assert!(
            headless
                .snapshot()
                .permissions
                .contains(&(Permission::Screen.name(), false))
        );
        assert!(names(&headless, DESKTOP).is_empty());
        let desktop = generated::CONNECTORS
            .iter()
            .find(|c| c.name == DESKTOP)
            .unwrap();
        assert!(!headless.serves(desktop));
        let linux = PermissionState::new(Platform::Linux, false, all_on());
        assert!(linux.serves(desktop));
        assert!(linux.effective(Permission::Screen.name()));
        let windows = PermissionState::new(Platform::Windows, false, all_on());
        assert!(windows.effective(Permission::Screen.name()));
        assert_eq!(
            names(&windows, DESKTOP),
            tools(&[desktop::actions::OBSERVE, desktop::actions::COMPUTER])
        );
    }
}
