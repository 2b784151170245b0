//! One connector as an MCP server: tools/list from the live permissions, tools/call through
//! the generated dispatch (decode → authorize → handler).

use std::sync::Arc;
use std::time::Instant;

use audit::{Attempt, Audit, Entry};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ResourceContents, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tool_api::{CallContext, ConnectorSpec, Content, Encoded, ToolError};

use crate::app::{App, ServedTool};

/// How many client `_meta` labels an audit line keeps, and how long each may be.
const MAX_LABELS: usize = 5;
const MAX_LABEL_CHARS: usize = 128;

/// What a connector server needs from the application it serves: the surface's tools, a
/// call context per call, the generated dispatch, and the audit log. [`App`] is gantry's;
/// the conformance test server implements it for its fixture surface.
pub trait Served: Send + Sync + 'static {
    /// The MCP definitions of every tool (any connector), in declaration order.
    fn tools(&self) -> &[ServedTool];
    /// Names of the tools `connector` lists right now.
    fn published(&self, connector: &str) -> Vec<&'static str>;
    /// The context a call on `connector` is decided in.
    fn call_context(&self, connector: &str) -> Result<CallContext, ToolError>;
    /// The context a call of worker agent `worker`, arriving on its own endpoint into
    /// `connector`, is decided in. Applications without workers refuse every such call.
    fn worker_context(
        &self,
        connector: &str,
        worker: &authz::WorkerId,
    ) -> Result<CallContext, ToolError> {
        let _ = (connector, worker);
        Err(ToolError::new(
            tool_api::ErrorCode::PermissionDenied,
            "this server has no worker agents",
        ))
    }
    /// Decodes, authorizes and runs tool `name`.
    fn dispatch<'a>(
        &'a self,
        connector: &'a str,
        cx: &'a CallContext,
        name: &'a str,
        arguments: rmcp::model::JsonObject,
    ) -> impl std::future::Future<Output = Result<Encoded, ToolError>> + Send + 'a;
    /// Where calls are recorded.
    fn audit(&self) -> &Audit;
    /// Whether answered calls go to the recorded sessions now.
    fn recording(&self) -> bool {
        false
    }
    /// Records an answered call in the recorded sessions.
    fn record(&self, _call: &recordings::Call<'_>) {}
    /// Secrets (connector tokens) that must never be recorded or shown.
    fn learn_secrets(&self, _secrets: Vec<String>) {}
    /// The OAuth sign-in, when a public host names its issuer. Without one, a connector whose
    /// `auth` is OAuth opens to nobody.
    fn sign_in(&self) -> Option<transport::signin::SignIn> {
        None
    }
    /// The upstream tools `connector` lists beside its own (the Gateway's), as the live
    /// permissions and policies let its caller see them.
    fn upstream_tools(
        &self,
        connector: &str,
    ) -> impl std::future::Future<Output = Vec<Tool>> + Send {
        let _ = connector;
        std::future::ready(Vec::new())
    }
    /// Whether a stdio connection to `connector` starts with its first tools only.
    fn progressive(&self, _connector: &str) -> bool {
        false
    }
}

/// The permission snapshot calls are decided in, or the refusal of every call while the
/// config or a policy file cannot be used.
fn usable_facts(live: &crate::app::Live) -> Result<&authz::Facts, ToolError> {
    live.facts.as_ref().ok_or_else(|| {
        let why = live.broken.as_deref().unwrap_or("no permission snapshot");
        ToolError::new(
            tool_api::ErrorCode::PermissionDenied,
            format!(
                "the config file or a policy file cannot be used, so every call is refused until it is fixed: {why}"
            ),
        )
    })
}

impl Served for App {
    fn tools(&self) -> &[ServedTool] {
        &self.tools
    }

