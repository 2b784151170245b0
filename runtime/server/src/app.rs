//! Everything a running server shares: settings, the policy engine, the live permissions,
//! the handlers, the audit log and the tool definitions each connector can list.

use std::sync::Arc;

use authz::Engine;
use generated::Handlers;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use tool_api::{Platform, ToolSpec};

use audit::Audit;
use config::Settings;
use config::cli::CommonArgs;
use confine::path_policy::LiveRoots;

use crate::handlers::{CoreTools, DesktopTools, FilesTools, GatewayTools, ShellTools, ZodexTools};
use crate::ops::path_policy::Roots;
use crate::permissions::PermissionState;
use crate::policy_set;

/// A tool definition ready for tools/list.
#[derive(Debug, Clone)]
pub struct ServedTool {
    /// Its declaration.
    pub spec: &'static ToolSpec,
    /// Its MCP form.
    pub tool: Tool,
}

/// The permissions in effect, and the Cedar context built from them.
#[derive(Debug)]
pub struct Live {
    /// Stored permissions and the facts that mask them.
    pub permissions: PermissionState,
    /// `permissions` as a validated Cedar context, shared by every call.
    pub facts: Option<authz::Facts>,
    /// Why the config file or a policy file cannot be used right now: every call is refused
    /// until it is fixed.
    pub broken: Option<String>,
    /// The policy set calls are decided by (the last valid one while `broken`).
    pub engine: Arc<Engine>,
    /// The roots as configured when this was built (a change rebuilds [`App::roots`]).
    roots: Vec<std::path::PathBuf>,
    /// Why the user policy files as stamped do not load (kept until one of them changes, so
    /// a broken file is never silently dropped by an unrelated reload).
    policy_problems: Vec<String>,
    /// The versions of the config file and the user policy files this was built from.
    stamp: Stamps,
}

/// What [`App::live`] watches: the config file and every user policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamps {
    config: state_dir::Stamp,
    policies: Vec<(std::path::PathBuf, state_dir::Stamp)>,
}

