//! The HTTP boundary: stateless Streamable HTTP, one endpoint per connector, and nothing else.
//!
//! - `/<token>/mcp`, or `/mcp` with `Authorization: Bearer <token>`: the connector that token
//!   belongs to. Tokens are compared in constant time; a wrong or missing one gets a bare 404,
//!   like every path that is not an endpoint, so nothing hints at what exists.
//! - `/healthz`: `ok`, for exactly the `Host` values MCP answers (so a tunnel check that
//!   passes means MCP passes too).
//! - A `Host` outside the allowed names ([`crate::hosts`]) is refused (403) on every path,
//!   which stops DNS rebinding; the log says which flag admits it. A request carrying an
//!   `Origin` that is neither configured nor the server's own loopback origin is refused (403):
//!   browsers cannot drive the server from another site's page. ChatGPT calls from OpenAI's
//!   servers, not from the page, so its requests carry no `Origin`.
//! - Bounded: headers must arrive within 10 s, a request must finish within 90 s (every tool
//!   yields within 30 s), bodies above 4 MiB get 413, at most 256 requests run at once (the rest
//!   wait) and at most 1024 connections that have proven a token are open.
//! - Connections that have not yet sent a request with a valid token live in a separate, small
//!   pool: 1024 of them, 128 per client address; when either is full, the oldest one that has
//!   had two seconds to send its request is dropped to admit the new one. Idle sockets therefore
//!   cannot hold the door shut: a real client, which sends its request at once, gets in even
//!   while someone keeps reconnecting, and a burst of real clients (all within their grace)
//!   is let in whole, up to 4096; past that the oldest goes whatever its age.
//!   More than one `Host` header is refused with 400 (RFC 9112).
//! - Request bodies in flight share 64 MiB; a request waits for room (up to 10 s, then 503),
//!   counted from its `Content-Length` (or as the largest body when it has none).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use config::{AuthMode, Settings};
use state_dir::LiveTokens;

use crate::signin::SignIn;

use crate::service::Handlers;

pub use crate::service::MAX_BODY_BYTES;
use crate::service::stateless;
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a request may take, answer included (every tool yields well within it).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
const MAX_IN_FLIGHT: usize = 256;
/// Request bytes all requests in flight may hold together (a body is also held parsed, so
/// the memory is a small multiple). A request without a length counts as the largest body.
pub const BODY_BUDGET_BYTES: usize = 64 << 20;
const MAX_CONNECTIONS: usize = 1024;
/// Connections that have not yet sent a request with a valid token, in all and per address.
const MAX_UNPROVEN: usize = 1024;
const MAX_UNPROVEN_PER_ADDRESS: usize = 128;
/// How long a new connection has to send a request with a valid token before it may be
/// dropped to make room (a real client sends its request at once).
const UNPROVEN_GRACE: Duration = Duration::from_secs(2);
/// New connections let in at once while every unproven one is within its grace.
const MAX_UNPROVEN_BURST: usize = 4096;

/// One connection that has not proven a token yet.
#[derive(Debug)]
struct Waiting {
    id: u64,
    ip: IpAddr,
    since: std::time::Instant,
    drop: CancellationToken,
}

/// The connections that have not proven a token yet, oldest first, and the next number.
type UnprovenQueue = (u64, std::collections::VecDeque<Waiting>);

/// The connections that have not proven a token yet.
#[derive(Debug, Default)]
struct Unproven {
    queue: std::sync::Mutex<UnprovenQueue>,
}

