//! The server: what composes gantry's parts into connectors. [`app::App`] holds the shared
//! state (settings, the policy engine, the live permissions and roots, the terminal registry,
//! recordings, workers); [`server`] is one connector as an MCP server, every call decided by
//! Cedar; [`handlers`] implement the generated handler traits, reaching the operating system
//! only through [`ops`] (and `confine`, `terminal`, `desktop`).

pub mod app;
pub mod handlers;
mod layout;
pub mod ops;
pub mod permissions;
pub mod policy_set;
pub mod read_state;
pub mod recorder;
mod reload;
pub mod server;
