//! gantry's transports: the HTTP boundary (stateless Streamable HTTP with its bounds, token
//! routing, `Host` and `Origin` checks), stdio's streams, and who opened a loopback
//! connection. Generic over [`Handlers`]: it serves whatever MCP handlers it is given and
//! decides nothing about tools.

pub mod http;
pub mod peer;
mod service;
pub mod signin;
pub mod stdio;
pub mod stdio_lines;

pub use service::{Handlers, McpService, mcp_service};
