//! Upstream MCP servers: the config's `[gateway.servers]`, reached as an MCP client over
//! stdio (a process gantry starts, in a process group of its own, ended with its group) or
//! Streamable HTTP. Nothing starts until the Gateway connector first needs a server; a
//! server that dies is started again on the next need; every wait is bounded.

use std::collections::BTreeMap;
use std::time::Duration;

use config::upstream::UpstreamConfig;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{RoleClient, RunningService, ServiceExt as _};
use tool_api::{Authorized, ErrorCode, ToolError};

/// Upstream bearer tokens, by the variable they came from, taken out of gantry's environment
/// at start-up ([`take_tokens`]) so no command, worker or upstream gantry starts inherits
/// them.
static TOKENS: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();

/// Moves the configured upstreams' bearer tokens out of the environment into memory. Call
/// once at start-up, before any other thread exists.
pub fn take_tokens(servers: &[(String, UpstreamConfig)]) {
    let mut taken = BTreeMap::new();
    for var in servers
        .iter()
        .filter_map(|(_, s)| s.bearer_token_env.as_deref())
    {
        if let Ok(value) = std::env::var(var) {
            taken.insert(var.to_string(), value);
            #[allow(unsafe_code)]
            // SAFETY: called from `main` before the runtime or any other thread starts, so no
            // one reads the environment meanwhile.
            unsafe {
                std::env::remove_var(var);
            }
        }
    }
    let _ = TOKENS.set(taken);
}

/// The token named by `var`: taken at start-up, else (a server built without `main`) read now.
fn token(var: &str) -> Option<String> {
    TOKENS
        .get()
        .and_then(|t| t.get(var).cloned())
        .or_else(|| std::env::var(var).ok())
}

/// How long the gateway waits on an upstream.
#[derive(Debug, Clone, Copy)]
pub struct Waits {
    /// For it to start and answer `initialize`.
    pub start: Duration,
    /// For its tools/list.
    pub list: Duration,
    /// For one tools/call.
    pub call: Duration,
}

