//! The workers' endpoint: a loopback listener where each working worker reaches the Core
//! tools at `/<its secret>/mcp`, its calls decided with itself as principal.
//!
//! A call is taken as the worker's only when both hold: the secret is the one its current
//! turn was given (a fresh one per turn, never recorded; in the URL path, or as a bearer token
//! to `/mcp`), and, where `/proc` shows it, the connection was opened by a descendant of that
//! worker's program (not merely a process in its cgroup: the user's processes may join one).
//! A command the model runs, or another worker, holding a leaked secret is refused.
//! Elsewhere (macOS, Windows) the secret alone decides.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use tower::ServiceExt as _;
use transport::McpService;

/// Connections open at once.
const MAX_CONNECTIONS: usize = 32;

/// Who the endpoint answers: the live workers, found by their turn's secret.
pub trait Callers: Send + Sync {
    /// The live worker whose endpoint secret is `secret`: its id, its program (whose
    /// descendants alone may call) and its MCP service.
    fn by_secret(&self, secret: &str) -> Option<Caller>;
}

/// A live worker as the endpoint finds it by its secret.
pub struct Caller {
    pub run: String,
    pub worker: String,
    pub held: Arc<terminal::Held>,
    pub service: McpService,
}

/// The bound endpoint.
#[derive(Debug)]
pub struct Endpoint {
    addr: SocketAddr,
}

impl Endpoint {
    /// Binds 127.0.0.1 on a free port and serves until the process ends.
    pub async fn start(agents: Weak<dyn Callers>) -> std::io::Result<Endpoint> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tracing::info!(%addr, "the workers' endpoint is listening (loopback only)");
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                let agents = agents.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    // Who opened it, once per connection, before any request is read.
                    let opener =
                        tokio::task::spawn_blocking(move || transport::peer::opener(peer, addr))
                            .await
                            .ok()
                            .flatten();
                    let service = hyper::service::service_fn(
                        move |request: http::Request<hyper::body::Incoming>| {
                            let agents = agents.clone();
                            async move {
                                Ok::<_, std::convert::Infallible>(
                                    route(agents, addr, opener, request.map(Body::new)).await,
                                )
                            }
                        },
                    );
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    builder
                        .timer(TokioTimer::new())
                        .header_read_timeout(std::time::Duration::from_secs(10));
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Endpoint { addr })
    }

    /// The URL a worker given `secret` calls.
    pub fn url(&self, secret: &str) -> String {
        config::urls::connector_url(self.addr, secret)
    }

    /// The URL a worker calls with its secret as a bearer token instead (no secret in it).
    pub fn bearer_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, why.to_string()).into_response()
}

async fn route(
    agents: Weak<dyn Callers>,
    local: SocketAddr,
    opener: Option<u32>,
    request: http::Request<Body>,
) -> Response {
    let own_host = format!("127.0.0.1:{}", local.port());
    let host_ok = request
        .headers()
        .get(http::header::HOST)
        .is_some_and(|h| h.as_bytes() == own_host.as_bytes());
    if !host_ok || request.headers().contains_key(http::header::ORIGIN) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: the workers' endpoint answers only its own loopback address, never a browser page",
        );
    }
    let Some(agents) = agents.upgrade() else {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "the server is stopping");
    };
    let path = request.uri().path();
    let secret = match path.strip_prefix('/').and_then(|p| p.split_once('/')) {
        Some((secret, "mcp")) => secret.to_string(),
        None if path == "/mcp" => match transport::http::bearer(&request) {
            Some(token) => token.to_string(),
            None => return StatusCode::NOT_FOUND.into_response(),
        },
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let Some(caller) = agents.by_secret(&secret) else {
        // No turn has this secret (a wrong one, or a turn that ended): nothing to say more.
        return StatusCode::NOT_FOUND.into_response();
    };
    if let Some(why) = transport::peer::outside_tree(opener, caller.held.pid()) {
        tracing::warn!(run = %caller.run, worker = %caller.worker, why = %why, "refused a call on a worker's endpoint");
        return refuse(
            StatusCode::FORBIDDEN,
            &format!(
                "Forbidden: this endpoint belongs to worker {} and answers only its own program ({why})",
                caller.worker
            ),
        );
    }
    let announced = request
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > transport::http::MAX_BODY_BYTES as u64) {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
    }
    match tokio::time::timeout(
        transport::http::REQUEST_TIMEOUT,
        caller.service.clone().oneshot(request),
    )
    .await
    {
        Ok(Ok(response)) => response,
        Ok(Err(never)) => match never {},
        Err(_) => refuse(StatusCode::REQUEST_TIMEOUT, "request took too long"),
    }
}