    fn published(&self, connector: &str) -> Vec<&'static str> {
        self.live()
            .permissions
            .published(connector)
            .map(|t| t.name)
            .collect()
    }

    async fn upstream_tools(&self, connector: &str) -> Vec<Tool> {
        let gateway = self
            .live()
            .permissions
            .published(connector)
            .any(|t| t.upstream);
        match self.call_context(connector) {
            Ok(cx) if gateway && connector == generated::gateway::NAME => {
                self.handlers.gateway.list(&cx).await
            }
            _ => Vec::new(),
        }
    }

    fn call_context(&self, connector: &str) -> Result<CallContext, ToolError> {
        let live = self.live();
        let facts = usable_facts(&live)?;
        let gate = authz::Gate::new(live.engine.clone(), connector, facts)?
            .also_decided_by(live.settling_engine.clone());
        Ok(CallContext::new(gate)
            .with_config_file(&self.settings.config_path)
            .with_settling(live.settling.as_deref()))
    }

    fn worker_context(
        &self,
        connector: &str,
        worker: &authz::WorkerId,
    ) -> Result<CallContext, ToolError> {
        let live = self.live();
        let facts = usable_facts(&live)?;
        let gate = authz::Gate::for_worker(live.engine.clone(), connector, worker.clone(), facts)?
            .also_decided_by(live.settling_engine.clone());
        Ok(CallContext::new(gate)
            .with_config_file(&self.settings.config_path)
            .with_settling(live.settling.as_deref()))
    }

    fn dispatch<'a>(
        &'a self,
        connector: &'a str,
        cx: &'a CallContext,
        name: &'a str,
        arguments: rmcp::model::JsonObject,
    ) -> impl std::future::Future<Output = Result<Encoded, ToolError>> + Send + 'a {
        self.handlers.dispatch(connector, cx, name, arguments)
    }

    fn audit(&self) -> &Audit {
        &self.audit
    }

    fn recording(&self) -> bool {
        App::recording(self)
    }

    fn record(&self, call: &recordings::Call<'_>) {
        self.recorder.record(call);
    }

    fn learn_secrets(&self, secrets: Vec<String>) {
        self.recorder.add_secrets(secrets);
    }

    fn sign_in(&self) -> Option<transport::signin::SignIn> {
        self.sign_in.clone()
    }

    fn progressive(&self, connector: &str) -> bool {
        self.settings.progressive.iter().any(|c| c == connector)
    }
}

impl agents::WorkerHost for App {
    fn prime_context(&self) -> Result<CallContext, ToolError> {
        self.call_context(generated::core::NAME)
    }

    fn worker_service(self: Arc<Self>, worker: tool_api::WorkerId) -> transport::McpService {
        let core = generated::CONNECTORS
            .iter()
            .find(|c| c.workers)
            .unwrap_or(&generated::CONNECTORS[0]);
        transport::mcp_service(ConnectorServer::for_worker(self, core, worker))
    }
}

/// The connectors of an application as the transports serve them: a [`ConnectorServer`] per
/// request over HTTP, one per connection over stdio.
#[derive(Debug)]
pub struct Connectors<S: Served>(pub Arc<S>);

impl<S: Served> Clone for Connectors<S> {
    fn clone(&self) -> Self {
        Connectors(self.0.clone())
    }
}

impl<S: Served> transport::Handlers for Connectors<S> {
    type Handler = ConnectorServer<S>;

    fn for_requests(&self, connector: &'static ConnectorSpec) -> ConnectorServer<S> {
        ConnectorServer::new(self.0.clone(), connector)
    }

    fn for_connection(
        &self,
        connector: &'static ConnectorSpec,
        connection: String,
    ) -> ConnectorServer<S> {
        ConnectorServer::for_connection(self.0.clone(), connector, connection)
    }

    fn learn_secrets(&self, secrets: Vec<String>) {
        self.0.learn_secrets(secrets);
    }

    fn sign_in(&self) -> Option<transport::signin::SignIn> {
        self.0.sign_in()
    }

    fn sign_in_event(&self, event: transport::signin::Event<'_>) {
        audit_sign_in(self.0.audit(), &event);
    }
}

/// One audit line for a sign-in event: `tool` is `sign-in`, what happened and who asked are
/// its attempted inputs.
pub fn audit_sign_in(audit: &Audit, event: &transport::signin::Event<'_>) {
    let refused = event.outcome != "ok" && event.outcome != "waiting";
    audit.record(&mut Entry {
        ts_ms: now_ms(),
        connector: event.connector,
        tool: "sign-in",
        decision: if refused { "deny" } else { "allow" },
        decisions: Vec::new(),
        more_decisions: 0,
        input: None,
        outcome: event.outcome,
        duration_us: 0,
        labels: Vec::new(),
        attempted: vec![
            Attempt {
                input: "event",
                value: event.what.to_string(),
                command: false,
            },
            Attempt {
                input: "client",
                value: event.client.chars().take(200).collect(),
                command: false,
            },
        ],
        call: None,
        phase: None,
    });
}