impl Unproven {
    fn lock(&self) -> std::sync::MutexGuard<'_, UnprovenQueue> {
        match self.queue.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Admits a new connection from `ip`. Past a cap (per address, or in all) the oldest
    /// connection that has had [`UNPROVEN_GRACE`] to send its request is dropped to make room;
    /// a burst of new connections (all still within their grace) is let in up to
    /// [`MAX_UNPROVEN_BURST`], beyond which the oldest is dropped whatever its age. Returns its
    /// number and the token that fires when it is dropped.
    fn admit(&self, ip: IpAddr) -> (u64, CancellationToken) {
        let mut guard = self.lock();
        let (next, queue) = &mut *guard;
        let now = std::time::Instant::now();
        let overdue = |w: &Waiting| now.duration_since(w.since) >= UNPROVEN_GRACE;
        if queue.iter().filter(|w| w.ip == ip).count() >= MAX_UNPROVEN_PER_ADDRESS
            && let Some(i) = queue.iter().position(|w| w.ip == ip && overdue(w))
            && let Some(old) = queue.remove(i)
        {
            old.drop.cancel();
        }
        while queue.len() >= MAX_UNPROVEN {
            match queue.iter().position(overdue).and_then(|i| queue.remove(i)) {
                Some(old) => old.drop.cancel(),
                None => break,
            }
        }
        if queue.len() >= MAX_UNPROVEN_BURST {
            // A flood faster than the grace: the oldest goes whatever its age. A real client
            // has sent its request long before thousands of others arrive after it.
            if let Some(old) = queue.pop_front() {
                old.drop.cancel();
            }
        }
        *next += 1;
        let id = *next;
        let drop = CancellationToken::new();
        queue.push_back(Waiting {
            id,
            ip,
            since: now,
            drop: drop.clone(),
        });
        (id, drop)
    }

    /// Takes a connection out of the pool (it proved a token, or it closed).
    fn leave(&self, id: u64) {
        let mut guard = self.lock();
        guard.1.retain(|w| w.id != id);
    }
}

/// One accepted connection, as its requests see it.
#[derive(Debug)]
struct Connection {
    id: u64,
    unproven: Arc<Unproven>,
    /// Its place among the proven connections, once it has one.
    slot: std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    proven: Arc<Semaphore>,
}

impl Connection {
    /// Moves the connection to the proven pool; false when that pool is full.
    fn prove(&self) -> bool {
        let mut slot = match self.slot.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if slot.is_some() {
            return true;
        }
        let Ok(permit) = self.proven.clone().try_acquire_owned() else {
            return false;
        };
        *slot = Some(permit);
        self.unproven.leave(self.id);
        true
    }
}

type Endpoint<H> = StreamableHttpService<H, NeverSessionManager>;

/// What the HTTP boundary needs to know.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Listen address.
    pub host: String,
    /// Listen port (0 = any).
    pub port: u16,
    /// Where the connector tokens live.
    pub state_dir: std::path::PathBuf,
    /// Extra accepted Host header values.
    pub allowed_hosts: Vec<String>,
    /// Accepted browser origins.
    pub allowed_origins: Vec<String>,
    /// The tunnel's public authority, when one was given.
    pub public_host: Option<String>,
    /// How each connector is opened (URL secret, OAuth, both); one not listed is opened by
    /// its URL secret.
    pub auth: Vec<(&'static str, AuthMode)>,
}

impl HttpOptions {
    /// How `connector` is opened.
    pub fn mode_of(&self, connector: &str) -> AuthMode {
        mode_in(&self.auth, connector)
    }
}

