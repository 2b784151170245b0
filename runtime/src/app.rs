//! Everything a running server shares: settings, the policy engine, the live permissions,
//! the handlers, the audit log and the tool definitions each connector can list.

use std::sync::Arc;

use authz::Engine;
use generated::Handlers;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use tool_api::{Platform, ToolSpec};

use crate::audit::Audit;
use crate::config::Settings;
use crate::handlers::{CoreTools, DesktopTools};
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

/// The shared state of a running server.
pub struct App {
    /// Effective settings.
    pub settings: Settings,
    /// The validated policy set.
    pub engine: Arc<Engine>,
    /// Stored permissions and the facts that mask them.
    pub permissions: PermissionState,
    /// `permissions` as a validated Cedar context, shared by every call.
    pub facts: authz::Facts,
    /// Tool handlers, one set per connector.
    pub handlers: Handlers<CoreTools, DesktopTools>,
    /// The audit log.
    pub audit: Audit,
    /// Every tool's MCP definition, in declaration order.
    pub tools: Vec<ServedTool>,
    /// The approved roots.
    pub roots: Arc<Roots>,
    /// Live command sessions.
    pub terminal: Arc<terminal::Registry>,
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

impl App {
    /// Loads policies, resolves roots, opens the state directory: everything that can fail
    /// before serving, with every problem reported.
    pub fn start(settings: Settings) -> Result<App, Vec<String>> {
        let mut problems = Vec::new();
        let engine = policy_set::load(settings.policies_dir.as_deref())
            .map_err(|e| problems.extend(e))
            .ok();
        let roots = Roots::new(&settings.roots)
            .map_err(|e| problems.push(e))
            .ok();
        let tools = served_tools().map_err(|e| problems.push(e)).ok();
        let audit = crate::state_dir::ensure(&settings.state_dir)
            .and_then(|()| Audit::open(&settings.state_dir))
            .map_err(|e| {
                problems.push(format!(
                    "state directory {}: {e}",
                    settings.state_dir.display()
                ))
            })
            .ok();
        let (Some(engine), Some(roots), Some(tools), Some(audit)) = (engine, roots, tools, audit)
        else {
            return Err(problems);
        };
        let roots = Arc::new(roots);
        let terminal = Arc::new(terminal::Registry::new(terminal::Config {
            max_sessions: usize::try_from(generated::core::limits::exec_command::MAX_SESSIONS)
                .unwrap_or(64),
            idle_timeout: settings.session_idle,
            spill_dir: settings.state_dir.join("spill"),
            spill_cap: generated::core::limits::exec_command::SPILL_CAP_BYTES,
        }));
        let permissions = PermissionState::new(
            Platform::current(),
            settings.read_only,
            settings.permissions.clone(),
        );
        let facts = engine
            .facts(&permissions.snapshot())
            .map_err(|d| vec![format!("permission snapshot: {d}")])?;
        Ok(App {
            settings,
            engine: Arc::new(engine),
            permissions,
            facts,
            handlers: Handlers {
                core: CoreTools::new(roots.clone(), terminal.clone()),
                desktop: DesktopTools,
            },
            audit,
            tools,
            roots,
            terminal,
        })
    }

    /// Ends idle command sessions every few seconds, for as long as the server runs.
    pub fn spawn_maintenance(self: &Arc<Self>) {
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
        self.terminal.shutdown();
    }

    /// The connectors this platform serves, in declaration order.
    pub fn connectors(&self) -> impl Iterator<Item = &'static tool_api::ConnectorSpec> + '_ {
        generated::CONNECTORS
            .iter()
            .filter(|c| self.permissions.serves(c))
    }
}
