//! What gantry reloads while serving (the config file, the `--policies` files, the roots they
//! name) and the one rule it follows: **a change that narrows what the model may do applies at
//! the next call; a change that widens it applies only once the files have been read whole,
//! validate, and stayed unchanged for [`SETTLE`].** Until then a call is decided in the meet
//! of the last settled state and the new one: a permission on in both, read-only if either
//! is, the roots both name, and permitted by both policy sets. A file that vanished, emptied
//! or changed kind is broken (every call refused, naming it), never "the defaults" or "no
//! rules": the config file stays broken until it is back; a policy file removed or emptied
//! on purpose applies once it has stayed so for [`SETTLE`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use authz::Engine;
use config::Settings;
use tool_api::Platform;

use config::cli::CommonArgs;
use confine::path_policy::LiveRoots;

use crate::ops::path_policy::Roots;
use crate::permissions::PermissionState;
use crate::policy_set;

/// How long a widening change must stay unchanged on disk before it applies. An editor's
/// save (truncate and write, write and rename, unlink and rename) takes milliseconds; a
/// half-written file never lasts this long.
pub const SETTLE: Duration = Duration::from_secs(1);

/// The versions of the config file and of every user policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamps {
    config: state_dir::Stamp,
    policies: Vec<(PathBuf, state_dir::Stamp)>,
}

impl Stamps {
    /// The versions of the files as they were read.
    pub(crate) fn read(
        config: state_dir::Stamp,
        policies: Vec<(PathBuf, state_dir::Stamp)>,
    ) -> Stamps {
        Stamps { config, policies }
    }

    /// The files as they are now.
    pub(crate) fn now(settings: &Settings) -> Stamps {
        Stamps {
            config: state_dir::file_stamp(&settings.config_path),
            policies: policy_set::dir_stamp(settings.policies_dir.as_deref()),
        }
    }
}

/// One reading of the config file and the policy files.
#[derive(Debug)]
pub(crate) struct Reading {
    /// The permissions it sets.
    pub(crate) permissions: PermissionState,
    /// The policy set it loads (the previous one when its files do not load).
    pub(crate) engine: Arc<Engine>,
    /// The roots it names (as written).
    pub(crate) roots: Vec<PathBuf>,
    /// Why it cannot be used at all: every call is refused until the files change.
    pub(crate) problems: Vec<String>,
    /// Why it cannot be used until it has settled (a policy file removed or emptied).
    pub(crate) unsettled: Vec<String>,
    /// Why its policy files do not load (kept while they stay as they are).
    pub(crate) policy_problems: Vec<String>,
    /// Whether its config file sets anything.
    pub(crate) has_settings: bool,
    /// The versions it was read from.
    pub(crate) stamp: Stamps,
}

/// The state calls are decided in now.
#[derive(Debug)]
pub struct Live {
    /// The permissions in effect (the meet of the settled and the new while settling).
    pub permissions: PermissionState,
    /// `permissions` as a validated Cedar context, shared by every call; `None` while broken.
    pub facts: Option<authz::Facts>,
    /// Why the config file or a policy file cannot be used right now: every call is refused
    /// until it is fixed.
    pub broken: Option<String>,
    /// The policy set calls are decided by (the settled one).
    pub engine: Arc<Engine>,
    /// While a policy change settles, its policy set, which must permit a call too.
    pub settling_engine: Option<Arc<Engine>>,
    /// What of the latest change is held back, and until when (said in denials).
    pub settling: Option<String>,
    /// The roots in effect, as written.
    roots: Vec<PathBuf>,
    /// The last reading that applied whole.
    settled: Arc<Reading>,
    /// The latest reading when it differs from `settled`, and when its files were first seen
    /// as they are.
    latest: Option<(Arc<Reading>, Instant)>,
}

impl Live {
    /// The state at start: the first reading, settled.
    pub(crate) fn first(reading: Reading, facts: authz::Facts) -> Live {
        Live {
            permissions: reading.permissions.clone(),
            facts: Some(facts),
            broken: None,
            engine: reading.engine.clone(),
            settling_engine: None,
            settling: None,
            roots: reading.roots.clone(),
            settled: Arc::new(reading),
            latest: None,
        }
    }

    /// The roots as the config file names them now (what an edit of `roots` starts from).
    pub fn written_roots(&self) -> &[PathBuf] {
        &self.newest().roots
    }

    fn newest(&self) -> &Arc<Reading> {
        self.latest.as_ref().map_or(&self.settled, |(r, _)| r)
    }

    fn stamp(&self) -> &Stamps {
        &self.newest().stamp
    }

    /// Whether the latest reading has now stayed unchanged long enough to apply.
    fn due(&self) -> bool {
        self.latest
            .as_ref()
            .is_some_and(|(_, since)| since.elapsed() >= SETTLE)
    }
}