/// The process group of a stdio server, ended when this is dropped: with its connection, and
/// on every way out of a start that failed or ran out of time. (Windows has no groups here:
/// the server's own process is ended, its children are not.)
struct Group(#[cfg_attr(not(unix), allow(dead_code))] Option<u32>);

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self
            .0
            .and_then(|g| i32::try_from(g).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

/// A connected upstream.
struct Connected {
    client: RunningService<RoleClient, ()>,
    _group: Group,
}

/// After a start fails, further needs fail at once for this long rather than start it again.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// One configured upstream server and its connection, made on first need.
pub struct Upstream {
    /// Its name in the config.
    pub name: String,
    config: UpstreamConfig,
    waits: Waits,
    connected: tokio::sync::Mutex<Option<(Connected, u64)>>,
    generation: std::sync::atomic::AtomicU64,
    /// When the last start failed, and why.
    failed: std::sync::Mutex<Option<(std::time::Instant, ToolError)>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The MCP handshake with server `name` over `transport`; `group` (its process group, if
/// gantry started it) ends with the connection, or at once when the handshake fails.
async fn handshake<T, E, A>(name: &str, transport: T, group: Group) -> Result<Connected, ToolError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = ().serve(transport).await.map_err(|e| failed(name, "no MCP handshake", e))?;
    Ok(Connected {
        client,
        _group: group,
    })
}

/// A call gantry's policies allowed: the upstream tool and its arguments.
#[derive(Debug)]
pub struct UpstreamCall {
    /// The tool's name as its server knows it.
    pub tool: String,
    /// Its arguments, passed through.
    pub arguments: rmcp::model::JsonObject,
}

fn failed(server: &str, what: &str, e: impl std::fmt::Display) -> ToolError {
    // A URL can be the secret (a token in its path or query): errors never repeat one.
    static URL: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s)]*").ok());
    let said = e.to_string();
    let said = match URL.as_ref() {
        Some(re) => re.replace_all(&said, "<its url>").into_owned(),
        None => "(details withheld)".to_string(),
    };
    let message: String = format!("upstream `{server}`: {what}: {said}")
        .chars()
        .take(500)
        .collect();
    ToolError::new(ErrorCode::OsError, message)
}

/// A failed exchange: the upstream's own refusal (a JSON-RPC error on a sound connection),
/// or a failure of the connection.
fn exchange_failed(server: &str, what: &str, e: rmcp::service::ServiceError) -> ToolError {
    match e {
        rmcp::service::ServiceError::McpError(data) => {
            let message: String = format!("upstream `{server}` refused: {}", data.message)
                .chars()
                .take(500)
                .collect();
            ToolError::invalid_input(message)
        }
        other => failed(server, what, other),
    }
}

fn timed_out(server: &str, what: &str, after: Duration) -> ToolError {
    ToolError::new(
        ErrorCode::Timeout,
        format!(
            "upstream `{server}` did not {what} within {}",
            humantime::format_duration(after)
        ),
    )
}

impl Upstream {
    /// The server `name` as `config` describes it; nothing is started.
    pub fn new(name: String, config: UpstreamConfig, waits: Waits) -> Upstream {
        Upstream {
            name,
            config,
            waits,
            connected: tokio::sync::Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(0),
            failed: std::sync::Mutex::new(None),
        }
    }

    async fn connect(&self) -> Result<Connected, ToolError> {
        let start = async {
            match (&self.config.command, &self.config.url) {
                (Some(command), _) => {
                    let mut cmd = tokio::process::Command::new(command);
                    cmd.args(&self.config.args)
                        .envs(&self.config.env)
                        .kill_on_drop(true);
                    if let Some(dir) = &self.config.cwd {
                        cmd.current_dir(dir);
                    }
                    #[cfg(unix)]
                    cmd.process_group(0);
                    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .map_err(|e| failed(&self.name, "could not start", e))?;
                    // From here on, every way out ends the group.
                    let group = Group(transport.id());
                    handshake(&self.name, transport, group).await
                }
                (None, Some(url)) => {
                    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                    let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                    if let Some(var) = &self.config.bearer_token_env {
                        let token = token(var).ok_or_else(|| {
                            failed(&self.name, "no bearer token", format!("${var} is not set"))
                        })?;
                        config = config.auth_header(token);
                    }
                    let transport =
                        rmcp::transport::StreamableHttpClientTransport::from_config(config);
                    handshake(&self.name, transport, Group(None)).await
                }
                (None, None) => Err(failed(&self.name, "not usable", "neither command nor url")),
            }
        };
        tokio::time::timeout(self.waits.start, start)
            .await
            .map_err(|_| timed_out(&self.name, "start and answer", self.waits.start))?
    }

    /// A handle on the connection, made now if there is none (or the last one ended), and
    /// the connection's number (to drop exactly it if it fails). A start that failed less
    /// than [`RETRY_AFTER`] ago fails again at once.
    async fn peer(&self) -> Result<(rmcp::Peer<RoleClient>, u64), ToolError> {
        let mut slot = tokio::time::timeout(self.waits.start, self.connected.lock())
            .await
            .map_err(|_| {
                timed_out(
                    &self.name,
                    "finish starting for another call",
                    self.waits.start,
                )
            })?;
        if slot.as_ref().is_some_and(|(c, _)| c.client.is_closed()) {
            *slot = None;
        }
        if let Some((c, n)) = slot.as_ref() {
            return Ok((c.client.peer().clone(), *n));
        }
        let recent = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .filter(|(at, _)| at.elapsed() < RETRY_AFTER)
            .map(|(_, e)| e.clone());
        if let Some(e) = recent {
            return Err(ToolError::new(
                e.code,
                format!(
                    "{} (it is started again {} s after a failure)",
                    e.message,
                    RETRY_AFTER.as_secs()
                ),
            ));
        }
        let n = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let connected = match self.connect().await {
            Ok(c) => c,
            Err(e) => {
                *self
                    .failed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((std::time::Instant::now(), e.clone()));
                return Err(e);
            }
        };
        let peer = connected.client.peer().clone();
        *slot = Some((connected, n));
        Ok((peer, n))
    }

    /// After a connection failed or hung, it is not trusted again: the next need starts
    /// anew. (An upstream's refusal of one call is not a failure of the connection.)
    async fn distrust(&self, n: u64, outcome: &Result<impl Sized, ToolError>) {
        if matches!(outcome, Err(e) if matches!(e.code, ErrorCode::OsError | ErrorCode::Timeout)) {
            let mut slot = self.connected.lock().await;
            if slot.as_ref().is_some_and(|(_, m)| *m == n) {
                *slot = None;
            }
        }
    }

    /// The server's tools.
    pub async fn tools(&self) -> Result<Vec<Tool>, ToolError> {
        let (peer, n) = self.peer().await?;
        let outcome = match tokio::time::timeout(self.waits.list, peer.list_all_tools()).await {
            Err(_) => Err(timed_out(&self.name, "list its tools", self.waits.list)),
            Ok(r) => r.map_err(|e| exchange_failed(&self.name, "tools/list failed", e)),
        };
        self.distrust(n, &outcome).await;
        outcome
    }

    /// Calls a tool the policies allowed.
    pub async fn call(&self, call: Authorized<UpstreamCall>) -> Result<CallToolResult, ToolError> {
        let UpstreamCall { tool, arguments } = call.into_inner();
        let (peer, n) = self.peer().await?;
        let request = CallToolRequestParams::new(tool).with_arguments(arguments);
        let outcome = match tokio::time::timeout(self.waits.call, peer.call_tool(request)).await {
            Err(_) => Err(timed_out(&self.name, "answer the call", self.waits.call)),
            Ok(r) => r.map_err(|e| exchange_failed(&self.name, "the call failed", e)),
        };
        self.distrust(n, &outcome).await;
        outcome
    }

    /// Ends the connection now if no call holds it (server shutdown, from sync code).
    pub fn stop_now(&self) {
        if let Ok(mut slot) = self.connected.try_lock() {
            slot.take();
        }
    }

    /// Ends the connection and a stdio server's process group.
    pub async fn stop(&self) {
        self.connected.lock().await.take();
    }
}
