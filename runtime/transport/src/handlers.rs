//! What the transports serve, and one connector's service in a form any listener can hold.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::Response;
use tool_api::ConnectorSpec;
use tower::ServiceExt;

/// The MCP handlers the transports serve: one per connector. The server implements it; the
/// transports know nothing else of it.
pub trait Handlers: Send + Sync + 'static {
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
}

/// One connector's MCP service with its type erased: what the workers' endpoint holds per
/// turn, answering each request as the HTTP boundary would.
pub type McpService =
    tower::util::BoxCloneSyncService<http::Request<Body>, Response<Body>, Infallible>;

/// `handler` as an [`McpService`] ([`crate::http::stateless`], no shutdown of its own).
pub fn mcp_service<H: rmcp::ServerHandler + Clone + Send + Sync + 'static>(
    handler: H,
) -> McpService {
    let service = crate::http::stateless(handler, None);
    tower::util::BoxCloneSyncService::new(ServiceExt::<http::Request<Body>>::map_response(
        service,
        |r| r.map(Body::new),
    ))
}