/// The shared state of a running server.
pub struct App {
    /// Effective settings.
    pub settings: Settings,
    /// The permissions in effect, reloaded when the config file changes.
    live: std::sync::RwLock<Arc<Live>>,
    /// The flags and environment of this run (to re-resolve the config with the same
    /// precedence when it changes).
    args: CommonArgs,
    /// Tool handlers, one set per connector.
    pub handlers:
        Handlers<CoreTools, DesktopTools, ZodexTools, FilesTools, ShellTools, GatewayTools>,
    /// The audit log.
    pub audit: Audit,
    /// Every tool's MCP definition, in declaration order.
    pub tools: Vec<ServedTool>,
    /// The approved roots in effect.
    pub roots: Arc<LiveRoots>,
    /// Live command sessions.
    pub terminal: Arc<terminal::Registry>,
    /// Recorded sessions.
    pub recorder: Arc<crate::recorder::Recorder>,
    /// Worker agents.
    pub agents: Arc<agents::Agents>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn permissions_on(live: &Live, permission: generated::Permission) -> bool {
    live.facts.is_some() && live.permissions.effective(permission.name())
}

fn schema(name: &str, text: &str) -> Result<JsonObject, String> {
    serde_json::from_str(text).map_err(|e| format!("schema of `{name}` is not a JSON object: {e}"))
}

/// Builds the MCP definitions of every tool gantry declares.
pub fn served_tools() -> Result<Vec<ServedTool>, String> {
    served_tools_of(generated::TOOLS)
}

/// Builds the MCP definitions of `specs` (any generated surface).
pub fn served_tools_of(specs: &'static [ToolSpec]) -> Result<Vec<ServedTool>, String> {
    specs
        .iter()
        .map(|spec| {
            let a = spec.annotations;
            let mut tool = Tool::new(
                spec.name,
                spec.description,
                Arc::new(schema(spec.name, spec.input_schema)?),
            )
            .with_title(spec.title)
            .with_annotations(ToolAnnotations::from_raw(
                None,
                Some(a.read_only),
                Some(a.destructive),
                Some(a.idempotent),
                Some(a.open_world),
            ));
            if let Some(out) = spec.output_schema {
                tool = tool.with_raw_output_schema(Arc::new(schema(spec.name, out)?));
            }
            Ok(ServedTool { spec, tool })
        })
        .collect()
}

/// gantry's own files, kept out of reach of its tools wherever the roots are.
fn owned_files(settings: &Settings) -> Vec<std::path::PathBuf> {
    [Some(&settings.config_path), Some(&settings.state_dir)]
        .into_iter()
        .chain([settings.policies_dir.as_ref()])
        .flatten()
        .cloned()
        .collect()
}

/// Below gantry's own files, what the tools may use: the spill files of command output.
fn usable_files(settings: &Settings) -> Vec<std::path::PathBuf> {
    vec![settings.state_dir.join("spill")]
}

/// What a confined `exec_command` adds to its description, so the model knows before it
/// tries: the one sentence that changes what the tool does.
const CONFINED_NOTE: &str =
    " Confined: commands write only below the approved roots and $TMPDIR; reads are as usual.";

fn say_commands_are_confined(tools: &mut [ServedTool]) {
    for t in tools
        .iter_mut()
        .filter(|t| t.spec.id == generated::core::actions::EXEC_COMMAND.as_str())
    {
        // The declared description says commands are not confined; here they are.
        let d = t.tool.description.clone().unwrap_or_default();
        let d = d.replace("; not confined to the approved roots.", ".");
        t.tool.description = Some(format!("{d}{CONFINED_NOTE}").into());
    }
}

/// What confinement must keep out of the roots: what gantry runs or trusts unconfined.
fn confinement_layout(
    settings: &Settings,
    exe: &std::path::Path,
) -> Vec<(&'static str, Option<std::path::PathBuf>)> {
    vec![
        ("gantry's binary", Some(exe.to_path_buf())),
        ("the config file", Some(settings.config_path.clone())),
        ("the policy directory", settings.policies_dir.clone()),
        ("the state directory", Some(settings.state_dir.clone())),
        (
            "HOME, whose login profile gantry runs to take the snapshot",
            std::env::var_os("HOME").map(std::path::PathBuf::from),
        ),
    ]
}

/// The private temp directory confined commands write to (created 0700).
fn confined_tmp(settings: &Settings) -> std::io::Result<std::path::PathBuf> {
    let tmp = settings.state_dir.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(tmp)
}

impl App {
    /// Loads policies, resolves roots, opens the state directory: everything that can fail
    /// before serving, with every problem reported.
    pub fn start(settings: Settings, args: CommonArgs) -> Result<App, Vec<String>> {
        let mut problems: Vec<String> = settings.default_root_problem().into_iter().collect();
        let engine = policy_set::load(settings.policies_dir.as_deref())
            .map_err(|e| problems.extend(e))
            .ok();
        let tools = served_tools()
            .map(|mut tools| {
                if settings.exec_confine {
                    say_commands_are_confined(&mut tools);
                }
                tools
            })
            .map_err(|e| problems.push(e))
            .ok();
        // The state directory first, so gantry's own files are placed by their real path.
        let audit = state_dir::ensure(&settings.state_dir)
            .and_then(|()| Audit::open(&settings.state_dir, settings.audit_command_lines))
            .map_err(|e| {
                problems.push(format!(
                    "state directory {}: {e}",
                    settings.state_dir.display()
                ))
            })
            .ok();
        // gantry's own files stay out of reach of its tools, wherever the roots are.
        let roots = Roots::new(&settings.roots)
            .map(|r| r.with_gantry_files(&owned_files(&settings), &usable_files(&settings)))
            .map_err(|e| problems.push(e))
            .ok();
        let (Some(engine), Some(roots), Some(tools), Some(audit)) = (engine, roots, tools, audit)
        else {
            return Err(problems);
        };
        // Say what the model can reach and where gantry keeps its own files (stderr).
        tracing::info!(
            roots = %roots.all().iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            config = %settings.config_path.display(),
            state_dir = %settings.state_dir.display(),
            "approved roots"
        );
        // Confinement is checked before anything is served: a setting the kernel cannot honour
        // stops the start instead of running commands unconfined.
        let launcher = if settings.exec_confine {
            crate::ops::confinement::probe().map_err(|e| vec![e])?;
            let exe = std::env::current_exe().map_err(|e| {
                vec![format!(
                    "[exec] confine: cannot find gantry's own binary: {e}"
                )]
            })?;
            crate::ops::confinement::check_layout(
                roots.all(),
                &confinement_layout(&settings, &exe),
            )
            .map_err(|e| vec![e])?;
            let tmp = confined_tmp(&settings)
                .map_err(|e| vec![format!("private temp directory for commands: {e}")])?;
            tracing::info!(tmp = %tmp.display(), "commands may write only below the approved roots and a private temp directory");
            crate::ops::confinement::launcher(&exe, roots.all(), &tmp)
        } else {
            Vec::new()
        };
        let configured_roots = settings.roots.clone();
        let roots = Arc::new(LiveRoots::new(roots));
        let terminal = Arc::new(terminal::Registry::new(terminal::Config {
            max_sessions: generated::core::limits::exec_command::MAX_SESSIONS,
            idle_timeout: settings.session_idle,
            spill_dir: settings.state_dir.join("spill"),
            spill_cap: generated::core::limits::exec_command::SPILL_CAP.get(),
            snapshot_dir: Some(settings.state_dir.join("shell")),
            warm_shell: settings.warm_shell,
            launcher,
            cgroup: settings.exec_cgroup,
        }));
        let desktop = crate::handlers::DesktopTools::connect(&settings);
        let permissions = PermissionState::new(
            Platform::current(),
            settings.read_only,
            settings.permissions.clone(),
        )
        .with_desktop(desktop.available());
        let facts = engine
            .facts(&permissions.snapshot())
            .map_err(|d| vec![format!("permission snapshot: {d}")])?;
        if permissions.effective(generated::Permission::Exec.name()) {
            terminal.prepare_in_background();
        }
        if permissions.read_only() {
            tracing::info!("read-only mode is on: every tool that changes state is refused");
        }
        tracing::info!("{}", terminal.process_tree_method());
        let live = Live {
            permissions,
            facts: Some(facts),
            broken: None,
            engine: Arc::new(engine),
            roots: configured_roots,
            policy_problems: Vec::new(),
            stamp: Stamps {
                config: state_dir::file_stamp(&settings.config_path),
                policies: policy_set::dir_stamp(settings.policies_dir.as_deref()),
            },
        };
        let recorder = Arc::new(crate::recorder::Recorder::open(&settings));
        let seen = Arc::new(crate::read_state::ReadState::default());
        let gateway = GatewayTools::new(settings.gateway_servers.clone());
        let shell = ShellTools::new(
            roots.clone(),
            terminal.clone(),
            settings.shell_allowed_commands.clone(),
        );
        let zodex = ZodexTools::new(
            roots.clone(),
            terminal.clone(),
            settings.zodex_workdir_context,
        );
        let agents = Arc::new(agents::Agents::new(
            settings.agents.clone(),
            terminal.clone(),
            roots.clone(),
            &settings,
        ));
        if permissions_on(&live, generated::Permission::SessionRecording) {
            recorder.import_in_background();
        }
        Ok(App {
            settings,
            live: std::sync::RwLock::new(Arc::new(live)),
            args,
            handlers: Handlers {
                core: CoreTools::new(
                    roots.clone(),
                    terminal.clone(),
                    recorder.clone(),
                    agents.clone(),
                    seen.clone(),
                ),
                desktop,
                zodex,
                files: FilesTools::new(roots.clone(), seen),
                shell,
                gateway,
            },
            audit,
            tools,
            roots,
            terminal,
            recorder,
            agents,
        })
    }

