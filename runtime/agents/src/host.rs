//! What the workers need of the server they work for.

use std::sync::Arc;

use tool_api::{CallContext, ToolError, WorkerId};

/// The server that runs the workers: it decides whether one may start and serves each
/// worker's calls. Held weakly, so the workers never keep a stopping server alive.
pub trait WorkerHost: Send + Sync {
    /// The context a call of the prime on the connector that has workers is decided in now:
    /// a worker starts only when a `spawn` would be allowed.
    fn prime_context(&self) -> Result<CallContext, ToolError>;
    /// The MCP service one worker's turn reaches: that connector, with the worker as the
    /// principal of every call.
    fn worker_service(self: Arc<Self>, worker: WorkerId) -> transport::McpService;
}
