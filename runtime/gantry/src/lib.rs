//! The `gantry` binary's own parts beside `main`: what `gantry check` reports, the `gantry
//! auth` and `gantry hosts` commands, how `GANTRY_LOG` names gantry's code, and what `serve`
//! says after its URLs.

pub mod auth_cli;
pub mod check;
pub mod hosts_cli;
mod log_filter;
pub mod start_notes;

pub use log_filter::log_filter;
