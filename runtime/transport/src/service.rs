//! What the transports serve: the handlers, and one connector's stateless MCP service, as the
//! HTTP boundary routes to it and as any other listener can hold it.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tool_api::ConnectorSpec;
use tower::ServiceExt;

/// The MCP handlers the transports serve: one per connector. The server implements it; the
/// transports know nothing else of it.
pub trait Handlers: Clone + Send + Sync + 'static {
    /// One connector's MCP handler.
    type Handler: rmcp::ServerHandler + Clone + Send + Sync + 'static;
    /// The handler of `connector` over stateless HTTP, where each request stands alone.
    fn for_requests(&self, connector: &'static ConnectorSpec) -> Self::Handler;
    /// The handler of `connector` for one long connection (stdio) named `connection`.
    fn for_connection(
        &self,
        connector: &'static ConnectorSpec,
        connection: String,
    ) -> Self::Handler;
    /// Secrets (connector tokens made at start) that must never be recorded or shown.
    fn learn_secrets(&self, secrets: Vec<String>);
    /// The OAuth sign-in of the connectors that use it (a public host is set), if any.
    fn sign_in(&self) -> Option<crate::signin::SignIn>;
    /// Audits a sign-in event.
    fn sign_in_event(&self, event: crate::signin::Event<'_>);
}

/// Largest request body.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// One connector's MCP service as the HTTP boundary and the workers' endpoint serve it:
/// stateless (no MCP session), JSON answers, bodies up to [`MAX_BODY_BYTES`]. The `Host`
/// check is gantry's own (wildcards, and `/healthz` alike), made before rmcp sees a request.
pub fn stateless<H: rmcp::ServerHandler + Clone>(
    handler: H,
    shutdown: Option<&CancellationToken>,
) -> StreamableHttpService<H, NeverSessionManager> {
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    if let Some(shutdown) = shutdown {
        config = config.with_cancellation_token(shutdown.child_token());
    }
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// One connector's MCP service with its type erased: what the workers' endpoint holds per
/// turn, answering each request as the HTTP boundary would.
pub type McpService =
    tower::util::BoxCloneSyncService<http::Request<Body>, Response<Body>, Infallible>;

/// `handler` as an [`McpService`] ([`stateless`], no shutdown of its own).
pub fn mcp_service<H: rmcp::ServerHandler + Clone + Send + Sync + 'static>(
    handler: H,
) -> McpService {
    let service = stateless(handler, None);
    tower::util::BoxCloneSyncService::new(ServiceExt::<http::Request<Body>>::map_response(
        service,
        |r| r.map(Body::new),
    ))
}