fn mode_in(auth: &[(&'static str, AuthMode)], connector: &str) -> AuthMode {
    auth.iter()
        .find(|(c, _)| *c == connector)
        .map_or(AuthMode::UrlSecret, |(_, m)| *m)
}

impl From<&Settings> for HttpOptions {
    fn from(s: &Settings) -> Self {
        HttpOptions {
            host: s.host.clone(),
            port: s.port,
            state_dir: s.state_dir.clone(),
            allowed_hosts: s.allowed_hosts.clone(),
            allowed_origins: s.allowed_origins.clone(),
            public_host: s.public_host.clone(),
            auth: s.auth_modes(),
        }
    }
}

/// Warns once a minute per refused name and at most a few times a second in all, so a flood
/// of refused requests can neither fill the log nor hide the one refusal the user is after.
#[derive(Debug, Default)]
struct Throttle(std::sync::Mutex<std::collections::VecDeque<(String, std::time::Instant)>>);

/// Names the throttle remembers.
const THROTTLE_NAMES: usize = 32;
/// Warnings in any one second.
const THROTTLE_PER_SECOND: usize = 4;

impl Throttle {
    fn ready_for(&self, name: &str) -> bool {
        let now = std::time::Instant::now();
        let mut seen = match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        seen.retain(|(_, at)| now.duration_since(*at) < Duration::from_secs(60));
        let last_second = seen
            .iter()
            .filter(|(_, at)| now.duration_since(*at) < Duration::from_secs(1))
            .count();
        if last_second >= THROTTLE_PER_SECOND || seen.iter().any(|(n, _)| n == name) {
            return false;
        }
        if seen.len() >= THROTTLE_NAMES {
            seen.pop_front();
        }
        seen.push_back((name.to_string(), now));
        true
    }
}

/// The Host value of a request, shortened and stripped of control characters for a log line.
fn shown_host(request: &Request) -> String {
    request
        .headers()
        .get(http::header::HOST)
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .or_else(|| request.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect()
}

/// The connector endpoints, found by token.
struct Endpoints<C: Handlers> {
    hosts: config::hosts::HostRules,
    refused: Throttle,
    tokens: LiveTokens,
    services: Vec<(&'static str, Endpoint<C::Handler>)>,
    allowed_origins: Vec<String>,
    in_flight: Semaphore,
    /// [`BODY_BUDGET_BYTES`] in KiB.
    body_kib: Semaphore,
    /// How each connector is opened.
    auth: Vec<(&'static str, AuthMode)>,
    /// The OAuth sign-in, when a connector uses it.
    sign_in: Option<SignIn>,
    handlers: Arc<C>,
}

/// The token of an `Authorization: Bearer` header.
pub fn bearer(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl<C: Handlers> Endpoints<C> {
    async fn route(&self, request: Request) -> Response {
        // RFC 9112 §3.2: a request with more than one Host is answered 400. Two Hosts could
        // otherwise pass the allow-list on one and be read by something else on the other.
        if request
            .headers()
            .get_all(http::header::HOST)
            .iter()
            .nth(1)
            .is_some()
        {
            return (
                StatusCode::BAD_REQUEST,
                "Bad Request: more than one Host header",
            )
                .into_response();
        }
        // The Host check comes first and covers every path, /healthz too: a tunnel whose
        // health check passes must not then be refused on MCP.
        // Decided on the header as sent; `shown_host` is only for the log line.
        let sent = match request.headers().get(http::header::HOST) {
            Some(h) => h.to_str().ok().map(str::to_string),
            None => request.uri().authority().map(|a| a.to_string()),
        };
        if !sent.as_deref().is_some_and(|h| self.hosts.admits(h)) {
            let host = shown_host(&request);
            if self.refused.ready_for(&host) {
                tracing::warn!(
                    host = %host,
                    "refused a request for a Host gantry does not answer (403); if and only if this is the name your tunnel printed, start gantry with --public-host {host} (or --allowed-host); anyone can send any Host through a tunnel, so never copy a name you do not recognise"
                );
            }
            return (
                StatusCode::FORBIDDEN,
                "Forbidden: Host is not allowed; start gantry with --public-host <this host>",
            )
                .into_response();
        }
        if let Some(origin) = request.headers().get(http::header::ORIGIN) {
            let allowed = origin
                .to_str()
                .is_ok_and(|o| self.allowed_origins.iter().any(|a| a == o));
            if !allowed {
                if self.refused.ready_for("origin") {
                    let shown: String = String::from_utf8_lossy(origin.as_bytes())
                        .chars()
                        .filter(|c| !c.is_control())
                        .take(100)
                        .collect();
                    tracing::warn!(
                        origin = %shown,
                        "refused a request from a browser page of another origin (403); if you trust that page, start gantry with --allowed-origin {shown}"
                    );
                }
                return (StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed").into_response();
            }
        }
        if request.uri().path() == "/healthz" {
            return "ok".into_response();
        }
        // Refuse an announced oversized body before reading any of it.
        let announced = request
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if announced.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
        }
        let request = match &self.sign_in {
            Some(sign_in) => match sign_in
                .answer(&|e| self.handlers.sign_in_event(e), &self.auth, request)
                .await
            {
                Ok(answered) => return answered,
                Err(request) => request,
            },
            None => request,
        };
        let path = request.uri().path();
        let first = match path.strip_prefix('/').map(|p| p.split_once('/')) {
            Some(Some((first, "mcp"))) => Some(first),
            _ => None,
        };
        // `/<connector>/mcp` of a connector that signs in with OAuth: its bearer token decides.
        let signed_in = first.and_then(|f| {
            self.auth
                .iter()
                .find(|(c, m)| *c == f && m.oauth())
                .map(|(c, _)| *c)
        });
        let connector = if let (Some(connector), Some(sign_in)) = (signed_in, &self.sign_in) {
            let token = bearer(&request);
            if let Some(refused) =
                sign_in.gate(&|e| self.handlers.sign_in_event(e), connector, token)
            {
                // A client's first request carries no token: that is how it learns where to
                // sign in. A token refused is worth the user's attention.
                if token.is_none() {
                    tracing::info!(
                        connector,
                        "a request without a sign-in token was told where to sign in (401)"
                    );
                } else if self.refused.ready_for("sign-in") {
                    tracing::warn!(
                        connector,
                        "refused a sign-in token that is expired, revoked or for another connector (401); the client signs in again, and you approve it on the control page"
                    );
                }
                return refused;
            }
            connector
        } else {
            let token = match first {
                Some(token) => Some(token.to_string()),
                None if path == "/mcp" => bearer(&request).map(str::to_string),
                None => None,
            };
            let Some(connector) = token.and_then(|t| self.tokens.get().connector_for(&t)) else {
                return StatusCode::NOT_FOUND.into_response();
            };
            if !mode_in(&self.auth, connector).url_secret() {
                if self.refused.ready_for("url-secret") {
                    tracing::warn!(
                        connector,
                        "refused the connector's URL secret (404): this connector signs in with OAuth (auth = \"oauth\"); give the client its sign-in URL, or set [auth] {connector} = \"both\" during a change-over"
                    );
                }
                // The same 404 as a wrong secret: the answer confirms no old secret.
                return StatusCode::NOT_FOUND.into_response();
            }
            connector
        };
        let Some((_, service)) = self.services.iter().find(|(c, _)| *c == connector) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        if let Some(connection) = request.extensions().get::<Arc<Connection>>()
            && !connection.prove()
        {
            return (StatusCode::SERVICE_UNAVAILABLE, "too many open connections").into_response();
        }
        let Ok(_permit) = self.in_flight.acquire().await else {
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        };
        // Room for the body before any of it is read: 256 requests of 4 MiB at once would
        // otherwise hold a gigabyte.
        let kib = u32::try_from(announced.unwrap_or(MAX_BODY_BYTES as u64).div_ceil(1024))
            .unwrap_or(u32::MAX);
        let Ok(Ok(_body)) = tokio::time::timeout(
            tool_api::memory::WAIT,
            self.body_kib.acquire_many(kib.max(1)),
        )
        .await
        else {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "server busy: too many large requests at once",
            )
                .into_response();
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, service.clone().oneshot(request)).await {
            Ok(Ok(response)) => response.map(Body::new),
            Ok(Err(never)) => match never {},
            Err(_) => (StatusCode::REQUEST_TIMEOUT, "request took too long").into_response(),
        }
    }
}

/// Why the server could not listen, and what to do about it.
pub fn listen_error(host: &str, port: u16, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "cannot listen on {host}:{port}: the port is in use, probably by another gantry (its control page, `gantry admin`, shows it) or another server; stop that one, or choose a free port with --port N (GANTRY_PORT, `port` in the config; 0 picks any)"
        ),
        std::io::ErrorKind::PermissionDenied => format!(
            "cannot listen on {host}:{port}: not allowed (ports below 1024 need privileges); choose another with --port N"
        ),
        std::io::ErrorKind::AddrNotAvailable => format!(
            "cannot listen on {host}:{port}: this machine has no such address; use 127.0.0.1 (the default) or one of its own addresses with --host"
        ),
        _ => format!("cannot listen on {host}:{port}: {e}"),
    }
}

/// The router of the HTTP boundary (`/healthz` and the connector endpoints).
pub fn router<C: Handlers>(
    handlers: &C,
    connectors: &[&'static tool_api::ConnectorSpec],
    settings: &HttpOptions,
    local: SocketAddr,
    tokens: LiveTokens,
    shutdown: &CancellationToken,
) -> Router {
    let hosts = config::hosts::HostRules::new(&settings.host, &settings.allowed_hosts);
    let services = connectors
        .iter()
        .map(|c| (c.name, stateless(handlers.for_requests(c), Some(shutdown))))
        .collect();
    // The server's own loopback origins are not foreign: a rebinding page has its own origin.
    let mut allowed_origins = settings.allowed_origins.clone();
    if local.ip().is_loopback() {
        let port = local.port();
        allowed_origins.extend([
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ]);
    }
    let sign_in = handlers
        .sign_in()
        .filter(|_| settings.auth.iter().any(|(_, m)| m.oauth()));
    let endpoints = Arc::new(Endpoints::<C> {
        auth: settings.auth.clone(),
        sign_in,
        handlers: Arc::new(handlers.clone()),
        hosts,
        refused: Throttle::default(),
        tokens,
        services,
        allowed_origins,
        in_flight: Semaphore::new(MAX_IN_FLIGHT),
        body_kib: Semaphore::new(BODY_BUDGET_BYTES / 1024),
    });
    Router::new().fallback(move |request: Request| {
        let endpoints = endpoints.clone();
        async move { endpoints.route(request).await }
    })
}

/// A bound HTTP listener whose URLs have been printed.
pub struct Listening {
    listener: tokio::net::TcpListener,
    /// Where it listens.
    pub addr: SocketAddr,
    tokens: LiveTokens,
}

/// Binds, prints one `<connector> <url>` line per served connector on stdout, and serves
/// until `shutdown` fires.
pub async fn serve<C: Handlers>(
    handlers: C,
    connectors: Vec<&'static tool_api::ConnectorSpec>,
    settings: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let bound = bind(&settings)?;
    let listening = listen(&handlers, &connectors, &settings, bound)?;
    run(&handlers, connectors, settings, listening, shutdown).await
}

/// Binds the listening socket, before anything else is set up: a port in use or an address
/// this machine lacks stops the start with no side effect.
pub fn bind(settings: &HttpOptions) -> Result<std::net::TcpListener, String> {
    let ip: IpAddr = settings
        .host
        .parse()
        .map_err(|_| format!("--host `{}` is not an IP address", settings.host))?;
    let listener = std::net::TcpListener::bind((ip, settings.port))
        .map_err(|e| listen_error(&settings.host, settings.port, &e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot listen on {}:{}: {e}", settings.host, settings.port))?;
    Ok(listener)
}

/// Takes the socket [`bind`] made and prints one `<connector> <url>` line per served
/// connector on stdout (and a `<connector>@public <url>` line when a public host is set).
/// Needs a tokio runtime.
pub fn listen<C: Handlers>(
    handlers: &C,
    connectors: &[&'static tool_api::ConnectorSpec],
    settings: &HttpOptions,
    bound: std::net::TcpListener,
) -> Result<Listening, String> {
    let names: Vec<&'static str> = connectors.iter().map(|c| c.name).collect();
    let tokens = LiveTokens::new(&settings.state_dir, &names)?;
    let first = tokens.get();
    // Made just now on a first start: recorded sessions must hide them too.
    handlers.learn_secrets(
        names
            .iter()
            .filter_map(|n| first.get(n).map(str::to_string))
            .collect(),
    );

    let listener = tokio::net::TcpListener::from_std(bound).map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "listening beyond loopback: anyone who can reach this address and knows a connector URL can use it");
    }
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        for name in &names {
            let mode = settings.mode_of(name);
            if let (true, Some(public)) = (mode.oauth(), &settings.public_host) {
                // No secret in these: the client signs in, and the user approves it.
                let _ = writeln!(
                    out,
                    "{name} {}",
                    config::urls::connector_url_without_secret(addr, name)
                );
                let _ = writeln!(
                    out,
                    "{name}@public {}",
                    config::urls::oauth_url(public, name)
                );
            } else if let Some(token) = first.get(name) {
                let _ = writeln!(out, "{name} {}", config::urls::connector_url(addr, token));
                if let Some(public) = &settings.public_host {
                    let _ = writeln!(
                        out,
                        "{name}@public {}",
                        config::urls::public_url(public, token)
                    );
                }
            }
        }
        let _ = out.flush();
    }
    Ok(Listening {
        listener,
        addr,
        tokens,
    })
}

/// Serves the connectors on a listener from [`listen`] until `shutdown` fires.
pub async fn run<C: Handlers>(
    handlers: &C,
    connectors: Vec<&'static tool_api::ConnectorSpec>,
    settings: HttpOptions,
    listening: Listening,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let Listening {
        listener,
        addr,
        tokens,
    } = listening;
    let router = router(handlers, &connectors, &settings, addr, tokens, &shutdown);
    tracing::info!(%addr, connectors = connectors.len(), "serving");

    let proven = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let unproven = Arc::new(Unproven::default());
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (id, evicted) = unproven.admit(peer.ip());
        let tagged = Arc::new(Connection {
            id,
            unproven: unproven.clone(),
            slot: std::sync::Mutex::new(None),
            proven: proven.clone(),
        });
        let service = TowerToHyperService::new(router.clone().map_request(
            move |r: http::Request<hyper::body::Incoming>| {
                let mut r = r.map(Body::new);
                r.extensions_mut().insert(tagged.clone());
                r
            },
        ));
        let shutdown = shutdown.clone();
        let unproven = unproven.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = shutdown.cancelled() => connection.as_mut().graceful_shutdown(),
                // Dropped to make room while it had still not proven a token.
                () = evicted.cancelled() => {}
            }
            unproven.leave(id);
        });
    }
}