/// The roots both lists name, in `a`'s order.
fn common_roots(a: &[PathBuf], b: &[PathBuf]) -> Vec<PathBuf> {
    a.iter().filter(|r| b.contains(r)).cloned().collect()
}

/// What reloads the files and keeps the state calls are decided in.
#[derive(Debug)]
pub(crate) struct Reloader {
    live: std::sync::RwLock<Arc<Live>>,
    /// The settings at start (what the restart-only settings are compared with).
    settings: Settings,
    /// The flags and environment of this run, to resolve the config with the same
    /// precedence each time.
    args: CommonArgs,
    /// Whether a desktop was reached at start (its permissions are masked without one).
    desktop: bool,
    terminal: Arc<terminal::Registry>,
    roots: Arc<LiveRoots>,
}

impl Live {
    /// Whether `permission` is in effect now (never while broken).
    pub fn on(&self, permission: generated::Permission) -> bool {
        self.facts.is_some() && self.permissions.effective(permission.name())
    }
}

impl Reloader {
    /// Starts from `first`, the state at start.
    pub(crate) fn new(
        first: Live,
        settings: Settings,
        args: CommonArgs,
        desktop: bool,
        terminal: Arc<terminal::Registry>,
        roots: Arc<LiveRoots>,
    ) -> Reloader {
        Reloader {
            live: std::sync::RwLock::new(Arc::new(first)),
            settings,
            args,
            desktop,
            terminal,
            roots,
        }
    }

    /// The flags and environment of this run.
    pub(crate) fn args(&self) -> &CommonArgs {
        &self.args
    }

