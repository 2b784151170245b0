//! Stateless Streamable HTTP: one endpoint per connector at `/<token>/mcp`, plus `/healthz`.
//! Nothing else exists: any other path, or a wrong token, is a bare 404.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::app::App;
use crate::server::ConnectorServer;
use crate::state_dir::Tokens;

type Endpoint = StreamableHttpService<ConnectorServer, NeverSessionManager>;

/// The connector endpoints, found by token.
struct Endpoints {
    tokens: Tokens,
    services: Vec<(&'static str, Endpoint)>,
}

impl Endpoints {
    async fn route(&self, request: Request) -> Response {
        // `/<token>/mcp`, exactly.
        let path = request.uri().path();
        let mut parts = path.strip_prefix('/').unwrap_or("").splitn(2, '/');
        let (Some(token), Some("mcp")) = (parts.next(), parts.next()) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let Some(connector) = self.tokens.connector_for(token) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let Some((_, service)) = self.services.iter().find(|(c, _)| *c == connector) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        match service.clone().oneshot(request).await {
            Ok(response) => response.map(Body::new),
            Err(never) => match never {},
        }
    }
}

/// The URL a client uses for `connector` (the secret is part of it).
pub fn connector_url(addr: SocketAddr, token: &str) -> String {
    let host = match addr.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{host}:{}/{token}/mcp", addr.port())
}

/// Binds, prints one `<connector> <url>` line per served connector on stdout, and serves
/// until `shutdown` fires.
pub async fn serve(app: Arc<App>, shutdown: CancellationToken) -> Result<(), String> {
    let settings = &app.settings;
    let connectors: Vec<&'static tool_api::ConnectorSpec> = app.connectors().collect();
    let names: Vec<&'static str> = connectors.iter().map(|c| c.name).collect();
    let tokens = Tokens::load_or_create(&settings.state_dir, &names)?;

    let ip: IpAddr = settings
        .host
        .parse()
        .map_err(|_| format!("--host `{}` is not an IP address", settings.host))?;
    let listener = tokio::net::TcpListener::bind((ip, settings.port))
        .await
        .map_err(|e| format!("cannot listen on {}:{}: {e}", settings.host, settings.port))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if !ip.is_loopback() {
        tracing::warn!(%addr, "listening beyond loopback: anyone who can reach this address and knows a connector URL can use it");
    }

    let mut allowed_hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if !ip.is_unspecified() && !ip.is_loopback() {
        allowed_hosts.push(ip.to_string());
    }
    allowed_hosts.extend(settings.allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(allowed_hosts)
        .with_cancellation_token(shutdown.child_token());

    let services = connectors
        .iter()
        .map(|c| {
            let server = ConnectorServer::new(app.clone(), c);
            let service: Endpoint = StreamableHttpService::new(
                move || Ok(server.clone()),
                Arc::new(NeverSessionManager::default()),
                config.clone(),
            );
            (c.name, service)
        })
        .collect();
    let endpoints = Arc::new(Endpoints {
        tokens: tokens.clone(),
        services,
    });
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .fallback(move |request: Request| {
            let endpoints = endpoints.clone();
            async move { endpoints.route(request).await }
        });

    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        for name in &names {
            if let Some(token) = tokens.get(name) {
                let _ = writeln!(out, "{name} {}", connector_url(addr, token));
            }
        }
        let _ = out.flush();
    }
    tracing::info!(%addr, connectors = names.len(), "serving");
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(|e| format!("server failed: {e}"))
}

/// Serves one connector on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(app: Arc<App>, connector: &str) -> Result<(), String> {
    use rmcp::ServiceExt as _;
    let Some(spec) = app.connectors().find(|c| c.name == connector) else {
        let served: Vec<&str> = app.connectors().map(|c| c.name).collect();
        return Err(format!(
            "connector `{connector}` is not served on this platform (served: {})",
            served.join(", ")
        ));
    };
    let server = ConnectorServer::new(app.clone(), spec);
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("stdio handshake failed: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("stdio server failed: {e}"))?;
    Ok(())
}
