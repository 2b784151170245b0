//! Everything a running server shares: settings, the policy engine, the live permissions,
//! the handlers, the audit log and the tool definitions each connector can list.

use std::sync::Arc;

use generated::Handlers;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use tool_api::{Platform, ToolSpec};

use audit::Audit;
use config::Settings;
use config::cli::CommonArgs;
use confine::path_policy::LiveRoots;

use crate::handlers::{
    CoreTools, DesktopTools, FilesTools, GatewayTools, HostsTools, ShellTools, ZodexTools,
};
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

pub use crate::reload::{Live, SETTLE};

/// How often the config and policy files are looked at between calls.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// The shared state of a running server.
pub struct App {
    /// Effective settings.
    pub settings: Settings,
    /// The permissions in effect, reloaded when the config or a policy file changes.
    reload: crate::reload::Reloader,
    /// Tool handlers, one set per connector.
    pub handlers: Handlers<
        CoreTools,
        DesktopTools,
        ZodexTools,
        FilesTools,
        ShellTools,
        GatewayTools,
        HostsTools,
    >,
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
    /// The OAuth sign-in of the connectors that use it (a public host is set).
    pub sign_in: Option<transport::signin::SignIn>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
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

impl App {
    /// Loads policies, resolves roots, opens the state directory: everything that can fail
    /// before serving, with every problem reported.
    pub fn start(settings: Settings, args: CommonArgs) -> Result<App, Vec<String>> {
        let mut problems: Vec<String> = settings.default_root_problem().into_iter().collect();
        let (engine, policy_stamps) = match policy_set::load_read(settings.policies_dir.as_deref())
        {
            Ok((engine, stamps)) => (Some(engine), stamps),
            Err(e) => {
                problems.extend(e);
                (None, Vec::new())
            }
        };
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
            .map(|r| {
                r.with_gantry_files(
                    &crate::layout::owned_files(&settings),
                    &crate::layout::usable_files(&settings),
                )
                .with_client_launch_files(&settings.client_launch_files)
            })
            .map_err(|e| problems.push(e))
            .ok();
        // Every problem stops the start, not only the ones that left a part missing: a root
        // too wide to default to (`/`, the home directory) loads fine and must still refuse.
        let (Some(engine), Some(roots), Some(tools), Some(audit), true) =
            (engine, roots, tools, audit, problems.is_empty())
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
                &crate::layout::confinement_layout(&settings, &exe),
            )
            .map_err(|e| vec![e])?;
            let tmp = crate::layout::confined_tmp(&settings)
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
        .with_desktop(desktop.available())
        .with_services(!settings.services.allowed.is_empty());
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
        let live = Live::first(
            crate::reload::Reading {
                permissions,
                engine: Arc::new(engine),
                roots: configured_roots,
                problems: Vec::new(),
                unsettled: Vec::new(),
                policy_problems: Vec::new(),
                has_settings: settings.config_has_settings,
                // The versions read, so a change during the start is seen at the first call.
                stamp: crate::reload::Stamps::read(
                    settings.config_stamp,
                    settings
                        .policies_dir
                        .as_ref()
                        .map_or_else(Vec::new, |_| policy_stamps),
                ),
            },
            facts,
        );
        let recorder = Arc::new(crate::recorder::Recorder::open(&settings));
        let seen = Arc::new(crate::read_state::ReadState::default());
        let gateway = GatewayTools::new(settings.gateway_servers.clone(), &terminal);
        let hosts = HostsTools::new(settings.machines.clone(), &settings.state_dir, &terminal);
        let shell = ShellTools::new(roots.clone(), terminal.clone(), desktop.clone(), &settings);
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
        if live.on(generated::Permission::SessionRecording) {
            recorder.import_in_background();
        }
        // Opened whenever a public host names an issuer, so grants stay listable and
        // revocable even while every connector is back on its URL secret.
        let sign_in = match settings.issuer() {
            None => None,
            Some(issuer) => {
                match oauth::Auth::open(&settings.state_dir.join(oauth::AUTH_DB)) {
                    Ok(store) => match transport::signin::SignIn::new(
                        Arc::new(store),
                        issuer,
                        settings.public_host.as_deref().unwrap_or_default(),
                        config::urls::is_loopback_name(&settings.host),
                    ) {
                        Ok(sign_in) => Some(sign_in),
                        Err(e) => return Err(vec![format!("cannot start the sign-in: {e}")]),
                    },
                    Err(e) => {
                        // A connector that signs in with OAuth would open to nobody; say
                        // why at start instead.
                        return Err(vec![format!("cannot open the sign-in store: {e}")]);
                    }
                }
            }
        };
        let reload = crate::reload::Reloader::new(
            live,
            settings.clone(),
            args,
            desktop.available(),
            terminal.clone(),
            roots.clone(),
        );
        Ok(App {
            settings,
            reload,
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
                hosts,
            },
            audit,
            tools,
            roots,
            terminal,
            recorder,
            agents,
            sign_in,
        })
    }

    /// The flags and environment of this run (which settings the config file cannot change
    /// while it runs).
    pub fn run_args(&self) -> &CommonArgs {
        self.reload.args()
    }

    /// The permissions and policies calls are decided in now (see [`crate::reload`]).
    pub fn live(&self) -> Arc<Live> {
        self.reload.live()
    }

    /// The same, right after the control page rewrote the config file, which then applies
    /// at once (see [`crate::reload::Reloader::adopt_config`]).
    pub fn adopt_config(&self) -> Arc<Live> {
        self.reload.adopt_config()
    }

    /// The roots as the config in effect names them (what an edit of `roots` starts from).
    pub fn live_config_roots(&self) -> Vec<std::path::PathBuf> {
        self.live().written_roots().to_vec()
    }

    /// Whether calls are recorded now (`session_recording` on), from the permissions the
    /// call was just decided with: its `call_context` refreshed them, so no second look at
    /// the config file on the call's path.
    pub fn recording(&self) -> bool {
        self.reload
            .current()
            .on(generated::Permission::SessionRecording)
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
        // The files are looked at between calls too, so a change applies (a settled widening,
        // the warm shell ended when `exec` is switched off) without waiting for a call.
        let app = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(WATCH_EVERY);
            loop {
                tick.tick().await;
                let Some(app) = app.upgrade() else { return };
                // Checked on every tick, not only when a file changed: a command allowed
                // before the change may finish after it and start a warm shell again.
                if !app.live().on(generated::Permission::Exec) {
                    app.terminal.end_warm();
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
        self.handlers.shell.stop();
        self.handlers.hosts.stop();
    }

    /// The connectors this platform serves, in declaration order.
    pub fn connectors(&self) -> impl Iterator<Item = &'static tool_api::ConnectorSpec> + '_ {
        let platform = Platform::current();
        let desktop = self.handlers.desktop.available();
        // Hosts only when the config names a machine, the gateway only when it names an
        // upstream (a change to either needs a restart): no endpoint for nothing.
        let hosts = self.handlers.hosts.any();
        let gateway = !self.settings.gateway_servers.is_empty();
        generated::CONNECTORS.iter().filter(move |c| {
            c.platforms.contains(&platform)
                && (desktop || c.name != generated::desktop::NAME)
                && (hosts || c.name != generated::hosts::NAME)
                && (gateway || c.name != generated::gateway::NAME)
        })
    }

    /// This platform's connectors that are not served, each with why.
    pub fn not_served(&self) -> Vec<(&'static str, String)> {
        let platform = Platform::current();
        let served: Vec<&str> = self.connectors().map(|c| c.name).collect();
        generated::CONNECTORS
            .iter()
            .filter(|c| c.platforms.contains(&platform) && !served.contains(&c.name))
            .map(|c| {
                let why = match c.name {
                    generated::desktop::NAME => self
                        .handlers
                        .desktop
                        .off_because()
                        .unwrap_or("no desktop was reached")
                        .to_string(),
                    generated::hosts::NAME => {
                        "no machine in the config; `gantry hosts add NAME user@host` adds one"
                            .to_string()
                    }
                    generated::gateway::NAME => {
                        "no upstream server in the config's [gateway.servers]".to_string()
                    }
                    _ => "not served here".to_string(),
                };
                (c.name, why)
            })
            .collect()
    }
}