/// The MCP server of one connector. Cheap to clone: the HTTP transport makes one per request.
pub struct ConnectorServer<S: Served = App> {
    app: Arc<S>,
    connector: &'static ConnectorSpec,
    /// Names the one connection this server answers (stdio), so its calls form one
    /// recorded conversation when the client gives no session label.
    connection: Option<Arc<str>>,
    /// The worker agent this server answers, on the endpoint only that worker was given.
    worker: Option<Arc<authz::WorkerId>>,
    /// Set for a connection under progressive disclosure: whether its first successful call
    /// has added the rest of the tools yet.
    disclosed: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl<S: Served> Clone for ConnectorServer<S> {
    fn clone(&self) -> Self {
        Self {
            app: self.app.clone(),
            connector: self.connector,
            connection: self.connection.clone(),
            worker: self.worker.clone(),
            disclosed: self.disclosed.clone(),
        }
    }
}

impl<S: Served> ConnectorServer<S> {
    /// The server of `connector`.
    pub fn new(app: Arc<S>, connector: &'static ConnectorSpec) -> Self {
        Self {
            app,
            connector,
            connection: None,
            worker: None,
            disclosed: None,
        }
    }

    /// The server of `connector` for worker agent `worker` alone: its calls are decided with
    /// the worker as principal. Only the worker's own endpoint makes one.
    pub fn for_worker(
        app: Arc<S>,
        connector: &'static ConnectorSpec,
        worker: authz::WorkerId,
    ) -> Self {
        Self {
            app,
            connector,
            connection: Some(format!("worker {}/{}", worker.run, worker.worker).into()),
            worker: Some(Arc::new(worker)),
            disclosed: None,
        }
    }

    /// The server of `connector` for one connection named `name`.
    /// Under progressive disclosure for `connector` (a connection lives long enough to be
    /// told of a change), it lists the connector's first tools until a call succeeds.
    pub fn for_connection(app: Arc<S>, connector: &'static ConnectorSpec, name: String) -> Self {
        let disclosed = (app.progressive(connector.name) && !connector.first_tools.is_empty())
            .then(|| Arc::new(std::sync::atomic::AtomicBool::new(false)));
        Self {
            app,
            connector,
            connection: Some(name.into()),
            worker: None,
            disclosed,
        }
    }

    /// The tools this connector lists right now (to this connection).
    pub fn listed(&self) -> Vec<Tool> {
        let published = self.app.published(self.connector.name);
        let only_first = self
            .disclosed
            .as_ref()
            .is_some_and(|d| !d.load(std::sync::atomic::Ordering::SeqCst));
        self.app
            .tools()
            .iter()
            .filter(|t| t.spec.connector == self.connector.name && !t.spec.upstream)
            .filter(|t| published.contains(&t.spec.name))
            .filter(|t| !only_first || self.connector.first_tools.contains(&t.spec.name))
            .map(|t| t.tool.clone())
            .collect()
    }

