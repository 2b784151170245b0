//! The `gantry` binary's own parts beside `main`: what `gantry check` reports, the `gantry
//! hosts` commands, and how `GANTRY_LOG` names gantry's code.

pub mod check;
pub mod hosts_cli;
mod log_filter;

pub use log_filter::log_filter;
