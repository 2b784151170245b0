//! The `gantry` binary's own parts beside `main`: what `gantry check` reports, and how
//! `GANTRY_LOG` names gantry's code.

pub mod check;
mod log_filter;

pub use log_filter::log_filter;