    /// The state as last refreshed, without looking at the files.
    pub(crate) fn current(&self) -> Arc<Live> {
        match self.live.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The permissions and policies calls are decided in now, after looking at the files
    /// (see the module documentation for the rule).
    pub(crate) fn live(&self) -> Arc<Live> {
        self.refresh(false)
    }

    /// The same, right after the control page rewrote the config file: gantry wrote it whole
    /// and atomically, so it applies now instead of after [`SETTLE`] (unless a policy change
    /// of someone else's is settling beside it).
    pub(crate) fn adopt_config(&self) -> Arc<Live> {
        self.refresh(true)
    }

    fn refresh(&self, adopt: bool) -> Arc<Live> {
        let now = Stamps::now(&self.settings);
        {
            let current = match self.live.read() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if *current.stamp() == now && !current.due() && !(adopt && current.latest.is_some()) {
                return current.clone();
            }
        }
        let mut current = match self.live.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let (latest, since) = match &current.latest {
            Some((r, since)) if r.stamp == now => (r.clone(), *since),
            None if current.settled.stamp == now => (current.settled.clone(), Instant::now()),
            _ => (Arc::new(self.read_files(&current, now)), Instant::now()),
        };
        let adopt = adopt && latest.stamp.policies == current.settled.stamp.policies;
        let fresh = self.compose(&current, latest, since, adopt);
        if !fresh.on(generated::Permission::Exec) {
            // No shell is kept ready for commands that may not run.
            self.terminal.end_warm();
        }
        *current = Arc::new(fresh);
        current.clone()
    }

    /// Reads the config file and (when they changed) the policy files.
    fn read_files(&self, current: &Live, now: Stamps) -> Reading {
        let settled = &current.settled;
        let newest = current.newest();
        // The versions this reading stands for are those of the files as read: content read
        // just after a change must never be filed under the version from before it (a file
        // flipped back to that version would then keep the other content).
        let mut read_stamp = now.clone();
        let (engine, policy_problems) = if now.policies == settled.stamp.policies {
            (settled.engine.clone(), settled.policy_problems.clone())
        } else if now.policies == newest.stamp.policies {
            (newest.engine.clone(), newest.policy_problems.clone())
        } else {
            match policy_set::load_read(self.settings.policies_dir.as_deref()) {
                Ok((e, stamps)) => {
                    tracing::info!("policy files read");
                    if self.settings.policies_dir.is_some() {
                        read_stamp.policies = stamps;
                    }
                    (Arc::new(e), Vec::new())
                }
                Err(errors) => (settled.engine.clone(), errors),
            }
        };
        let mut problems = policy_problems.clone();
        // A policy file removed or emptied since the settled state: broken until it has
        // stayed so (an editor's unlink-then-rename is back within milliseconds).
        let mut unsettled = Vec::new();
        for (path, stamp) in &settled.stamp.policies {
            match now.policies.iter().find(|(p, _)| p == path) {
                None => unsettled.push(format!("policy file {} was removed", path.display())),
                Some((_, Some(now))) if now.len == 0 && stamp.is_some_and(|was| was.len > 0) => {
                    unsettled.push(format!("policy file {} was emptied", path.display()));
                }
                _ => {}
            }
        }
        let had_config = self.settings.config_exists || settled.stamp.config.is_some();
        let settings = match Settings::resolve(&self.args) {
            // A config file that was there and is gone is broken, never fresh defaults:
            // deleting it (or an editor's unlink-then-rename) must not turn every permission
            // back on.
            Ok(s) if !s.config_exists && had_config => Err(vec![format!(
                "{} is gone; every call is refused until it is back",
                self.settings.config_path.display()
            )]),
            // Nor does one that was emptied (truncated for an in-place save, or cleared).
            Ok(s) if !s.config_has_settings && settled.has_settings => Err(vec![format!(
                "{} sets nothing any more (empty or only comments); a running server never falls back to the defaults, so every call is refused until it has its settings again (or gantry is restarted)",
                self.settings.config_path.display()
            )]),
            resolved => resolved.map_err(|e| e.iter().map(ToString::to_string).collect()),
        };
        let none = || {
            PermissionState::new(Platform::current(), true, Default::default())
                .with_desktop(self.desktop)
        };
        let (permissions, roots, has_settings) = match settings {
            Ok(s) => {
                read_stamp.config = s.config_stamp;
                problems.extend(s.default_root_problem());
                if s.roots != settled.roots
                    && let Err(e) = Roots::new(&s.roots)
                {
                    problems.push(e);
                }
                problems.extend(self.restart_only_changes(&s));
                // [services] applies only after a restart: the start's says what is served.
                let permissions =
                    PermissionState::new(Platform::current(), s.read_only, s.permissions.clone())
                        .with_desktop(self.desktop)
                        .with_services(!self.settings.services.allowed.is_empty());
                (permissions, s.roots, s.config_has_settings)
            }
            Err(errors) => {
                problems.extend(errors);
                (none(), settled.roots.clone(), settled.has_settings)
            }
        };
        Reading {
            permissions,
            engine,
            roots,
            problems,
            unsettled,
            policy_problems,
            has_settings,
            stamp: read_stamp,
        }
    }

    /// Settings read only at start that the file changed: those that decide what may run or
    /// be reached refuse every call until gantry restarts; the rest are only said.
    fn restart_only_changes(&self, s: &Settings) -> Vec<String> {
        let mut problems = Vec::new();
        if s.exec_confine != self.settings.exec_confine
            || s.warm_shell != self.settings.warm_shell
            || s.exec_cgroup != self.settings.exec_cgroup
        {
            problems
                .push("[exec] changed in the config file: restart gantry for it to apply".into());
        }
        if s.client_launch_files != self.settings.client_launch_files {
            problems.push(
                "client_launch_files changed in the config file: restart gantry for it to apply"
                    .into(),
            );
        }
        if s.desktop_yield_to_user != self.settings.desktop_yield_to_user {
            tracing::warn!("[desktop] changed in the config file: restart gantry for it to apply");
        }
        // What may run or be reached changed: refused until it applies (a narrowed
        // allow-list or a removed server must not keep working meanwhile).
        if s.shell_allowed_commands != self.settings.shell_allowed_commands
            || s.shell_runs_files != self.settings.shell_runs_files
            || s.shell_display_programs != self.settings.shell_display_programs
        {
            problems
                .push("[shell] changed in the config file: restart gantry for it to apply".into());
        }
        if s.apps != self.settings.apps {
            problems
                .push("[apps] changed in the config file: restart gantry for it to apply".into());
        }
        if s.services != self.settings.services {
            problems.push(
                "[services] changed in the config file: restart gantry for it to apply".into(),
            );
        }
        if s.browser != self.settings.browser {
            problems.push(
                "[browser] changed in the config file: restart gantry for it to apply".into(),
            );
        }
        if s.gateway_servers != self.settings.gateway_servers {
            problems.push(
                "[gateway] changed in the config file: restart gantry for it to apply".into(),
            );
        }
        if s.zodex_workdir_context != self.settings.zodex_workdir_context {
            tracing::warn!("[zodex] changed in the config file: restart gantry for it to apply");
        }
        if s.session_redact != self.settings.session_redact
            || s.session_all_directories != self.settings.session_all_directories
            || s.session_sources != self.settings.session_sources
        {
            // Not a reason to refuse calls: the old settings keep applying until then.
            tracing::warn!("[session] changed in the config file: restart gantry for it to apply");
        }
        problems
    }

    /// The state calls are decided in, from the settled reading and the latest one.
    fn compose(&self, current: &Live, latest: Arc<Reading>, since: Instant, adopt: bool) -> Live {
        let settled = current.settled.clone();
        if !latest.problems.is_empty() {
            let why = latest.problems.join("; ");
            if current.broken.as_deref() != Some(why.as_str()) {
                tracing::error!(problem = %why, "the config or a policy file cannot be used; refusing every call until it is fixed");
            }
            return self.broken(current, settled, latest, since, why);
        }
        let due = adopt || since.elapsed() >= SETTLE || Arc::ptr_eq(&latest, &settled);
        if due {
            return match self.state(current, &latest, &latest.permissions, None, &latest.roots) {
                Ok(mut live) => {
                    if !Arc::ptr_eq(&latest, &settled) {
                        tracing::info!(config = %self.settings.config_path.display(), "permissions reloaded");
                    }
                    live.settled = latest;
                    live
                }
                Err(why) => self.broken(current, settled, latest, since, why),
            };
        }
        let until = format!(
            "it applies once the files have stayed unchanged for {} s",
            SETTLE.as_secs_f32()
        );
        if !latest.unsettled.is_empty() {
            let why = format!(
                "{}; every call is refused until {until}",
                latest.unsettled.join("; ")
            );
            return self.broken(current, settled, latest, since, why);
        }
        // Settling: what both allow.
        let permissions = settled.permissions.meet(&latest.permissions);
        let roots = common_roots(&settled.roots, &latest.roots);
        if roots.is_empty() {
            let why = format!(
                "the approved roots are being replaced; every call is refused until {until}"
            );
            return self.broken(current, settled, latest, since, why);
        }
        let settling_engine =
            (!Arc::ptr_eq(&settled.engine, &latest.engine)).then(|| latest.engine.clone());
        match self.state(current, &settled, &permissions, settling_engine, &roots) {
            Ok(mut live) => {
                live.settling = Some(format!(
                    "the config or a policy file changed {} ms ago: what it turns on applies once it has stayed unchanged for {} s; what it turns off applies now",
                    since.elapsed().as_millis(),
                    SETTLE.as_secs_f32()
                ));
                live.settled = settled;
                live.latest = Some((latest, since));
                live
            }
            Err(why) => self.broken(current, settled, latest, since, why),
        }
    }

    /// A usable state: `permissions` decided by `base`'s engine (and `settling_engine`), on
    /// `roots`. Applies the roots when they changed.
    fn state(
        &self,
        current: &Live,
        base: &Arc<Reading>,
        permissions: &PermissionState,
        settling_engine: Option<Arc<Engine>>,
        roots: &[PathBuf],
    ) -> Result<Live, String> {
        let facts = base
            .engine
            .facts(&permissions.snapshot())
            .map_err(|d| d.to_string())?;
        if roots != current.roots.as_slice() {
            self.apply_roots(roots)?;
        }
        Ok(Live {
            permissions: permissions.clone(),
            facts: Some(facts),
            broken: None,
            engine: base.engine.clone(),
            settling_engine,
            settling: None,
            roots: roots.to_vec(),
            settled: base.clone(),
            latest: None,
        })
    }

    fn broken(
        &self,
        current: &Live,
        settled: Arc<Reading>,
        latest: Arc<Reading>,
        since: Instant,
        why: String,
    ) -> Live {
        let none = PermissionState::new(Platform::current(), true, Default::default())
            .with_desktop(self.desktop);
        let latest = (!Arc::ptr_eq(&latest, &settled)).then_some((latest, since));
        Live {
            permissions: none,
            facts: None,
            broken: Some(why),
            engine: settled.engine.clone(),
            settling_engine: None,
            settling: None,
            roots: current.roots.clone(),
            settled,
            latest,
        }
    }

    /// Makes `configured` the roots in effect (and the confined launcher's, when commands are
    /// confined); an error leaves the old ones.
    fn apply_roots(&self, configured: &[PathBuf]) -> Result<(), String> {
        let r = Roots::new(configured)?
            .with_gantry_files(
                &crate::layout::owned_files(&self.settings),
                &crate::layout::usable_files(&self.settings),
            )
            .with_client_launch_files(&self.settings.client_launch_files);
        if self.settings.exec_confine {
            // New roots must keep what confinement relies on out of reach.
            let exe = std::env::current_exe().unwrap_or_default();
            crate::ops::confinement::check_layout(
                r.all(),
                &crate::layout::confinement_layout(&self.settings, &exe),
            )?;
            let tmp = crate::layout::confined_tmp(&self.settings).map_err(|e| e.to_string())?;
            self.terminal
                .set_launcher(crate::ops::confinement::launcher(&exe, r.all(), &tmp));
        }
        let shown: Vec<String> = r.all().iter().map(|p| p.display().to_string()).collect();
        tracing::info!(roots = %shown.join(", "), "approved roots changed");
        self.roots.set(r);
        Ok(())
    }
}
