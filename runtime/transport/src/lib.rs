//! gantry's transports: the HTTP boundary (stateless Streamable HTTP with its bounds, token
//! routing, `Host` and `Origin` checks), stdio's streams, and who opened a loopback
//! connection. Generic over [`Handlers`]: it serves whatever MCP handlers it is given and
//! decides nothing about tools.

mod handlers;
pub mod http;
pub mod peer;
pub mod stdio;

pub use handlers::{Handlers, McpService, mcp_service};