/// Serves one connector on stdin/stdout until the client closes stdin.
pub async fn serve_stdio<C: Handlers>(
    handlers: &C,
    connectors: &[&'static tool_api::ConnectorSpec],
    connector: &str,
) -> Result<(), String> {
    use rmcp::ServiceExt as _;
    let Some(spec) = connectors.iter().copied().find(|c| c.name == connector) else {
        let served: Vec<&str> = connectors.iter().map(|c| c.name).collect();
        return Err(format!(
            "connector `{connector}` is not served on this platform (served: {})",
            served.join(", ")
        ));
    };
    // One stdio server process is one client connection: its calls are one conversation.
    let started_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let server =
        handlers.for_connection(spec, format!("stdio-{}-{started_ms}", std::process::id()));
    let (input, output) = crate::stdio::streams();
    let running = server
        .serve((crate::stdio_lines::BoundedLines::new(input), output))
        .await
        .map_err(|e| {
            format!(
                "stdio: no MCP client on the other end ({e}). `gantry serve --stdio` is started by an MCP client, which sends an `initialize` request first; `gantry config claude-desktop` (or codex, cursor, claude-code) prints a setup, and `gantry config inspector` a way to try it by hand"
            )
        })?;
    running
        .waiting()
        .await
        .map_err(|e| format!("stdio server failed: {e}"))?;
    Ok(())
}
