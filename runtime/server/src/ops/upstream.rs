//! Upstream MCP servers: the config's `[gateway.servers]`, reached as an MCP client over
//! stdio (a process gantry starts, in a process group of its own, ended with its group) or
//! Streamable HTTP. Nothing starts until the Gateway connector first needs a server; a
//! server that dies is started again on the next need; every wait is bounded.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{RoleClient, RunningService, ServiceExt as _};
use serde::Deserialize;
use tool_api::{Authorized, ErrorCode, ToolError};

/// One `[gateway.servers.NAME]` entry: a `command` (with `args`, `env`, `cwd`) or a `url`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The program to start (stdio).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables added to its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<String>,
    /// A Streamable HTTP endpoint.
    pub url: Option<String>,
    /// The environment variable (of gantry's own environment) holding the bearer token for
    /// `url`, so no secret is written in the config.
    pub bearer_token_env: Option<String>,
    /// Waits shorter than the Gateway's limits, for a server that should answer fast
    /// (`"5 s"`); each wait is the shorter of the two.
    pub timeout: Option<String>,
}

impl UpstreamConfig {
    /// `timeout` as a duration; `Err` says why it is not one.
    pub fn timeout(&self) -> Result<Option<Duration>, String> {
        self.timeout
            .as_deref()
            .map(|t| humantime::parse_duration(t).map_err(|e| format!("timeout `{t}`: {e}")))
            .transpose()
    }
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

/// A connected upstream.
struct Connected {
    client: RunningService<RoleClient, ()>,
    /// The process group of a stdio server, ended with the connection. (Windows has no
    /// groups here: the server's own process is ended, its children are not.)
    #[cfg_attr(not(unix), allow(dead_code))]
    group: Option<u32>,
}

impl Drop for Connected {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pgid) = self
            .group
            .and_then(|g| rustix::process::Pid::from_raw(g as i32))
        {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

/// One configured upstream server and its connection, made on first need.
pub struct Upstream {
    /// Its name in the config.
    pub name: String,
    config: UpstreamConfig,
    waits: Waits,
    connected: tokio::sync::Mutex<Option<(Connected, u64)>>,
    generation: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
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
    let message: String = format!("upstream `{server}`: {what}: {e}")
        .chars()
        .take(500)
        .collect();
    ToolError::new(ErrorCode::OsError, message)
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
                    let group = transport.id();
                    let client =
                        ().serve(transport)
                            .await
                            .map_err(|e| failed(&self.name, "no MCP handshake", e))?;
                    Ok(Connected { client, group })
                }
                (None, Some(url)) => {
                    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                    let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                    if let Some(var) = &self.config.bearer_token_env {
                        let token = std::env::var(var).map_err(|_| {
                            failed(&self.name, "no bearer token", format!("${var} is not set"))
                        })?;
                        config = config.auth_header(token);
                    }
                    let transport =
                        rmcp::transport::StreamableHttpClientTransport::from_config(config);
                    let client =
                        ().serve(transport)
                            .await
                            .map_err(|e| failed(&self.name, "no MCP handshake", e))?;
                    Ok(Connected {
                        client,
                        group: None,
                    })
                }
                (None, None) => Err(failed(&self.name, "not usable", "neither command nor url")),
            }
        };
        tokio::time::timeout(self.waits.start, start)
            .await
            .map_err(|_| timed_out(&self.name, "start and answer", self.waits.start))?
    }

    /// A handle on the connection, made now if there is none (or the last one ended), and
    /// the connection's number (to drop exactly it if it fails).
    async fn peer(&self) -> Result<(rmcp::Peer<RoleClient>, u64), ToolError> {
        let mut slot = self.connected.lock().await;
        if slot.as_ref().is_some_and(|(c, _)| c.client.is_closed()) {
            *slot = None;
        }
        if let Some((c, n)) = slot.as_ref() {
            return Ok((c.client.peer().clone(), *n));
        }
        let n = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let connected = self.connect().await?;
        let peer = connected.client.peer().clone();
        *slot = Some((connected, n));
        Ok((peer, n))
    }

    /// After a failed or hung exchange the connection is not trusted again: the next need
    /// starts anew.
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
            Ok(r) => r.map_err(|e| failed(&self.name, "tools/list failed", e)),
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
            Ok(r) => r.map_err(|e| failed(&self.name, "the call failed", e)),
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
