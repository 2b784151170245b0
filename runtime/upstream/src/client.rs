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
            scrub_initial_environment(var);
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

/// Overwrites the value of `var` where the process's environment strings live. Removing a
/// variable only drops its pointer: the string stays in the block the kernel set up at exec,
/// which `/proc/<pid>/environ` shows to anything running as the user (every command gantry
/// runs). Zeroing it there leaves no copy but the one in [`TOKENS`].
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn scrub_initial_environment(var: &str) {
    unsafe extern "C" {
        static mut environ: *mut *mut libc::c_char;
    }
    let prefix = format!("{var}=");
    // SAFETY: called from `main` before any other thread exists (see `take_tokens`), so
    // nothing reads or changes the environment meanwhile; each entry is a NUL-terminated
    // string that stays valid until the variable is removed, and only its value's bytes
    // (before the terminating NUL) are overwritten.
    unsafe {
        let mut entry = environ;
        if entry.is_null() {
            return;
        }
        while !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry).to_bytes();
            if text.starts_with(prefix.as_bytes()) {
                let value_len = text.len() - prefix.len();
                std::ptr::write_bytes((*entry).add(prefix.len()), 0, value_len);
            }
            entry = entry.add(1);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn scrub_initial_environment(_var: &str) {}

/// The token named by `var`: taken at start-up, else (a server built without `main`) read now.
fn token(var: &str) -> Option<String> {
    TOKENS
        .get()
        .and_then(|t| t.get(var).cloned())
        .or_else(|| std::env::var(var).ok())
}

/// How long the gateway waits on an upstream, and how much it reads of one answer.
#[derive(Debug, Clone, Copy)]
pub struct Waits {
    /// The longest message read from a stdio server: a longer one fails its call as soon as
    /// the limit is crossed.
    pub max_message: usize,
    /// For it to start and answer `initialize`.
    pub start: Duration,
    /// For its tools/list.
    pub list: Duration,
    /// For one tools/call.
    pub call: Duration,
    /// After a failed start, how long further needs fail at once rather than start it
    /// again; doubled after each failure in a row up to `last_retry`.
    pub first_retry: Duration,
    /// The longest such wait.
    pub last_retry: Duration,
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

/// Starts a stdio server inside a group of the host's that ends with its connection (the
/// command cgroups, where they can be used): the argv prefix to start it through, and what
/// ends the group when dropped. So what the server detaches (`setsid`) ends with it too.
pub type Contain = std::sync::Arc<
    dyn Fn() -> Option<(
            Vec<std::ffi::OsString>,
            Box<dyn std::any::Any + Send + Sync>,
        )> + Send
        + Sync,
>;

/// A connected upstream.
struct Connected {
    client: RunningService<RoleClient, ()>,
    _group: Group,
    /// A stdio server's process (ended when dropped, its group with `_group`).
    _child: Option<tokio::process::Child>,
    /// Its cgroup, ended when dropped.
    _contained: Option<Box<dyn std::any::Any + Send + Sync>>,
}

/// The last bytes a stdio server wrote to its stderr: what it said before it failed.
const STDERR_TAIL: usize = 4096;

/// One configured upstream server and its connection, made on first need.
pub struct Upstream {
    /// Its name in the config.
    pub name: String,
    config: UpstreamConfig,
    waits: Waits,
    contain: Option<Contain>,
    connected: tokio::sync::Mutex<Option<(Connected, u64)>>,
    generation: std::sync::atomic::AtomicU64,
    /// When the last start failed, why, and how many failed in a row.
    failed: std::sync::Mutex<Option<(std::time::Instant, ToolError, u32)>>,
    /// The end of what a stdio server wrote to stderr, when it is kept ([`Upstream::keeping_stderr`]).
    stderr: Option<std::sync::Arc<std::sync::Mutex<Vec<u8>>>>,
    /// What reads that stderr, until the server closes it.
    stderr_reader: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Every line from a stdio server must be JSON ([`Upstream::strict_json`]).
    strict: bool,
    /// Run before each start of a stdio server.
    before_start: Option<Box<dyn Fn() + Send + Sync>>,
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
        _child: None,
        _contained: None,
    })
}

