//! The Gateway connector's MCP client: the config's upstream servers, reached over stdio (a
//! process gantry starts in a process group of its own, ended with its group) or Streamable
//! HTTP. Nothing starts until a server is first needed; every wait is bounded. It decides
//! nothing: each call arrives already authorized.

mod client;

pub use client::{Contain, Upstream, UpstreamCall, Waits, take_tokens};