    /// The flags and environment of this run (which settings the config file cannot change
    /// while it runs).
    pub fn run_args(&self) -> &CommonArgs {
        &self.args
    }

    /// The roots as the config in effect names them (what an edit of `roots` starts from).
    pub fn live_config_roots(&self) -> Vec<std::path::PathBuf> {
        self.live().roots.clone()
    }

    /// Whether calls are recorded now (`session_recording` on), from the permissions the
    /// call was just decided with: its `call_context` refreshed them, so no second look at
    /// the config file on the call's path.
    pub fn recording(&self) -> bool {
        let current = match self.live.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        permissions_on(&current, generated::Permission::SessionRecording)
    }

    /// Ends idle command sessions every few seconds, for as long as the server runs.
    pub fn spawn_maintenance(self: &Arc<Self>) {
        let host: Arc<dyn agents::WorkerHost> = self.clone();
        self.agents.attach(Arc::downgrade(&host));
        let app = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                let Some(app) = app.upgrade() else { return };
                for id in app.terminal.reap_idle().await {
                    tracing::info!(session = id, "ended an idle command session");
                }
            }
        });
    }

    /// Ends every command session and its process tree (server shutdown).
    pub fn shutdown(&self) {
        // Recorded first: the workers' programs end with the registry, and their record says
        // they sleep rather than that they vanished.
        self.agents.shutdown();
        self.terminal.shutdown();
        self.handlers.gateway.stop();
    }

    /// The connectors this platform serves, in declaration order.
    pub fn connectors(&self) -> impl Iterator<Item = &'static tool_api::ConnectorSpec> + '_ {
        let platform = Platform::current();
        let desktop = self.handlers.desktop.available();
        generated::CONNECTORS.iter().filter(move |c| {
            c.platforms.contains(&platform) && (desktop || c.name != generated::desktop::NAME)
        })
    }

    /// The permissions and policies in effect now. Editing the config file's permissions or
    /// read-only mode, or a file of the `--policies` directory, takes effect on the next call;
    /// a config file that stops parsing (or vanishes) and a policy file that stops validating
    /// refuse every call (fail closed) until fixed. Roots from the config file are live the
    /// same way; the address needs a restart.
    pub fn live(&self) -> Arc<Live> {
        let now = Stamps {
            config: state_dir::file_stamp(&self.settings.config_path),
            policies: policy_set::dir_stamp(self.settings.policies_dir.as_deref()),
        };
        {
            let current = match self.live.read() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if current.stamp == now {
                return current.clone();
            }
        }
        let mut current = match self.live.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let (engine, policy_problems) = if now.policies == current.stamp.policies {
            (current.engine.clone(), current.policy_problems.clone())
        } else {
            match policy_set::load(self.settings.policies_dir.as_deref()) {
                Ok(e) => {
                    tracing::info!("policies reloaded");
                    (Arc::new(e), Vec::new())
                }
                Err(errors) => (current.engine.clone(), errors),
            }
        };
        let mut problems: Vec<String> = policy_problems.clone();
        // A config file that was there and is gone is broken, never fresh defaults: deleting
        // it (or an editor's unlink-then-rename) must not turn every permission back on.
        // (Resolving reads the file itself, so a file gone between the stamp and the read is
        // caught here too.)
        let had_config = self.settings.config_exists || current.stamp.config.is_some();
        let settings = match Settings::resolve(&self.args) {
            Ok(s) if !s.config_exists && had_config => Err(vec![format!(
                "{} is gone; every call is refused until it is back",
                self.settings.config_path.display()
            )]),
            resolved => resolved.map_err(|e| e.iter().map(ToString::to_string).collect()),
        };
        let mut roots = current.roots.clone();
        let (permissions, facts) = match settings {
            Ok(s) => {
                // Roots are live too: a change to `roots` in the config applies from the
                // next call; roots that cannot be served refuse every call until fixed.
                problems.extend(s.default_root_problem());
                if s.roots != current.roots {
                    match Roots::new(&s.roots) {
                        Ok(r) => {
                            let r = r.with_gantry_files(
                                &owned_files(&self.settings),
                                &usable_files(&self.settings),
                            );
                            let shown: Vec<String> =
                                r.all().iter().map(|p| p.display().to_string()).collect();
                            tracing::info!(roots = %shown.join(", "), "approved roots changed");
                            if self.settings.exec_confine {
                                // New roots must keep what confinement relies on out of
                                // reach; if not, every call is refused until fixed.
                                let exe = std::env::current_exe().unwrap_or_default();
                                match crate::ops::confinement::check_layout(
                                    r.all(),
                                    &confinement_layout(&self.settings, &exe),
                                )
                                .and_then(|()| {
                                    confined_tmp(&self.settings).map_err(|e| e.to_string())
                                }) {
                                    Ok(tmp) => self.terminal.set_launcher(
                                        crate::ops::confinement::launcher(&exe, r.all(), &tmp),
                                    ),
                                    Err(e) => problems.push(e),
                                }
                            }
                            self.roots.set(r);
                            roots.clone_from(&s.roots);
                        }
                        Err(e) => problems.push(e),
                    }
                }
                if s.exec_confine != self.settings.exec_confine
                    || s.warm_shell != self.settings.warm_shell
                    || s.exec_cgroup != self.settings.exec_cgroup
                {
                    problems.push(
                        "[exec] changed in the config file: restart gantry for it to apply".into(),
                    );
                }
                if s.desktop_yield_to_user != self.settings.desktop_yield_to_user {
                    tracing::warn!(
                        "[desktop] changed in the config file: restart gantry for it to apply"
                    );
                }
                // What may run or be reached changed: refused until it applies (a narrowed
                // allow-list or a removed server must not keep working meanwhile).
                if s.shell_allowed_commands != self.settings.shell_allowed_commands {
                    problems.push(
                        "[shell] changed in the config file: restart gantry for it to apply".into(),
                    );
                }
                if s.gateway_servers != self.settings.gateway_servers {
                    problems.push(
                        "[gateway] changed in the config file: restart gantry for it to apply"
                            .into(),
                    );
                }
                if s.zodex_workdir_context != self.settings.zodex_workdir_context {
                    tracing::warn!(
                        "[zodex] changed in the config file: restart gantry for it to apply"
                    );
                }
                if s.session_redact != self.settings.session_redact
                    || s.session_all_directories != self.settings.session_all_directories
                    || s.session_sources != self.settings.session_sources
                {
                    // Not a reason to refuse calls: the old settings keep applying until then.
                    tracing::warn!(
                        "[session] changed in the config file: restart gantry for it to apply"
                    );
                }
                let permissions =
                    PermissionState::new(Platform::current(), s.read_only, s.permissions.clone())
                        .with_desktop(self.handlers.desktop.available());
                let facts = engine
                    .facts(&permissions.snapshot())
                    .map_err(|d| problems.push(d.to_string()))
                    .ok();
                (permissions, facts)
            }
            Err(errors) => {
                problems.extend(errors);
                let none = PermissionState::new(Platform::current(), true, Default::default())
                    .with_desktop(self.handlers.desktop.available());
                (none, None)
            }
        };
        let fresh = if problems.is_empty() {
            tracing::info!(config = %self.settings.config_path.display(), "permissions reloaded");
            Live {
                permissions,
                facts,
                broken: None,
                engine,
                roots,
                policy_problems,
                stamp: now,
            }
        } else {
            let why = problems.join("; ");
            tracing::error!(problem = %why, "the config or a policy file cannot be used; refusing every call until it is fixed");
            Live {
                permissions,
                facts: None,
                broken: Some(why),
                engine,
                roots,
                policy_problems,
                stamp: now,
            }
        };
        *current = Arc::new(fresh);
        current.clone()
    }
}
