//! The `gantry` binary's own parts beside `main`: what `gantry check` reports.

pub mod check;