    /// Runs one call through the generated dispatch; returns what it recorded for the audit.
    async fn call(
        &self,
        name: &str,
        arguments: rmcp::model::JsonObject,
        call_id: &str,
    ) -> (Result<Encoded, ToolError>, Recorded) {
        let cx = match &self.worker {
            Some(w) => self.app.worker_context(self.connector.name, w),
            None => self.app.call_context(self.connector.name),
        };
        let cx = match cx {
            Ok(cx) => cx.with_call_id(call_id),
            Err(e) => return (Err(e), Recorded::default()),
        };
        let outcome = self
            .app
            .dispatch(self.connector.name, &cx, name, arguments)
            .await;
        let (decisions, more) = cx.decisions();
        let recorded = Recorded {
            decisions,
            more,
            input: cx.input(),
        };
        (outcome, recorded)
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// A call's id in the audit, unique among the servers sharing a log: this process and a count.
fn next_call_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    static PID: std::sync::LazyLock<u32> = std::sync::LazyLock::new(std::process::id);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", *PID)
}

/// What a call attempted, by its tool's audited inputs as given (a list as its JSON), each
/// cut like every recorded resource.
fn attempted(
    spec: Option<&'static tool_api::ToolSpec>,
    arguments: &rmcp::model::JsonObject,
) -> Vec<Attempt<'static>> {
    let audited = spec.map_or(&[][..], |s| s.audited);
    audited
        .iter()
        .filter_map(|(input, kind)| {
            let value = match arguments.get(*input)? {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Some(Attempt {
                input,
                value: value
                    .chars()
                    .take(tool_api::MAX_RECORDED_ID_CHARS)
                    .collect(),
                command: *kind == tool_api::Audited::Command,
            })
        })
        .collect()
}

/// What a call recorded for the audit.
#[derive(Debug, Default)]
struct Recorded {
    decisions: Vec<tool_api::Decided>,
    more: usize,
    input: Option<String>,
}

fn to_result(outcome: Result<Encoded, ToolError>) -> CallToolResult {
    match outcome {
        Ok(encoded) => {
            let mut content = vec![ContentBlock::text(encoded.text)];
            content.extend(encoded.extra.into_iter().map(|c| match c {
                Content::Image { data, mime } => ContentBlock::image(data, mime),
                Content::Audio { data, mime } => ContentBlock::audio(data, mime),
                Content::Resource { uri, mime, text } => {
                    ContentBlock::resource(ResourceContents::text(text, uri).with_mime_type(mime))
                }
            }));
            let mut result = if encoded.failed {
                CallToolResult::error(content)
            } else {
                CallToolResult::success(content)
            };
            result.structured_content = encoded.structured;
            result.meta = encoded.meta.map(rmcp::model::MetaObject);
            result
        }
        Err(e) => {
            let mut result = CallToolResult::error(vec![ContentBlock::text(e.to_string())]);
            result.meta = Some(rmcp::model::MetaObject(serde_json::Map::from_iter([(
                tool_api::ERROR_META_KEY.to_string(),
                serde_json::json!({ "code": e.code.as_str() }),
            )])));
            result
        }
    }
}

fn labels(cx: &RequestContext<RoleServer>, connector: &str) -> Vec<(&'static str, String)> {
    // Labels correlate audit lines with the client's conversation; they never authorize.
    const KEYS: [&str; MAX_LABELS] = [
        "openai/session",
        "openai/subject",
        "openai/userAgent",
        "openai/locale",
        crate::handlers::HUB_CALL_META,
    ];
    KEYS.iter()
        // A hub sends its call id only to a machine's Core connector; on any other it would be
        // a client's own claim.
        .filter(|k| **k != crate::handlers::HUB_CALL_META || connector == generated::core::NAME)
        .filter_map(|k| {
            cx.meta
                .get(*k)
                .and_then(|v| v.as_str())
                .map(|v| (*k, v.chars().take(MAX_LABEL_CHARS).collect()))
        })
        .collect()
}

/// Who is calling, for the log: the client's name and version as its `initialize` gave them
/// (stdio), as the request's own `_meta` gives them (MCP 2026-07-28 over HTTP), or else the
/// HTTP `User-Agent`. Shortened and free of control characters.
fn client_of(cx: &RequestContext<RoleServer>) -> String {
    let named = |i: &Implementation| format!("{} {}", i.name, i.version);
    let from_handshake = cx
        .peer
        .peer_info()
        .map(|p| p.client_info.clone())
        .filter(|i| *i != Implementation::default());
    let from_meta = || cx.meta.client_info();
    let from_agent = || {
        cx.extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get(http::header::USER_AGENT))
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let label = from_handshake
        .or_else(from_meta)
        .map(|i| named(&i))
        .or_else(from_agent)
        .unwrap_or_else(|| "unnamed client".into());
    label.chars().filter(|c| !c.is_control()).take(80).collect()
}

impl<S: Served> ServerHandler for ConnectorServer<S> {
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        let client: String = format!(
            "{} {}",
            request.client_info.name, request.client_info.version
        )
        .chars()
        .filter(|c| !c.is_control())
        .take(80)
        .collect();
        let protocol: String = request
            .protocol_version
            .to_string()
            .chars()
            .filter(|c| !c.is_control())
            .take(40)
            .collect();
        tracing::info!(connector = self.connector.name, client = %client, protocol = %protocol, "client connected");
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = if self.disclosed.is_some() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("gantry", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.connector.instructions)
    }