/// A call gantry's policies allowed: the upstream tool and its arguments.
#[derive(Debug)]
pub struct UpstreamCall {
    /// The tool's name as its server knows it.
    pub tool: String,
    /// Its arguments, passed through.
    pub arguments: rmcp::model::JsonObject,
    /// The request's `_meta`, if any.
    pub meta: Option<rmcp::model::JsonObject>,
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
    // rmcp names the transport by its Rust type, which tells the user nothing.
    static TRANSPORT: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"Transport \[[^\]]*\] error: ").ok());
    let said = match TRANSPORT.as_ref() {
        Some(re) => re.replace_all(&said, "").into_owned(),
        None => said,
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
        rmcp::service::ServiceError::McpError(data)
            if data.code.0 == transport::stdio_lines::OVERSIZED_CODE =>
        {
            ToolError::new(
                ErrorCode::OutputLimit,
                format!("upstream `{server}`: {}", data.message),
            )
        }
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
    pub fn new(
        name: String,
        config: UpstreamConfig,
        waits: Waits,
        contain: Option<Contain>,
    ) -> Upstream {
        Upstream {
            name,
            config,
            waits,
            contain,
            connected: tokio::sync::Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(0),
            failed: std::sync::Mutex::new(None),
            stderr: None,
            stderr_reader: std::sync::Mutex::new(None),
            strict: false,
            before_start: None,
        }
    }

    /// A stdio server's first line that is not JSON breaks its connection, rather than being
    /// dropped and the next one read (for a server whose stdout others can write to).
    pub fn strict_json(mut self) -> Upstream {
        self.strict = true;
        self
    }

    /// Runs `hook` before each start of the stdio server (a fresh log for what starts it).
    pub fn before_start(mut self, hook: impl Fn() + Send + Sync + 'static) -> Upstream {
        self.before_start = Some(Box::new(hook));
        self
    }

    /// Keeps the last few KB a stdio server writes to stderr (otherwise dropped), for
    /// [`Upstream::said`].
    pub fn keeping_stderr(mut self) -> Upstream {
        self.stderr = Some(std::sync::Arc::default());
        self
    }

    /// The end of what the stdio server last started wrote to stderr (lossy UTF-8), when it
    /// is kept.
    pub fn said(&self) -> String {
        self.stderr.as_ref().map_or_else(String::new, |tail| {
            let tail = tail
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            String::from_utf8_lossy(&tail).into_owned()
        })
    }

    /// [`Upstream::said`], once the server has closed its stderr (or `within` has passed): a
    /// server that just failed may still be writing why.
    pub async fn said_settled(&self, within: Duration) -> String {
        let reader = self
            .stderr_reader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(mut reader) = reader
            && tokio::time::timeout(within, &mut reader).await.is_err()
        {
            *self
                .stderr_reader
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reader);
        }
        self.said()
    }

    /// Whether a start failed last, and has not been tried again since.
    pub fn failing(&self) -> bool {
        self.failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    async fn connect(&self) -> Result<Connected, ToolError> {
        let start = async {
            match (&self.config.command, &self.config.url) {
                (Some(command), _) => {
                    if let Some(hook) = &self.before_start {
                        hook();
                    }
                    let contained = self.contain.as_ref().and_then(|c| c());
                    let mut cmd = match &contained {
                        Some((prefix, _)) => {
                            let mut c = tokio::process::Command::new(&prefix[0]);
                            c.args(&prefix[1..]).arg(command);
                            c
                        }
                        None => tokio::process::Command::new(command),
                    };
                    cmd.args(&self.config.args)
                        .envs(&self.config.env)
                        .kill_on_drop(true);
                    if let Some(dir) = &self.config.cwd {
                        cmd.current_dir(dir);
                    }
                    #[cfg(unix)]
                    cmd.process_group(0);
                    cmd.stdin(std::process::Stdio::piped())
                        .stdout(std::process::Stdio::piped())
                        .stderr(if self.stderr.is_some() {
                            std::process::Stdio::piped()
                        } else {
                            std::process::Stdio::null()
                        });
                    let mut child = cmd
                        .spawn()
                        .map_err(|e| failed(&self.name, "could not start", e))?;
                    if let (Some(tail), Some(err)) = (&self.stderr, child.stderr.take()) {
                        *self
                            .stderr_reader
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Some(keep_tail(tail.clone(), err));
                    }
                    // From here on, every way out ends the group.
                    let group = Group(child.id());
                    let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take())
                    else {
                        return Err(failed(&self.name, "could not start", "no pipes"));
                    };
                    // Its answers are read a bounded line at a time: one over the limit fails
                    // its call at once instead of being read whole.
                    let output = if self.strict {
                        transport::stdio_lines::BoundedLines::strict_responses(
                            output,
                            self.waits.max_message,
                        )
                    } else {
                        transport::stdio_lines::BoundedLines::responses(
                            output,
                            self.waits.max_message,
                        )
                    };
                    let mut connected = handshake(&self.name, (output, input), group).await?;
                    connected._child = Some(child);
                    connected._contained = contained.map(|(_, guard)| guard);
                    Ok(connected)
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
            .map(|(at, e, n)| (*at, e.clone(), *n));
        let in_a_row = recent.as_ref().map_or(0, |(_, _, n)| *n);
        if let Some((at, e, n)) = recent {
            let wait = self.retry_after(n);
            if at.elapsed() < wait {
                return Err(ToolError::new(
                    e.code,
                    format!(
                        "{} (tried again {} after that failure)",
                        e.message,
                        humantime::format_duration(wait)
                    ),
                ));
            }
        }
        let n = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(tail) = &self.stderr {
            tail.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clear();
        }
        let outcome = self.connect().await;
        let mut failed = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let connected = match outcome {
            Ok(c) => {
                *failed = None;
                c
            }
            Err(e) => {
                *failed = Some((std::time::Instant::now(), e.clone(), in_a_row + 1));
                return Err(e);
            }
        };
        drop(failed);
        let peer = connected.client.peer().clone();
        *slot = Some((connected, n));
        Ok((peer, n))
    }

    /// How long needs fail at once after `n` failed starts in a row.
    fn retry_after(&self, n: u32) -> Duration {
        let doubled = self
            .waits
            .first_retry
            .saturating_mul(1u32 << n.saturating_sub(1).min(16));
        doubled.min(self.waits.last_retry)
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

    /// The version the server gave in its `initialize` answer; starts it if need be.
    pub async fn server_version(&self) -> Result<String, ToolError> {
        let (peer, _) = self.peer().await?;
        Ok(peer
            .peer_info()
            .and_then(|i| i.server_info.as_ref().map(|s| s.version.clone()))
            .unwrap_or_default())
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
        let UpstreamCall {
            tool,
            arguments,
            meta,
        } = call.into_inner();
        let (peer, n) = self.peer().await?;
        let mut request = CallToolRequestParams::new(tool).with_arguments(arguments);
        request.meta = meta.map(|m| rmcp::model::RequestMetaObject(rmcp::model::MetaObject(m)));
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

/// Reads `stream` to its end, keeping its last [`STDERR_TAIL`] bytes in `tail`.
fn keep_tail(
    tail: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    mut stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncReadExt as _;
    tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut kept = tail
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            kept.extend_from_slice(&buf[..n]);
            let over = kept.len().saturating_sub(STDERR_TAIL);
            kept.drain(..over);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_start_is_tried_again_later_each_time_up_to_the_last_wait() {
        let second = Duration::from_secs(1);
        let up = Upstream::new(
            "x".into(),
            UpstreamConfig {
                command: Some("x".into()),
                args: Vec::new(),
                env: BTreeMap::new(),
                cwd: None,
                url: None,
                bearer_token_env: None,
                timeout: None,
            },
            Waits {
                max_message: 1,
                start: second,
                list: second,
                call: second,
                first_retry: second,
                last_retry: second * 30,
            },
            None,
        );
        let waits: Vec<u64> = (1..=7).map(|n| up.retry_after(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(up.retry_after(u32::MAX).as_secs(), 30);
    }
}
