//! gantry's public surface as Rust: argument and output types, one handler trait and one
//! dispatch function per connector, Cedar resource types, and static tables of permissions,
//! connectors and tools.
//!
//! Everything under `src/surface*` is generated from `surface.toml` by `codegen` (on every
//! `cargo build`, or by hand with `cargo codegen`). Do not edit it; edit `surface.toml`.

#[rustfmt::skip]
mod surface;

pub use surface::*;
