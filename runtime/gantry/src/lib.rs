//! The `gantry` binary's own parts beside `main`: what `gantry check` reports, the `gantry
//! auth` and `gantry hosts` commands, and how `GANTRY_LOG` names gantry's code.

pub mod auth_cli;
pub mod check;
pub mod hosts_cli;
mod log_filter;

pub use log_filter::log_filter;