    /// Answers the request the stdio transport puts in place of an oversized one
    /// (`transport::stdio_lines`), under that request's id; any other unknown method is not
    /// found.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        if request.method == transport::stdio_lines::OVERSIZED_METHOD {
            return Err(ErrorData::invalid_request(
                format!(
                    "the request is larger than {} MiB, the most one stdio line may hold; nothing was done (send less, e.g. a smaller file or patch per call)",
                    transport::stdio_lines::MAX_LINE_BYTES >> 20
                ),
                None,
            ));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            request.method,
            None,
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.app
            .tools()
            .iter()
            .find(|t| t.spec.connector == self.connector.name && t.spec.name == name)
            .map(|t| t.tool.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.listed();
        if self
            .disclosed
            .as_ref()
            .is_none_or(|d| d.load(std::sync::atomic::Ordering::SeqCst))
        {
            tools.extend(self.app.upstream_tools(self.connector.name).await);
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        let name: String = request
            .name
            .chars()
            .filter(|c| !c.is_control())
            .take(64)
            .collect();
        let arguments = request.arguments.unwrap_or_default();
        let spec = self
            .app
            .tools()
            .iter()
            .find(|t| t.spec.connector == self.connector.name && t.spec.name == request.name)
            .map(|t| t.spec);
        let attempted = attempted(spec, &arguments);
        // A call that acts is on record before it acts: if it kills gantry, its intent line
        // stays (joined to no outcome).
        let acts = spec.is_none_or(|s| !s.annotations.read_only);
        let call_id = next_call_id();
        if acts {
            self.app.audit().record(&mut Entry {
                ts_ms: now_ms(),
                connector: self.connector.name,
                tool: &name,
                decision: "none",
                decisions: Vec::new(),
                more_decisions: 0,
                input: None,
                outcome: "pending",
                duration_us: 0,
                labels: Vec::new(),
                attempted: attempted.clone(),
                call: Some(call_id.clone()),
                phase: Some("intent"),
            });
        }
        let recording = self.app.recording();
        let arguments_json = if recording {
            serde_json::to_string(&arguments).unwrap_or_default()
        } else {
            String::new()
        };
        let (outcome, recorded) = self.call(&request.name, arguments, &call_id).await;
        let code = match &outcome {
            Ok(_) => "ok",
            Err(e) => e.code.as_str(),
        };
        let mut labels = labels(&cx, self.connector.name);
        if let Some(w) = &self.worker {
            // Proven by the endpoint, unlike the client's own labels.
            labels.push(("gantry/worker", format!("{}/{}", w.run, w.worker)));
        }
        let decision = audit::overall(&recorded.decisions);
        let duration = started.elapsed();
        tracing::info!(
            connector = self.connector.name,
            tool = %name,
            outcome = code,
            ms = format_args!("{:.1}", duration.as_secs_f64() * 1000.0),
            client = %client_of(&cx),
            worker = self.worker.as_ref().map(|w| format!("{}/{}", w.run, w.worker)),
            "call"
        );
        self.app.audit().record(&mut Entry {
            ts_ms: now_ms(),
            connector: self.connector.name,
            tool: &name,
            decision,
            decisions: recorded.decisions,
            more_decisions: recorded.more,
            input: recorded.input,
            outcome: code,
            duration_us: duration.as_micros(),
            labels: labels.clone(),
            attempted,
            call: Some(call_id),
            phase: None,
        });
        let code = code.to_string();
        let result = to_result(outcome);
        // Disclosure, not a gate: any tool could be called all along; the first success
        // adds the rest to the list, and the client is told to list again.
        if result.is_error != Some(true)
            && let Some(d) = &self.disclosed
            && !d.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            tracing::info!(
                connector = self.connector.name,
                "first call succeeded: every tool is listed now"
            );
            if let Err(e) = cx.peer.notify_tool_list_changed().await {
                tracing::debug!(error = %e, "the client was not told that the tools changed");
            }
        }
        if recording {
            let text = result
                .content
                .first()
                .and_then(|c| c.as_text())
                .map_or("", |t| t.text.as_str());
            let client_label = labels
                .iter()
                .find(|(k, _)| *k == "openai/session")
                .filter(|_| self.worker.is_none());
            let grouping = match (client_label, &self.connection) {
                (Some((_, label)), _) => recordings::Grouping::ClientLabel(label.clone()),
                (None, Some(c)) => recordings::Grouping::Connection(c.to_string()),
                (None, None) => recordings::Grouping::TimeGap,
            };
            self.app.record(&recordings::Call {
                ts_ms: i64::try_from(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis()),
                )
                .unwrap_or(i64::MAX),
                connector: self.connector.name,
                tool: &name,
                arguments: &arguments_json,
                result: text,
                decision,
                error: (code != "ok").then_some(code.as_str()),
                failed: result.is_error == Some(true),
                grouping,
                labels: labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                // What `session` returned is recorded but never returned again by it.
                hidden: name == generated::core::actions::SESSION.as_str(),
            });
        }
        Ok(result.into())
    }
}
