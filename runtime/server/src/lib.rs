//! The gantry server: serves the generated surface over MCP, every call decided by Cedar.
//!
//! Module map: [`cli`] and [`config`] turn flags, environment and the config file into
//! [`config::Settings`]; [`app`] loads policies and roots into the shared [`app::App`];
//! [`server`] is one connector as an MCP server; [`http`] exposes connectors over stateless
//! Streamable HTTP (or stdio, with [`stdio`]'s streams); [`handlers`] implement the generated handler traits; [`recorder`] keeps
//! recorded sessions (the `recordings` store); [`ops`]
//! is the only code that touches the operating system.

pub mod admin;
pub mod agents;
pub mod app;
pub mod audit;
pub mod check;
pub mod cli;
pub mod client_setup;
pub mod config;
pub mod config_edit;
pub mod handlers;
pub mod hosts;
pub mod http;
pub mod ops;
pub mod permissions;
pub mod policy_set;
pub mod read_state;
pub mod recorder;
pub mod server;
pub mod state_dir;
pub mod stdio;
